"""Owner of ``opencl/modules/primers.cl``, ``primers_fine.cl`` and ``primers_conventional.cl``: k-difference primers.

For sequences alpha (length m) and beta (length n) and k >= 1: for each start r of alpha
(0-based), the shortest substring alpha[r : r + length] with at least k edit differences from
every substring of beta. :func:`find_primers` returns ``lengths`` (int64[m], 0 where a start has
no solution) and the number of symbol comparisons of alpha against beta performed, counted as in
:mod:`bowmap.modules.primers.reference`, so the kernels' counts equal the sequential reference's.

Methods and forms of parallelism (``PrimerOptions``):
* ``landau-vishkin`` + ``coarse`` (default, the fastest): many starts in flight, each start's
  diagonals cut into tiles, one work-group per (start, tile), the tile's working set of L and
  its alpha and beta segments in local memory, per-group result slots reduced in parallel by a
  second kernel. Starts are batched; after a batch with a start that has no solution (all later
  starts then have none) that start's comparisons are recounted up to the level where its suffix
  first occurs, as the sequential reference stops there.
* ``landau-vishkin`` + ``fine``: one work-group per start, a column of L spread over its
  work-items, columns in global memory; any k (the coarse form falls back to it when a tile's
  halo of k - 1 diagonals does not fit local memory).
* ``conventional`` + ``coarse``: one work-item per start sweeping beta with a strip of DP rows in
  registers, rows interleaved by start in global memory.
* ``conventional`` + ``fine``: one work-group per start, a strip of one DP row per work-item
  swept as an anti-diagonal wavefront (one barrier a step).
* ``sequential``: the NumPy references (``--method conventional`` or ``landau-vishkin``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pyopencl as cl

from bowmap.modules.primers import reference
from bowmap.runtime.devices import DeviceContext, ReusedBuffer
from bowmap.runtime.errors import UsageError

TILED_SOURCE = "modules/primers.cl"
FINE_SOURCE = "modules/primers_fine.cl"
CONVENTIONAL_SOURCE = "modules/primers_conventional.cl"
CONVENTIONAL_ROWS = 32  # DP rows a work-item holds in registers per sweep over beta
SHORT_CELL_LIMIT = 0xFFFF  # conventional DP entries (capped at k) are stored as ushort below this k
METHODS = ("landau-vishkin", "conventional")
PARALLELISMS = ("coarse", "fine", "sequential")
# NVIDIA's OpenCL caps a kernel's static __local arrays at 48 KiB whatever the device has.
STATIC_LOCAL_LIMIT = 48 << 10
# Launch about this many work-groups per compute unit, so every unit stays busy through a batch.
GROUPS_PER_COMPUTE_UNIT = 256
FINE_SCRATCH_BYTES = 1 << 30  # at most this much global memory for the fine form's columns


@dataclass(frozen=True)
class PrimerOptions:
    k: int
    method: str = "landau-vishkin"
    parallelism: str = "coarse"
    tile_width: int | None = None  # diagonals a work-group owns (coarse); None: from k and the device
    batch_starts: int | None = None  # starts a launch; None: enough to fill the device
    alpha_cache: int | None = None  # alpha symbols a tile keeps in local memory (coarse); None: from k
    starts: int | None = None  # solve only starts 0..starts-1 (a slice, for benchmarks); None: all


def check_options(options: PrimerOptions) -> None:
    if options.k < 1:
        raise UsageError(f"-k {options.k}: must be at least 1")
    if options.method not in METHODS:
        raise UsageError(f"--method {options.method}: expected one of {', '.join(METHODS)}")
    if options.parallelism not in PARALLELISMS:
        raise UsageError(f"--parallelism {options.parallelism}: expected one of {', '.join(PARALLELISMS)}")


def _as_codes(sequence) -> np.ndarray:
    if isinstance(sequence, str):
        sequence = sequence.encode()
    if isinstance(sequence, (bytes, bytearray)):
        return np.frombuffer(bytes(sequence), dtype=np.uint8)
    return np.ascontiguousarray(sequence, dtype=np.uint8)


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


class PrimerSearch:
    """Kernels, a command queue and reused buffers for one thread on one device."""

    def __init__(self, device: DeviceContext, queue: cl.CommandQueue | None = None):
        self.device = device
        self.queue = queue if queue is not None else device.queue()
        context = device.context
        self._alpha, self._beta = ReusedBuffer(context, cl.mem_flags.READ_ONLY), ReusedBuffer(context, cl.mem_flags.READ_ONLY)
        self._slot_rows, self._slot_hits, self._slot_counts = (ReusedBuffer(context) for _ in range(3))
        self._reach, self._hits, self._counts = (ReusedBuffer(context) for _ in range(3))
        self._columns = ReusedBuffer(context)
        # Every kernel launch of the latest call: with a profiling queue, benchmarks sum their times.
        self.kernel_events: list[cl.Event] = []
        self.last_layout: dict = {}
        # Comparisons of each start the latest call solved (0 for starts it did not reach).
        self.start_comparisons = np.zeros(0, dtype=np.uint64)

    # ------------------------------------------------------------ sizing

    def _group_size(self) -> int:
        """A power of two: the reductions halve it. At most 256 (8 NVIDIA warps), at most what the
        device allows; refined below from the built kernel's own limit."""
        size = 1
        while size * 2 <= min(256, self.device.device.max_work_group_size):
            size *= 2
        return size

    def _build(self, source: str, kernel_name: str, options: dict[str, int]) -> tuple[cl.Kernel, int]:
        """(kernel, work-group size): the group size shrinks (halving) until the built kernel
        accepts it (register-heavy builds may allow fewer work-items than the device)."""
        group = self._group_size()
        while True:
            defines = tuple(f"-D{name}={value}" for name, value in sorted({**options, "GROUP": group}.items()))
            program = self.device.program(source, defines)
            kernel = cl.Kernel(program, kernel_name)
            largest = kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, self.device.device)
            if largest >= group or group == 1:
                return kernel, group
            group //= 2

    def _tiled_layout(self, k: int, tile_width: int | None, alpha_cache: int | None) -> dict[str, int] | None:
        """-D constants of the tiled kernel, or None when even the smallest tile's local memory
        does not fit (very large k): the caller then takes the fine form."""
        group = self._group_size()
        halo = k - 1
        limit = min(self.device.info.local_memory, STATIC_LOCAL_LIMIT) - 256  # the runtime's own use

        def local_bytes(tile: int, cache: int) -> int:
            span = tile + 2 * halo
            words = (cache // 4 + 2) + ((span + cache) // 4 + 2)  # the symbol caches
            return 2 * 4 * (span + 2) + 4 * words + group * (4 + 4 + 8)

        if alpha_cache is None:
            # Rows that unrelated diagonals reach stay within about 2k (random DNA); homologous
            # diagonals go further, up to the solution's length (hundreds to thousands). Where
            # local memory is short, a smaller cache beats a narrower tile (more halo work).
            wanted = _round_up(max(1024, 8 * k), 64)
            caches = [wanted] + [size for size in (2048, 1024, 512, 256) if size < wanted]
        else:
            caches = [alpha_cache]
        for cache in caches:
            tile = tile_width
            if tile is None:
                # Own diagonals >= 16 x halo keeps recomputed halo cells under ~12% of the work.
                tile = _round_up(max(8 * group, 16 * halo), group)
                while tile > group and local_bytes(tile, cache) > limit:
                    tile -= group
                if cache != caches[-1] and tile < 8 * halo:
                    continue
                if tile < halo:
                    # Halo cells would outnumber own cells more than 2:1; the fine form wastes
                    # none (it reads its columns from global memory instead).
                    return None
            if local_bytes(tile, cache) <= limit:
                return {"TILE": tile, "HALO": halo, "ALPHA_CACHE": cache}
        return None

    def _batch(self, requested: int | None, groups_per_start: int, remaining: int) -> int:
        if requested is not None:
            return max(1, min(requested, remaining))
        target = self.device.info.compute_units * GROUPS_PER_COMPUTE_UNIT
        return max(1, min(remaining, -(-target // groups_per_start)))

    # ------------------------------------------------------------ solving

    def find(self, alpha, beta, options: PrimerOptions) -> tuple[np.ndarray, int]:
        """(lengths int64[m], comparisons) by the method and parallelism of ``options``."""
        check_options(options)
        alpha_codes, beta_codes = _as_codes(alpha), _as_codes(beta)
        if len(alpha_codes) == 0 or len(beta_codes) == 0:
            raise ValueError("alpha and beta must not be empty")
        # k beyond |alpha| + 1 gives the same answers (see below): clamp before the size check.
        k = min(options.k, len(alpha_codes) + 1)
        if len(alpha_codes) + k >= 1 << 30 or len(beta_codes) + k >= 1 << 30:
            raise UsageError("sequences must stay below 2^30 symbols")
        self.kernel_events = []
        m, n = len(alpha_codes), len(beta_codes)
        self.start_comparisons = np.zeros(m, dtype=np.uint64)
        if options.parallelism == "sequential":
            lengths, counts = reference.solve_starts(alpha_codes, beta_codes, options.k, options.method, options.starts)
            self.start_comparisons = counts.astype(np.uint64)
            return lengths, int(counts.sum())
        self._upload(alpha_codes, beta_codes)
        end = m if options.starts is None else max(0, min(options.starts, m))
        # k > m changes nothing but sizes: every suffix (M <= m < k) then occurs with M < k
        # differences, found at level M <= m, and no DP entry reaches m + 1. So kernels get
        # min(k, m + 1): the same answers and counts, with halos and columns bounded by m.
        options = replace(options, k=min(options.k, m + 1))
        if options.method == "conventional":
            return self._find_conventional(m, n, end, options), int(self.start_comparisons.sum())
        layout = None if options.parallelism == "fine" else self._tiled_layout(options.k, options.tile_width, options.alpha_cache)
        if layout is None:
            lengths = self._find_fine(m, n, end, options)
        else:
            lengths = self._find_tiled(m, n, end, options, layout)
        return lengths, int(self.start_comparisons.sum())

    def _upload(self, alpha: np.ndarray, beta: np.ndarray) -> None:
        for staging, array in ((self._alpha, alpha), (self._beta, beta)):
            staging.upload(self.queue, array)
        self.queue.finish()  # the host arrays may go away once we return

    def _read_starts(self, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        reach = np.empty(count, dtype=np.int32)
        hits = np.empty(count, dtype=np.int32)
        counts = np.empty(count, dtype=np.uint64)
        for host, device in ((reach, self._reach), (hits, self._hits), (counts, self._counts)):
            cl.enqueue_copy(self.queue, host, device.buffer, is_blocking=False)
        self.queue.finish()
        return reach.astype(np.int64), hits.astype(np.int64), counts

    def _run_tiled(self, kernels, layout, m: int, n: int, k: int, first: int, count: int, levels: int, tiles: int):
        """Launch the tiled kernel and the slot reduction for starts first..first+count-1."""
        (tiled, group), (reduce, reduce_group) = kernels
        slots = count * tiles
        slot_buffers = (self._slot_rows.at_least(4 * slots), self._slot_hits.at_least(4 * slots), self._slot_counts.at_least(8 * slots))
        outputs = (self._reach.at_least(4 * count), self._hits.at_least(4 * count), self._counts.at_least(8 * count))
        self.kernel_events.append(tiled(
            self.queue, (slots * group,), (group,), self._alpha.buffer, np.int32(m), self._beta.buffer, np.int32(n),
            np.int32(first), np.int32(levels), np.int32(tiles), *slot_buffers,
        ))
        self.kernel_events.append(reduce(
            self.queue, (count * reduce_group,), (reduce_group,), *slot_buffers, np.int32(tiles), np.int32(levels), *outputs,
        ))
        return self._read_starts(count)

    def _find_tiled(self, m: int, n: int, end: int, options: PrimerOptions, layout: dict[str, int]) -> np.ndarray:
        k = options.k
        kernels = (self._build(TILED_SOURCE, "lv_tiles", layout), self._build(TILED_SOURCE, "lv_reduce", layout))
        tiles = -(-(n + k) // layout["TILE"])  # diagonals -(k-1)..n
        self.last_layout = {**layout, "GROUP": kernels[0][1], "tiles": tiles, "parallelism": "coarse"}
        lengths = np.zeros(m, dtype=np.int64)
        first = 0
        while first < end:
            count = self._batch(options.batch_starts, tiles, end - first)
            reach, hits, counts = self._run_tiled(kernels, layout, m, n, k, first, count, k, tiles)
            suffix_lengths = m - first - np.arange(count)
            stopped = np.flatnonzero(reach >= suffix_lengths)
            solved = count if len(stopped) == 0 else int(stopped[0])
            lengths[first : first + solved] = reach[:solved] + 1
            self.start_comparisons[first : first + solved] = counts[:solved]
            if len(stopped):
                # This start's suffix occurs with < k differences: the sequential method stops
                # after the level where it first does, so count only the levels up to that one.
                stop = first + solved
                _, _, recount = self._run_tiled(kernels, layout, m, n, k, stop, 1, int(hits[solved]) + 1, tiles)
                self.start_comparisons[stop] = recount[0]
                break
            first += count
        return lengths

    def _record_batch(self, lengths: np.ndarray, m: int, first: int, count: int) -> bool:
        """Read back starts first..first+count-1 into ``lengths`` and the comparison counts; True
        when one of them has no solution (its suffix occurs): later starts have none either."""
        reach, _, counts = self._read_starts(count)
        stopped = np.flatnonzero(reach >= m - first - np.arange(count))
        solved = count if len(stopped) == 0 else int(stopped[0])
        lengths[first : first + solved] = reach[:solved] + 1
        taken = solved + (1 if len(stopped) else 0)
        self.start_comparisons[first : first + taken] = counts[:taken]
        return len(stopped) > 0

    def _find_fine(self, m: int, n: int, end: int, options: PrimerOptions) -> np.ndarray:
        k = options.k
        kernel, group = self._build(FINE_SOURCE, "lv_fine", {})
        self.last_layout = {"GROUP": group, "parallelism": "fine"}
        column_bytes = 2 * 4 * (n + k + 2)
        largest = max(1, min(FINE_SCRATCH_BYTES, self.device.info.max_allocation) // column_bytes)
        lengths = np.zeros(m, dtype=np.int64)
        first = 0
        while first < end:
            count = min(self._batch(options.batch_starts, 1, end - first), largest)
            outputs = (self._reach.at_least(4 * count), self._hits.at_least(4 * count), self._counts.at_least(8 * count))
            self.kernel_events.append(kernel(
                self.queue, (count * group,), (group,), self._alpha.buffer, np.int32(m), self._beta.buffer, np.int32(n),
                np.int32(first), np.int32(k), np.int32(k), self._columns.at_least(count * column_bytes), *outputs,
            ))
            # The fine kernel stops each start at its first occurrence level itself.
            if self._record_batch(lengths, m, first, count):
                break
            first += count
        return lengths

    def _find_conventional(self, m: int, n: int, end: int, options: PrimerOptions) -> np.ndarray:
        k = options.k
        fine = options.parallelism == "fine"
        cell, cell_bytes = ("ushort", 2) if k < SHORT_CELL_LIMIT else ("uint", 4)
        name = "conventional_fine" if fine else "conventional_starts"
        kernel, group = self._build(CONVENTIONAL_SOURCE, name, {"ROWS": CONVENTIONAL_ROWS, "CELL": cell})
        self.last_layout = {"GROUP": group, "ROWS": CONVENTIONAL_ROWS, "CELL": cell, "parallelism": options.parallelism}
        row_bytes = (n + 1) * cell_bytes
        # A DP row per start in global memory. Coarse: one work-item per start, so as many starts
        # a launch as a third of the device's memory holds (one allocation at most). Fine: one
        # work-group per start, enough groups to fill the device.
        scratch = min(self.device.info.max_allocation, self.device.info.global_memory // 3)
        largest = max(1, scratch // row_bytes)
        lengths = np.zeros(m, dtype=np.int64)
        first = 0
        while first < end:
            if options.batch_starts is not None:
                count = max(1, min(options.batch_starts, end - first))
            elif fine:
                count = min(self._batch(None, 1, end - first), largest)
            else:
                count = min(end - first, largest)
            outputs = (self._reach.at_least(4 * count), self._counts.at_least(8 * count))
            self._hits.at_least(4 * count)  # read back with the others, unused here
            scratch_buffer = self._columns.at_least(count * row_bytes)
            common = (self._alpha.buffer, np.int32(m), self._beta.buffer, np.int32(n), np.int32(k), np.int32(first))
            if fine:
                event = kernel(self.queue, (count * group,), (group,), *common, scratch_buffer, *outputs)
            else:
                event = kernel(self.queue, (_round_up(count, group),), (group,), *common, np.int32(count), scratch_buffer, *outputs)
            self.kernel_events.append(event)
            if self._record_batch(lengths, m, first, count):
                break
            first += count
        return lengths


def find_primers(device: DeviceContext, alpha, beta, options: PrimerOptions) -> tuple[np.ndarray, int]:
    """Convenience: a fresh :class:`PrimerSearch` on ``device``; see :meth:`PrimerSearch.find`."""
    return PrimerSearch(device).find(alpha, beta, options)


def solutions(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the starts that have a solution: 0-based, ends exclusive."""
    starts = np.flatnonzero(lengths > 0)
    return starts, starts + lengths[starts]
