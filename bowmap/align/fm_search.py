"""Owner of ``opencl/align/fm_search.cl``: exact FM-index search and locate on an OpenCL device.

Usage: upload each block once per device (:class:`DeviceBlock`, shared by every queue of that
context), then give each worker thread its own :class:`FMSearch` (own queue, own kernels).
Patterns travel as one concatenated ``uint8`` code array with per-pattern offsets and lengths,
the layout a chunk of reads and its seeds already has.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyopencl as cl
import pyopencl.cltypes as cltypes

from bowmap.index.load import FMIndex, IndexBlock
from bowmap.runtime.arrays import segment_ranges
from bowmap.runtime.devices import DeviceArray, DeviceContext, ReusedBuffer, read_back, work_group_size
from bowmap.runtime.errors import BowmapError

SOURCE = "align/fm_search.cl"


class DeviceBlock:
    """One index block's read-only buffers in one device context."""

    def __init__(self, device: DeviceContext, block: IndexBlock):
        flags = cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR
        context = device.context
        for name, array in (("occ", block.occ), ("marks", block.marks), ("samples", block.samples)):
            if array.nbytes > device.info.max_allocation:
                raise BowmapError(
                    f"index block {block.number} needs a {array.nbytes}-byte buffer but {device.info.name} "
                    f"allows {device.info.max_allocation}: rebuild the index with --device-mem for this device"
                )
        self.block = block
        self.occ = cl.Buffer(context, flags, hostbuf=block.occ)
        self.marks = cl.Buffer(context, flags, hostbuf=block.marks)
        # A zero-size buffer is not allowed: a block always has its offset-0 suffix sampled.
        self.samples = cl.Buffer(context, flags, hostbuf=block.samples)
        self.first_rows = cltypes.make_uint4(*(int(value) for value in block.first_rows))


def _as_u32(array, what: str) -> np.ndarray:
    array = np.asarray(array)
    if array.size and (array.min() < 0 or array.max() >= 2**32):
        raise ValueError(f"{what} must fit in uint32")
    return np.ascontiguousarray(array, dtype=np.uint32)


class FMSearch:
    """Kernels, a command queue and reused buffers for one worker thread on one device."""

    def __init__(self, device: DeviceContext, queue: cl.CommandQueue | None = None):
        self.device = device
        self.queue = queue if queue is not None else device.queue()
        program = device.program(SOURCE)
        self._search = cl.Kernel(program, "fm_search")
        self._locate = cl.Kernel(program, "fm_locate")
        self._locate_intervals = cl.Kernel(program, "fm_locate_intervals")
        self._seed_search = cl.Kernel(program, "seed_search")
        self._choose_seeds = cl.Kernel(program, "choose_seeds")
        self._locate_hits = cl.Kernel(program, "locate_hits")
        self._group = work_group_size(self._search, device)
        mf = cl.mem_flags
        context = device.context
        self._codes, self._offsets, self._lengths = (ReusedBuffer(context, mf.READ_ONLY) for _ in range(3))
        self._sent_codes = ReusedBuffer(context, mf.READ_ONLY)  # send_codes': apart, so no search overwrites it
        self._rows = ReusedBuffer(context, mf.READ_ONLY)
        self._results = ReusedBuffer(context, mf.READ_WRITE)
        # seed_hits' scratch: seed_first, read offsets, taken, read_rows, crowded, read starts.
        self._seed_scratch = [ReusedBuffer(context, mf.READ_WRITE) for _ in range(6)]
        # The latest kernel launch: with a profiling queue, benchmarks read its device time.
        self.last_kernel_event: cl.Event | None = None

    def _global_size(self, count: int) -> tuple[int]:
        return (-(-count // self._group) * self._group,)

    def search(self, block: DeviceBlock, codes, offsets, lengths) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """SA intervals [lo, hi) of each pattern in ``block`` (``lo = hi = 0`` when absent) and
        ``depth``, the length of the pattern's longest suffix that occurs. All uint32."""
        codes = np.ascontiguousarray(codes, dtype=np.uint8)
        offsets = _as_u32(offsets, "pattern offsets")
        lengths = _as_u32(lengths, "pattern lengths")
        count = len(offsets)
        if len(lengths) != count:
            raise ValueError("offsets and lengths differ in size")
        if count and int(np.add(offsets, lengths, dtype=np.uint64).max()) > len(codes):
            raise ValueError("a pattern reaches past the end of codes")
        results = np.zeros((3, count), dtype=np.uint32)
        if count == 0:
            return results[0], results[1], results[2]
        read_back(self.queue, results, self._search_on_device(block, codes, offsets, lengths))
        return results[0], results[1], results[2]

    def _search_on_device(self, block: DeviceBlock, codes, offsets, lengths):
        """The fm_search kernel enqueued over checked patterns (count > 0); its results buffer."""
        count = len(offsets)
        inputs = [codes.buffer if isinstance(codes, DeviceArray) else self._codes.upload(self.queue, codes)]
        inputs += [staging.upload(self.queue, array) for staging, array in zip((self._offsets, self._lengths), (offsets, lengths))]
        results_device = self._results.at_least(3 * 4 * count)
        self.last_kernel_event = self._search(
            self.queue, self._global_size(count), (self._group,),
            block.occ, np.uint32(block.block.primary), np.uint32(block.block.length), block.first_rows,
            *inputs, np.uint32(count), results_device,
        )
        return results_device

    def locate(self, block: DeviceBlock, rows) -> np.ndarray:
        """Block offsets (uint32) of the suffixes at ``rows`` (each in 1..n)."""
        rows = _as_u32(rows, "rows")
        count = len(rows)
        positions = np.zeros(count, dtype=np.uint32)
        if count == 0:
            return positions
        if rows.min() < 1 or rows.max() > block.block.length:
            raise ValueError(f"rows must lie in 1..{block.block.length}")
        rows_device = self._rows.upload(self.queue, rows)
        positions_device = self._results.at_least(positions.nbytes)
        self.last_kernel_event = self._locate(
            self.queue, self._global_size(count), (self._group,),
            block.occ, np.uint32(block.block.primary), block.first_rows, block.marks, block.samples,
            rows_device, np.uint32(count), positions_device,
        )
        read_back(self.queue, positions, positions_device)
        return positions

    def locate_intervals(self, block: DeviceBlock, lo, hi) -> np.ndarray:
        """Block offsets (uint32) of the suffixes at every row of every SA interval [lo, hi) of
        ``block``, interval after interval: ``locate(block, interval_rows(lo, hi)[1])``, with
        the rows made on the device from the intervals rather than sent one by one."""
        lo = _as_u32(lo, "interval starts")
        sizes = _as_u32(hi, "interval ends").astype(np.int64) - lo
        if len(sizes) != len(lo):
            raise ValueError("lo and hi differ in size")
        if (sizes < 0).any():
            raise ValueError("an interval ends before it starts")
        occupied = sizes > 0
        if occupied.any() and (lo[occupied].min() < 1 or (lo[occupied] + sizes[occupied]).max() > block.block.length + 1):
            raise ValueError(f"rows must lie in 1..{block.block.length}")
        before = np.cumsum(sizes) - sizes
        count = int(sizes.sum())
        if count >= 2**32:
            raise ValueError("more than 2^32 - 1 rows at once")
        positions = np.zeros(count, dtype=np.uint32)
        if count == 0:
            return positions
        starts = self._rows.upload(self.queue, np.concatenate((lo, before.astype(np.uint32))))
        positions_device = self._results.at_least(positions.nbytes)
        self.last_kernel_event = self._locate_intervals(
            self.queue, self._global_size(count), (self._group,),
            block.occ, np.uint32(block.block.primary), block.first_rows, block.marks, block.samples,
            starts, np.uint32(len(lo)), np.uint32(count), positions_device,
        )
        read_back(self.queue, positions, positions_device)
        return positions

    def send_codes(self, codes) -> DeviceArray:
        """Pattern codes sent once for several :meth:`seed_hits` calls (a chunk's rounds)."""
        return self._sent_codes.send(self.queue, np.ascontiguousarray(codes, dtype=np.uint8))

    def choose_seeds(self, results, seed_first: np.ndarray, max_occurrences: int, budget: int, seed_first_device=None):
        """The choose_seeds kernel on the SA intervals in device buffer ``results`` (fm_search's
        layout, 2 * seed_first[-1] seeds): (taken, per-read rows, per-read crowded flags), the
        first a device buffer, the others read back (uint32, bool). ``seed_first_device``:
        ``seed_first`` on the device already."""
        reads = len(seed_first) - 1
        half = int(seed_first[-1])
        if seed_first_device is None:
            seed_first_device = self._seed_scratch[0].upload(self.queue, _as_u32(seed_first, "seed firsts"))
        taken = self._seed_scratch[2].at_least(4 * max(1, 2 * half))
        rows_device = self._seed_scratch[3].at_least(4 * max(1, reads))
        crowded_device = self._seed_scratch[4].at_least(max(1, reads))
        rows = np.zeros(reads, dtype=np.uint32)
        crowded = np.zeros(reads, dtype=np.uint8)
        if reads:
            self._choose_seeds(
                self.queue, self._global_size(reads), (self._group,), results, seed_first_device, np.uint32(reads), np.uint32(half),
                np.uint32(max_occurrences), np.uint32(budget), taken, rows_device, crowded_device,
            )
            read_back(self.queue, rows, rows_device, crowded, crowded_device)
        return taken, rows, crowded.astype(bool)

    def seed_hits(self, block: DeviceBlock, codes, read_starts, seed_first, read_offset, seed_length: int, max_occurrences: int,
                  budget: int, buffers: HitBuffers) -> tuple[DeviceHits, np.ndarray]:
        """Search a round of seeds of one length, choose them (:func:`bowmap.seed_filter.choose_seeds`)
        and locate the chosen ones' every occurrence, all on the device: the hits stay there for
        seed_windows.cl, only per-read counts come back, and the seeds travel as their offsets in
        their reads. Seeds: every read's forward seeds (read r's are ``seed_first[r] ..
        seed_first[r + 1] - 1``, seed f ``codes[read_starts[r] + read_offset[f]:][:seed_length]``),
        then as many reverse ones in the same order and places of the reverse codes, which follow
        the forward ones in ``codes`` (host codes or :meth:`send_codes`'s; ``read_starts[-1]``
        codes each). Returns the hits and the mask of reads left crowded."""
        reads = len(seed_first) - 1
        half = int(seed_first[-1])
        if len(read_starts) != reads + 1 or len(read_offset) != half or len(codes) != 2 * int(read_starts[-1]):
            raise ValueError("codes, read_starts, seed_first and read_offset disagree on the reads and seeds")
        if not seed_hits_fit(block.block):
            raise ValueError("the block's text positions do not fit 32 bits")
        if budget + max_occurrences >= 2**31:
            raise ValueError("budget and max_occurrences must fit the kernels' 32-bit sums")
        seed_first, read_starts, read_offset = (_as_u32(array, what) for array, what in (
            (seed_first, "seed firsts"), (read_starts, "read starts"), (read_offset, "read offsets")))
        if half and (read_offset.astype(np.int64) + seed_length > np.repeat(np.diff(read_starts.astype(np.int64)), np.diff(seed_first))).any():
            raise ValueError("a seed reaches past the end of its read")
        hit_first = np.zeros(reads + 1, dtype=np.uint32)
        crowded = np.zeros(reads, dtype=bool)
        if half:
            if not isinstance(codes, DeviceArray):
                codes = self._codes.upload(self.queue, np.ascontiguousarray(codes, dtype=np.uint8))
            inputs = [staging.upload(self.queue, array) for staging, array in zip(self._seed_scratch[:2] + self._seed_scratch[5:], (seed_first, read_offset, read_starts))]
            results = self._results.at_least(3 * 4 * 2 * half)
            self.last_kernel_event = self._seed_search(
                self.queue, self._global_size(2 * half), (self._group,),
                block.occ, np.uint32(block.block.primary), np.uint32(block.block.length), block.first_rows,
                codes.buffer if isinstance(codes, DeviceArray) else codes, inputs[2], inputs[0], inputs[1], np.uint32(reads),
                np.uint32(half), np.uint32(seed_length), np.uint32(read_starts[-1]), results,
            )
            taken, rows, crowded = self.choose_seeds(results, seed_first, max_occurrences, budget, inputs[0])
            np.cumsum(rows, out=hit_first[1:])
        total = int(hit_first[-1])
        first_device = buffers.first.upload(self.queue, hit_first)
        positions = buffers.positions.at_least(4 * max(1, total))
        tags = buffers.tags.at_least(4 * max(1, total))
        if total:
            self.last_kernel_event = self._locate_hits(
                self.queue, self._global_size(total), (self._group,),
                block.occ, np.uint32(block.block.primary), block.first_rows, block.marks, block.samples,
                results, taken, inputs[0], inputs[1], np.uint32(reads), np.uint32(half),
                np.uint32(seed_length), np.uint32(block.block.start), first_device, np.uint32(total), positions, tags,
            )
        return DeviceHits(first_device, positions, tags, total, hit_first), crowded


@dataclass
class DeviceHits:
    """One round of seed hits left on the device, grouped by read: read r's are ``first[r] ..
    first[r + 1] - 1`` of ``positions`` (text) and ``tags`` (read offset << 7 | seed length << 1
    | reverse), seed_windows.cl's layout. ``count`` hits in all."""

    first: object  # cl.Buffer, uint[reads + 1]
    positions: object  # cl.Buffer, uint[count]
    tags: object  # cl.Buffer, uint[count]
    count: int
    first_host: np.ndarray  # ``first`` as uploaded (its length tells the reads it was made for)


class HitBuffers:
    """The device buffers of one round of hits (:meth:`FMSearch.seed_hits`): one per round that
    must live while later rounds are made."""

    def __init__(self, device: DeviceContext):
        self.first, self.positions, self.tags = (ReusedBuffer(device.context, cl.mem_flags.READ_WRITE) for _ in range(3))


def seed_hits_fit(block: IndexBlock) -> bool:
    """Whether :meth:`FMSearch.seed_hits` may locate in ``block``: its text positions fit 32 bits."""
    return block.start + block.length < 2**32


def interval_rows(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Expand SA intervals [lo, hi) into (owner interval, row) pairs, owners in order."""
    sizes = (hi.astype(np.int64) - lo).clip(0)
    owners = np.repeat(np.arange(len(sizes)), sizes)
    rows = segment_ranges(lo, sizes)
    return owners, rows


def exact_matches(index: FMIndex, device: DeviceContext, codes, offsets, lengths) -> tuple[np.ndarray, np.ndarray]:
    """Every occurrence of every pattern in the whole text, through the kernels.

    Returns (pattern, text position) pairs, sorted, each once although blocks overlap.
    """
    searcher = FMSearch(device)
    pattern_parts, position_parts = [], []
    for block in index.blocks:
        device_block = DeviceBlock(device, block)
        lo, hi, _ = searcher.search(device_block, codes, offsets, lengths)
        pattern_parts.append(np.repeat(np.arange(len(lo)), hi.astype(np.int64) - lo))
        position_parts.append(searcher.locate_intervals(device_block, lo, hi).astype(np.int64) + block.start)
    pairs = np.unique(np.stack([np.concatenate(pattern_parts), np.concatenate(position_parts)], axis=1), axis=0)
    return pairs[:, 0], pairs[:, 1]
