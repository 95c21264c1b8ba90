"""The Python API of ``bowmap sw-search``: every query against every database sequence, the best
hits of each query.

The database is cut, in its own order, into batches that fit the smallest device's memory; each
device's worker thread takes batches, loads one (its codes sent once), scores every query
against it and keeps each query's best hits. Hits are merged in batch order with the same rule
(score descending, then database order), so the result is the same whatever the batches,
devices or methods.

Methods: ``intertask`` (two targets a work-item, see :mod:`.kernels`), ``intratask`` (a target a
work-group) and ``auto``: intratask for targets longer than :func:`crossover_length`.
"""

from __future__ import annotations

import logging
import queue as queues
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from bowmap.modules.sw_search.kernels import SearchKernels, Targets
from bowmap.modules.sw_search.reference import top_hits
from bowmap.modules.sw_search.scoring import Scoring
from bowmap.runtime.devices import DeviceContext

log = logging.getLogger("bowmap.modules.sw_search")

METHODS = ("intertask", "intratask", "auto")
# auto's crossover: the intertask kernels keep a boundary row of 8 bytes a target column for
# every work-item; the device holds about compute units x preferred multiple x RESIDENT_WAVEFRONTS
# work-items at once. Targets longer than (launch scratch / (8 x that)) cannot fill the device in
# one launch, and go to the intratask kernel. Clamped to this range.
RESIDENT_WAVEFRONTS = 16
SHORTEST_CROSSOVER, LONGEST_CROSSOVER = 2048, 1 << 16
# A batch's codes take at most this share of the smallest device's memory (the launch scratch
# takes another eighth, see SearchKernels).
BATCH_MEMORY_SHARE = 4


@dataclass
class SearchOptions:
    """``top``: hits kept a query. ``crossover``: auto's length (None: from the device).
    ``batch_residues``: residues a batch (None: from the devices' memory). ``tile``: query rows
    an intertask work-item holds (8, 16, 32)."""

    method: str = "auto"
    top: int = 10
    crossover: int | None = None
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


def crossover_length(kernels: SearchKernels) -> int:
    """auto's length for the device of ``kernels`` (see RESIDENT_WAVEFRONTS)."""
    import pyopencl as cl

    info = kernels.device.info
    multiple = kernels._packed.get_work_group_info(
        cl.kernel_work_group_info.PREFERRED_WORK_GROUP_SIZE_MULTIPLE, kernels.device.device)
    resident = info.compute_units * max(1, multiple) * RESIDENT_WAVEFRONTS
    return int(min(LONGEST_CROSSOVER, max(SHORTEST_CROSSOVER, kernels.scratch_bytes // (8 * resident))))


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
            crossover = options.crossover or crossover_length(kernels)
            while not failures:
                try:
                    number = work.get_nowait()
                except queues.Empty:
                    return
                first, end = ranges[number]
                batch = Targets(targets.codes, targets.offsets[first:end], targets.lengths[first:end])
                if options.method == "auto":
                    intratask = batch.lengths > crossover
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
                log.info("sw-search: batch %d/%d (%d targets, %d residues) on %s: %.2f s, %.1f GCUPS",
                         done, len(ranges), end - first, int(batch.lengths.sum()), device.info.name, seconds,
                         cells / max(seconds, 1e-9) / 1e9)
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
