"""One owner per device: the device's only context, its one copy of the index and its command
queues live in one process (:class:`bowmap.runtime.owner.DeviceOwner`, in a process of its own:
``OwnerProcess``); kernel owners in other processes drive it
through a :class:`RemoteDevice`, which stands in for a :class:`bowmap.runtime.devices.DeviceContext`.

Why: a context per worker process costs each process its own context, program builds and copy
of the index on the device (15 processes on a 16-core GPU host: slow start-up, 15x the device
memory, kernels of different processes time-sliced rather than run side by side). With one owner
a host worker adds neither a context nor device memory beyond its chunk buffers.

How: the kernel owners (FMSearch, DeviceWindows, SmithWaterman) run unchanged on a RemoteDevice.
Their buffer creations, kernel launches and copies go through bowmap.runtime.devices' dispatching
helpers (:func:`~bowmap.runtime.devices.make_buffer`, ``make_kernel``, ``enqueue_copy``,
``read_back``, ``wait_idle``), which record them per thread; a blocking read-back sends the whole
batch to the owner in one message, so a chunk's stage costs one round trip per synchronisation
it had anyway. Bytes of uploads and read-backs travel through a shared-memory arena of the thread's
own (a file in /dev/shm, or a memory file where that is full, mapped by both processes), never
through a pickle. The owner executes a batch with the very PyOpenCL calls the kernel owner would
have made in its own process, in the same order on the same kind of in-order queue, so results
are the same bit for bit.

Keys: a buffer or queue made by a client is named ``(token, number)``, the token being its
process's; buffers the owner made for everyone (the index blocks, the packed text) are named
``("shared", name)``; a kernel by its program's key and its name (the owner has one of each for
all its clients). A buffer is created with its thread's next batch, ahead of the
commands that use it; buffers a thread dropped are released on the owner after its next batch.
"""

from __future__ import annotations

import collections
import errno
import functools
import itertools
import logging
import mmap
import os
import secrets
import tempfile
import threading
import time
import types
import weakref
from multiprocessing.connection import Client, Listener

import numpy as np

from bowmap.runtime import usage
from bowmap.runtime.errors import BowmapError

log = logging.getLogger("bowmap.runtime.remote")

def _token() -> str:
    return f"{os.getpid()}-{secrets.token_hex(4)}"


_TOKEN = _token()  # this process's name in an owner's tables
_NUMBERS = itertools.count(1)
_RELEASED: collections.deque = collections.deque()  # keys of dropped buffers, sent with the next batch


def _new_process() -> None:
    """A forked child is a new client: a token of its own, and none of its parent's releases."""
    global _TOKEN, _NUMBERS
    _TOKEN = _token()
    _NUMBERS = itertools.count(1)
    _RELEASED.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_process)

# A channel's first arena (unless its first batch needs more), and the least of any later one:
# past that it doubles when a batch needs more. The owner registers each arena with NVIDIA's
# driver, which pins its pages (see bowmap.runtime.pinning), one arena after another whatever the
# thread. Why two sizes: a host worker's set-up and a small run's chunks fit in 8 MiB (chr20,
# 10,000 pairs: 2.5-5.7 MB at most), and five workers' 32 MiB arenas held that run's start 60 ms
# (H200); a chunk of the default 4 Mi bases needs 16-32 MiB (16 grew to 32 in every worker's
# first chunk).
_FIRST_ARENA_BYTES = 8 << 20
_ARENA_BYTES = 32 << 20
_ALIGN = 64


def _key() -> tuple[str, int]:
    return _TOKEN, next(_NUMBERS)


def _arena_folder() -> str | None:
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


# ---------------------------------------------------------------- the client side (host workers)


class RemoteBuffer:
    """A device buffer of an owner: its key and size. A buffer this process made is released on
    the owner once dropped here (with the next batch)."""

    is_remote = True

    def __init__(self, key, size: int, owned: bool = True):
        self.key = key
        self.size = size
        if owned:
            weakref.finalize(self, _RELEASED.append, key)


class _Ref:
    """A buffer named among a kernel's arguments."""

    __slots__ = ("key",)

    def __init__(self, key):
        self.key = key

    def __reduce__(self):
        return _Ref, (self.key,)


class _Local:
    """A kernel argument of local memory (``pyopencl.LocalMemory``), by its size."""

    __slots__ = ("size",)

    def __init__(self, size: int):
        self.size = size

    def __reduce__(self):
        return _Local, (self.size,)


# How long a client waits for an owner process to listen: its start (Python, NumPy, PyOpenCL)
# takes well under a second; its socket is made before its device is opened.
CONNECT_SECONDS = 60.0


def _connect(address, authkey: bytes, pid: int | None):
    """A connection to the owner at ``address``; while it is not listening yet (an owner process
    still starting, ``pid``), wait for it, unless that process has stopped."""
    deadline = time.monotonic() + CONNECT_SECONDS
    pause = 0.001
    while True:
        try:
            return Client(address, family="AF_UNIX", authkey=authkey)
        except (FileNotFoundError, ConnectionRefusedError):
            if pid is None or not _alive(pid) or time.monotonic() > deadline:
                raise BowmapError("the device owner process stopped before it answered") from None
            # Short sleeps: the owner's start is a run's critical path (50 ms at most cost a
            # small run's workers 14-50 ms each on an H200).
            time.sleep(pause)
            pause = min(2 * pause, 0.01)
        except (EOFError, ConnectionError):  # it died while its greeting was awaited
            raise BowmapError("the device owner process stopped before it answered") from None


def listening(address, authkey: bytes) -> Listener:
    """A DeviceOwner's listener at ``address`` (made before the owner where clients may come
    first: see bowmap.runtime.owner_process); clients that connect before it accepts wait in
    its backlog, room for a host worker a core and more."""
    return Listener(address, family="AF_UNIX", authkey=authkey, backlog=max(64, 2 * (os.cpu_count() or 1)))


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (an owner that died before its run reaped it is a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: not Linux
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True


class _Channel:
    """One thread's connection to an owner, its arena and the commands recorded since its last
    synchronisation."""

    def __init__(self, address, authkey: bytes, pid: int | None = None):
        self.connection = _connect(address, authkey, pid)
        self.commands: list[tuple] = []
        self.reads: list[tuple[np.ndarray, int]] = []  # (destination, arena offset), filled at the flush
        self.used = 0
        self.arena: mmap.mmap | None = None
        self.view: np.ndarray | None = None
        self.new_arena: tuple[str, int] | None = None  # sent with the next batch
        self._forget_name = None  # removes the new arena's name once the owner has mapped it (see _arena_file)
        self.calls = -1  # the hello is call 0
        self.call(("hello", _TOKEN))

    def call(self, message):
        """Send one message, wait for its answer; the owner's failure is raised here."""
        try:
            with usage.timed("owner answers"):
                if usage.COUNTING:  # the round trip piece by piece (bench/host_waits.py --round-trips)
                    self.calls += 1
                    usage.mark(f"sent {_TOKEN}", self.calls)
                self.connection.send(message)
                status, value = self.connection.recv()
                if usage.COUNTING:
                    usage.mark(f"received {_TOKEN}", self.calls)
        except (EOFError, OSError):
            raise BowmapError("the device owner process stopped answering") from None
        if status == "ok":
            return value
        text, user_error = value
        raise BowmapError(text) if user_error else RuntimeError(f"device owner: {text}")

    def _room(self, size: int) -> int:
        """An arena offset with ``size`` bytes free after it, for this batch."""
        offset = self.used
        end = offset + max(size, 1)
        if self.arena is None or end > len(self.arena):
            self._grow(end)
        self.used = -(-end // _ALIGN) * _ALIGN
        return offset

    def _grow(self, needed: int) -> None:
        if self.arena is None and needed <= _FIRST_ARENA_BYTES:
            size = _FIRST_ARENA_BYTES
        else:  # a first batch larger than the first arena gets what a second would
            size = max(_ARENA_BYTES, needed, 2 * (len(self.arena) if self.arena is not None else 0))
        arena, name, forget = _arena_file(size)
        if self.arena is not None:
            arena[: self.used] = self.arena[: self.used]  # this batch's uploads so far
            self.view = None
            self.arena.close()
        if self._forget_name is not None:  # never sent: no one else maps it
            self._forget_name()
        self.arena = arena
        self.view = np.frombuffer(arena, dtype=np.uint8)
        self.new_arena, self._forget_name = (name, size), forget

    def put(self, array: np.ndarray) -> int:
        """Copy ``array``'s bytes into the arena; their offset."""
        data = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        offset = self._room(len(data))
        self.view[offset : offset + len(data)] = data
        return offset

    def flush(self) -> None:
        """Send the recorded commands, wait for them to run, fill the read-backs' arrays."""
        if not self.commands:
            return
        released = []
        while _RELEASED:
            released.append(_RELEASED.popleft())
        arena, self.new_arena = self.new_arena, None
        forget, self._forget_name = self._forget_name, None
        commands, self.commands = self.commands, []
        try:
            self.call(("batch", arena, released, commands))
        finally:
            if forget is not None:
                forget()  # mapped on both sides now (or the owner is gone)
            reads, self.reads = self.reads, []
            self.used = 0
        for destination, offset in reads:
            np.copyto(destination, np.ndarray(destination.shape, destination.dtype, buffer=self.arena, offset=offset))


def _arena_file(size: int):
    """A shared file of ``size`` bytes for an arena, mapped here: (mapping, the name the owner
    opens it by, a callable that removes that name once the owner has it mapped).

    A file in /dev/shm (else the temporary folder), its pages allocated now. Where /dev/shm is
    full (a container's: Docker gives 64 MiB, 15 host workers need 32 each), a memory file
    (memfd, bounded by memory alone) named by its /proc descriptor path."""
    folder = _arena_folder()
    descriptor, path = tempfile.mkstemp(prefix="bowmap-arena-", dir=folder)
    arena = None
    try:
        arena = _mapped(descriptor, size)
    finally:
        os.close(descriptor)
        if arena is None:  # full, or failed
            os.unlink(path)
    if arena is not None:
        return arena, path, functools.partial(os.unlink, path)
    if not hasattr(os, "memfd_create"):
        raise BowmapError(f"no room in {folder or tempfile.gettempdir()} for a {size >> 20} MiB arena (the host workers' shared "
                          "memory with the device owner): free some, or run fewer processes (-p)")
    log.debug("%s is full: arenas in memory files", folder)
    descriptor = os.memfd_create("bowmap-arena", os.MFD_CLOEXEC)
    try:
        arena = _mapped(descriptor, size)
    finally:
        if arena is None:  # no memory, or failed
            os.close(descriptor)
    if arena is None:
        raise BowmapError(f"no memory for a {size >> 20} MiB arena (the host workers' shared memory with the device owner): "
                          "run fewer processes (-p)")
    return arena, f"/proc/{os.getpid()}/fd/{descriptor}", functools.partial(os.close, descriptor)


def _mapped(descriptor: int, size: int) -> mmap.mmap | None:
    """The file of ``descriptor`` made ``size`` bytes, its pages allocated (_allocate), and
    mapped here; None where there is no room for them."""
    os.ftruncate(descriptor, size)
    return mmap.mmap(descriptor, size) if _allocate(descriptor, size) else None


def _allocate(descriptor: int, size: int) -> bool:
    """Give an arena's file its pages now, in this host worker; False where there is no room.
    Why: not in the owner, where NVIDIA's driver would allocate them while registering the arena
    (see DeviceOwner._map; H200, 32 MiB: 12.9-17.4 ms a sparse file, 9.9-12.7 ms an allocated
    one, measured in the owner's loop before registrations moved to threads of their own, the
    rest being the owner's page tables, which populating its mapping first does not shorten),
    nor as a SIGBUS at a write into a full /dev/shm."""
    try:
        os.posix_fallocate(descriptor, 0, size)
    except AttributeError:
        pass  # not on this system: the pages come at first use
    except OSError as error:
        if error.errno == errno.ENOSPC:
            return False
        # a file system that does not allocate ahead: the pages come at first use
    return True


class RemoteContext:
    """Stands in for a pyopencl Context: where its owner listens, and each thread's channel."""

    is_remote = True

    def __init__(self, address, authkey: bytes, pid: int | None = None):
        self.address = address
        self.authkey = authkey
        self.pid = pid  # the owner's process, when it has one of its own (OwnerProcess)
        self._local = threading.local()

    def channel(self) -> _Channel:
        channel = getattr(self._local, "channel", None)
        if channel is None:
            channel = self._local.channel = _Channel(self.address, self.authkey, self.pid)
        return channel

    def request(self, message):
        """A synchronous request after this thread's recorded commands."""
        channel = self.channel()
        channel.flush()
        return channel.call(message)

    def flush(self) -> None:
        """Send this thread's recorded commands and wait for them: what it made, other threads
        may name from now on (see :meth:`buffer`)."""
        self.channel().flush()

    def buffer(self, flags: int, size: int = 0, hostbuf=None) -> RemoteBuffer:
        """A buffer made on the owner with this thread's next batch (before any command of it
        that names the buffer): its creation costs no round trip of its own. A thread other than
        this one may name it only after this thread's next synchronisation (:meth:`flush`; a
        worker's set-up ends with one, so its kernel owners may run in any thread)."""
        key = _key()
        channel = self.channel()
        if hostbuf is not None:
            hostbuf = np.ascontiguousarray(hostbuf)
            size = hostbuf.nbytes
            channel.commands.append(("buffer", key, int(flags), size, channel.put(hostbuf)))
        else:
            channel.commands.append(("create", key, int(flags), int(size)))
        return RemoteBuffer(key, size)


class RemoteQueue:
    """Stands in for a pyopencl CommandQueue of the owner's context."""

    is_remote = True

    def __init__(self, context: RemoteContext):
        self.context = context
        self.key = _key()

    def copy(self, destination, source, is_blocking: bool = True, **options) -> None:
        """``pyopencl.enqueue_copy`` between a host array and a buffer, either way."""
        channel = self.context.channel()
        if isinstance(destination, RemoteBuffer):
            if options:
                raise ValueError(f"remote uploads take no options ({sorted(options)})")
            source = np.ascontiguousarray(source)
            offset = channel.put(source)
            channel.commands.append(("write", self.key, destination.key, offset, source.nbytes))
        else:
            offset = channel._room(destination.nbytes)  # noqa: SLF001 - the channel's own allocation
            channel.commands.append(("read", self.key, source.key, offset, destination.dtype.str, destination.shape,
                                     options or None, bool(is_blocking)))
            channel.reads.append((destination, offset))
        if is_blocking:
            channel.flush()

    def wait_idle(self) -> None:
        """Everything queued so far has run (on the owner, sleeping while it waits)."""
        channel = self.context.channel()
        channel.commands.append(("wait_idle", self.key))
        channel.flush()

    finish = wait_idle

    def flush(self) -> None:
        self.context.channel().flush()


# What kernel owners ask of a kernel: OpenCL's CL_KERNEL_WORK_GROUP_SIZE, _PREFERRED_WORK_GROUP_SIZE_MULTIPLE
# and _LOCAL_MEM_SIZE (pyopencl.kernel_work_group_info); the owner answers them for every kernel
# of a program with the program itself (DeviceOwner._kernel_facts).
KERNEL_FACTS = (0x11B0, 0x11B3, 0x11B2)


class RemoteProgram:
    """A program built on the owner's device: (source name, build options), and its kernels'
    facts (:data:`KERNEL_FACTS`: {(kernel name, parameter): value})."""

    is_remote = True

    def __init__(self, device: RemoteDevice, key: tuple, facts: dict | None = None):
        self.device = device
        self.key = key
        self.facts = {} if facts is None else facts

    def kernel(self, name: str) -> RemoteKernel:
        return RemoteKernel(self, name)


class RemoteKernel:
    """Stands in for a pyopencl Kernel: a call is recorded on the calling thread's channel."""

    def __init__(self, program: RemoteProgram, name: str):
        self.program = program
        self.name = name

    def get_work_group_info(self, parameter, device=None) -> int:
        parameter = int(parameter)
        facts = self.program.facts
        if (self.name, parameter) not in facts:  # not one of KERNEL_FACTS: asked once
            facts[self.name, parameter] = self.program.device.context.request(("kernel_info", self.program.key, self.name, parameter))
        return facts[self.name, parameter]

    def __call__(self, queue: RemoteQueue, global_size, local_size, *arguments):
        import pyopencl as cl

        encoded = tuple(
            _Ref(argument.key) if isinstance(argument, RemoteBuffer)
            else _Local(argument.size) if isinstance(argument, cl.LocalMemory) else argument
            for argument in arguments
        )
        queue.context.channel().commands.append((
            "kernel", self.program.key, self.name, queue.key, tuple(global_size),
            None if local_size is None else tuple(local_size), encoded,
        ))


class RemoteDevice:
    """A :class:`bowmap.runtime.devices.DeviceContext` whose context lives in a DeviceOwner:
    ``info``, ``context``, ``device`` (the platform name and NVIDIA compute capability the
    kernel owners ask for), ``program``, ``queue``."""

    def __init__(self, info, address, authkey: bytes, pid: int | None = None):
        self.info = info
        self.context = RemoteContext(address, authkey, pid)
        self.build_seconds = 0.0
        self._programs: dict[tuple, RemoteProgram] = {}
        self._facts = None

    @property
    def device(self):
        if self._facts is None:
            platform, capability = self.context.request(("facts",))
            facts = types.SimpleNamespace(platform=types.SimpleNamespace(name=platform))
            if capability is not None:
                facts.compute_capability_major_nv, facts.compute_capability_minor_nv = capability
            self._facts = facts
        return self._facts

    def program(self, source_name: str, options: tuple[str, ...] = ()) -> RemoteProgram:
        key = (source_name, tuple(options))
        if key not in self._programs:
            started = time.perf_counter()
            facts = self.context.request(("program", key))
            self.build_seconds += time.perf_counter() - started
            self._programs[key] = RemoteProgram(self, key, facts)
        return self._programs[key]

    def queue(self) -> RemoteQueue:
        return RemoteQueue(self.context)

    def shared_buffer(self, name: str, size: int = 0) -> RemoteBuffer:
        """A buffer the owner made for every client (``DeviceOwner(shared=...)``)."""
        return RemoteBuffer(("shared", name), size, owned=False)

    def __repr__(self) -> str:
        return f"RemoteDevice({self.info.index}: {self.info.name})"
