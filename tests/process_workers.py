"""Worker starters for run_processes tests: module-level, so spawned processes can import them."""

from __future__ import annotations

import functools
import os
import random
import time

from bowmap.errors import BowmapError


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
