"""The runners of `bowmap align`: serial (:func:`run_serial`), threaded (:func:`run_threaded`)
and worker processes (:func:`run_processes`), with one bounded reader (:meth:`_Run.read`) and one
in-order writer (:class:`OrderedWriter`) shared by all three. Threads, queues and processes only.

The work itself lives in plain functions of a chunk (seed/filter, Smith-Waterman, formatting),
so :func:`run_serial` can call them without threads (for debugging, and as the reference the
threaded run must match byte for byte).

    reader ──▶ stage 1 workers ──▶ stage 2 workers ──▶ writer (input order)

Each worker is a callable owning its own device queue and buffers. Queues are bounded, so
memory stays flat whatever the input size. The first exception in any thread stops every thread
promptly and is raised again in the caller's thread. A result whose ``text`` is bytes (the
aligner's :class:`bowmap.align.workers.ChunkResult`) crosses from a worker process through
shared memory (:class:`TextSlots`), or as raw bytes beside the rest of it, pickled, where it
does not fit (see :func:`_worker_process`).
"""

from __future__ import annotations

import dataclasses
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterable

from bowmap.runtime import usage

_END = object()  # end-of-stream marker, passed on by every stage
_POLL_SECONDS = 0.1


class _Stop(Exception):
    """Raised inside a thread when another thread failed: unwind quietly."""


class OrderedWriter:
    """The one in-order writer of every runner: results come numbered 0, 1, 2, ... (their chunk's
    ``number``) in any order, and ``write`` gets them in that order. Each result written releases
    ``in_flight`` once (the semaphore the reader takes a chunk), so chunks held here until the
    ones before them are written count against the run's bound on chunks in flight."""

    def __init__(self, write: Callable, in_flight: threading.Semaphore | None = None):
        self.write = write
        self.in_flight = in_flight
        self.waiting: dict = {}
        self.written = 0

    def add(self, number: int, result) -> None:
        waiting = self.waiting
        waiting[number] = result
        while self.written in waiting:
            self.write(waiting.pop(self.written))
            usage.mark("written", self.written)
            if self.in_flight is not None:
                self.in_flight.release()
            self.written += 1

    def finish(self, sent: int) -> None:
        """Every one of the ``sent`` chunks written, or an error."""
        if self.waiting or self.written != sent:
            raise RuntimeError(f"pipeline lost chunks: {self.written} of {sent} written")


class _Run:
    def __init__(self):
        self.failed = threading.Event()
        self.error: BaseException | None = None
        self.lock = threading.Lock()
        self.sent = 0  # chunks the reader has handed out

    def fail(self, error: BaseException) -> None:
        with self.lock:
            if self.error is None:
                self.error = error
        self.failed.set()

    def put(self, channel: queue.Queue, item) -> None:
        while True:
            if self.failed.is_set():
                raise _Stop
            try:
                channel.put(item, timeout=_POLL_SECONDS)
                return
            except queue.Full:
                continue

    def get(self, channel: queue.Queue):
        while True:
            if self.failed.is_set():
                raise _Stop
            try:
                return channel.get(timeout=_POLL_SECONDS)
            except queue.Empty:
                continue

    def read(self, chunks: Iterable, channel, in_flight: threading.Semaphore, end, ends: int) -> None:
        """The one bounded reader: each chunk into ``channel`` as ``(number, chunk)`` once
        ``in_flight`` admits it, then ``ends`` end markers ``end``."""
        for chunk in chunks:
            while not in_flight.acquire(timeout=_POLL_SECONDS):
                if self.failed.is_set():
                    raise _Stop
            self.put(channel, (chunk.number, chunk))
            usage.mark("handed out", chunk.number)
            self.sent += 1
        for _ in range(ends):
            self.put(channel, end)

    def thread(self, target, *args) -> threading.Thread:
        def body():
            try:
                target(*args)
            except _Stop:
                pass
            except BaseException as error:  # noqa: BLE001 - carried to the caller's thread
                self.fail(error)

        return threading.Thread(target=body, daemon=True)


def run_serial(chunks: Iterable, stages: list[Callable], write: Callable) -> None:
    """The same work as :func:`run_threaded`, in this thread, one chunk at a time."""
    writer, sent = OrderedWriter(write), 0
    for chunk in chunks:
        number = chunk.number
        for stage in stages:
            chunk = stage(chunk)
        writer.add(number, chunk)
        sent += 1
    writer.finish(sent)


def run_threaded(chunks: Iterable, stages: list[list[Callable]], write: Callable, queue_size: int = 4) -> None:
    """Run ``chunks`` through each stage's workers (one thread per worker) and hand the results
    to ``write`` in input order. Chunks must have a ``number`` attribute (0, 1, 2, ...) that
    results keep (``(number, result)`` pairs travel between stages)."""
    run = _Run()
    channels = [queue.Queue(maxsize=queue_size) for _ in range(len(stages) + 1)]
    # Chunks in flight, queued or held by the writer until the ones before them are written: a
    # bound, so one slow chunk cannot make finished ones pile up in the writer's memory.
    in_flight = threading.Semaphore(queue_size * (len(stages) + 1) + sum(len(workers) for workers in stages))

    def work(stage: int, worker: Callable, done: list[int]):
        source, target = channels[stage], channels[stage + 1]
        while (item := run.get(source)) is not _END:
            number, data = item
            run.put(target, (number, worker(data)))
        with run.lock:
            done[0] += 1
            last = done[0] == len(stages[stage])
        if last:  # the stage's last worker passes one marker to each worker downstream
            for _ in stages[stage + 1] if stage + 1 < len(stages) else [None]:
                run.put(target, _END)

    def write_in_order():
        writer = OrderedWriter(write, in_flight)
        while (item := run.get(channels[-1])) is not _END:
            writer.add(*item)
        writer.finish(run.sent)  # the reader is done: its end markers came before this one

    threads = [run.thread(run.read, chunks, channels[0], in_flight, _END, len(stages[0]))]
    for stage, workers in enumerate(stages):
        done = [0]
        threads += [run.thread(work, stage, worker, done) for worker in workers]
    threads.append(run.thread(write_in_order))
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            while thread.is_alive():
                if run.failed.is_set() and thread is threads[0]:
                    break  # the reader may be blocked on its input: a daemon, left behind
                thread.join(_POLL_SECONDS)
    except KeyboardInterrupt as interrupt:  # ^C, or SIGTERM as bowmap.cli.Terminated: kept as it came
        run.fail(interrupt)
        # Workers notice within a poll; a reader blocked on input (a terminal, a pipe) may not
        # return at all: it is a daemon thread and must not hold the exit up.
        for thread in threads:
            thread.join(1.0)
    if run.error is not None:
        raise run.error


# ------------------------------------------------------------------------------------ processes


def _inbox_items(inbox, stop: threading.Event | None = None):
    """(number, chunk) items from a worker's inbox until the end marker. Waits in short polls:
    it ends (as if at the end) when ``stop`` is set, and exits the process when the parent has
    died (a parent killed without clean-up must not leave workers holding device contexts)."""
    while True:
        try:
            with usage.timed("next chunk"):
                item = inbox.get(timeout=_POLL_SECONDS * 5)
        except queue.Empty:
            if stop is not None and stop.is_set():
                return
            if not _parent_alive():
                os._exit(1)
            continue
        if item is None:
            return
        yield item


def _threaded_worker(stages: list[list[Callable]], inbox, send) -> None:
    """One worker process's chunks through :func:`run_threaded` (several queue pairs in one
    process: one thread's host work overlaps another's wait for the device). Chunks are
    renumbered in the order this process receives them, results sent with their own numbers."""
    import collections
    import dataclasses

    numbers: collections.deque = collections.deque()
    stop = threading.Event()  # set when run_threaded fails: its reader must not wait on the inbox

    def chunks():
        for local, (number, chunk) in enumerate(_inbox_items(inbox, stop)):
            numbers.append(number)
            yield dataclasses.replace(chunk, number=local)

    try:
        run_threaded(chunks(), stages, lambda result: send(("result", numbers.popleft(), result)))
    finally:
        stop.set()


def _worker_process(start_worker: Callable, rank: int, inbox, results, gate=None, slots: TextSlots | None = None) -> None:
    """A worker process's body: ``start_worker(rank)`` makes the callable that turns a chunk into
    its result, or the stages' workers (lists of callables, applied in turn; with several
    workers a stage they run in threads); chunks come from ``inbox`` until the end marker,
    results go to the ``results`` connection, this worker's own, their text through ``slots``
    where it fits. ``gate`` (a semaphore shared by the run's workers) is what
    :func:`start_gate` holds."""
    import signal
    import traceback

    from bowmap.runtime.errors import BowmapError

    global _STARTED
    entered = time.monotonic()
    if os.getpid() != _IMPORTED_IN:  # forked: this module was imported by the parent, before
        _STARTED = entered
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles ^C and ends its workers
    # A forked worker has its parent's handlers: SIGTERM (the parent's terminate() after a
    # failure) must end it, not raise in it (bowmap.cli's handler), which could leave it blocked.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # blocked while starting
    number = -1
    done = False
    # A sender thread writes the results to the pipe, so the worker goes on with its next chunk
    # while the parent is still reading the last one (two results at most wait, memory stays flat).
    outgoing: queue.Queue = queue.Queue(maxsize=2)

    def pump():
        try:
            while (message := outgoing.get()) is not None:
                kind, number, payload = message
                text = getattr(payload, "text", None) if kind == "result" else None
                if isinstance(text, (bytes, bytearray)) and text and slots is not None and len(text) <= slots.size:
                    # Its text (SAM) into shared memory, for the parent to write from there.
                    slot = slots.put(text)
                    results.send(("slot", number, (dataclasses.replace(payload, text=b""), slot, len(text))))
                elif isinstance(text, (bytes, bytearray)):
                    # Too long for a slot: the text goes as raw bytes after the rest, so neither
                    # side copies it into or out of a pickle.
                    results.send(("text", number, dataclasses.replace(payload, text=b"")))
                    results.send_bytes(text)
                else:
                    results.send(message)
        except OSError:  # the parent has gone: nobody to tell
            os._exit(1)
        except BaseException:  # noqa: BLE001 - a result that cannot be sent: the parent sees this process end
            traceback.print_exc()
            os._exit(1)

    sender = threading.Thread(target=pump, daemon=True, name="bowmap-results")
    sender.start()

    def send(message):
        outgoing.put(message)

    profile_folder = os.environ.get("BOWMAP_PROFILE")  # developers: cProfile each worker
    profiler = None
    if profile_folder:  # (BOWMAP_USAGE: the usage JSON alone, see bowmap.runtime.usage)
        import cProfile

        profiler = cProfile.Profile()  # wall clock; CPU time goes to the usage JSON (a thread
        # CPU-time clock gave nonsense per-function figures on the GPU machine's VM)
        profiler.enable()
    try:
        _START_GATE[:] = [gate] if gate is not None else []
        stages = start_worker(rank)
        _READY.append(time.monotonic() - _STARTED)
        # The parent's ``ready`` callback learns when this worker entered its body and was ready
        # (time.monotonic, one clock for every process on Linux) and where its start went.
        send(("ready", rank, {"entered": entered, "ready": time.monotonic(), **getattr(start_worker, "start_timings", {})}))
        if callable(stages):
            stages = [[stages]]
        if all(len(workers) == 1 for workers in stages):
            for number, chunk in _inbox_items(inbox):
                usage.mark("received", number)
                for workers in stages:
                    chunk = workers[0](chunk)
                usage.mark("finished", number)
                send(("result", number, chunk))
        else:
            _threaded_worker(stages, inbox, send)
        if profiler is not None:
            profiler.dump_stats(os.path.join(profile_folder, f"worker{rank}.prof"))
        if usage.FOLDER:
            write_usage(os.path.join(usage.FOLDER, f"worker{rank}.usage.json"))
        send(("done", rank, None))
        done = True
    # Failures travel as (error, True): a user error, its type kept (the parent may act on it,
    # see bowmap.align.reads.RangeInputError); or as (traceback text, False).
    except BowmapError as error:
        send(("failed", number, (error, True)))
    except BaseException:  # noqa: BLE001 - reported to the parent, which raises it
        send(("failed", number, (f"worker process {rank}:\n{traceback.format_exc()}", False)))
    finally:
        outgoing.put(None)
        sender.join()
        results.close()
    if done:
        # Everything is sent: leave without the interpreter's teardown, whose release of the
        # device context, buffers and programs one by one only holds up the parent's wait for
        # this process (run_processes joins its workers before the run ends); the system frees
        # them as the process ends.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def write_usage(path: str) -> None:
    """Developers: this process's CPU time, age and waits, as JSON (see bowmap.runtime.usage)."""
    usage.write_usage(path, _STARTED, _READY[0] if _READY else None)


def _parent_alive() -> bool:
    import multiprocessing

    parent = multiprocessing.parent_process()
    return parent is None or parent.is_alive()


class TextSlots:
    """Shared memory for one worker process's result texts (SAM): ``count`` slots of ``size``
    bytes in one anonymous file (memfd) that the worker writes and the parent maps. The worker
    copies a text into its next slot and sends only where it lies; the parent writes the output
    straight from the slot and then frees it. Through a pipe, the parent of a GPU run spent its
    whole time receiving single-end text (one H200, chr20, 6 M reads: its main thread never
    idle, the workers' senders blocked 83% of the time), and bounded the run. The slots' pages
    stay resident once written (15 workers, 4 Mi-base chunks: about 330 MB in all), where a
    worker's texts waiting to cross a pipe (up to three) held as much.

    Slots are used and freed in turn: the parent writes a worker's results in the order the
    worker sends them (its chunks' numbers increase), so the slot freed is always the oldest.
    The parent checks that order (:meth:`text`). Passed to a spawned worker, the file goes as a
    descriptor (as a multiprocessing Connection's does); a forked one inherits it."""

    def __init__(self, descriptor: int, count: int, size: int, free, memory=None):
        self.descriptor, self.count, self.size, self.free = descriptor, count, size, free
        self.memory = memory  # the parent's mapping (a worker writes with os.pwrite, unmapped)
        self.next = 0  # the worker's next slot; in the parent, the next slot it expects

    @classmethod
    def create(cls, context, count: int, size: int) -> TextSlots | None:
        """Slots, or None where the system has no memfd (not Linux) or refuses one: then texts
        go through the pipe."""
        import mmap

        if not hasattr(os, "memfd_create"):
            return None
        try:
            descriptor = os.memfd_create("bowmap-text")
        except OSError:
            return None
        try:
            os.ftruncate(descriptor, count * size)
            return cls(descriptor, count, size, context.Semaphore(count), mmap.mmap(descriptor, count * size))
        except OSError:
            os.close(descriptor)
            return None

    def __reduce__(self):
        from multiprocessing import reduction

        return _attached_slots, (reduction.DupFd(self.descriptor), self.count, self.size, self.free)

    def put(self, text: bytes | bytearray) -> int:
        """(The worker) ``text`` copied into the next slot once the parent has freed it; its
        number. Exits the process if the parent dies meanwhile."""
        while not self.free.acquire(timeout=_POLL_SECONDS * 5):
            if not _parent_alive():
                os._exit(1)
        slot, self.next = self.next, (self.next + 1) % self.count
        start, view = slot * self.size, memoryview(text)
        while len(view):  # os.pwrite copies without the GIL (a memcpy into the mapping holds it)
            written = os.pwrite(self.descriptor, view, start)
            start, view = start + written, view[written:]
        return slot

    def text(self, slot: int, size: int) -> memoryview:
        """(The parent) the text in ``slot``: valid until :meth:`release`. Slots must come in
        turn: any other would be one the worker may be writing."""
        if slot != self.next:
            raise RuntimeError(f"a worker's text came in slot {slot}, expected {self.next}")
        self.next = (self.next + 1) % self.count
        start = slot * self.size
        return memoryview(self.memory)[start : start + size]

    def release(self) -> None:
        self.free.release()

    def close_descriptor(self) -> None:
        """(The parent, once its workers have started or failed to) the mapping stays (with a
        descriptor of its own); this one goes."""
        if self.descriptor >= 0:
            os.close(self.descriptor)
            self.descriptor = -1


def _attached_slots(descriptor, count: int, size: int, free) -> TextSlots:
    """A spawned worker's slots: its descriptor of the memfd, no mapping."""
    return TextSlots(descriptor.detach(), count, size, free)


_START_GATE: list = []  # a worker's gate (see start_gate), set by _worker_process


def start_gate():
    """A context manager that a worker's ``start_worker`` holds while it makes its device
    context: at most START_AT_ONCE workers of a run do so at a time. NVIDIA's driver makes
    contexts of several processes slowly together, not one by one (15 processes on an H200: all
    15 made after 4.3-4.5 s at once; 4 at a time: the first after 0.9 s, the last after 2.9 s),
    so gated workers start mapping sooner and the last is ready sooner too. Outside a worker
    process it holds nothing."""
    import contextlib

    return _START_GATE[0] if _START_GATE else contextlib.nullcontext()


START_AT_ONCE = 4
_STARTED = time.monotonic()  # this process's start (a worker's: its import of this module, or its fork)
_IMPORTED_IN = os.getpid()
_READY: list[float] = []  # a worker's age when its aligner was ready


def _start(workers) -> None:
    """Start worker processes with SIGINT blocked, so a ^C while they start up (imports,
    unpickling) reaches the parent alone; each worker ignores it, then unblocks it."""
    import signal

    masked = hasattr(signal, "pthread_sigmask")
    if masked:
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        for worker in workers:
            worker.start()
    finally:
        if masked:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _widen_pipe(descriptor: int) -> None:
    """Grow a pipe's buffer from 64 KiB to the most an unprivileged process may ask (Linux: 1 MiB
    by default): a chunk, or a chunk's SAM text too long for a TextSlots slot, then crosses in a few writes, each
    of which needs its thread to hold the GIL again, rather than in about 140."""
    try:
        import fcntl

        with open("/proc/sys/fs/pipe-max-size") as limit:
            size = min(int(limit.read()), 4 << 20)
        if size > fcntl.fcntl(descriptor, fcntl.F_GETPIPE_SZ):  # never shrink it (a low limit)
            fcntl.fcntl(descriptor, fcntl.F_SETPIPE_SZ, size)
    except (ImportError, AttributeError, OSError, ValueError):
        pass  # not Linux, or not allowed: the default buffer works, a little slower


def run_processes(chunks: Iterable, start_worker: Callable, write: Callable, processes: int, queue_size: int = 2,
                  ready: Callable[[int, dict], None] | None = None, start_method: str = "spawn", text_slot_bytes: int = 0,
                  watch: Callable[[], None] | None = None) -> float:
    """Run ``chunks`` through ``processes`` worker processes and hand the results to ``write`` in
    input order (chunks numbered 0, 1, 2, ... by their ``number`` attribute).

    ``start_worker(rank)`` runs in each new process (so it must be picklable, as must chunks and
    results) and returns the callable that turns a chunk into its result. Processes are spawned
    (``start_method``), unless the caller knows they make no OpenCL call of their own (host
    workers of device owners): then they may be forked, which starts them at once rather than
    after their own imports (about 0.9 s for 15 workers on 16 cores). A worker with a device
    context of its own is spawned: a forked child of a process that has used OpenCL is not safe.
    (A fork server was tried: its workers keep the environment, standard error and sys.path of
    its own start, so they may import another copy of bowmap than this process's.) This process reads
    (a thread) and writes (the caller's thread); at most ``processes * (queue_size
    + 2)`` chunks are in flight, so memory stays flat. Each worker sends its results through a
    pipe of its own, so a worker that dies, even halfway through a message, is seen at once
    (end of file) and stops the run. The first failure stops every process; a worker's user
    error (a :class:`bowmap.runtime.errors.BowmapError`) is raised again here, its type kept.
    ``ready(rank, timings)`` is called here when worker ``rank`` has started: ``timings`` holds
    ``spawned`` (when this process started the workers), ``entered`` (the worker's body began)
    and ``ready``, all time.monotonic(), and ``start_worker.start_timings`` if it has that.
    With ``text_slot_bytes``, a result's ``text`` (bytes) up to that size comes through shared
    memory (:class:`TextSlots`, two a worker) and reaches ``write`` as a memoryview of it, valid
    only during that call. ``watch()``, called between polls (0.1 s at most), stops the run with
    what it raises. Returns the seconds spent waiting for the workers to exit after their last result.
    """
    import multiprocessing
    from multiprocessing.connection import wait

    from bowmap.runtime.devices import forking_quietly

    context = multiprocessing.get_context(start_method)
    inbox = context.Queue(maxsize=processes * queue_size)
    in_flight = threading.Semaphore(processes * (queue_size + 2))
    run = _Run()
    pipes = [context.Pipe(duplex=False) for _ in range(processes)]
    gate = context.Semaphore(START_AT_ONCE)
    for connection in [inbox._reader] + [receiving for receiving, _ in pipes]:  # noqa: SLF001
        _widen_pipe(connection.fileno())
    slots = [TextSlots.create(context, 2, text_slot_bytes) if text_slot_bytes else None for _ in range(processes)]
    workers = [
        context.Process(target=_worker_process, args=(start_worker, rank, inbox, pipes[rank][1], gate, slots[rank]), daemon=True)
        for rank in range(processes)
    ]
    reader = run.thread(run.read, chunks, inbox, in_flight, None, processes)
    spawned = time.monotonic()
    try:
        with forking_quietly():  # (a spawn warns of nothing)
            _start(workers)
    finally:
        for worker_slots in slots:
            if worker_slots is not None:
                worker_slots.close_descriptor()
    for _, child_end in pipes:
        child_end.close()  # the workers hold them now: a dead worker's pipe reads as ended
    reader.start()

    def write_then_free(item):
        result, used_slots = item
        write(result)
        if used_slots is not None:
            used_slots.release()

    open_pipes = {receiving: rank for rank, (receiving, _) in enumerate(pipes)}
    try:
        writer = OrderedWriter(write_then_free, in_flight)
        while open_pipes:
            if run.failed.is_set():
                break
            if watch is not None:
                watch()
            for connection in wait(list(open_pipes), timeout=_POLL_SECONDS):
                rank = open_pipes[connection]
                try:
                    kind, number, payload = connection.recv()
                    used_slots = None
                    if kind == "text":  # see _worker_process: a result and its text, sent in two parts
                        kind, payload = "result", dataclasses.replace(payload, text=connection.recv_bytes())
                    elif kind == "slot":  # its text in shared memory
                        (payload, slot, size), used_slots = payload, slots[rank]
                        kind, payload = "result", dataclasses.replace(payload, text=used_slots.text(slot, size))
                except (EOFError, OSError):
                    workers[rank].join(1.0)
                    raise RuntimeError(
                        f"worker process {rank} ended unexpectedly (exit code {workers[rank].exitcode})"
                    ) from None
                if kind == "failed":
                    error, user_error = payload
                    raise error if user_error else RuntimeError(error)
                if kind == "done":
                    del open_pipes[connection]
                elif kind == "ready":
                    if ready is not None:
                        ready(rank, {"spawned": spawned, **payload})
                elif kind == "result":
                    writer.add(number, (payload, used_slots))
        reader.join()
        if run.error is not None:
            raise run.error
        writer.finish(run.sent)
    except BaseException as error:
        run.fail(error)
        for worker in workers:
            if worker.is_alive():
                worker.terminate()
        if run.error is not None and run.error is not error and not isinstance(error, KeyboardInterrupt):
            raise run.error from None  # the reader's error (a bad record) came first
        raise
    finally:
        exiting = time.monotonic()
        for worker in workers:
            worker.join(5.0)
        for receiving, _ in pipes:
            receiving.close()
        inbox.cancel_join_thread()
    return time.monotonic() - exiting
