"""The owner side of bowmap.runtime.remote: :class:`DeviceOwner` holds one device's context, its
shared buffers (the index blocks, the packed text) and its queues, and executes the batches its
clients (RemoteDevices in host worker processes) send; :class:`OwnerProcess` runs one in a
process of its own. The protocol and the reasons are in bowmap.runtime.remote's docstring."""

from __future__ import annotations

import collections
import contextlib
import mmap
import os
import secrets
import sys
import threading
import time
from multiprocessing.connection import Listener

import numpy as np

from bowmap.runtime import usage
from bowmap.runtime.devices import forking_quietly, wait_idle
from bowmap.runtime.errors import BowmapError
from bowmap.runtime.remote import _Local, _Ref

# The owner's switch interval (see DeviceOwner). Measured on an H200 with 16 cores, chr20, 1 M
# pairs, whole command, two rounds: 5.09/5.23 s at 1 ms, 5.61/5.50 s at 0.2 ms; one thread
# polling every waiting thread's marker (the others asleep on an Event) in place of each
# polling its own: 5.33/5.38 s.
SWITCH_INTERVAL_SECONDS = 0.001

DEVICE_WAITS = "device waits in batches"  # usage's name for a batch's waits for the device

# Bytes of dropped client buffers an owner keeps for reuse (BufferPool): at most this, and at
# most this share of the device's memory.
POOL_BYTES = 1 << 30
POOL_SHARE = 1 / 16


class BufferPool:
    """Device buffers the clients dropped, kept for their next creations of the same flags.

    Why: freeing device memory is slow on GPU drivers and stops the owner: NVIDIA's
    clReleaseMemObject waits for the device, and pyopencl calls it holding the GIL, so every
    serving thread stood still while it ran (py-spy, H200, chr20 1 M pairs: 14% of the owner's
    GIL samples were releases). A host worker's buffers grow (ReusedBuffer doubles them) and the
    ones they outgrow come here; a creation takes the smallest kept buffer of its flags that is
    at least as large and at most FIT times as large. At most ``limit`` bytes are kept; past
    that a dropped buffer is freed. Used under the owner's lock."""

    FIT = 4

    def __init__(self, limit: int):
        self.limit = limit
        self.bytes = 0
        self._kept: dict[int, list[tuple[int, object]]] = {}  # flags -> [(size, buffer)]

    def take(self, flags: int, size: int):
        """A kept buffer for a creation of ``size`` bytes and ``flags`` and its size, or None."""
        kept = self._kept.get(flags)
        if not kept:
            return None
        fits = [number for number, (held, _) in enumerate(kept) if size <= held <= self.FIT * max(size, 1)]
        if not fits:
            return None
        held, buffer = kept.pop(min(fits, key=lambda number: kept[number][0]))
        self.bytes -= held
        return held, buffer

    def keep(self, flags: int, size: int, buffer) -> bool:
        """Keep ``buffer`` (``size`` bytes, ``flags``) if there is room; whether it was kept."""
        if self.bytes + size > self.limit:
            return False
        self._kept.setdefault(flags, []).append((size, buffer))
        self.bytes += size
        return True


class DeviceOwner:
    """Owns one device's context in this process and serves RemoteDevices of other processes.

    ``open_device()`` makes the context (a DeviceContext) and ``shared(device)`` the buffers every
    client may name (a dict name -> pyopencl Buffer): both run in a thread of their own, started
    here, so the caller goes on (spawning the host workers) meanwhile; requests wait for them.
    Each client connection is served by a thread; PyOpenCL releases the GIL while it waits."""

    def __init__(self, open_device, shared, address=None, authkey: bytes | None = None):
        self.authkey = secrets.token_bytes(32) if authkey is None else authkey
        self._listener = Listener(address, family="AF_UNIX", authkey=self.authkey)
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
        self._released_early: set = set()  # see _release
        self._made: dict = {}  # key -> (flags, size) of the buffers clients created: they go to the pool
        self._pool = BufferPool(POOL_BYTES)
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
            self._pool.limit = min(POOL_BYTES, int(POOL_SHARE * device.info.global_memory))
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
                except (EOFError, OSError, TypeError):  # TypeError: closed by close() meanwhile
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
                            created = set()
                            with usage.timed("batches"):
                                try:
                                    self._execute(device, arena, commands, created)
                                finally:
                                    self._release(released, created)
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
                        for table in (self._buffers, self._queues, self._kernels, self._made):
                            for key in [key for key in table if key[0] == token]:
                                del table[key]
                        self._released_early = {key for key in self._released_early if key[0] != token}

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
        if kind == "facts":
            from bowmap.runtime.devices import nvidia_compute_capability

            return device.device.platform.name, nvidia_compute_capability(device.device)
        raise ValueError(f"unknown request {kind!r}")

    def _release(self, released, created: set) -> None:
        """Forget the buffers a client dropped (``released``, keys), after its batch that made
        ``created``. A key may come before its creation (dropped by one thread of the client,
        whose release another thread's batch carried, before the making thread's batch came):
        it is kept, and the buffer dropped after the batch that makes it. A dropped buffer goes
        to the pool (BufferPool) where it has room."""
        with self._lock:
            for key in released:
                if key in self._buffers:
                    self._drop(key)
                else:
                    self._released_early.add(key)
            for key in created & self._released_early:
                self._drop(key)
                self._released_early.discard(key)

    def _drop(self, key) -> None:
        buffer = self._buffers.pop(key)
        made = self._made.pop(key, None)
        if made is not None:
            self._pool.keep(*made, buffer)

    def _create(self, device, key, flags: int, size: int):
        """A client's new buffer: one from the pool, else a new one."""
        import pyopencl as cl

        with self._lock:
            kept = self._pool.take(flags, size)
        if kept is None:
            kept = size, cl.Buffer(device.context, flags, size=size)
        with self._lock:
            self._made[key] = (flags, kept[0])
        return kept[1]

    def _execute(self, device, arena, commands, created: set) -> None:
        """One batch, in order; then every queue it used is idle, so the arena may be reused.
        The keys of the buffers it makes are added to ``created``."""
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
                        with usage.timed(DEVICE_WAITS):
                            wait_idle(queue)
                        busy.discard(queue_key)
                    if size:
                        source = np.frombuffer(arena, dtype=np.uint8, count=size, offset=offset)
                        pending.append(cl.enqueue_copy(queue, buffers[buffer_key], source, is_blocking=False))
                elif operation == "read":
                    _, queue_key, buffer_key, offset, dtype, shape, options, blocking = command
                    queue = touched[queue_key] = self._queue(device, queue_key)
                    destination = np.ndarray(shape, np.dtype(dtype), buffer=arena, offset=offset)
                    with usage.timed(DEVICE_WAITS) if blocking else contextlib.nullcontext():
                        event = cl.enqueue_copy(queue, destination, buffers[buffer_key], is_blocking=blocking, **(options or {}))
                    if blocking:
                        del touched[queue_key]  # idle now: the batch's end need not wait for it
                        busy.discard(queue_key)
                    else:
                        pending.append(event)
                elif operation == "wait_idle":
                    with usage.timed(DEVICE_WAITS):
                        wait_idle(self._queue(device, command[1]))
                    touched.pop(command[1], None)
                    busy.discard(command[1])
                elif operation == "create":
                    _, key, flags, size = command
                    buffers[key] = self._create(device, key, flags, size)
                    created.add(key)
                elif operation == "buffer":
                    _, key, flags, size, offset = command
                    source = np.frombuffer(arena, dtype=np.uint8, count=size, offset=offset)
                    buffers[key] = cl.Buffer(device.context, flags | cl.mem_flags.COPY_HOST_PTR, hostbuf=source)
                    created.add(key)
                else:
                    raise ValueError(f"unknown command {operation!r}")
        finally:
            with usage.timed(DEVICE_WAITS):
                for queue in touched.values():
                    wait_idle(queue)
            pending.clear()



# ---------------------------------------------------------------- the owner in a process of its own


class OwnerProcess:
    """A :class:`DeviceOwner` in a process of its own, one a device.

    Why: the owner's serving threads hold the GIL for every batch they unpack and launch; in the
    run's main process they shared it with the reader and the writer, and two devices' owners
    would share it with each other. Its own process gives each owner a GIL of its own.

    The process starts at once and waits for its work: :meth:`serve` sends ``open_device`` and
    ``shared`` (as DeviceOwner's, picklable); given here, they are sent at once. It is spawned,
    or with ``start_method="fork"`` forked, which spares it the interpreter's start and the
    imports (about 0.7 s of a run's start on the GPU machine): allowed only in a process that has
    made no OpenCL call yet (see bowmap.runtime.devices.may_fork_device_users), so that the
    child opens the driver itself. The socket's address is chosen here, so :attr:`endpoint` is
    known at once; clients that come before the owner listens wait for it (see
    bowmap.runtime.remote._connect). The process ends when :meth:`close` is called or this
    process's end of the control pipe closes (this process died)."""

    def __init__(self, open_device=None, shared=None, name: str = "device", start_method: str = "spawn"):
        import multiprocessing
        import signal
        from multiprocessing.connection import arbitrary_address

        context = multiprocessing.get_context(start_method)
        self.authkey = secrets.token_bytes(32)
        self.address = arbitrary_address("AF_UNIX")
        self._control, child = context.Pipe()
        self._set_up: dict | None = None
        self.process = context.Process(target=_owner_process, args=(self.address, self.authkey, child),
                                       daemon=True, name="bowmap-owner")
        # SIGINT blocked while it starts, so a ^C then reaches this process alone (the owner
        # ignores it: the run ends it through close()).
        masked = hasattr(signal, "pthread_sigmask")
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if masked else None
        try:
            with forking_quietly():
                self.process.start()
        finally:
            if masked:
                signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        child.close()
        if open_device is not None:
            self.serve(open_device, shared, name)

    def serve(self, open_device, shared, name: str = "device") -> OwnerProcess:
        """Open the device and share its buffers (``name``: the owner's, in its usage file)."""
        self._control.send(("serve", open_device, shared, name))
        return self

    @property
    def endpoint(self) -> tuple:
        """What a client needs to reach this owner (picklable): RemoteDevice's arguments after its info."""
        return self.address, self.authkey, self.process.pid

    @property
    def set_up_seconds(self) -> dict:
        """The owner's set-up times once it has reported them (else empty): context and upload."""
        if self._set_up is None:
            try:
                if self._control.poll():
                    status, value = self._control.recv()
                    self._set_up = value if status == "ready" else {}
            except (EOFError, OSError):
                self._set_up = {}
        return self._set_up or {}

    def close(self) -> None:
        try:
            self._control.send("stop")
        except (OSError, EOFError):
            pass
        self.process.join(timeout=10)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(timeout=5)
        self._control.close()


def _owner_process(address, authkey: bytes, control) -> None:
    """An owner process's body: wait for its work (OwnerProcess.serve), serve until told to stop
    or orphaned, then leave at once."""
    import signal

    started = time.monotonic()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the run stops the owner itself
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # forked, it has its parent's handler (see runners._worker_process)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    owner = None
    name = "device"
    try:
        try:
            message = control.recv()
        except (EOFError, OSError):
            message = "stop"  # the run's process is gone
        if message != "stop":
            _, open_device, shared, name = message
            owner = DeviceOwner(open_device, shared, address, authkey)
            try:
                owner.wait_ready()
                control.send(("ready", owner.set_up_seconds))
            except BaseException as error:  # noqa: BLE001 - the clients get it with their requests
                control.send(("failed", str(error)))
            try:
                control.recv()
            except (EOFError, OSError):
                pass  # the run's process is gone
    finally:
        if owner is not None:
            owner.close()
            if usage.FOLDER:
                usage.write_usage(os.path.join(usage.FOLDER, f"owner-{name}.usage.json"), started)
        sys.stdout.flush()
        sys.stderr.flush()
        # No interpreter teardown: releasing the context, queues and buffers one by one only
        # holds up the run's end (and NVIDIA's driver may abort in it); the system frees them.
        os._exit(0)
