"""Owner of ``opencl/fm_search.cl``: exact FM-index search and locate on an OpenCL device.

Usage: upload each block once per device (:class:`DeviceBlock`, shared by every queue of that
context), then give each worker thread its own :class:`FMSearch` (own queue, own kernels).
Patterns travel as one concatenated ``uint8`` code array with per-pattern offsets and lengths,
the layout a chunk of reads and its seeds already has.
"""

from __future__ import annotations

import numpy as np
import pyopencl as cl
import pyopencl.cltypes as cltypes

from bowmap.arrays import segment_ranges
from bowmap.devices import DeviceContext, ReusedBuffer, read_back, work_group_size
from bowmap.errors import BowmapError
from bowmap.index import FMIndex, IndexBlock

SOURCE = "fm_search.cl"


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
        self._group = work_group_size(self._search, device)
        mf = cl.mem_flags
        context = device.context
        self._codes, self._offsets, self._lengths = (ReusedBuffer(context, mf.READ_ONLY) for _ in range(3))
        self._rows = ReusedBuffer(context, mf.READ_ONLY)
        self._results = ReusedBuffer(context, mf.WRITE_ONLY)
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
        inputs = [staging.upload(self.queue, array) for staging, array in zip((self._codes, self._offsets, self._lengths), (codes, offsets, lengths))]
        results_device = self._results.at_least(results.nbytes)
        self.last_kernel_event = self._search(
            self.queue, self._global_size(count), (self._group,),
            block.occ, np.uint32(block.block.primary), np.uint32(block.block.length), block.first_rows,
            *inputs, np.uint32(count), results_device,
        )
        read_back(self.queue, results, results_device)
        return results[0], results[1], results[2]

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
