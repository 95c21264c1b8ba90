"""Developers' profiles: a process's CPU time beside its age, and where its threads waited.

``BOWMAP_PROFILE=DIR`` cProfiles each host worker and writes every process's usage JSON to DIR;
``BOWMAP_USAGE=DIR`` writes the usage JSON alone (no cProfile, which slows the run it measures).
The waits (:func:`waited`) are thread-seconds by name, summed over the process's threads: a
worker's waits for its owner's answers and for its next chunk, an owner's batches and the device
waits inside them, the first process's writing. They are counted only when one of the two
variables is set."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time

FOLDER = os.environ.get("BOWMAP_USAGE") or os.environ.get("BOWMAP_PROFILE") or None
# BOWMAP_TIMELINE=1 with BOWMAP_USAGE: device owners make their queues with profiling on and
# write every kernel's (name, queue, queued, submitted, started, ended) to FOLDER (DeviceOwner).
TIMELINE = FOLDER is not None and os.environ.get("BOWMAP_TIMELINE") == "1"
COUNTING = FOLDER is not None  # the waits are summed only then
_WAITS: dict[str, list] = {}
_MARKS: list = []  # (name, number, time.monotonic()) of mark()
_LOCK = threading.Lock()


def waited(name: str, seconds: float) -> None:
    """Add ``seconds`` (and one) to the wait ``name`` (call only where COUNTING)."""
    with _LOCK:
        entry = _WAITS.setdefault(name, [0, 0.0])
        entry[0] += 1
        entry[1] += seconds


_FORKED_WITH: set | None = None  # a forked process's modules at its fork (write_usage's "imported")


def _forked() -> None:
    global _FORKED_WITH
    _MARKS.clear()  # a forked worker's marks are its own
    if COUNTING:
        _FORKED_WITH = set(sys.modules)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


def mark(name: str, number: int | None = None) -> None:
    """Note when ``name`` happened (a chunk's ``number`` where it is about one), on the clock
    every process shares (time.monotonic): bench/host_waits.py --phases lays the run's phases
    out from them. Does nothing unless COUNTING."""
    if COUNTING:
        _MARKS.append((name, number, time.monotonic()))


class _Timed:
    __slots__ = ("name", "started")

    def __init__(self, name: str):
        self.name = name

    def __enter__(self):
        self.started = time.perf_counter()

    def __exit__(self, *exception):
        waited(self.name, time.perf_counter() - self.started)


_NOT_TIMED = contextlib.nullcontext()


def timed(name: str):
    """A context manager that adds the time spent inside it to the wait ``name``; one that does
    nothing unless COUNTING (the hot paths then pay a ``with`` only)."""
    return _Timed(name) if COUNTING else _NOT_TIMED


def thread_times() -> list[list]:
    """This process's live threads' CPU, busiest first: [name, user s, system s], the name a
    Python thread's own, else the system's (a driver's threads too); empty where there is no
    /proc (not Linux)."""
    names = {thread.native_id: thread.name for thread in threading.enumerate()}
    tick = os.sysconf("SC_CLK_TCK")
    rows = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return rows
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/stat") as file:
                text = file.read()
        except OSError:
            continue  # ended meanwhile
        comm, fields = text[text.index("(") + 1 : text.rindex(")")], text[text.rindex(")") + 2 :].split()
        rows.append([names.get(int(task), comm), int(fields[11]) / tick, int(fields[12]) / tick])  # utime, stime
    return sorted(rows, key=lambda row: -(row[1] + row[2]))


def write_usage(path: str, started: float, ready: float | None = None) -> None:
    """This process's CPU time (all its threads) and its age since ``started`` (time.monotonic),
    as JSON: CPU / age is how busy it kept its core. ``ready``: its age when it was ready to work.
    ``waits``: name -> [count, thread-seconds] (see :func:`waited`); ``marks``: [name, number,
    time.monotonic()] (see :func:`mark`); ``threads``: the live threads' CPU (:func:`thread_times`);
    ``imported``: in a forked process, the modules it imported itself (what its start paid for
    that its parent could have imported once for all its children)."""
    import resource  # Unix only: imported where a developer asked for the files

    usage = resource.getrusage(resource.RUSAGE_SELF)
    with _LOCK:
        waits = {name: [count, round(seconds, 6)] for name, (count, seconds) in _WAITS.items()}
        marks = list(_MARKS)
    with open(path, "w") as file:
        json.dump({"user_s": usage.ru_utime, "system_s": usage.ru_stime, "age_s": time.monotonic() - started, "ready_s": ready,
                   "waits": waits, "marks": marks, "threads": thread_times(),
                   "imported": sorted(set(sys.modules) - _FORKED_WITH) if _FORKED_WITH is not None else []}, file)


def write_timeline(path: str, timeline: list) -> None:
    """A device owner's kernels run so far (TIMELINE; ``timeline``: [(kernel name, queue key,
    profiled event)]), as JSON rows of name, queue number, and the device clock's queued,
    submitted, started and ended (ns)."""
    numbers: dict = {}
    rows = [[name, numbers.setdefault(queue_key, len(numbers)), event.profile.queued, event.profile.submit,
             event.profile.start, event.profile.end] for name, queue_key, event in timeline]
    with open(path, "w") as file:
        json.dump(rows, file)
