"""The owner side of bowmap.runtime.remote: :class:`DeviceOwner` holds one device's context, its
shared buffers (the index blocks, the packed text) and its queues, and executes the batches its
clients (RemoteDevices in host worker processes) send; bowmap.runtime.owner_process.OwnerProcess
runs one in a process of its own. The protocol and the reasons are in bowmap.runtime.remote's docstring."""

from __future__ import annotations

import collections
import functools
import mmap
import os
import secrets
import selectors
import threading
import time
from multiprocessing.connection import Listener

import numpy as np

from bowmap.runtime import usage
from bowmap.runtime.buffer_pool import POOL_BYTES, POOL_SHARE, BufferPool
from bowmap.runtime.errors import BowmapError
from bowmap.runtime.pinning import Pinning
from bowmap.runtime.remote import _Local, _Ref, listening

# The requests answered from the context alone, before the shared buffers are uploaded (_may_start).
_OF_THE_CONTEXT = {"program", "kernel_info", "facts"}

# Where a batch's command names its queue (the commands that use one).
_ON_QUEUE = {"kernel": 4, "write": 1, "read": 1, "wait_idle": 1}

# The serving loop's polls of the events it waits for: the first pause, and the longest it
# doubles to while nothing completes (as devices.wait_idle's sleeps).
_FIRST_POLL_SECONDS = 20e-6
_LONGEST_POLL_SECONDS = 50e-6

DEVICE_WAITS = "device waits in batches"  # usage's name for a batch's waits for the device

def _launch(typed: list, queue, global_size, local_size, values: list):
    """Launch ``typed`` = [kernel, its declared scalar dtypes] on ``values``, declaring the
    numpy scalars' dtypes first where they differ (buffers, local memory: None): pyopencl then
    packs them in one call, not one buffer-protocol call each (H200 owner, py-spy: setting the
    arguments 10% of the loop's samples, enqueueing 3%; PoCL, 20 arguments: 52 us, declared 6 us)."""
    kernel, declared = typed
    dtypes = [getattr(value, "dtype", None) for value in values]
    if dtypes != declared:
        kernel.set_scalar_arg_dtypes(dtypes)
        typed[1] = dtypes
    return kernel(queue, global_size, local_size, *values)


class _Client:
    """One client connection of a DeviceOwner: its process's token, its arena, and the request
    it has in hand (a client thread sends one and waits for its answer)."""

    __slots__ = ("connection", "token", "arena", "pinned", "work", "waiting", "event", "gone", "requests")

    def __init__(self, connection):
        self.connection = connection
        self.token = None
        self.arena = None
        self.pinned = None  # the arena registered with the driver (DeviceOwner._map)
        self.work = None  # the generator serving its request (DeviceOwner._handle)
        self.waiting = 0.0  # when its work began to wait for the device
        self.event = None  # the event its work waits for
        self.gone = False  # hung up (its work may still run)
        self.requests = 0  # read so far (the marks of bench/host_waits.py --round-trips)


class DeviceOwner:
    """Owns one device's context in this process and serves RemoteDevices of other processes.

    ``open_device()`` makes the context (a DeviceContext) and ``shared(device)`` the buffers every
    client may name (a dict name -> pyopencl Buffer): both run in a thread of their own, started
    here, so the caller goes on (spawning the host workers) meanwhile; requests wait for them
    (a program or a kernel's facts for the context alone, see :meth:`_may_start`).

    One thread serves every client (:meth:`_loop`): each request is a generator
    (:meth:`_handle`) that runs until it must wait for a queue to go idle, yielding the event
    it waits for; the loop polls the events of all waiting requests and reads new requests
    between polls, so no thread sleeps or wakes per wait. Why: with a thread a connection (15
    host workers), every wake-up of a waiting thread had to take the process's GIL from the
    thread that held it, each handover up to the switch interval; the owner then used a whole
    core and the workers waited for its answers 39% of their lives (H200, chr20 1 M pairs,
    bench/host_waits.py). ``register_arenas``: register the clients' arenas with the driver
    (see :meth:`_map`); by default where measured to pay, on NVIDIA."""

    def __init__(self, open_device, shared, address=None, authkey: bytes | None = None, register_arenas: bool | None = None,
                 listener: Listener | None = None):
        self.authkey = secrets.token_bytes(32) if authkey is None else authkey
        self._listener = listening(address, self.authkey) if listener is None else listener
        self.address = self._listener.address
        self.device = None
        self._context = None  # the device once its context is open (self.device: once set up)
        self.set_up_seconds: dict[str, float] = {}
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._buffers: dict = {}
        self._queues: dict = {}
        self._kernels: dict = {}  # program key -> its kernels (see _program_kernels)
        self._facts: dict = {}  # program key -> its kernels' facts (see _kernel_facts)
        self._departed: list = []  # what gone clients made and replaced arenas: kept, not freed (see _forget)
        self._clients: collections.Counter = collections.Counter()  # open connections a token
        self._lock = threading.Lock()
        self._closed = False
        self._accepted: collections.deque = collections.deque()  # connections for the loop to take
        self._wake_reader, self._wake_writer = os.pipe()  # wakes the loop: a connection, set-up's end, close()
        os.set_blocking(self._wake_writer, False)
        self._released_early: set = set()  # see _release
        self._made: dict = {}  # key -> (flags, size) of the buffers clients created: they go to the pool
        self._pool = BufferPool(POOL_BYTES)
        self.timeline: list = []  # (kernel name, queue key, event) with usage.TIMELINE (usage.write_timeline)
        self._register = register_arenas  # decided with the device where None (_set_up)
        self.pinning = Pinning()  # the arenas' registrations (_map)
        self.batches = {"registered": 0, "pageable": 0}  # served so far, by their arena's kind
        threading.Thread(target=self._set_up, args=(open_device, shared), daemon=True, name="bowmap-owner-setup").start()
        threading.Thread(target=self._accept, daemon=True, name="bowmap-owner").start()
        threading.Thread(target=self._loop, daemon=True, name="bowmap-owner-loop").start()

    @property
    def endpoint(self) -> tuple:
        """What a client needs to reach this owner (picklable)."""
        return self.address, self.authkey

    def _set_up(self, open_device, shared) -> None:
        try:
            started = time.perf_counter()
            usage.mark("owner set-up")
            device = open_device()
            opened = time.perf_counter()
            usage.mark("owner context")
            self._context = device
            self._wake()  # its requests may start (see _may_start)
            buffers = shared(device)
            usage.mark("owner uploaded")
            self._pool.limit = min(POOL_BYTES, int(POOL_SHARE * device.info.global_memory))
            self._buffers.update({("shared", name): buffer for name, buffer in buffers.items()})
            if self._register is None:
                self._register = "NVIDIA" in device.info.platform.upper()
            self.device = device
            self.set_up_seconds = {"context": opened - started, "upload": time.perf_counter() - opened}
        except BaseException as error:  # noqa: BLE001 - every request answers with it
            self._error = error
        finally:
            self._ready.set()
            self._wake()

    def _may_start(self, request) -> bool:
        """Whether ``request`` may be served now: a greeting at once, a program or a kernel's facts
        once the context is open, the rest once the shared buffers are uploaded too. Why: host
        workers' first program was built after the upload (H200, chr20: 12 ms of a run's start)."""
        kind = request[0]
        return kind == "hello" or self._ready.is_set() or (kind in _OF_THE_CONTEXT and self._context is not None)

    def wait_ready(self):
        """The owner's device once set up; raises its set-up's error."""
        self._ready.wait()
        if self._error is not None:
            raise self._error
        return self.device

    def _wake(self) -> None:
        with self._lock:
            if self._wake_writer is not None:  # else the loop has ended
                try:
                    os.write(self._wake_writer, b"w")
                except BlockingIOError:
                    pass  # the pipe is full: the loop wakes anyway

    def _accept(self) -> None:
        while not self._closed:
            try:
                connection = self._listener.accept()
            except (OSError, EOFError):
                if self._closed:
                    return
                continue  # a client that failed authentication or hung up at once
            self._accepted.append(connection)
            self._wake()

    def close(self) -> None:
        self._closed = True
        try:
            self._listener.close()
        except OSError:
            pass
        self._wake()  # the loop closes the connections and the pipe

    # -- the serving loop

    def _loop(self) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self._wake_reader, selectors.EVENT_READ)
        clients: list[_Client] = []
        waiting: list[_Client] = []  # clients whose work waits for an event
        early: collections.deque = collections.deque()  # (client, request) before the device was ready
        pause = _FIRST_POLL_SECONDS
        try:
            while not self._closed:
                moved = False
                with usage.timed("loop: select"):
                    ready = selector.select(pause if waiting else None)  # set-up and close() wake it
                for key, _ in ready:
                    if key.data is None:
                        os.read(self._wake_reader, 4096)
                        while self._accepted:
                            client = _Client(self._accepted.popleft())
                            clients.append(client)
                            selector.register(client.connection.fileno(), selectors.EVENT_READ, client)
                        continue
                    client = key.data
                    try:
                        request = client.connection.recv()
                    except (EOFError, OSError):
                        selector.unregister(client.connection.fileno())
                        client.gone = True
                        if client.work is None:
                            self._forget(client)
                        continue
                    if usage.COUNTING and client.token is not None:
                        client.requests += 1
                        usage.mark(f"read {client.token}", client.requests)
                    if self._may_start(request):
                        with usage.timed("loop: requests started"):
                            self._start(client, request, waiting)
                    else:
                        early.append((client, request))
                    moved = True
                for client, request in [item for item in early if self._may_start(item[1])]:
                    early.remove((client, request))
                    self._start(client, request, waiting)
                    moved = True
                for client in list(waiting):
                    with usage.timed("loop: event polls"):
                        status = client.event.command_execution_status
                    if status > 0:  # queued, submitted or running
                        continue
                    waiting.remove(client)
                    client.event = None  # a copy's event holds its view of the arena, which may be replaced next
                    if usage.COUNTING:
                        usage.waited(DEVICE_WAITS, time.perf_counter() - client.waiting)
                        usage.mark(f"done {client.token}", client.requests)
                    with usage.timed("loop: advances"):
                        self._advance(client, waiting, status)
                    moved = True
                pause = _FIRST_POLL_SECONDS if moved else min(2 * pause, _LONGEST_POLL_SECONDS)
        finally:
            selector.close()
            with self._lock:
                os.close(self._wake_reader)
                os.close(self._wake_writer)
                self._wake_writer = None
            for client in clients:
                try:
                    client.connection.close()
                except OSError:
                    pass

    def _start(self, client: _Client, request, waiting: list) -> None:
        client.work = self._handle(client, request)
        self._advance(client, waiting, None)

    def _advance(self, client: _Client, waiting: list, status) -> None:
        """Run ``client``'s work on to its next wait (then it joins ``waiting``) or its end (then
        its answer goes); ``status``: the OpenCL status of the event it waited for."""
        try:
            client.event = client.work.send(status)
        except StopIteration as stop:
            reply = ("ok", stop.value)
        except BowmapError as error:
            reply = ("error", (str(error), True))
        except Exception as error:  # noqa: BLE001 - the client raises it
            reply = ("error", (f"{type(error).__name__}: {error}", False))
        else:
            client.waiting = time.perf_counter()
            waiting.append(client)
            if usage.COUNTING:
                usage.mark(f"queued {client.token}", client.requests)
            return
        client.work = None
        if client.gone:
            self._forget(client)
            return
        if usage.COUNTING and client.token is not None:
            usage.mark(f"replied {client.token}", client.requests)
        try:
            client.connection.send(reply)
        except (OSError, EOFError):
            client.gone = True

    def _forget(self, client: _Client) -> None:
        """A client that hung up, its work done: its arena and, once its process has no
        connection left, what it made are forgotten, but kept (:attr:`_departed`), not freed:
        NVIDIA's driver frees device memory only once the whole device is idle, holding up this
        loop meanwhile, and host workers hang up as they finish, while the others map their last
        chunks (H200, chr20: the disconnections took 12% of the loop's last two seconds, py-spy).
        They go with the owner: its process ends without freeing anything (owner_process), an
        owner in a test's process when it is collected."""
        if client.arena is not None:
            self._unmap(client)
        try:
            client.connection.close()
        except OSError:
            pass
        token = client.token
        if token is not None:
            client.token = None
            with self._lock:
                self._clients[token] -= 1
                if self._clients[token] == 0:  # the process is gone: forget what it made
                    for table in (self._buffers, self._queues, self._made):
                        for key in [key for key in table if key[0] == token]:
                            self._departed.append(table.pop(key))
                    self._released_early = {key for key in self._released_early if key[0] != token}

    def _handle(self, client: _Client, request):
        """One request, as a generator: it yields the events it waits for (see _loop) and
        returns the answer's value."""
        kind = request[0]
        if kind == "hello":
            client.token = request[1]
            with self._lock:
                self._clients[client.token] += 1
            return None
        if kind in _OF_THE_CONTEXT:
            if self._context is None or self._error is not None:
                self.wait_ready()  # raises the set-up's error
            return self._answer(self._context, request)
        device = self.wait_ready()
        if kind == "batch":
            _, new_arena, released, commands = request
            if new_arena is not None:
                with usage.timed("command: arena mapped"):
                    self._map(client, device, *new_arena)
                usage.mark("arena mapped", new_arena[1])  # its size
            created = set()
            started = time.perf_counter()
            registered = client.pinned is not None
            self.batches["registered" if registered else "pageable"] += 1
            try:
                yield from self._execute(device, client.arena, commands, created, registered)
            finally:
                self._release(released, created)
                if usage.COUNTING:
                    usage.waited("batches", time.perf_counter() - started)
            return None
        raise ValueError(f"unknown request {kind!r}")

    def _map(self, client: _Client, device, path: str, size: int) -> None:
        """Map a client's new arena (in place of its old one) and, where ``register_arenas``,
        register it with the driver as a buffer over its pages (``USE_HOST_PTR``; in a thread,
        bowmap.runtime.pinning): NVIDIA's driver then copies from and into it directly, as from
        pinned memory, and a copy may be queued behind the kernels of its queue without holding
        up the caller (see _execute). Why: copies from pageable memory go through the driver's
        staging buffers, every queue's one after another (H200, 8 MB behind another queue's
        kernel: a copy held its caller 1.4 ms, a blocking read 0.6 ms, 0.2 ms each registered;
        chr20, 1 M pairs, 15 host workers: batches took half the time registered). Until its
        registration is done, the client's batches use the arena unregistered."""
        with open(path, "r+b") as file:
            arena = mmap.mmap(file.fileno(), size)
        if client.arena is not None:
            self._unmap(client)
        client.arena = arena
        if self._register:
            self.pinning.start(device.context, arena, lambda: client.arena is arena, functools.partial(self._pinned, client, arena))

    def _pinned(self, client: _Client, arena, registered) -> None:
        """``client``'s ``arena`` registered (in a thread of bowmap.runtime.pinning.Pinning): its
        next batches use it so, unless it was replaced or forgotten meanwhile (then it is kept
        with the others, :attr:`_departed`)."""
        with self._lock:
            if client.arena is arena:
                client.pinned = registered
            else:
                self._departed.append(registered)

    def _unmap(self, client: _Client) -> None:
        """Forget ``client``'s arena: its registered buffer and mapping are kept, not freed (see
        :meth:`_forget`: an arena replaced by a larger one, or its client gone)."""
        with self._lock:
            self._departed.append(client.pinned if client.pinned is not None else client.arena)
            client.pinned = None
            client.arena = None

    def _queue(self, device, key):
        queue = self._queues.get(key)
        if queue is None:
            if usage.TIMELINE:
                import pyopencl as cl

                made = cl.CommandQueue(device.context, device.device, properties=cl.command_queue_properties.PROFILING_ENABLE)
            else:
                made = device.queue()
            with self._lock:
                queue = self._queues.setdefault(key, made)
        return queue

    def _answer(self, device, message):
        kind = message[0]
        if kind == "program":
            return self._kernel_facts(device, message[1])
        if kind == "kernel_info":
            _, program_key, name, parameter = message
            return int(self._program_kernels(device, program_key)[name][0].get_work_group_info(parameter, device.device))
        if kind == "facts":
            from bowmap.runtime.devices import nvidia_compute_capability

            return device.device.platform.name, nvidia_compute_capability(device.device)
        raise ValueError(f"unknown request {kind!r}")

    def _kernel_facts(self, device, program_key) -> dict:
        """The program ``program_key`` built, and what its clients' kernel owners ask of each of its
        kernels (the KERNEL_FACTS of :mod:`bowmap.runtime.remote`), as {(kernel name, parameter):
        value}: sent with the program, so a host worker's set-up costs one round trip a program,
        not one a question (15 host workers asked 23 questions each, one after another in the
        owner's loop; H200, chr20: their set-up after connecting took 0.26-0.33 s, 0.22 s since)."""
        facts = self._facts.get(program_key)
        if facts is None:
            from bowmap.runtime.remote import KERNEL_FACTS

            facts = {}
            for name, (kernel, _) in self._program_kernels(device, program_key).items():
                for parameter in KERNEL_FACTS:
                    facts[name, parameter] = int(kernel.get_work_group_info(parameter, device.device))
            self._facts[program_key] = facts
        return facts

    def _program_kernels(self, device, program_key) -> dict:
        """The kernels of the program ``program_key``, made once for every client: {name: [kernel,
        its declared scalar dtypes (see _launch)]}. Why: a kernel made a client (15 host workers,
        a dozen kernels each) cost the loop a creation and pyopencl's invoker (looked up in its
        on-disk cache) each, in the first chunks (H200, chr20, py-spy --native: 8% of the loop's
        samples). One object serves all: only this loop sets its arguments, and an enqueue takes
        their values as they are then."""
        kernels = self._kernels.get(program_key)
        if kernels is None:
            kernels = self._kernels[program_key] = {kernel.function_name: [kernel, None]
                                                    for kernel in device.program(*program_key).all_kernels()}
            usage.mark(f"built {program_key[0]}")
        return kernels

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

    @staticmethod
    def _idle(queue, last=None):
        """Wait (yielding to the loop) until everything queued on ``queue`` has run: until
        ``last``, the event of the latest command queued there, has completed (an in-order
        queue), or where it is not known, a marker queued now; a failed command raises
        BowmapError (as devices.wait_idle)."""
        import pyopencl as cl

        with usage.timed("command: marker and flush"):
            event = cl.enqueue_marker(queue) if last is None else last
            queue.flush()
        status = event.command_execution_status
        if status > 0:
            status = yield event
        if status < 0:
            raise BowmapError(f"a device command failed (OpenCL status {status})")

    def _execute(self, device, arena, commands, created: set, registered: bool = False):
        """One batch, in order, as a generator (see _idle); then every queue it used is idle, so
        the arena may be reused. The keys of the buffers it makes are added to ``created``.

        ``registered``: the arena is registered with the driver (see _map), so copies from and
        into it may be queued behind kernels and return at once: the whole batch is queued,
        then waited for once. A client's wait for a queue is then put off until a command of
        another queue or the batch's end (commands of the same in-order queue run after
        it anyway). Otherwise a copy waits until its queue is idle (from pageable memory
        NVIDIA's driver would hold the loop until the kernels before it ran)."""
        import pyopencl as cl

        pending = []  # events of copies from or into the arena: kept until their queues are idle
        touched = {}  # queues with commands not known to have run
        busy = set()  # queues with kernels not known to have run
        last = {}  # queue key -> the event of this batch's latest command there
        deferred = None  # the queue whose wait is put off (registered)
        buffers = self._buffers
        closing = False
        try:
            for command in commands:
                operation = command[0]
                if deferred is not None and operation in _ON_QUEUE and command[_ON_QUEUE[operation]] != deferred:
                    yield from self._idle(touched[deferred], last.pop(deferred, None))
                    del touched[deferred]
                    busy.discard(deferred)
                    deferred = None
                if operation == "kernel":
                    _, program_key, name, queue_key, global_size, local_size, arguments = command
                    typed = self._program_kernels(device, program_key)[name]
                    queue = touched[queue_key] = self._queue(device, queue_key)
                    busy.add(queue_key)
                    with usage.timed("command: kernel"):
                        values = [
                            buffers[argument.key] if isinstance(argument, _Ref)
                            else cl.LocalMemory(argument.size) if isinstance(argument, _Local) else argument
                            for argument in arguments
                        ]
                        event = last[queue_key] = _launch(typed, queue, global_size, local_size, values)
                    if usage.TIMELINE:
                        self.timeline.append((name, queue_key, event))
                elif operation == "write" or operation == "read":
                    queue_key, buffer_key = command[1], command[2]
                    queue = touched[queue_key] = self._queue(device, queue_key)
                    blocking = operation == "read" and command[7]
                    if not registered and queue_key in busy and (operation == "write" or blocking):
                        # A copy from pageable memory waits for the kernels before it, the loop
                        # with it (spinning on NVIDIA): wait here, yielding.
                        yield from self._idle(queue, last.get(queue_key))
                        busy.discard(queue_key)
                    if operation == "write":
                        offset, size = command[3], command[4]
                        if size:
                            with usage.timed("command: write"):
                                source = np.frombuffer(arena, dtype=np.uint8, count=size, offset=offset)
                                pending.append(cl.enqueue_copy(queue, buffers[buffer_key], source, is_blocking=False))
                            last[queue_key] = pending[-1]
                        continue
                    _, _, _, offset, dtype, shape, options, _ = command
                    # Never a blocking copy: its return comes late under load (H200: 2-4 ms
                    # after the copy ended, bench/host_waits.py --timeline), and the loop waits.
                    with usage.timed("command: read"):
                        destination = np.ndarray(shape, np.dtype(dtype), buffer=arena, offset=offset)
                        pending.append(cl.enqueue_copy(queue, destination, buffers[buffer_key], is_blocking=False, **(options or {})))
                    last[queue_key] = pending[-1]
                    if blocking and not registered:
                        yield from self._idle(queue, pending[-1])
                        del touched[queue_key]  # idle now: the batch's end need not wait for it
                        last.pop(queue_key)
                elif operation == "wait_idle":
                    if registered:
                        deferred = command[1]
                        touched.setdefault(deferred, self._queue(device, deferred))
                        continue
                    yield from self._idle(self._queue(device, command[1]), last.pop(command[1], None))
                    touched.pop(command[1], None)
                    busy.discard(command[1])
                elif operation == "create":
                    _, key, flags, size = command
                    with usage.timed("command: create"):
                        buffers[key] = self._create(device, key, flags, size)
                    created.add(key)
                elif operation == "buffer":
                    _, key, flags, size, offset = command
                    source = np.frombuffer(arena, dtype=np.uint8, count=size, offset=offset)
                    with usage.timed("command: buffer with its bytes"):
                        buffers[key] = cl.Buffer(device.context, flags | cl.mem_flags.COPY_HOST_PTR, hostbuf=source)
                    created.add(key)
                else:
                    raise ValueError(f"unknown command {operation!r}")
        except GeneratorExit:  # the owner closed with this batch unfinished
            closing = True
            raise
        finally:
            if not closing:
                for queue_key, queue in touched.items():
                    yield from self._idle(queue, last.get(queue_key))
            pending.clear()
