"""Threads and queues only: the reader, the stage workers and the writer of `bowmap align`.

The work itself lives in plain functions of a chunk (seed/filter, Smith-Waterman, formatting),
so :func:`run_serial` can call them without threads (for debugging, and as the reference the
threaded run must match byte for byte).

    reader ──▶ stage 1 workers ──▶ stage 2 workers ──▶ writer (input order)

Each worker is a callable owning its own device queue and buffers. Queues are bounded, so
memory stays flat whatever the input size. The first exception in any thread stops every thread
promptly and is raised again in the caller's thread.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable

_END = object()  # end-of-stream marker, passed on by every stage
_POLL_SECONDS = 0.1


class _Stop(Exception):
    """Raised inside a thread when another thread failed: unwind quietly."""


class _Run:
    def __init__(self):
        self.failed = threading.Event()
        self.error: BaseException | None = None
        self.lock = threading.Lock()

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
    for chunk in chunks:
        for stage in stages:
            chunk = stage(chunk)
        write(chunk)


def run_threaded(chunks: Iterable, stages: list[list[Callable]], write: Callable, queue_size: int = 4) -> None:
    """Run ``chunks`` through each stage's workers (one thread per worker) and hand the results
    to ``write`` in input order. Chunks must have a ``number`` attribute (0, 1, 2, ...) that
    results keep (``(number, result)`` pairs travel between stages)."""
    run = _Run()
    channels = [queue.Queue(maxsize=queue_size) for _ in range(len(stages) + 1)]
    # Chunks in flight, queued or held by the writer until the ones before them are written: a
    # bound, so one slow chunk cannot make finished ones pile up in the writer's memory.
    in_flight = threading.Semaphore(queue_size * (len(stages) + 1) + sum(len(workers) for workers in stages))

    def read():
        for chunk in chunks:
            while not in_flight.acquire(timeout=_POLL_SECONDS):
                if run.failed.is_set():
                    raise _Stop
            run.put(channels[0], (chunk.number, chunk))
        for _ in stages[0]:
            run.put(channels[0], _END)

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
        waiting, next_number = {}, 0
        while (item := run.get(channels[-1])) is not _END:
            waiting[item[0]] = item[1]
            while next_number in waiting:
                write(waiting.pop(next_number))
                in_flight.release()
                next_number += 1
        if waiting:
            raise RuntimeError(f"pipeline lost chunks before {min(waiting)}")

    threads = [run.thread(read)]
    for stage, workers in enumerate(stages):
        done = [0]
        threads += [run.thread(work, stage, worker, done) for worker in workers]
    threads.append(run.thread(write_in_order))
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            while thread.is_alive():
                thread.join(_POLL_SECONDS)
    except KeyboardInterrupt:
        run.fail(KeyboardInterrupt())
        # Workers notice within a poll; a reader blocked on input (a terminal, a pipe) may not
        # return at all: it is a daemon thread and must not hold the exit up.
        for thread in threads:
            thread.join(1.0)
    if run.error is not None:
        raise run.error
