"""Owner of ``opencl/modules/sw_search.cl``: Smith-Waterman scores of one query against a batch of
targets held on one device (see the kernel file's header for the recurrences and layouts).

:class:`SearchKernels` loads a batch once (:meth:`SearchKernels.load`) and scores any number of
queries against it (:meth:`SearchKernels.scores`). Targets go to the intertask kernels (two a
work-item in 16-bit lanes; a lane that may have overflowed is run again, one target a work-item
in 32 bits) or to the intratask kernel (one a work-group), as the caller splits them.

Targets for the intertask kernels are sorted by length (longest first) and cut into *length
bins* of 2 x work-group size targets; a bin is padded to its longest target (rounded up to 4)
and interleaved so that a wavefront's code loads are consecutive (:func:`interleave`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyopencl as cl

from bowmap.modules.sw_search.scoring import CODES, PAD_CODE, Scoring
from bowmap.runtime.devices import DeviceContext, ReusedBuffer, nvidia_compute_capability, read_back, wait_idle

SOURCE = "modules/sw_search.cl"
TILES = (8, 16, 32)
INTRA_ROWS = 8  # query rows a work-item of the intratask kernel keeps in registers
WAVEFRONTS = 4  # intertask work-group: this many of the device's preferred multiple (warps)
LANE_LIMIT = 32767


@dataclass
class Targets:
    """Database sequences as one array of codes: target t is codes[offsets[t] : offsets[t] + lengths[t]]."""

    codes: np.ndarray  # uint8
    offsets: np.ndarray  # int64
    lengths: np.ndarray  # int64

    def __len__(self) -> int:
        return len(self.lengths)

    @classmethod
    def from_list(cls, sequences: list[np.ndarray]) -> Targets:
        lengths = np.array([len(sequence) for sequence in sequences], dtype=np.int64)
        offsets = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64) if len(lengths) else lengths
        codes = np.concatenate(sequences).astype(np.uint8) if len(lengths) else np.zeros(0, dtype=np.uint8)
        return cls(codes, offsets, lengths)

    def subset(self, indexes: np.ndarray) -> Targets:
        """The targets ``indexes`` (in that order), their codes gathered into a new array."""
        lengths = self.lengths[indexes]
        offsets = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64) if len(lengths) else lengths
        starts = np.repeat(self.offsets[indexes] - offsets, lengths)
        return Targets(self.codes[starts + np.arange(int(lengths.sum()))], offsets, lengths)


@dataclass
class Interleaved:
    """Targets in the intertask kernels' layout (see the module docstring)."""

    lanes: int  # targets a work-item: 2 (packed) or 1 (wide)
    group_size: int
    members: np.ndarray  # int64[groups * group_size * lanes]: target of each lane slot, -1 none
    columns: np.ndarray  # uint32[groups]: a multiple of 4
    offsets: np.ndarray  # uint64[groups + 1]: first code word (uint x lanes) of each group
    words: np.ndarray  # uint8[offsets[-1] * 4 * lanes]

    @property
    def groups(self) -> int:
        return len(self.columns)


def interleave(targets: Targets, indexes: np.ndarray, lanes: int, group_size: int) -> Interleaved:
    """The targets ``indexes`` sorted by length, longest first (ties in index order), in bins of
    lanes x group_size: slot l * lanes + k of a bin is lane k of local id l."""
    order = np.asarray(indexes, dtype=np.int64)
    order = order[np.lexsort((order, -targets.lengths[order]))]
    per_group = lanes * group_size
    groups = -(-len(order) // per_group)
    members = np.full(groups * per_group, -1, dtype=np.int64)
    members[: len(order)] = order
    lengths = np.where(members >= 0, targets.lengths[np.maximum(members, 0)], 0).reshape(groups, per_group)
    columns = (-(-lengths.max(axis=1, initial=0) // 4) * 4).astype(np.uint32)
    words_a_group = columns.astype(np.uint64) // 4 * group_size
    offsets = np.concatenate(([0], np.cumsum(words_a_group))).astype(np.uint64)
    words = np.full(int(offsets[-1]) * 4 * lanes, PAD_CODE, dtype=np.uint8)
    for group in range(groups):  # a loop over bins (2 x work-group targets each), not targets
        width = int(columns[group])
        if width == 0:
            continue
        slots = members[group * per_group : (group + 1) * per_group]
        valid = np.arange(width)[None, :] < lengths[group][:, None]
        starts = targets.offsets[np.maximum(slots, 0)]
        block = np.full((per_group, width), PAD_CODE, dtype=np.uint8)
        block[valid] = targets.codes[(starts[:, None] + np.arange(width)[None, :])[valid]]
        start = int(offsets[group]) * 4 * lanes
        layout = block.reshape(group_size, lanes, width // 4, 4).transpose(2, 0, 1, 3)
        words[start : start + block.size] = layout.reshape(-1)
    return Interleaved(lanes, group_size, members, columns, offsets, words)


def profile(query: np.ndarray, scoring: Scoring, tile: int) -> np.ndarray:
    """uint16[tiles][CODES][tile]: s(query row, code) + OE as 16-bit two's complement; rows past
    the query's end score PAD (<= 0) against everything."""
    tiles = max(1, -(-len(query) // tile))
    rows = np.full(tiles * tile, PAD_CODE, dtype=np.intp)
    rows[: len(query)] = query
    table = scoring.table() + scoring.open_extend
    values = table[rows].reshape(tiles, tile, CODES).transpose(0, 2, 1)
    return np.ascontiguousarray(values.astype(np.int16)).view(np.uint16)


@dataclass
class _Loaded:
    """A batch on the device: its packed intertask bins, its intratask targets."""

    targets: Targets
    packed: Interleaved | None
    intra_indexes: np.ndarray  # int64: batch indexes of the intratask targets, in launch order
    intra_lengths: np.ndarray


class SearchKernels:
    """Kernels, a command queue and reused buffers of one worker thread on one device.

    ``tile``: query rows an intertask work-item keeps in registers (8, 16 or 32).
    ``group_size`` / ``intra_group_size``: work-group sizes (default: from the device).
    ``scratch_bytes`` caps the boundary rows of one launch (default: an eighth of the device's
    memory, at most its largest allocation); larger calls run in several launches.
    ``packed_asm``: Hopper's PTX s16x2 instructions (default: NVIDIA compute capability >= 9.0).
    """

    def __init__(self, device: DeviceContext, scoring: Scoring, queue=None, tile: int = 16,
                 group_size: int | None = None, intra_group_size: int | None = None,
                 scratch_bytes: int | None = None, packed_asm: bool | None = None):
        if tile not in TILES:
            raise ValueError(f"tile must be one of {TILES}")
        self.device = device
        self.scoring = scoring
        self.queue = queue if queue is not None else device.queue()
        self.tile = tile
        capability = nvidia_compute_capability(device.device)
        self.packed_asm = (capability is not None and capability >= (9, 0)) if packed_asm is None else bool(packed_asm)
        options = (
            f"-DGAP_OPEN={scoring.gap_open}", f"-DGAP_EXTEND={scoring.gap_extend}", f"-DTILE={tile}",
            f"-DINTRA_ROWS={INTRA_ROWS}", f"-DPACKED_ASM={int(self.packed_asm)}",
        ) + (() if capability is None else ("-cl-nv-maxrregcount=128",))
        program = device.program(SOURCE, options)
        self._packed = cl.Kernel(program, "sw_intertask_packed")
        self._wide = cl.Kernel(program, "sw_intertask_wide")
        self._intra = cl.Kernel(program, "sw_intratask")
        info = device.info
        self.scratch_bytes = scratch_bytes or min(info.max_allocation, max(1 << 24, info.global_memory // 8))
        self.preferred_multiple = max(1, self._packed.get_work_group_info(
            cl.kernel_work_group_info.PREFERRED_WORK_GROUP_SIZE_MULTIPLE, device.device))
        self.group_size = group_size or self._group_size(self._packed)
        self.wide_group_size = group_size or self._group_size(self._wide)
        self._intra_group_size = intra_group_size
        mf = cl.mem_flags
        context = device.context
        self._buffers = {name: ReusedBuffer(context, mf.READ_ONLY) for name in (
            "codes", "code_offsets", "columns", "boundary_offsets", "intra_codes", "intra_offsets",
            "intra_lengths", "intra_boundary_offsets", "wide_codes", "wide_offsets", "wide_columns",
            "wide_boundary_offsets", "profile", "query", "scores")}
        self._boundary = ReusedBuffer(context, mf.READ_WRITE)
        self._best = ReusedBuffer(context, mf.WRITE_ONLY)
        self._wide_best = ReusedBuffer(context, mf.WRITE_ONLY)
        self._intra_best = ReusedBuffer(context, mf.WRITE_ONLY)
        self._loaded: _Loaded | None = None
        self.reruns = 0  # targets run again in 32 bits (their 16-bit lanes could have overflowed)

    def _group_size(self, kernel) -> int:
        info = cl.kernel_work_group_info
        multiple = max(1, kernel.get_work_group_info(info.PREFERRED_WORK_GROUP_SIZE_MULTIPLE, self.device.device))
        largest = kernel.get_work_group_info(info.WORK_GROUP_SIZE, self.device.device)
        return max(1, min(largest, multiple * WAVEFRONTS))

    def intra_group_size(self, query_length: int) -> int:
        """Work-items an intratask group: enough for the query's rows (INTRA_ROWS each), in whole
        preferred multiples, within the kernel's largest group."""
        if self._intra_group_size:
            return self._intra_group_size
        info = cl.kernel_work_group_info
        multiple = max(1, self._intra.get_work_group_info(info.PREFERRED_WORK_GROUP_SIZE_MULTIPLE, self.device.device))
        largest = self._intra.get_work_group_info(info.WORK_GROUP_SIZE, self.device.device)
        wanted = -(-max(1, math.ceil(query_length / INTRA_ROWS)) // multiple) * multiple
        return max(1, min(largest, wanted))

    # ------------------------------------------------------------ loading a batch

    def load(self, targets: Targets, intratask: np.ndarray | None = None) -> None:
        """Send a batch: targets whose ``intratask`` flag is set go to the intratask kernel, the
        others to the intertask ones. Replaces the batch loaded before."""
        intratask = np.zeros(len(targets), dtype=bool) if intratask is None else np.asarray(intratask, dtype=bool)
        inter_indexes = np.flatnonzero(~intratask)
        packed = None
        if len(inter_indexes):
            packed = interleave(targets, inter_indexes, 2, self.group_size)
            self._upload_interleaved(packed, "")
        intra_indexes = np.flatnonzero(intratask)
        intra_indexes = intra_indexes[np.lexsort((intra_indexes, -targets.lengths[intra_indexes]))]
        intra = targets.subset(intra_indexes)
        if len(intra_indexes):
            upload = self._buffers
            upload["intra_codes"].upload(self.queue, intra.codes if len(intra.codes) else np.zeros(1, np.uint8))
            upload["intra_offsets"].upload(self.queue, intra.offsets.astype(np.uint64))
            upload["intra_lengths"].upload(self.queue, intra.lengths.astype(np.uint32))
            upload["intra_boundary_offsets"].upload(self.queue, np.concatenate(([0], np.cumsum(intra.lengths + 1))).astype(np.uint64))
        upload = self._buffers
        upload["scores"].upload(self.queue, np.ascontiguousarray(self.scoring.table().T))
        self._loaded = _Loaded(targets, packed, intra_indexes, intra.lengths)

    def _upload_interleaved(self, layout: Interleaved, prefix: str) -> None:
        name = (prefix + "_") if prefix else ""
        buffers = self._buffers
        buffers[name + "codes"].upload(self.queue, layout.words if len(layout.words) else np.zeros(8, np.uint8))
        buffers[(name or "code_") + "offsets"].upload(self.queue, layout.offsets)
        buffers[name + "columns"].upload(self.queue, layout.columns)
        buffers[name + "boundary_offsets"].upload(self.queue, layout.offsets * np.uint64(4))

    # ------------------------------------------------------------ scoring a query

    def scores(self, query: np.ndarray) -> np.ndarray:
        """int64[len(targets)]: the best local score of ``query`` (codes) with each target of
        the loaded batch, in the batch's order."""
        loaded = self._loaded
        if loaded is None:
            raise RuntimeError("load a batch first")
        result = np.zeros(len(loaded.targets), dtype=np.int64)
        query = np.asarray(query, dtype=np.uint8)
        if len(query) == 0 or len(loaded.targets) == 0:
            return result
        if loaded.packed is not None:
            self._buffers["profile"].upload(self.queue, profile(query, self.scoring, self.tile))
            tiles = max(1, -(-len(query) // self.tile))
            lanes = self._run_intertask(self._packed, loaded.packed, "", tiles, self._best, np.uint32)
            lanes = lanes.view(np.int16).astype(np.int64)
            members = loaded.packed.members
            result[members[members >= 0]] = lanes[members >= 0]
            overflowed = members[(members >= 0) & (lanes > LANE_LIMIT - self.scoring.largest)]
            if len(overflowed):
                self.reruns += len(overflowed)
                wide = interleave(loaded.targets, overflowed, 1, self.wide_group_size)
                self._upload_interleaved(wide, "wide")
                values = self._run_intertask(self._wide, wide, "wide", tiles, self._wide_best, np.int32)
                result[wide.members[wide.members >= 0]] = values[wide.members >= 0]
        if len(loaded.intra_indexes):
            result[loaded.intra_indexes] = self._run_intratask(query, loaded)
        return result

    def _run_intertask(self, kernel, layout: Interleaved, prefix: str, tiles: int, best_buffer, dtype) -> np.ndarray:
        """One value a lane slot of ``layout`` (packed: the uint of two lanes, little-endian)."""
        name = (prefix + "_") if prefix else ""
        buffers = self._buffers
        size = layout.group_size
        best = best_buffer.at_least(layout.groups * size * 4)
        boundary_bytes = layout.columns.astype(np.int64) * size * 8
        local = cl.LocalMemory(CODES * self.tile * 2)
        for first, last in _launches(boundary_bytes, self.scratch_bytes):
            boundary = self._boundary.at_least(max(8, int(boundary_bytes[first:last].sum())))
            kernel(self.queue, ((last - first) * size,), (size,),
                   buffers[name + "codes"].buffer, buffers[(name or "code_") + "offsets"].buffer,
                   buffers[name + "columns"].buffer, buffers["profile"].buffer, np.uint32(tiles), boundary,
                   buffers[name + "boundary_offsets"].buffer, np.uint32(first), best, local)
            wait_idle(self.queue)  # asleep between launches: ^C is handled within one launch
        values = np.empty(layout.groups * size, dtype=dtype)
        read_back(self.queue, values, best)
        return values

    def _run_intratask(self, query: np.ndarray, loaded: _Loaded) -> np.ndarray:
        buffers = self._buffers
        size = self.intra_group_size(len(query))
        count = len(loaded.intra_indexes)
        query_buffer = buffers["query"].upload(self.queue, query)
        best = self._intra_best.at_least(count * 4)
        boundary_bytes = (loaded.intra_lengths + 1) * 8
        for first, last in _launches(boundary_bytes, self.scratch_bytes):
            boundary = self._boundary.at_least(int(boundary_bytes[first:last].sum()))
            self._intra(self.queue, ((last - first) * size,), (size,), query_buffer, np.uint32(len(query)),
                        buffers["intra_codes"].buffer, buffers["intra_offsets"].buffer, buffers["intra_lengths"].buffer,
                        buffers["scores"].buffer, boundary, buffers["intra_boundary_offsets"].buffer, np.uint32(first),
                        best, cl.LocalMemory(CODES * CODES * 4), cl.LocalMemory(2 * size * 8))
            wait_idle(self.queue)
        values = np.empty(count, dtype=np.int32)
        read_back(self.queue, values, best)
        return values


def _launches(scratch: np.ndarray, budget: int):
    """(first, end) ranges of consecutive groups whose scratch bytes fit ``budget`` (a group
    larger than the budget alone goes in a launch of its own)."""
    first, count = 0, len(scratch)
    total = np.cumsum(scratch)
    while first < count:
        before = total[first - 1] if first else 0
        last = max(first + 1, int(np.searchsorted(total, before + budget, side="right")))
        yield first, min(last, count)
        first = last
