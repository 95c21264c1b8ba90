"""Host memory of the index build: each block's predicted peak, the memory cap, and which blocks
run at once so the predicted total stays under it.

A block of n bases built by :func:`bowmap.index_builder.fm_block.write_block` holds its text (n
bytes, codes 0..3) and its suffix array (pydivsufsort: int32 below 2^31 bases, so 4n bytes)
together while sorting and while the BWT is read out of them; the occurrence lines and samples
stream to their files, and the sampled rows (4n/sa_sample bytes) are kept for the marks. So

    peak(n) = (1 + 4 + 4/sa_sample) * n + BLOCK_OVERHEAD

BLOCK_OVERHEAD covers the worker's interpreter with NumPy and pydivsufsort and the temporaries of
one step of the BWT pass. Both were fitted to the VmHWM of one worker process per block
(pydivsufsort 0.0.20, NumPy 2.4, sa_sample 32): blocks of 10, 40, 100 and 200 Mbases peaked at
136, 282, 590 and 1102 MB, 5.124 bytes a base plus 77-85 MB; 96 MiB leaves a margin.
tests/index/test_parallel_build.py checks the prediction against a measured block.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

TEXT_BYTES_PER_BASE = 1
SUFFIX_BYTES_PER_BASE = 4  # int32: blocks stay below 2^31 bases (format.MAX_BLOCK_BASES)
ROW_BYTES_PER_SAMPLE = 4
BLOCK_OVERHEAD = 96 << 20
# The default cap: a 16 GB workstation's memory, or less where less is available now.
DEFAULT_MAX_MEMORY = 16 << 30

GIB = float(1 << 30)


def block_peak_bytes(length: int, sa_sample: int) -> int:
    """Predicted peak resident bytes of the process building a block of ``length`` bases."""
    per_base = TEXT_BYTES_PER_BASE + SUFFIX_BYTES_PER_BASE + ROW_BYTES_PER_SAMPLE / sa_sample
    return int(per_base * length) + BLOCK_OVERHEAD


def available_memory() -> int | None:
    """MemAvailable of /proc/meminfo in bytes (None where it cannot be read)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def default_max_memory() -> int:
    """16 GiB, or the memory available now where that is less."""
    available = available_memory()
    return DEFAULT_MAX_MEMORY if available is None else min(DEFAULT_MAX_MEMORY, available)


def resident_bytes() -> int:
    """This process's resident memory now (VmRSS), in bytes; 0 where unknown."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


@dataclass
class Schedule:
    """What the build will run at once, predicted before it starts."""

    order: list[int]  # block numbers, in the order they are started (largest first)
    predictions: list[int]  # predicted peak bytes of each block, by block number
    at_once: int  # most blocks predicted to run at the same time
    peak: int  # predicted peak bytes of the whole build: baseline plus the blocks running at once
    over_cap: list[int]  # blocks whose prediction alone exceeds the cap: each is built alone


def may_start(block: int, running: list[int], predictions: list[int], baseline: int, cap: int, threads: int) -> bool:
    """The rule the build follows: a block starts when a thread is free and the predicted total
    stays under ``cap``, or when nothing else runs (a block over the cap is built alone)."""
    if not running:
        return True
    if len(running) >= threads:
        return False
    return baseline + sum(predictions[other] for other in running) + predictions[block] <= cap


def plan_schedule(lengths: list[int], sa_sample: int, cap: int, threads: int, baseline: int) -> Schedule:
    """Simulate :func:`may_start` with each block taking time in proportion to n log n (the
    sort's cost): the most blocks at once and the predicted peak. The real run follows the same
    rule with real finishing times, so its total never exceeds ``max(cap, the largest block)``."""
    predictions = [block_peak_bytes(length, sa_sample) for length in lengths]
    order = sorted(range(len(lengths)), key=lambda block: (-lengths[block], block))
    pending = list(order)
    running: dict[int, float] = {}  # block -> finishing time
    now, at_once, peak = 0.0, 0, baseline
    while pending or running:
        for block in list(pending):
            if may_start(block, list(running), predictions, baseline, cap, threads):
                pending.remove(block)
                running[block] = now + lengths[block] * math.log2(lengths[block] + 2)
        at_once = max(at_once, len(running))
        peak = max(peak, baseline + sum(predictions[block] for block in running))
        finished = min(running, key=lambda block: (running[block], block))
        now = running.pop(finished)
    over_cap = [block for block in range(len(lengths)) if baseline + predictions[block] > cap]
    return Schedule(order=order, predictions=predictions, at_once=at_once, peak=peak, over_cap=over_cap)
