"""The Python API of ``bowmap sw-search``: every query against every database sequence, the best
hits of each query.

The database is cut, in its own order, into batches that fit the smallest device's memory; each
device's worker thread takes batches, loads one (its codes sent once), scores every query
against it and keeps each query's best hits. Hits are merged in batch order with the same rule
(score descending, then database order), so the result is the same whatever the batches,
devices or methods.

Methods: ``intertask`` (two targets a work-item, see :mod:`.kernels`), ``intratask`` (a target a
work-group) and ``auto``: per batch, intratask for its longest targets when they are too few to
fill the device (:func:`auto_split`), intertask for the rest.
"""

from __future__ import annotations

import logging
import queue as queues
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from bowmap.modules.sw_search.kernels import INTRA_ROWS, SearchKernels, Targets
from bowmap.modules.sw_search.reference import top_hits
from bowmap.modules.sw_search.scoring import Scoring
from bowmap.runtime.devices import DeviceContext

log = logging.getLogger("bowmap.modules.sw_search")

METHODS = ("intertask", "intratask", "auto")
# auto's rule, from bench/sw_search.py's crossover runs on an H200 (132 compute units, warps of
# 32): a query of 464 against databases of 100 M residues, the sequences of each of one length.
#   length          500     1,000   2,000   4,000   8,000   16,000  32,000
#   sequences       200,000 100,000 50,000  25,000  12,500  6,250   3,125
#   intertask GCUPS 2,229   2,231   1,306   708     360     182     92
#   intratask GCUPS 1,137 .. 1,234 at every length
# Intertask does not slow with length as such: below about 80,000 sequences its GCUPS fall in
# proportion to the number of sequences (0.0285 GCUPS a sequence, least squares over 3,125 ..
# 25,000), i.e. a launch then takes as long as its longest lanes however few there are. The
# device is full at 2,230 / 0.0285 = 78,000 sequences = 39,000 work-items of two lanes =
# compute units x preferred work-group multiple x 9.3: RESIDENT_WAVEFRONTS wavefronts a compute
# unit (a GPU hides memory latency with many resident wavefronts). Intratask (a target a
# work-group) fills the device with far fewer targets and ran at 0.53 of full intertask speed
# (1,180 / 2,230) at every length: per row computed, 0.53 x 512 / 464 = 0.585, its groups of 64
# work-items computing 512 query rows (8 each) where intertask computes 464 (tiles of 16).
# The model (auto_split): with FILL targets filling the device (device_fill), intertask over
# targets of R residues in all, the longest of L, takes as long as max(R, FILL x L) residues at
# full speed would; intratask as long as R / S, S = INTRATASK_SPEED x the rows intertask computes
# for the queries / the rows intratask does (intratask_speed). auto sends a batch's j longest
# targets to intratask, j (a whole length at a time) making the sum of the two smallest. For one
# length and N sequences: intertask when N >= FILL x S (40,300 on the H200 for m = 464: for
# 100 M residues a crossover length of 2,480, between the measured 2,000 (intertask faster) and
# 4,000 (intratask faster)); a few long targets beside many short ones go to intratask.
# CPUs (PoCL): a core runs one work-group at a time, so FILL = 2 x compute units x work-group
# size; intratask ran at 0.3 .. 0.4 of intertask (PoCL, 2 shared cores, databases of 0.4 M
# residues: intertask 0.8, intratask 0.2 .. 0.3 GCUPS; crossover between 25 and 50 sequences,
# FILL x S = 45 with 2 x 2 x 32 and S = 0.35, 0.39 a row). Measured with one query length (464):
# other lengths differ only in the rows each kernel computes. The kernels' scores are the same
# whichever runs a target.
RESIDENT_WAVEFRONTS = 9
MEASURED_QUERY = 464
INTRATASK_SPEED = {"GPU": 0.585, "CPU": 0.39}  # a row computed, by device kind; others as a GPU
# A batch's codes take at most this share of the smallest device's memory (the launch scratch
# takes another eighth, see SearchKernels).
BATCH_MEMORY_SHARE = 4


@dataclass
class SearchOptions:
    """``top``: hits kept a query. ``crossover``: auto sends targets longer than this to
    intratask (None: :func:`auto_split` decides a batch at a time). ``fill``: targets that fill
    the device for :func:`auto_split` (None: :func:`device_fill`). ``batch_residues``: residues
    a batch (None: from the devices' memory). ``tile``: query rows an intertask work-item holds
    (8, 16, 32)."""

    method: str = "auto"
    top: int = 10
    crossover: int | None = None
    fill: int | None = None
    batch_residues: int | None = None
    tile: int = 16
    group_size: int | None = None  # tests: small work-groups on PoCL
    intra_group_size: int | None = None

    def check(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, not {self.method!r}")
        if self.top < 1:
            raise ValueError("top must be at least 1")


@dataclass
class Hits:
    """Each query's best hits: ``targets[q]`` database indexes (best first), ``scores[q]``."""

    targets: list[np.ndarray]
    scores: list[np.ndarray]
    cells: int = 0  # DP cells computed (query length x database residues, summed)
    seconds: float = 0.0
    reruns: int = 0  # targets run again in 32 bits
    methods: dict = field(default_factory=dict)  # method -> targets it scored (per query)

    @property
    def gcups(self) -> float:
        return self.cells / self.seconds / 1e9 if self.seconds > 0 else 0.0


def device_fill(kernels: SearchKernels) -> int:
    """Targets that fill the device of ``kernels`` with intertask work, two a work-item (see
    RESIDENT_WAVEFRONTS): a GPU's compute units x the packed kernel's preferred work-group
    multiple x RESIDENT_WAVEFRONTS work-items; a CPU's compute units x the work-group size."""
    info = kernels.device.info
    if info.kind == "CPU":
        return 2 * info.compute_units * kernels.group_size
    return 2 * info.compute_units * kernels.preferred_multiple * RESIDENT_WAVEFRONTS


def intratask_speed(kernels: SearchKernels, query_lengths) -> float:
    """Intratask's GCUPS as a share of full intertask GCUPS for these queries: the share a row
    computed measured on devices of this kind (INTRATASK_SPEED) x the query rows intertask
    computes (tiles of ``kernels.tile``) / those intratask does (strips of INTRA_ROWS x its
    group size): a short query leaves most of an intratask group's rows idle."""
    lengths = [int(m) for m in query_lengths if m > 0] or [MEASURED_QUERY]
    inter = sum(-(-m // kernels.tile) * kernels.tile for m in lengths)
    intra = 0
    for m in lengths:
        strip = INTRA_ROWS * kernels.intra_group_size(m)
        intra += -(-m // strip) * strip
    return INTRATASK_SPEED.get(kernels.device.info.kind, INTRATASK_SPEED["GPU"]) * inter / intra


def auto_split(lengths: np.ndarray, fill: int, speed: float) -> np.ndarray:
    """bool[len(lengths)]: the targets ``auto`` sends to intratask, the longest j of them, with j
    (taking all targets of one length or none) making the model's time smallest (see
    RESIDENT_WAVEFRONTS): R_longest(j) / speed + max(R_rest(j), fill x L(j + 1)), R residues,
    L(j + 1) the longest target left to intertask, ``speed`` intratask's (:func:`intratask_speed`);
    a tie keeps more on intertask."""
    lengths = np.asarray(lengths, dtype=np.int64)
    count = len(lengths)
    chosen = np.zeros(count, dtype=bool)
    if count == 0:
        return chosen
    order = np.lexsort((np.arange(count), -lengths))  # longest first, ties in batch order
    longest_first = lengths[order]
    longest = np.concatenate(([0], np.cumsum(longest_first)))  # residues of the j longest, j = 0..count
    next_length = np.append(longest_first, 0)  # the longest target left to intertask
    cost = longest / speed + np.maximum(longest[-1] - longest, fill * next_length)
    allowed = np.ones(count + 1, dtype=bool)
    allowed[1:count] = longest_first[:-1] > longest_first[1:]  # j between two lengths
    candidates = np.flatnonzero(allowed)
    j = int(candidates[np.argmin(cost[candidates])])
    chosen[order[:j]] = True
    return chosen


def batches(lengths: np.ndarray, residues: int, at_least: int = 1) -> list[tuple[int, int]]:
    """(first, end) target ranges in database order of at most ``residues`` residues (a longer
    target alone), at least ``at_least`` of them when there are that many targets."""
    count = len(lengths)
    if count == 0:
        return []
    residues = max(1, min(residues, -(-int(lengths.sum()) // at_least)))
    total = np.cumsum(lengths)
    ranges, first = [], 0
    while first < count:
        before = total[first - 1] if first else 0
        end = max(first + 1, int(np.searchsorted(total, before + residues, side="right")))
        ranges.append((first, min(end, count)))
        first = end
    return ranges


def _batch_residues(devices: list[DeviceContext]) -> int:
    return min(min(device.info.max_allocation, device.info.global_memory // BATCH_MEMORY_SHARE) for device in devices) // 2


def search(queries: list[np.ndarray], targets: Targets, scoring: Scoring, devices: list[DeviceContext],
           options: SearchOptions | None = None) -> Hits:
    """Best hits of every query (codes) against ``targets`` on ``devices`` (one thread each)."""
    options = options or SearchOptions()
    options.check()
    started = time.perf_counter()
    residues = options.batch_residues or _batch_residues(devices)
    ranges = batches(targets.lengths, residues, at_least=len(devices))
    found: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
    stats = {"reruns": 0, "intertask": 0, "intratask": 0}
    work: queues.SimpleQueue = queues.SimpleQueue()
    for number in range(len(ranges)):
        work.put(number)
    failures: list[BaseException] = []
    lock = threading.Lock()

    def worker(device: DeviceContext) -> None:
        try:
            kernels = SearchKernels(device, scoring, tile=options.tile, group_size=options.group_size,
                                    intra_group_size=options.intra_group_size)
            fill, speed = options.fill or device_fill(kernels), intratask_speed(kernels, [len(query) for query in queries])
            while not failures:
                try:
                    number = work.get_nowait()
                except queues.Empty:
                    return
                first, end = ranges[number]
                batch = Targets(targets.codes, targets.offsets[first:end], targets.lengths[first:end])
                if options.method == "auto" and options.crossover:
                    intratask = batch.lengths > options.crossover
                elif options.method == "auto":
                    intratask = auto_split(batch.lengths, fill, speed)
                else:
                    intratask = np.full(len(batch), options.method == "intratask")
                batch_started = time.perf_counter()
                kernels.load(batch, intratask)
                reruns_before = kernels.reruns
                kept = []
                for query in queries:
                    scores = kernels.scores(query)
                    order, best = top_hits(scores, options.top)
                    kept.append((order + first, best))
                seconds = time.perf_counter() - batch_started
                cells = int(batch.lengths.sum()) * sum(len(query) for query in queries)
                with lock:
                    found[number] = kept
                    stats["reruns"] += kernels.reruns - reruns_before
                    stats["intratask"] += int(intratask.sum())
                    stats["intertask"] += int((~intratask).sum())
                    done = len(found)
                log.info("sw-search: batch %d/%d (%d targets, %d of them intratask, %d residues) on %s: %.2f s, %.1f GCUPS",
                         done, len(ranges), end - first, int(intratask.sum()), int(batch.lengths.sum()), device.info.name,
                         seconds, cells / max(seconds, 1e-9) / 1e9)
        except BaseException as error:  # noqa: BLE001 - raised again by the caller's thread
            failures.append(error)

    threads = [threading.Thread(target=worker, args=(device,), name=f"sw-search-{index}", daemon=True)
               for index, device in enumerate(devices)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    hits = Hits([], [], reruns=stats["reruns"], methods={"intertask": stats["intertask"], "intratask": stats["intratask"]})
    for index in range(len(queries)):
        parts = [found[number][index] for number in range(len(ranges))]
        indexes = np.concatenate([part[0] for part in parts]) if parts else np.zeros(0, dtype=np.int64)
        values = np.concatenate([part[1] for part in parts]) if parts else np.zeros(0, dtype=np.int64)
        order = np.lexsort((indexes, -values))[: options.top]
        hits.targets.append(indexes[order])
        hits.scores.append(values[order])
    hits.cells = int(targets.lengths.sum()) * sum(len(query) for query in queries)
    hits.seconds = time.perf_counter() - started
    return hits
