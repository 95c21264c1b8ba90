"""Owner of ``opencl/align/smith_waterman.cl``: affine-gap Smith-Waterman of reads against windows.

Usage: each worker thread makes its own :class:`SmithWaterman` (own queue, kernels, buffers) and
calls :meth:`SmithWaterman.best` on every candidate (read, window) pair of a chunk, then
:meth:`SmithWaterman.traceback` on the pair chosen for each read. Reads and windows travel as
concatenated ``uint8`` code arrays with offsets and lengths; pairs name a read and a window, so a
read aligned against many windows is uploaded once.

Definitions (the kernels and :mod:`bowmap.align.references.smith_waterman` follow them exactly):

* Codes 0..3 are A, C, G, T; 4 (any code above 3) is ambiguous and scores ``-ambiguous``
  against every base, itself included.
* Local mode (default): the best-scoring pair of substrings, the read's unaligned ends soft
  clipped. End-to-end mode ("glocal"): the whole read against any substring of the window.
* Coordinates are 0-based, ends exclusive: the alignment covers read[read_start:read_end] and
  window[window_start:window_end].
* Best end cell. Local: the largest score, counting ``Scoring.clip_penalty`` as a bonus for each
  read end the alignment reaches (BWA-MEM's clipping penalty: of two alignments, one clipping
  a read end must score that much more to be chosen); the kernels report that chosen score
  (:func:`cigar_scores` gives the CIGAR's own); ties go to the smallest window end, then the
  smallest read end. When no cell scores above 0 the result is score 0, all ends 0, and the CIGAR is one
  soft clip of the whole read (empty for an empty read): the caller reports the read unmapped.
  End-to-end: read_end is always the read length; ties go to the smallest window end. An
  alignment always exists: a window shorter than the read, even an empty one, still aligns with
  insertions; window end 0 means the whole read inserted, score -(gap_open + m * gap_extend).
* Traceback ties: a cell's score is taken from the diagonal (M) first, then from a deletion (D),
  then from an insertion (I); a gap run prefers opening over extending (the shorter gap); in
  local mode the walk stops at the first cell on the path whose score is 0 or less, so an
  alignment never starts with a run of zero net score.
* CIGAR: BAM encoding ``length << 4 | op`` with M = 0, I = 1, D = 2, S = 4; M covers matches and
  mismatches alike. M + I + S lengths add up to the read length, M + D to
  window_end - window_start, and re-scoring the CIGAR gives :func:`cigar_scores` of the score.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyopencl as cl

from bowmap.runtime.arrays import lexsort, segment_ranges, unique
from bowmap.align.extend.packed_text import PackedText
from bowmap.runtime.devices import (
    DeviceArray,
    DeviceContext,
    ReusedBuffer,
    make_kernel,
    nvidia_compute_capability,
)
from bowmap.runtime.deferred import DeferredReads, joined_columns
from bowmap.runtime.errors import BowmapError
from bowmap.align.extend.scoring import Scoring

SOURCE = "align/smith_waterman.cl"
OP_M, OP_I, OP_D, OP_S = 0, 1, 2, 4
LONGEST_SEQUENCE = 1 << 20  # read or window length limit (int32 scores with SCORE_LIMIT)
# CIGAR operations a traced pair's row brings back with its scores (SmithWaterman.traceback):
# short reads' alignments need a handful (40,000 of mason's 2x150 reads on chr20: at most 9); a wider CIGAR
# costs one more read-back (of every traced row's remaining columns).
CIGAR_COLUMNS = 16


def _as_u32(array, what: str) -> np.ndarray:
    array = np.asarray(array)
    if array.ndim != 1:
        raise ValueError(f"{what} must be one-dimensional")
    if array.size and (array.min() < 0 or array.max() >= 2**32):
        raise ValueError(f"{what} must fit in uint32")
    return np.ascontiguousarray(array, dtype=np.uint32)


@dataclass
class _Pairs:
    """Checked inputs, with the pairs in launch order (longest first, so a wavefront's pairs
    have similar lengths): ``order[k]`` is the caller's index of the pair launched k-th."""

    read_codes: np.ndarray
    read_offsets: np.ndarray
    read_lengths: np.ndarray
    window_codes: np.ndarray | PackedText
    window_offsets: np.ndarray  # uint64
    window_lengths: np.ndarray
    pair_reads: np.ndarray  # in launch order
    pair_windows: np.ndarray
    order: np.ndarray
    m: np.ndarray  # read length of each pair, launch order, int64
    n: np.ndarray


def _check(read_codes, read_offsets, read_lengths, window_codes, window_offsets, window_lengths, pair_reads, pair_windows) -> _Pairs:
    codes = []
    for what, array in (("read codes", read_codes), ("window codes", window_codes)):
        if isinstance(array, PackedText) or (what == "read codes" and isinstance(array, DeviceArray)):
            codes.append(array)
            continue
        array = np.asarray(array)
        if array.ndim != 1:
            raise ValueError(f"{what} must be one-dimensional")
        codes.append(np.ascontiguousarray(array, dtype=np.uint8))
    read_offsets, read_lengths = _as_u32(read_offsets, "read offsets"), _as_u32(read_lengths, "read lengths")
    window_offsets = np.asarray(window_offsets)
    if window_offsets.ndim != 1 or (window_offsets.size and window_offsets.min() < 0):
        raise ValueError("window offsets must be one-dimensional and not negative")
    window_offsets = np.ascontiguousarray(window_offsets, dtype=np.uint64)
    window_lengths = _as_u32(window_lengths, "window lengths")
    pair_reads, pair_windows = _as_u32(pair_reads, "pair reads"), _as_u32(pair_windows, "pair windows")
    for what, offsets, lengths, sequence_codes in (
        ("read", read_offsets, read_lengths, codes[0]),
        ("window", window_offsets, window_lengths, codes[1]),
    ):
        if len(offsets) != len(lengths):
            raise ValueError(f"{what} offsets and lengths differ in size")
        available = sequence_codes.length if isinstance(sequence_codes, PackedText) else len(sequence_codes)
        if len(lengths) and int(np.add(offsets, lengths, dtype=np.uint64).max()) > available:
            raise ValueError(f"a {what} reaches past the end of its codes")
        if len(lengths) and int(lengths.max()) > LONGEST_SEQUENCE:
            raise ValueError(f"a {what} is longer than {LONGEST_SEQUENCE} bases")
    if len(pair_reads) != len(pair_windows):
        raise ValueError("pair_reads and pair_windows differ in size")
    if len(pair_reads) and (int(pair_reads.max()) >= len(read_lengths) or int(pair_windows.max()) >= len(window_lengths)):
        raise ValueError("a pair names a read or window that does not exist")
    m = read_lengths[pair_reads].astype(np.int64)
    n = window_lengths[pair_windows].astype(np.int64)
    order = lexsort((-n, -m)).astype(np.int64)  # longest reads first, then longest windows
    return _Pairs(
        codes[0], read_offsets, read_lengths, codes[1], window_offsets, window_lengths,
        pair_reads[order], pair_windows[order], order, m[order], n[order],
    )


def twins(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pairs of launch positions with equal read length for ``sw_score_twins``: consecutive
    positions within each run of equal ``m`` (the launch order sorts by length), the odd one
    out of a run twinned with itself. Returns (first, second), second[k] >= first[k]."""
    count = len(m)
    run_starts = np.flatnonzero(np.r_[True, m[1:] != m[:-1]])
    run_ends = np.r_[run_starts[1:], count]
    rank = np.arange(count) - np.repeat(run_starts, run_ends - run_starts)
    first = np.flatnonzero(rank % 2 == 0)
    end = np.repeat(run_ends, run_ends - run_starts)[first]
    second = np.where(first + 1 < end, first + 1, first)
    return first, second


class SmithWaterman:
    """Kernels, a command queue and reused buffers for one worker thread on one device.

    ``read_tile`` (8 or 16) is the number of read rows a work-item keeps in registers; the
    default, 16, halves the boundary traffic of 8 at about 3 x 16 live registers.
    ``scratch_bytes`` caps the boundary-row and direction buffers of one launch (default: an
    eighth of the device's global memory, at most its largest allocation); a call larger than
    that runs in several launches.
    ``packed_scores``: :meth:`best` runs ``sw_score_twins``, two pairs of equal read length a
    work-item in 16-bit lanes, whenever the scores fit (``Scoring.fits_packed_lanes``); else
    ``sw_score``, one pair a work-item in 32-bit values. Same results either way. ``packed_asm``:
    the lanes use Hopper's PTX instructions (add/max.s16x2, prmt) rather than OpenCL short2
    operations; it defaults to whether the device is an NVIDIA GPU of compute capability 9.0 or
    later. ``packed_scores`` defaults to True: the twins ran 3x (local) to 3.5x (end-to-end) the
    one-pair kernel on PoCL (bench/smith_waterman.py) and faster on an H200 (see the README).
    ``teams``: the twins run as ``sw_score_teams`` and the tracebacks as ``sw_traceback_teams``,
    a work-item a tile, the tiles of a twin (a pair) a column apart, where a work-group holds
    its tiles; by default on GPUs, where a launch of ``sw_score_twins`` or ``sw_traceback``
    lasts as long as its longest pair's whole sweep on one work-item (CPUs run a work-group's
    steps one after another between barriers: one work-item a pair is faster there). Every
    call's twins go to the teams, however many: bench/smith_waterman.py's 131,072 twins of
    equal windows ran 19% faster as sw_score_twins, yet in runs the teams won (H200, 1 Gbp
    human-like reads, bench/kernel_times.py: giving calls of over 150 twins a compute unit to
    sw_score_twins took the scores from 15.6 to 20.2 ms per 100,000 reads).
    """

    def __init__(self, device: DeviceContext, scoring: Scoring, queue: cl.CommandQueue | None = None,
                 read_tile: int = 16, scratch_bytes: int | None = None,
                 packed_scores: bool | None = None, packed_asm: bool | None = None, teams: bool | None = None):
        if read_tile not in (8, 16):
            raise ValueError("read_tile must be 8 or 16")
        self.device = device
        self.scoring = scoring
        self.queue = queue if queue is not None else device.queue()
        self.read_tile = read_tile
        capability = nvidia_compute_capability(device.device)
        hopper = capability is not None and capability >= (9, 0)
        # NVIDIA's compiler gave sw_score_twins 139 registers a work-item in local mode (14 warps
        # an SM); capped at 128 (16 warps, no spills) it ran 1.70 -> 2.16 TCUPS on an H200, the
        # other kernels (at most 111 registers) unchanged; 96 was slower again.
        self._compiler_options = () if capability is None else ("-cl-nv-maxrregcount=128",)
        self.packed_scores = True if packed_scores is None else bool(packed_scores)
        self.packed_asm = hopper if packed_asm is None else bool(packed_asm)
        self.teams = device.info.is_gpu if teams is None else bool(teams)
        info = device.info
        self.scratch_bytes = scratch_bytes or min(info.max_allocation, max(1 << 24, info.global_memory // 8))
        self._kernels: dict[bool, dict[str, cl.Kernel]] = {}
        mf = cl.mem_flags
        context = device.context
        self._inputs = [ReusedBuffer(context, mf.READ_ONLY) for _ in range(9)]
        self._group_inputs = [ReusedBuffer(context, mf.READ_ONLY) for _ in range(3)]
        self._sent_reads = ReusedBuffer(context, mf.READ_ONLY)  # send_reads' (apart: calls do not overwrite it)
        self.sent_reads: DeviceArray | None = None  # the latest send_reads' (the SAM fields read them too)
        self._boundary = ReusedBuffer(context, mf.READ_WRITE)
        self._directions = ReusedBuffer(context, mf.READ_WRITE)
        self._results = ReusedBuffer(context, mf.WRITE_ONLY)
        self._cigar = ReusedBuffer(context, mf.WRITE_ONLY)
        # The latest kernel launches: with a profiling queue, benchmarks read their device time.
        self.last_kernel_events: list[cl.Event] = []

    # ------------------------------------------------------------ set-up

    def _kernel(self, name: str, wide: bool, windows=None, last_rows: int | None = None):
        """The kernel for 16- or 32-bit boundary scores and for window codes given as bytes or
        as a PackedText (with or without an ambiguity mask); the teams' kernels are built for
        one ``last_rows`` (the read's rows in its last tile) a program."""
        packed = isinstance(windows, PackedText)
        key = (wide, packed, packed and windows.masked, last_rows)
        kernels = self._kernels.get(key)
        if kernels is None:
            options = self.scoring.build_options() + (
                f"-DREAD_TILE={self.read_tile}", f"-DWIDE_BOUNDARY={int(wide)}",
                f"-DPACKED_WINDOWS={int(packed)}", f"-DAMBIGUOUS_MASK={int(key[2])}",
                f"-DPACKED_ASM={int(self.packed_asm)}",
            ) + (() if last_rows is None else (f"-DLAST_ROWS={last_rows}",)) + self._compiler_options
            program = self.device.program(SOURCE, options)
            names = ("sw_score", "sw_traceback", "sw_score_twins") if last_rows is None else ("sw_score_teams", "sw_traceback_teams")
            kernels = self._kernels[key] = {kernel_name: make_kernel(program, kernel_name) for kernel_name in names}
            if last_rows is None:
                for kernel_name in names:
                    kernels["group_" + kernel_name] = self._work_group_size(kernels[kernel_name], kernel_name != "sw_score_twins")
            else:  # the teams' work-groups: a multiple of the first, at most the second
                for kernel_name in names:
                    kernels["group_" + kernel_name] = tuple(kernels[kernel_name].get_work_group_info(which, self.device.device) for which in (
                        cl.kernel_work_group_info.PREFERRED_WORK_GROUP_SIZE_MULTIPLE, cl.kernel_work_group_info.WORK_GROUP_SIZE))
        return kernels[name], kernels["group_" + name]

    def _work_group_size(self, kernel, profiled: bool = True) -> int:
        """A few warps/wavefronts a group, within the kernel's limit and the local memory the
        query profile takes (5 codes x read_tile 16-bit scores a work-item; none for the twins)."""
        device = self.device.device
        multiple = kernel.get_work_group_info(cl.kernel_work_group_info.PREFERRED_WORK_GROUP_SIZE_MULTIPLE, device)
        largest = kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, device)
        fixed_local = kernel.get_work_group_info(cl.kernel_work_group_info.LOCAL_MEM_SIZE, device)
        by_memory = (self.device.info.local_memory - fixed_local) // self._profile_bytes(1) if profiled else largest
        size = max(1, min(largest, multiple * 2, by_memory))
        if size >= multiple:
            size -= size % multiple
        return size

    def _profile_bytes(self, group: int) -> int:
        return 5 * self.read_tile * 2 * group

    def _upload_sequences(self, pairs: _Pairs):
        """Buffers of the kernels' first seven arguments: read codes, offsets and lengths, window
        codes (or the packed text), offsets and lengths, and the ambiguity mask."""
        windows = pairs.window_codes
        arrays = (pairs.read_codes, pairs.read_offsets, pairs.read_lengths, windows, pairs.window_offsets, pairs.window_lengths)
        buffers = [
            array.buffer if isinstance(array, PackedText | DeviceArray) else staging.upload(self.queue, array)
            for staging, array in zip(self._inputs, arrays)
        ]
        if isinstance(windows, PackedText):
            return buffers + [windows.ambiguous]
        return buffers + [self._inputs[8].at_least(1)]

    def _upload_pairs(self, pairs: _Pairs, slots) -> list:
        """Buffers of the pairs ``slots`` (indexes or a slice, launch order): their reads and windows."""
        return [staging.upload(self.queue, array[slots]) for staging, array in zip(self._inputs[6:], (pairs.pair_reads, pairs.pair_windows))]

    def _launches(self, count: int, group: int, columns: np.ndarray, boundary_element: int, extra_bytes=None):
        """Split the launch order into launches of whole work-groups whose scratch fits
        ``scratch_bytes``: the boundary row, (longest window + 1) x global size x element, plus
        ``extra_bytes`` per group (the direction words). Yields (first pair, end pair, groups)."""
        groups = -(-count // group)
        padded = np.zeros(groups * group, dtype=np.int64)
        padded[:count] = columns
        group_columns = padded.reshape(groups, group).max(axis=1) + 1
        extra = np.zeros(groups, dtype=np.int64) if extra_bytes is None else np.asarray(extra_bytes, dtype=np.int64)
        first = 0
        while first < groups:
            taken = np.arange(1, groups - first + 1)
            cost = np.cumsum(extra[first:]) + np.maximum.accumulate(group_columns[first:]) * boundary_element * group * taken
            last = first + int(np.searchsorted(cost, self.scratch_bytes, side="right"))
            if last == first:
                raise BowmapError(
                    f"Smith-Waterman of work-group {first} (reads up to {int(self._m[first * group])} bases, windows up to "
                    f"{int(group_columns[first]) - 1}) needs {int(cost[0])} bytes of scratch, more than the "
                    f"{self.scratch_bytes} allowed on {self.device.info.name}"
                )
            yield first * group, min(last * group, count), slice(first, last)
            first = last

    # ------------------------------------------------------------ calls

    def send_reads(self, read_codes) -> DeviceArray:
        """Read codes sent once, given as ``read_codes`` to several calls (a chunk's scoring,
        its rescue's and its traceback)."""
        self.sent_reads = self._sent_reads.send(self.queue, np.ascontiguousarray(read_codes, dtype=np.uint8))
        return self.sent_reads

    def best(self, read_codes, read_offsets, read_lengths, window_codes, window_offsets, window_lengths, pair_reads, pair_windows):
        """Best score and end cell of every pair: (score, read_end, window_end), int32 arrays,
        one entry per pair in the caller's order (ends exclusive; see the module docstring for
        ties and the empty cases)."""
        pairs = _check(read_codes, read_offsets, read_lengths, window_codes, window_offsets, window_lengths, pair_reads, pair_windows)
        count = len(pairs.order)
        results = np.zeros((3, count), dtype=np.int32)
        self.last_kernel_events = []
        if count == 0:
            return results[0], results[1], results[2]
        longest_read, longest_window = int(pairs.m[0]), int(pairs.n.max())
        sequences = self._upload_sequences(pairs)
        if self.packed_scores and self.scoring.fits_packed_lanes(longest_read, longest_window):
            self._best_twins(pairs, sequences, results)
            return results[0], results[1], results[2]
        wide = self.scoring.needs_wide_scores(longest_read, longest_window)
        kernel, group = self._kernel("sw_score", wide, pairs.window_codes)
        element = 8 if wide else 4
        self._m = pairs.m
        reads, parts = DeferredReads(self.queue), []
        for start, stop, _ in self._launches(count, group, pairs.n, element):
            size = stop - start
            global_size = -(-size // group) * group
            columns = int(pairs.n[start:stop].max()) + 1
            boundary = self._boundary.at_least(columns * global_size * element)
            pair_buffers = self._upload_pairs(pairs, slice(start, stop))
            output = self._results.at_least(3 * size * 4)
            self.last_kernel_events.append(kernel(
                self.queue, (global_size,), (group,), *sequences, *pair_buffers, np.uint32(size),
                boundary, cl.LocalMemory(self._profile_bytes(group)), output,
            ))
            parts.append((np.empty((3, size), dtype=np.int32), slice(start, stop)))
            reads.add(parts[-1][0], output)
        reads.wait()  # one synchronisation for every launch
        for part, slots in parts:
            results[:, pairs.order[slots]] = part
        return results[0], results[1], results[2]

    def _best_twins(self, pairs: _Pairs, sequences, results: np.ndarray) -> None:
        """:meth:`best` by ``sw_score_twins`` or ``sw_score_teams``: fills ``results`` (3 x pairs,
        the caller's order)."""
        first, second = twins(pairs.m)
        reads = DeferredReads(self.queue)
        parts = []
        if self.teams:  # the twins the teams do not take are left to sw_score_twins
            rest = self._teams(pairs, sequences, first, second, reads, parts)
            first, second = first[rest], second[rest]
        if len(first):
            kernel, group = self._kernel("sw_score_twins", False, pairs.window_codes)
            self._m = pairs.m[first]
            for start, stop, _ in self._launches(len(first), group, pairs.n[first], 8):
                size = stop - start
                global_size = -(-size // group) * group
                columns = int(pairs.n[first[start:stop]].max()) + 1  # a twin's first has the longer window
                boundary = self._boundary.at_least(columns * global_size * 8)
                self._launch_twins(kernel, (global_size,), (group,), pairs, sequences, first[start:stop], second[start:stop],
                                   reads, parts, boundary)
        reads.wait()  # one synchronisation for every launch
        for part, slots in parts:
            # Straight to the caller's order (one scatter, not two); a pair twinned with itself
            # writes its result twice.
            results[:, pairs.order[slots]] = part

    def _launch_twins(self, kernel, global_size, group, pairs: _Pairs, sequences, first, second, reads, parts, *arguments) -> None:
        """One launch of a twins kernel on the twins (``first``, ``second``), its results read into a new part."""
        slots = np.stack((first, second), axis=1).reshape(-1)
        pair_buffers = self._upload_pairs(pairs, slots)
        output = self._results.at_least(3 * len(slots) * 4)
        self.last_kernel_events.append(kernel(
            self.queue, global_size, group, *sequences, *pair_buffers, np.uint32(len(first)), *arguments, output,
        ))
        parts.append((np.empty((3, len(slots)), dtype=np.int32), slots))
        reads.add(parts[-1][0], output)

    def _teams(self, pairs: _Pairs, sequences, first, second, reads, parts) -> np.ndarray:
        """Launches ``sw_score_teams`` on the twins it takes, one launch for each number of rows
        in the read's last tile; returns the others (empty reads, reads of more tiles than a
        work-group holds), as indexes into ``first`` and ``second``."""
        taken = np.zeros(len(first), dtype=bool)
        for kernel, these, team, group in self._team_launches("sw_score_teams", False, pairs.window_codes, pairs.m[first]):
            groups = -(-len(these) // (group // team))
            self._launch_twins(kernel, (groups * group,), (group,), pairs, sequences, first[these], second[these], reads, parts,
                               np.uint32(team), cl.LocalMemory(8 * (3 * group + 1)))
            taken[these] = True
        return np.flatnonzero(~taken)

    def _team_launches(self, name: str, wide: bool, windows, m: np.ndarray):
        """The teams kernel ``name``'s launches over reads of lengths ``m``, one for each count
        of rows in the read's last tile: yields (kernel, the indexes into ``m`` it takes, team
        size, work-group size). Empty reads and reads of more tiles than a work-group holds are
        left out."""
        tile = self.read_tile
        last_rows = (m - 1) % tile + 1
        for rows in unique(last_rows[m > 0]):  # not np.unique: on NumPy 2.3+ its first call imports numpy.ma (62 ms a process, H200)
            kernel, (multiple, largest) = self._kernel(name, wide, windows, int(rows))
            these = np.flatnonzero((last_rows == rows) & (m > 0) & (m <= largest * tile))
            if len(these) == 0:
                continue
            team = -(-int(m[these].max()) // tile)
            # As many teams as fit the fewest wavefronts that hold one (150-base reads: 10 tiles, 3
            # teams in 32 work-items on NVIDIA). Whole teams in whole wavefronts (16 teams in 160)
            # ran 11% slower on an H200 (bench/smith_waterman.py): every step's barrier waits for 5 warps.
            yield kernel, these, team, min(largest, -(-team // multiple) * multiple)

    def traceback(self, read_codes, read_offsets, read_lengths, window_codes, window_offsets, window_lengths, pair_reads, pair_windows):
        """Best alignment of every pair with its CIGAR:
        (score, read_start, read_end, window_start, window_end, cigar_ops, cigar_offsets,
        cigar_lengths). The first five are int32 per pair and equal :meth:`best`'s score and
        ends; pair k's CIGAR is cigar_ops[cigar_offsets[k] : + cigar_lengths[k]] (uint32, BAM
        encoding), soft clips included in local mode.

        Runs the same sweep as :meth:`best` while writing 4 direction bits a cell to a scratch
        buffer, then walks back on the device: meant for the few pairs chosen per read."""
        pairs = _check(read_codes, read_offsets, read_lengths, window_codes, window_offsets, window_lengths, pair_reads, pair_windows)
        count = len(pairs.order)
        self.last_kernel_events = []
        if count == 0:
            empty = np.zeros(0, dtype=np.int32)
            return empty, empty, empty, empty, empty, np.zeros(0, np.uint32), np.zeros(0, np.uint32), np.zeros(0, np.uint32)
        wide = self.scoring.needs_wide_scores(int(pairs.m[0]), int(pairs.n.max()))
        sequences = self._upload_sequences(pairs)
        results = np.zeros((6, count), dtype=np.int32)
        # Pair i (launch order) writes its operations to row i of one (count x pitch) table that
        # every launch shares, and only the table's first columns come back: CIGAR_COLUMNS of
        # them with the scores (one synchronisation for all launches), the rest, up to the
        # longest CIGAR, only where some CIGAR is longer (a second one).
        pitch = int((pairs.m + pairs.n + 2).max())  # CIGAR operations a pair may need
        if count * pitch >= 2**32:
            raise BowmapError("too many CIGAR operations in one traceback")
        cigar_device = self._cigar.at_least(count * pitch * 4)
        head = np.empty((count, min(CIGAR_COLUMNS, pitch)), dtype=np.uint32)
        reads, parts = DeferredReads(self.queue), []
        launch = (pairs, sequences, wide, pitch, cigar_device, reads, parts)
        rest = self._traceback_teams(*launch) if self.teams else np.arange(count)  # the pairs the teams do not take
        if len(rest):
            self._traceback_tiles(*launch, rest)
        reads.add_columns(head, cigar_device, pitch)
        reads.wait()
        for part, slots in parts:
            results[:, slots] = part
        rest = reads.add_rest(head, cigar_device, pitch, int(results[5].max()))  # CIGARs wider than the head, if any
        reads.wait()
        table = joined_columns(head, rest)
        # Back to the caller's order, the CIGARs compacted: operation k of pair p (launch order)
        # sits at table row p, column k.
        all_cigars = table.reshape(-1)
        row_offsets = np.arange(count, dtype=np.int64) * table.shape[1]
        unordered = np.empty_like(results)
        unordered[:, pairs.order] = results
        caller_row_offsets = np.empty(count, dtype=np.int64)
        caller_row_offsets[pairs.order] = row_offsets
        lengths = unordered[5].astype(np.int64)
        offsets = np.cumsum(lengths) - lengths
        cigar_ops = all_cigars[segment_ranges(caller_row_offsets, lengths)]
        return (
            unordered[0], unordered[1], unordered[2], unordered[3], unordered[4],
            cigar_ops, offsets.astype(np.uint32), lengths.astype(np.uint32),
        )


    def _traceback_tiles(self, pairs: _Pairs, sequences, wide: bool, pitch: int, cigar_device, reads, parts, chosen) -> None:
        """:meth:`traceback` of the pairs ``chosen`` (indexes, launch order) by ``sw_traceback``."""
        kernel, group = self._kernel("sw_traceback", wide, pairs.window_codes)
        element = 8 if wide else 4
        word = self.read_tile // 2  # bytes of one (tile, column) direction word
        count, m, n = len(chosen), pairs.m[chosen], pairs.n[chosen]
        self._m = m
        # Direction words of work-group g: its most tiles x its longest window x group size.
        all_groups = -(-count // group)
        padded_tiles = np.zeros(all_groups * group, dtype=np.int64)
        padded_columns = np.zeros(all_groups * group, dtype=np.int64)
        padded_tiles[:count], padded_columns[:count] = -(-m // self.read_tile), n
        all_group_columns = padded_columns.reshape(all_groups, group).max(axis=1)
        all_group_words = padded_tiles.reshape(all_groups, group).max(axis=1) * all_group_columns * group
        for start, stop, group_slice in self._launches(count, group, n, element, all_group_words * word):
            slots = chosen[start:stop]
            global_size = -(-len(slots) // group) * group
            group_columns = all_group_columns[group_slice]
            group_words = all_group_words[group_slice]
            direction_offsets = (np.cumsum(group_words) - group_words).astype(np.uint64)
            directions = self._directions.at_least(max(1, int(group_words.sum())) * word)
            boundary = self._boundary.at_least((int(group_columns.max()) + 1) * global_size * element)
            pair_buffers = self._upload_pairs(pairs, slots)
            group_buffers = [staging.upload(self.queue, array) for staging, array in zip(
                self._group_inputs, (direction_offsets, group_columns.astype(np.uint32), (slots * pitch).astype(np.uint32)))]
            self._launch_traceback(kernel, global_size, group, slots, reads, parts, *sequences, *pair_buffers, np.uint32(len(slots)),
                                   boundary, cl.LocalMemory(self._profile_bytes(group)), directions, group_buffers[0], group_buffers[1],
                                   cigar_device, group_buffers[2])

    def _traceback_teams(self, pairs: _Pairs, sequences, wide: bool, pitch: int, cigar_device, reads, parts) -> np.ndarray:
        """:meth:`traceback` by ``sw_traceback_teams`` of the pairs it takes; returns the others
        (indexes, launch order)."""
        word = self.read_tile // 2
        taken = np.zeros(len(pairs.m), dtype=bool)
        for kernel, these, team, group in self._team_launches("sw_traceback_teams", wide, pairs.window_codes, pairs.m):
            tiles = -(-pairs.m[these] // self.read_tile)
            words = (pairs.n[these] + tiles - 1) * tiles  # a pair's direction words, laid out by step
            ends = np.cumsum(words) * word
            first = 0
            while first < len(these):  # launches whose direction words fit scratch_bytes
                last = max(first + 1, int(np.searchsorted(ends, self.scratch_bytes + (ends[first - 1] if first else 0), side="right")))
                if last == first + 1 and words[first] * word > self.scratch_bytes:
                    raise BowmapError(f"a traceback of a {int(pairs.m[these[first]])}-base read needs {int(words[first] * word)} "
                                      f"bytes of scratch, more than the {self.scratch_bytes} allowed on {self.device.info.name}")
                slots = these[first:last]
                offsets = np.cumsum(words[first:last]) - words[first:last]
                directions = self._directions.at_least(int(words[first:last].sum()) * word)
                pair_buffers = self._upload_pairs(pairs, slots)
                offset_buffers = [staging.upload(self.queue, array) for staging, array in zip(
                    self._group_inputs, (offsets.astype(np.uint64), (slots * pitch).astype(np.uint32)))]
                groups = -(-len(slots) // (group // team))
                self._launch_traceback(kernel, groups * group, group, slots, reads, parts, *sequences, *pair_buffers,
                                       np.uint32(len(slots)), np.uint32(team), cl.LocalMemory(self._profile_bytes(group)),
                                       cl.LocalMemory(8 * (2 * group + 2)), directions, offset_buffers[0], cigar_device, offset_buffers[1])
                first = last
            taken[these] = True
        return np.flatnonzero(~taken)

    def _launch_traceback(self, kernel, global_size: int, group: int, slots, reads, parts, *arguments) -> None:
        """One launch of a traceback kernel on the pairs ``slots`` (launch order); its six results
        read into a new part."""
        output = self._results.at_least(6 * len(slots) * 4)
        self.last_kernel_events.append(kernel(self.queue, (global_size,), (group,), *arguments, output))
        parts.append((np.empty((6, len(slots)), dtype=np.int32), slots))
        reads.add(parts[-1][0], output)

def cigar_scores(scoring: Scoring, score, read_start, read_end, read_length) -> np.ndarray:
    """The CIGAR's own score (what re-scoring the alignment gives) of alignments the kernels
    report with ``score``: in local mode that score holds the clip bonus for each read end the
    alignment reaches (first base: read_start 0; last: read_end the read length), which this
    takes off. An empty alignment (read_end 0) keeps its score. int64 arrays."""
    score = np.asarray(score, dtype=np.int64)
    read_start, read_end = np.asarray(read_start, dtype=np.int64), np.asarray(read_end, dtype=np.int64)
    aligned = read_end > 0
    bonus = scoring.clip_bonus * (aligned & (read_start == 0)) + scoring.clip_bonus * (aligned & (read_end == np.asarray(read_length, dtype=np.int64)))
    return score - bonus


def cigar_string(ops: np.ndarray) -> str:
    """'5S10M1I4M' from BAM-encoded operations (for messages and tests)."""
    return "".join(f"{int(op) >> 4}{'MIDNSHP=X'[int(op) & 15]}" for op in ops)
