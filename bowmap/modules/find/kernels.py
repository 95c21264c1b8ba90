"""Owner of ``opencl/modules/find.cl``: exact search and locate of patterns in one index block,
for DNA (2-bit occurrence lines) and protein or text indexes (wavelet matrix; or, to measure the
alternative, per-symbol sampled counts built in memory: :mod:`.sampled`).

Usage: :class:`FindBlock` uploads one block to one device (read-only, shared by that context's
queues); a :class:`FindSearch` per thread holds the kernels, its queue and reused buffers.
Patterns travel as one concatenated ``uint8`` code array with per-pattern offsets and lengths.
"""

from __future__ import annotations

import numpy as np
import pyopencl as cl

from bowmap.index.alphabet import wavelet_meta
from bowmap.index.load import IndexBlock
from bowmap.modules.find.sampled import SampledRank
from bowmap.runtime.devices import DeviceContext, ReusedBuffer, filled_buffer, read_back, work_group_size
from bowmap.runtime.errors import BowmapError

SOURCE = "modules/find.cl"


def block_meta(block: IndexBlock) -> np.ndarray:
    """The kernel's ``meta`` of a block: C of A, C, G, T for DNA; sigma, zeros, lf_base else."""
    if block.zeros is None:
        return block.first_rows.astype(np.uint32)
    return wavelet_meta(block.symbol_counts, block.zeros)


def block_device_bytes(block: IndexBlock, sampled: SampledRank | None = None) -> int:
    """Device memory one uploaded block takes, in bytes (with ``sampled`` counts in place of its
    rank lines when given)."""
    if sampled is not None:
        return sampled.lines.nbytes + block.marks.nbytes + block.samples.nbytes + 4
    return block.occ.nbytes + block.marks.nbytes + block.samples.nbytes + 4 * len(block_meta(block))


class FindBlock:
    """One index block's read-only buffers in one device context; with ``sampled`` (a protein or
    text block's counts, :func:`.sampled.build_sampled`) those replace its wavelet lines."""

    def __init__(self, device: DeviceContext, block: IndexBlock, sampled: SampledRank | None = None):
        if sampled is not None and block.zeros is None:
            raise ValueError("sampled counts are for protein and text blocks")
        rank_lines = block.occ if sampled is None else sampled.lines
        for what, array in (("rank lines", rank_lines), ("marks", block.marks), ("samples", block.samples)):
            if array.nbytes > device.info.max_allocation:
                raise BowmapError(
                    f"index block {block.number} needs a {array.nbytes}-byte buffer for its {what} but "
                    f"{device.info.name} allows {device.info.max_allocation}: rebuild the index with --device-mem for this device"
                )
        self.block = block
        self.wavelet = block.zeros is not None
        self.levels = len(block.zeros) if self.wavelet else 0
        self.level_lines = block.occ.shape[1] if self.wavelet else 0
        self.sampled_step = None if sampled is None else sampled.step
        if sampled is not None:  # find.cl's -DSAMPLED takes line_words, byte_words where levels go
            self.levels, self.level_lines = sampled.line_words, sampled.byte_words
        meta = block_meta(block) if sampled is None else np.array([sampled.sigma], dtype=np.uint32)
        # Made and filled by a copy (filled_buffer): NVIDIA copies a creation's host pointer 5 times slower.
        self.lines = filled_buffer(device, np.ascontiguousarray(rank_lines))
        self.marks = filled_buffer(device, np.ascontiguousarray(block.marks))
        self.samples = filled_buffer(device, np.ascontiguousarray(block.samples))
        self.meta = filled_buffer(device, meta)

    def index_arguments(self) -> tuple:
        return (self.lines, np.uint32(self.block.primary), self.meta, np.uint32(self.levels), np.uint32(self.level_lines))

    def release(self) -> None:
        for buffer in (self.lines, self.marks, self.samples, self.meta):
            buffer.release()


class FindSearch:
    """find.cl's kernels for one alphabet (``wavelet``: protein or text), a queue, reused buffers;
    ``sampled_step``: built for sampled counts of that step (protein or text) in place of the
    wavelet matrix."""

    def __init__(self, device: DeviceContext, wavelet: bool, queue: cl.CommandQueue | None = None,
                 sampled_step: int | None = None):
        if sampled_step is not None and not wavelet:
            raise ValueError("sampled counts are for protein and text blocks")
        self.device = device
        self.wavelet = wavelet
        self.sampled_step = sampled_step
        self.queue = queue if queue is not None else device.queue()
        if sampled_step is not None:
            options: tuple[str, ...] = ("-DSAMPLED", f"-DSAMPLED_STEP={int(sampled_step)}u")
        else:
            options = ("-DWAVELET",) if wavelet else ()
        program = device.program(SOURCE, options)
        self._search = cl.Kernel(program, "find_search")
        self._locate = cl.Kernel(program, "find_locate")
        self._group = work_group_size(self._search, device)
        flags = cl.mem_flags
        context = device.context
        self._codes, self._offsets, self._lengths, self._starts = (ReusedBuffer(context, flags.READ_ONLY) for _ in range(4))
        self._results, self._positions = ReusedBuffer(context, flags.READ_WRITE), ReusedBuffer(context, flags.READ_WRITE)
        self.last_kernel_event: cl.Event | None = None

    def _global_size(self, count: int) -> tuple[int]:
        return (-(-count // self._group) * self._group,)

    def _check(self, block: FindBlock) -> None:
        if block.wavelet != self.wavelet or block.sampled_step != self.sampled_step:
            raise ValueError("the block's alphabet or rank structure is not the one these kernels were built for")

    def search(self, block: FindBlock, codes: np.ndarray, offsets: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows [lo, hi) of each pattern in ``block`` (uint32; lo = hi = 0 when absent).
        Every length must be at least 1."""
        self._check(block)
        codes = np.ascontiguousarray(codes, dtype=np.uint8)
        offsets = np.ascontiguousarray(offsets, dtype=np.uint32)
        lengths = np.ascontiguousarray(lengths, dtype=np.uint32)
        count = len(offsets)
        if len(lengths) != count or (count and (lengths.min() < 1 or int((offsets.astype(np.int64) + lengths).max()) > len(codes))):
            raise ValueError("patterns must have offsets and lengths >= 1 inside codes")
        results = np.zeros((2, count), dtype=np.uint32)
        if count == 0:
            return results[0], results[1]
        inputs = [staging.upload(self.queue, array) for staging, array in
                  zip((self._codes, self._offsets, self._lengths), (codes, offsets, lengths))]
        results_device = self._results.at_least(results.nbytes)
        self.last_kernel_event = self._search(
            self.queue, self._global_size(count), (self._group,), *block.index_arguments(), np.uint32(block.block.length),
            *inputs, np.uint32(count), results_device,
        )
        read_back(self.queue, results, results_device)
        return results[0], results[1]

    def locate(self, block: FindBlock, lo: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        """Block offsets (uint32) of the suffixes at every row of the pieces [lo, lo + size),
        piece after piece; rows must lie in 1..n."""
        self._check(block)
        lo = np.asarray(lo, dtype=np.int64)
        sizes = np.asarray(sizes, dtype=np.int64)
        keep = sizes > 0
        lo, sizes = lo[keep], sizes[keep]
        count = int(sizes.sum())
        positions = np.zeros(count, dtype=np.uint32)
        if count == 0:
            return positions
        if lo.min() < 1 or (lo + sizes).max() > block.block.length + 1 or count >= 2**32:
            raise ValueError(f"rows must lie in 1..{block.block.length}")
        starts = np.concatenate((lo, np.cumsum(sizes) - sizes)).astype(np.uint32)
        starts_device = self._starts.upload(self.queue, starts)
        positions_device = self._positions.at_least(positions.nbytes)
        self.last_kernel_event = self._locate(
            self.queue, self._global_size(count), (self._group,), *block.index_arguments(), block.marks, block.samples,
            starts_device, np.uint32(len(lo)), np.uint32(count), positions_device,
        )
        read_back(self.queue, positions, positions_device)
        return positions
