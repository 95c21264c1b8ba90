"""Worker starters for run_processes tests: module-level, so spawned processes can import them."""

from __future__ import annotations

import functools
import os
import random
import time
from dataclasses import dataclass

from bowmap.runtime.errors import BowmapError


@dataclass
class Chunk:
    number: int
    value: int


def square(chunk):
    time.sleep(random.random() * 0.002)
    return chunk.number, chunk.value**2, os.getpid()


def fail_at(number: int, how: str, chunk):
    if chunk.number == number:
        if how == "user":
            raise BowmapError(f"chunk {number}: bad input")
        if how == "bug":
            raise ValueError("kernel failed")
        os._exit(3)  # a crash: no report at all
    return square(chunk)


class Squares:
    def __call__(self, rank: int):
        return square


class FailAt:
    def __init__(self, number: int, how: str):
        self.number, self.how = number, how

    def __call__(self, rank: int):
        return functools.partial(fail_at, self.number, self.how)


class FailsToStart:
    def __call__(self, rank: int):
        raise BowmapError("device 7: no such device")


def plus_one(result):
    number, value, pid = result
    return number, value + 1, pid


class ThreadedSquares:
    def __call__(self, rank: int):
        return [[square] * 3, [plus_one] * 2]


def slow_fail(chunk):
    if chunk.number == 0:
        time.sleep(0.5)
        raise ValueError("stage failed")
    return square(chunk)


class ThreadedFailing:
    """Several queue pairs a process, one stage failing: the worker must report, not hang."""

    def __call__(self, rank: int):
        return [[slow_fail] * 2, [plus_one] * 2]


class DiesMidMessage:
    """A worker killed while its (large) result is half sent."""

    def __call__(self, rank: int):
        return die_mid_message


def _killed_soon() -> None:
    """This process is killed (no clean-up, no report) 0.2 s from now."""
    import signal
    import threading

    threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()


def die_mid_message(chunk):
    if chunk.number == 3:
        _killed_soon()
        return chunk.number, b"x" * (64 << 20), os.getpid()  # the parent is slow to read it
    return square(chunk)


class ExitsQuietly:
    """A worker that ends with exit code 0 and sends nothing: the run must not wait forever."""

    def __call__(self, rank: int):
        os._exit(0)


@dataclass
class TextResult:
    """A result with its text, as the aligner's (bowmap.align.workers.ChunkResult): the text is
    sent as raw bytes, the rest pickled."""

    text: bytes
    number: int
    pid: int


def text_square(chunk):
    return TextResult(f"{chunk.number}:{chunk.value**2}\n".encode() * (1 + chunk.number % 5) * 4000, chunk.number, os.getpid())


class TextSquares:
    def __call__(self, rank: int):
        return text_square


def value_text(chunk):
    """A text of the chunk's value alone (a threaded worker renumbers its chunks)."""
    return TextResult(f"{chunk.value}\n".encode() * (1 + chunk.value % 5) * 6000, -1, 0)


def value_text_later(chunk):
    time.sleep(random.random() * 0.002)
    return value_text(chunk)


def _same(result):
    return result


class ThreadedTextSquares:
    """Two threads a stage, so a worker's results come out of its threads in any order and
    are sent in its own order (runners._threaded_worker)."""

    def __call__(self, rank: int):
        return [[value_text_later] * 2, [_same] * 2]


def die_mid_text(chunk):
    if chunk.number == 3:
        _killed_soon()
        return TextResult(b"x" * (64 << 20), chunk.number, os.getpid())  # killed while its raw text is half sent
    return text_square(chunk)


class DiesMidText:
    def __call__(self, rank: int):
        return die_mid_text


@dataclass
class GatedSquares:
    """Holds the start gate a while, and writes when it held it to ``folder``/rank."""

    folder: str

    def __call__(self, rank: int):
        from bowmap.align.runners import start_gate

        with start_gate():
            entered = time.monotonic()
            time.sleep(0.5)
            left = time.monotonic()
        with open(os.path.join(self.folder, str(rank)), "w") as file:
            file.write(f"{entered} {left}")
        return square


def failing_extend(extend, item):
    """A Smith-Waterman stage that fails, naming the process it failed in."""
    raise RuntimeError(f"simulated kernel failure in process {os.getpid()}")


class FailingAligner:
    """The aligner's own worker starter (bowmap.align.workers.ProcessWorker), its extend stage
    made to fail: a fault injected inside the spawned worker process, not in the parent."""

    def __init__(self, starter):
        self.starter = starter

    def __call__(self, rank: int):
        seeds, extends = self.starter(rank)
        return [seeds, [functools.partial(failing_extend, extend) for extend in extends]]


def hang(chunk):
    """A worker that never finishes its chunk (as one could on a corrupted index)."""
    while True:
        time.sleep(1)


class Hangs:
    def __call__(self, rank: int):
        return hang
