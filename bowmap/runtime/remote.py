"""One owner per device: the device's only context, its one copy of the index and its command
queues live in one process (:class:`DeviceOwner`); kernel owners in other processes drive it
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
own (a file in /dev/shm mapped by both processes), never through a pickle. The owner executes a
batch with the very PyOpenCL calls the kernel owner would have made in its own process, in the
same order on the same kind of in-order queue, so results are the same bit for bit.

Keys: a buffer, queue or kernel made by a client is named ``(token, number)``, the token being
its process's; buffers the owner made for everyone (the index blocks, the packed text) are
named ``("shared", name)``. Buffer creations are synchronous requests (rare: buffers are reused
and grow by doubling), so a buffer exists on the owner before any thread of its process names it.
"""

from __future__ import annotations

import collections
import itertools
import logging
import mmap
import os
import secrets
import sys
import tempfile
import threading
import time
import types
import weakref
from multiprocessing.connection import Client, Listener

import numpy as np

from bowmap.runtime.devices import wait_idle
from bowmap.runtime.errors import BowmapError

log = logging.getLogger("bowmap.runtime.remote")

_TOKEN = f"{os.getpid()}-{secrets.token_hex(4)}"  # this process's name in an owner's tables
_NUMBERS = itertools.count(1)
_RELEASED: collections.deque = collections.deque()  # keys of dropped buffers, sent with the next batch
_ARENA_BYTES = 16 << 20  # a channel's first arena; it doubles when a batch needs more
_ALIGN = 64
SWITCH_INTERVAL_SECONDS = 0.001  # the owner's process (see DeviceOwner)


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


class _Channel:
    """One thread's connection to an owner, its arena and the commands recorded since its last
    synchronisation."""

    def __init__(self, address, authkey: bytes):
        self.connection = Client(address, family="AF_UNIX", authkey=authkey)
        self.commands: list[tuple] = []
        self.reads: list[tuple[np.ndarray, int]] = []  # (destination, arena offset), filled at the flush
        self.used = 0
        self.arena: mmap.mmap | None = None
        self.view: np.ndarray | None = None
        self.new_arena: tuple[str, int] | None = None  # sent with the next batch
        self.call(("hello", _TOKEN))

    def call(self, message):
        """Send one message, wait for its answer; the owner's failure is raised here."""
        try:
            self.connection.send(message)
            status, value = self.connection.recv()
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
        size = max(_ARENA_BYTES, needed, 2 * (len(self.arena) if self.arena is not None else 0))
        descriptor, path = tempfile.mkstemp(prefix="bowmap-arena-", dir=_arena_folder())
        try:
            os.ftruncate(descriptor, size)
            arena = mmap.mmap(descriptor, size)
        finally:
            os.close(descriptor)
        if self.arena is not None:
            arena[: self.used] = self.arena[: self.used]  # this batch's uploads so far
            self.view = None
            self.arena.close()
        if self.new_arena is not None:  # never sent: no one else maps it
            os.unlink(self.new_arena[0])
        self.arena = arena
        self.view = np.frombuffer(arena, dtype=np.uint8)
        self.new_arena = (path, size)

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
        commands, self.commands = self.commands, []
        try:
            self.call(("batch", arena, released, commands))
        finally:
            if arena is not None:
                os.unlink(arena[0])  # mapped on both sides now (or the owner is gone)
            reads, self.reads = self.reads, []
            self.used = 0
        for destination, offset in reads:
            np.copyto(destination, np.ndarray(destination.shape, destination.dtype, buffer=self.arena, offset=offset))


class RemoteContext:
    """Stands in for a pyopencl Context: where its owner listens, and each thread's channel."""

    is_remote = True

    def __init__(self, address, authkey: bytes):
        self.address = address
        self.authkey = authkey
        self._local = threading.local()

    def channel(self) -> _Channel:
        channel = getattr(self._local, "channel", None)
        if channel is None:
            channel = self._local.channel = _Channel(self.address, self.authkey)
        return channel

    def request(self, message):
        """A synchronous request after this thread's recorded commands."""
        channel = self.channel()
        channel.flush()
        return channel.call(message)

    def buffer(self, flags: int, size: int = 0, hostbuf=None) -> RemoteBuffer:
        key = _key()
        channel = self.channel()
        channel.flush()
        offset = None
        if hostbuf is not None:
            hostbuf = np.ascontiguousarray(hostbuf)
            size = hostbuf.nbytes
            offset = channel.put(hostbuf)
            channel.commands.append(("buffer", key, int(flags), size, offset))
            channel.flush()
        else:
            channel.call(("create", key, int(flags), int(size)))
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


class RemoteProgram:
    """A program built on the owner's device: (source name, build options)."""

    is_remote = True

    def __init__(self, device: RemoteDevice, key: tuple):
        self.device = device
        self.key = key

    def kernel(self, name: str) -> RemoteKernel:
        return RemoteKernel(self, name)


class RemoteKernel:
    """Stands in for a pyopencl Kernel: a call is recorded on the calling thread's channel."""

    def __init__(self, program: RemoteProgram, name: str):
        self.program = program
        self.name = name
        self.key = _key()
        self._info: dict[int, int] = {}

    def get_work_group_info(self, parameter, device=None) -> int:
        parameter = int(parameter)
        if parameter not in self._info:
            self._info[parameter] = self.program.device.context.request(("kernel_info", self.program.key, self.name, parameter))
        return self._info[parameter]

    def __call__(self, queue: RemoteQueue, global_size, local_size, *arguments):
        import pyopencl as cl

        encoded = tuple(
            _Ref(argument.key) if isinstance(argument, RemoteBuffer)
            else _Local(argument.size) if isinstance(argument, cl.LocalMemory) else argument
            for argument in arguments
        )
        queue.context.channel().commands.append((
            "kernel", self.key, self.program.key, self.name, queue.key, tuple(global_size),
            None if local_size is None else tuple(local_size), encoded,
        ))


class RemoteDevice:
    """A :class:`bowmap.runtime.devices.DeviceContext` whose context lives in a DeviceOwner:
    ``info``, ``context``, ``device`` (the platform name and NVIDIA compute capability the
    kernel owners ask for), ``program``, ``queue``."""

    def __init__(self, info, address, authkey: bytes):
        self.info = info
        self.context = RemoteContext(address, authkey)
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
            self.context.request(("program", key))
            self.build_seconds += time.perf_counter() - started
            self._programs[key] = RemoteProgram(self, key)
        return self._programs[key]

    def queue(self) -> RemoteQueue:
        return RemoteQueue(self.context)

    def shared_buffer(self, name: str, size: int = 0) -> RemoteBuffer:
        """A buffer the owner made for every client (``DeviceOwner(shared=...)``)."""
        return RemoteBuffer(("shared", name), size, owned=False)

    def __repr__(self) -> str:
        return f"RemoteDevice({self.info.index}: {self.info.name})"


# ---------------------------------------------------------------- the owner side


class DeviceOwner:
    """Owns one device's context in this process and serves RemoteDevices of other processes.

    ``open_device()`` makes the context (a DeviceContext) and ``shared(device)`` the buffers every
    client may name (a dict name -> pyopencl Buffer): both run in a thread of their own, started
    here, so the caller goes on (spawning the host workers) meanwhile; requests wait for them.
    Each client connection is served by a thread; PyOpenCL releases the GIL while it waits."""

    def __init__(self, open_device, shared):
        self.authkey = secrets.token_bytes(32)
        self._listener = Listener(family="AF_UNIX", authkey=self.authkey)
        self.address = self._listener.address
        self.device = None
        self.set_up_seconds: dict[str, float] = {}
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._buffers: dict = {}
        self._queues: dict = {}
        self._kernels: dict = {}
        self._clients: collections.Counter = collections.Counter()  # open connections a token
        self._lock = threading.Lock()
        self._closed = False
        self._connections: list = []
        # Many short holds of the GIL by the serving threads: hand it over sooner than every 5 ms.
        if sys.getswitchinterval() > SWITCH_INTERVAL_SECONDS:
            sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
        threading.Thread(target=self._set_up, args=(open_device, shared), daemon=True, name="bowmap-owner-setup").start()
        threading.Thread(target=self._accept, daemon=True, name="bowmap-owner").start()

    @property
    def endpoint(self) -> tuple:
        """What a client needs to reach this owner (picklable)."""
        return self.address, self.authkey

    def _set_up(self, open_device, shared) -> None:
        try:
            started = time.perf_counter()
            device = open_device()
            opened = time.perf_counter()
            buffers = shared(device)
            self._buffers.update({("shared", name): buffer for name, buffer in buffers.items()})
            self.device = device
            self.set_up_seconds = {"context": opened - started, "upload": time.perf_counter() - opened}
        except BaseException as error:  # noqa: BLE001 - every request answers with it
            self._error = error
        finally:
            self._ready.set()

    def wait_ready(self):
        """The owner's device once set up; raises its set-up's error."""
        self._ready.wait()
        if self._error is not None:
            raise self._error
        return self.device

    def _accept(self) -> None:
        while not self._closed:
            try:
                connection = self._listener.accept()
            except (OSError, EOFError):
                if self._closed:
                    return
                continue  # a client that failed authentication or hung up at once
            self._connections.append(connection)
            threading.Thread(target=self._serve, args=(connection,), daemon=True, name="bowmap-owner-client").start()

    def close(self) -> None:
        self._closed = True
        try:
            self._listener.close()
        except OSError:
            pass
        for connection in self._connections:
            try:
                connection.close()
            except OSError:
                pass

    # -- one connection

    def _serve(self, connection) -> None:
        token = None
        arena = None
        try:
            while True:
                try:
                    message = connection.recv()
                except (EOFError, OSError):
                    return
                try:
                    kind = message[0]
                    if kind == "hello":
                        token = message[1]
                        with self._lock:
                            self._clients[token] += 1
                        value = None
                    else:
                        device = self.wait_ready()
                        if kind == "batch":
                            _, new_arena, released, commands = message
                            if new_arena is not None:
                                arena = self._map(arena, *new_arena)
                            for key in released:
                                self._buffers.pop(key, None)
                            self._execute(device, arena, commands)
                            value = None
                        else:
                            value = self._answer(device, message)
                    reply = ("ok", value)
                except BowmapError as error:
                    reply = ("error", (str(error), True))
                except Exception as error:  # noqa: BLE001 - the client raises it
                    reply = ("error", (f"{type(error).__name__}: {error}", False))
                try:
                    connection.send(reply)
                except (OSError, EOFError):
                    return
        finally:
            if arena is not None:
                arena.close()
            if token is not None:
                with self._lock:
                    self._clients[token] -= 1
                    if self._clients[token] == 0:  # the process is gone: free what it made
                        for table in (self._buffers, self._queues, self._kernels):
                            for key in [key for key in table if key[0] == token]:
                                del table[key]

    @staticmethod
    def _map(old, path: str, size: int):
        with open(path, "r+b") as file:
            arena = mmap.mmap(file.fileno(), size)
        if old is not None:
            old.close()
        return arena

    def _queue(self, device, key):
        queue = self._queues.get(key)
        if queue is None:
            with self._lock:
                queue = self._queues.setdefault(key, device.queue())
        return queue

    def _answer(self, device, message):
        import pyopencl as cl

        kind = message[0]
        if kind == "program":
            device.program(*message[1])
            return None
        if kind == "kernel_info":
            _, program_key, name, parameter = message
            return int(cl.Kernel(device.program(*program_key), name).get_work_group_info(parameter, device.device))
        if kind == "create":
            _, key, flags, size = message
            self._buffers[key] = cl.Buffer(device.context, flags, size=size)
            return None
        if kind == "facts":
            from bowmap.runtime.devices import nvidia_compute_capability

            return device.device.platform.name, nvidia_compute_capability(device.device)
        raise ValueError(f"unknown request {kind!r}")

    def _execute(self, device, arena, commands) -> None:
        """One batch, in order; then every queue it used is idle, so the arena may be reused."""
        import pyopencl as cl

        # Waits sleep (devices.wait_idle: NVIDIA's blocking waits spin a core). Measured on an
        # H200, 1 M chr20 pairs, 15 host workers: 4.31 s of mapping, against 4.88 s with a
        # marker's completion callback waking the waiting thread instead.
        pending = []  # events of copies from or into the arena: kept until their queues are idle
        touched = {}  # queues with commands not known to have run
        busy = set()  # queues with kernels not known to have run
        buffers = self._buffers
        try:
            for command in commands:
                operation = command[0]
                if operation == "kernel":
                    _, key, program_key, name, queue_key, global_size, local_size, arguments = command
                    kernel = self._kernels.get(key)
                    if kernel is None:
                        kernel = self._kernels[key] = cl.Kernel(device.program(*program_key), name)
                    queue = touched[queue_key] = self._queue(device, queue_key)
                    busy.add(queue_key)
                    kernel(queue, global_size, local_size, *[
                        buffers[argument.key] if isinstance(argument, _Ref)
                        else cl.LocalMemory(argument.size) if isinstance(argument, _Local) else argument
                        for argument in arguments
                    ])
                elif operation == "write":
                    _, queue_key, buffer_key, offset, size = command
                    queue = touched[queue_key] = self._queue(device, queue_key)
                    if queue_key in busy:
                        # A copy from pageable memory waits for the kernels before it, spinning
                        # on NVIDIA: wait for them here, sleeping (as ReusedBuffer.upload does).
                        wait_idle(queue)
                        busy.discard(queue_key)
                    if size:
                        source = np.frombuffer(arena, dtype=np.uint8, count=size, offset=offset)
                        pending.append(cl.enqueue_copy(queue, buffers[buffer_key], source, is_blocking=False))
                elif operation == "read":
                    _, queue_key, buffer_key, offset, dtype, shape, options, blocking = command
                    queue = touched[queue_key] = self._queue(device, queue_key)
                    destination = np.ndarray(shape, np.dtype(dtype), buffer=arena, offset=offset)
                    event = cl.enqueue_copy(queue, destination, buffers[buffer_key], is_blocking=blocking, **(options or {}))
                    if blocking:
                        del touched[queue_key]  # idle now: the batch's end need not wait for it
                        busy.discard(queue_key)
                    else:
                        pending.append(event)
                elif operation == "wait_idle":
                    wait_idle(self._queue(device, command[1]))
                    touched.pop(command[1], None)
                    busy.discard(command[1])
                elif operation == "buffer":
                    _, key, flags, size, offset = command
                    source = np.frombuffer(arena, dtype=np.uint8, count=size, offset=offset)
                    buffers[key] = cl.Buffer(device.context, flags | cl.mem_flags.COPY_HOST_PTR, hostbuf=source)
                else:
                    raise ValueError(f"unknown command {operation!r}")
        finally:
            for queue in touched.values():
                wait_idle(queue)
            pending.clear()

