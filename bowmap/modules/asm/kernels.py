"""Owner of ``opencl/modules/asm.cl``: approximate string matching (ASM) on an OpenCL device.

ASM(X, Y) = min over substrings Y' of Y of the edit distance ED(X, Y'), with where a best Y'
ends and starts. Two kernels compute Sellers' DP over overlapping pieces of Y (Man, Nakano and
Ito's decomposition; see the header of ``opencl/modules/asm.cl``): ``"dp"`` runs the anti-diagonal
wavefront with several rows a work-item, ``"bitvector"`` Myers' bit-vector algorithm with 64 rows
a 64-bit word. Both take a batch of patterns against one text in one launch, reduce over pieces
on the device, and can return the distance at every end (for ``--all``).

Coordinates are 0-based half-open: a match is ``text[start:end]``, so ``end`` is also the
1-based inclusive position of its last symbol. Which best match is reported is the rule of
:mod:`bowmap.modules.asm.reference`: the smallest end with the least distance, then the smallest start
(longest match) found by a reverse pass on the host (O(m (m + distance)) cells a pattern).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyopencl as cl

from bowmap.modules.asm.reference import match_start
from bowmap.runtime.devices import DeviceContext, ReusedBuffer, wait_idle

SOURCE = "modules/asm.cl"
METHODS = ("dp", "bitvector")
WORD_BITS = 64
# A strip longer than this many registers a work-item spills; beyond it, widen the work-group.
MOST_ROWS_PER_ITEM = 32
# Pieces at least this many pattern lengths long, so the 2m overlap costs at most ~1/3 extra.
PIECE_PATTERN_LENGTHS = 4
# Work-groups (or 64-row words) resident a compute unit that the default piece count aims at.
DIAGONAL_GROUPS_PER_UNIT = 8
BITVECTOR_ITEMS_PER_UNIT = 2048
# DP cells one launch covers at most: a long job runs as several launches, and between them the
# host waits asleep (wait_idle), so ^C and SIGTERM are handled within about one launch's time.
CELLS_PER_LAUNCH = 1 << 28
# --all returns a distance for every end: patterns go in slices whose table stays this small.
DISTANCE_TABLE_BYTES = 256 << 20


@dataclass
class Encoded:
    """A batch in the kernels' dense codes: pattern symbols 1..symbols-1, other text symbols 0."""

    text: np.ndarray  # uint8[n]
    patterns: list[np.ndarray]  # uint8 codes each
    symbols: int  # codes 0..symbols-1 occur


def encode(patterns: list[bytes], text: bytes) -> Encoded:
    """Dense codes for any byte alphabet: the bytes found in the patterns get 1.. in byte order,
    every other text byte 0. When the patterns hold all 256 byte values the codes are the bytes
    themselves (symbols = 256, no code left for "absent"; only the bit-vector kernel takes that)."""
    arrays = [np.frombuffer(bytes(pattern), dtype=np.uint8) for pattern in patterns]
    present = np.zeros(256, dtype=bool)
    for array in arrays:
        present[array] = True
    if present.all():
        table = np.arange(256, dtype=np.uint8)
        symbols = 256
    else:
        table = np.zeros(256, dtype=np.uint8)
        table[present] = np.arange(1, int(present.sum()) + 1)
        symbols = int(present.sum()) + 1
    text_codes = table[np.frombuffer(bytes(text), dtype=np.uint8)]
    return Encoded(text_codes, [table[array] for array in arrays], symbols)


@dataclass
class Matches:
    """Results for a batch of patterns, arrays indexed by pattern. Positions 0-based half-open."""

    distance: np.ndarray  # int64: ASM(pattern, text)
    start: np.ndarray  # int64: match is text[start:end]; -1 when starts were not asked for
    end: np.ndarray  # int64
    distances: np.ndarray | None  # int32[count][n]: best distance of a match ending at e + 1


def _largest_group(kernel, device: DeviceContext) -> tuple[int, int]:
    """(largest work-group size, preferred multiple) of a built kernel on the device."""
    info = cl.kernel_work_group_info
    largest = kernel.get_work_group_info(info.WORK_GROUP_SIZE, device.device)
    multiple = kernel.get_work_group_info(info.PREFERRED_WORK_GROUP_SIZE_MULTIPLE, device.device)
    return largest, max(1, multiple)


class ApproximateMatcher:
    """Kernels, a command queue and reused buffers for one worker thread on one device."""

    def __init__(self, device: DeviceContext, queue: cl.CommandQueue | None = None):
        self.device = device
        self.queue = queue if queue is not None else device.queue()
        mf = cl.mem_flags
        context = device.context
        self._text = ReusedBuffer(context, mf.READ_ONLY)
        self._patterns = ReusedBuffer(context, mf.READ_ONLY)
        self._lengths = ReusedBuffer(context, mf.READ_ONLY)
        self._distances = ReusedBuffer(context, mf.WRITE_ONLY)
        self._piece_best = ReusedBuffer(context, mf.READ_WRITE)
        self._best = ReusedBuffer(context, mf.WRITE_ONLY)
        self._kernels: dict[tuple, cl.Kernel] = {}
        # The latest DP kernel launch (not the reduction): benchmarks read its device time.
        self.last_kernel_event: cl.Event | None = None
        self.last_kernel_events: list = []  # every launch of the latest call (long jobs run in slices)

    def _kernel(self, name: str, rows_per_item: int = 1) -> cl.Kernel:
        key = (name, rows_per_item)
        if key not in self._kernels:
            program = self.device.program(SOURCE, (f"-DROWS_PER_ITEM={rows_per_item}",))
            self._kernels[key] = cl.Kernel(program, name)
        return self._kernels[key]

    # ------------------------------------------------------------ geometry

    def diagonal_geometry(self, longest: int) -> tuple[int, int]:
        """(work-items a piece G, rows a work-item R) for the anti-diagonal kernel, G * R >= longest.

        G aims at four times the device's preferred multiple (128 on NVIDIA), so short patterns
        get one row a work-item and long ones a strip of R rows in registers; when R would pass
        MOST_ROWS_PER_ITEM, G grows to the kernel's largest work-group instead."""
        largest, multiple = _largest_group(self._kernel("asm_diagonal"), self.device)
        target = max(1, min(largest, multiple * 4))
        rows_per_item = math.ceil(longest / target)
        if rows_per_item > MOST_ROWS_PER_ITEM:
            rows_per_item = math.ceil(longest / largest)
        while True:
            items = math.ceil(longest / rows_per_item)
            largest, _ = _largest_group(self._kernel("asm_diagonal", rows_per_item), self.device)
            if items <= largest:
                return items, rows_per_item
            rows_per_item = math.ceil(longest / largest)

    def bitvector_geometry(self, longest: int) -> tuple[int, int]:
        """(words a pattern, pieces a work-group) for the bit-vector kernel."""
        words = math.ceil(longest / WORD_BITS)
        largest, multiple = _largest_group(self._kernel("asm_bitvector"), self.device)
        if words > largest:
            raise ValueError(
                f"bit-vector patterns are limited to {WORD_BITS * largest} symbols on {self.device.info.name} "
                f"(got {longest}); use the dp method"
            )
        target = max(words, min(largest, multiple * 4))
        return words, max(1, target // words)

    def default_pieces(self, method: str, n: int, longest: int) -> int:
        """Pieces for a text of n symbols: enough work-items to fill the device, but pieces at
        least PIECE_PATTERN_LENGTHS * m long so the overlap stays a small part of the work."""
        units = self.device.info.compute_units
        if method == "dp":
            wanted = units * DIAGONAL_GROUPS_PER_UNIT
        else:
            wanted = units * BITVECTOR_ITEMS_PER_UNIT // math.ceil(longest / WORD_BITS)
        return max(1, min(n, wanted, n // (PIECE_PATTERN_LENGTHS * longest)))

    # ------------------------------------------------------------ launches

    def ends(self, encoded: Encoded, method: str = "dp", pieces: int | None = None,
             all_distances: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """(distance int64[count], end int64[count], distances int32[count][n] or None) of the
        encoded batch: the least distance, the smallest end achieving it, and with
        ``all_distances`` the best distance of a match ending at every e in 1..n (at [e - 1])."""
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, not {method!r}")
        n = len(encoded.text)
        count = len(encoded.patterns)
        lengths = np.array([len(pattern) for pattern in encoded.patterns], dtype=np.uint32)
        if n == 0 or count == 0 or lengths.min() == 0:
            raise ValueError("the text and every pattern must hold at least one symbol")
        if n >= 2**32 - 1 or lengths.max() >= 2**24:
            raise ValueError("texts must be shorter than 2^32 - 1 symbols and patterns than 2^24")
        longest = int(lengths.max())
        # A piece owns at least a pattern's length of ends: more pieces only repeat the 2m
        # overlap's work (--pieces 10^9 on a 48 kb text ran 159 s for a 0.2 s job).
        most_pieces = max(1, n // longest)
        pieces = self.default_pieces(method, n, longest) if pieces is None else max(1, min(int(pieces), most_pieces))
        # The overlap only has to be 2m - 1; 2m keeps the paper's S + 2m pieces.
        overlap = 2 * longest

        text = self._text.upload(self.queue, encoded.text)
        if method == "dp":
            if encoded.symbols > 255:
                raise ValueError("the dp kernel keeps code 0 for padding rows: patterns using all 256 byte values need the bitvector method")
            items, rows_per_item = self.diagonal_geometry(longest)
            rows = items * rows_per_item
            table = np.zeros((count, rows), dtype=np.uint8)
            mask = np.arange(rows)[None, :] >= (rows - lengths)[:, None]
            table[mask] = np.concatenate(encoded.patterns)
            kernel = self._kernel("asm_diagonal", rows_per_item)
            pattern_data = self._patterns.upload(self.queue, table)
        else:
            words, per_group = self.bitvector_geometry(longest)
            pattern_data = self._patterns.upload(self.queue, self._peq(encoded, lengths, words))
            kernel = self._kernel("asm_bitvector")
        lengths_device = self._lengths.upload(self.queue, lengths)

        distances = np.zeros((count, n), dtype=np.int32) if all_distances else None
        distances_device = self._distances.at_least(count * n * 4 if all_distances else 4)
        piece_best = self._piece_best.at_least(count * pieces * 8)
        common = (np.uint32(pieces), np.uint32(overlap), np.uint32(all_distances), distances_device, piece_best)
        cells_a_piece = (math.ceil(n / pieces) + overlap) * longest
        self.last_kernel_events = []
        if method == "dp":
            per_launch = max(1, CELLS_PER_LAUNCH // (cells_a_piece * count))
            for first in range(0, pieces, per_launch):
                wait_idle(self.queue)  # asleep: a signal is handled here
                self.last_kernel_event = kernel(
                    self.queue, (items * min(per_launch, pieces - first), count), (items, 1),
                    text, np.uint32(n), pattern_data, lengths_device, np.uint32(rows), *common,
                    cl.LocalMemory(2 * items * 4), np.uint32(first),
                )
                self.last_kernel_events.append(self.last_kernel_event)
        else:
            size = words * per_group
            groups = math.ceil(pieces / per_group) * count
            per_launch = max(1, CELLS_PER_LAUNCH // (cells_a_piece * per_group))
            for first in range(0, groups, per_launch):
                wait_idle(self.queue)
                self.last_kernel_event = kernel(
                    self.queue, (size * min(per_launch, groups - first),), (size,),
                    text, np.uint32(n), pattern_data, np.uint32(encoded.symbols), lengths_device,
                    np.uint32(words), *common, cl.LocalMemory(2 * size * 4), np.uint32(first),
                )
                self.last_kernel_events.append(self.last_kernel_event)
        best = self._reduce(piece_best, pieces, count)
        if all_distances:
            cl.enqueue_copy(self.queue, distances, distances_device, is_blocking=True)
        return (best >> np.uint64(32)).astype(np.int64), (best & np.uint64(0xFFFFFFFF)).astype(np.int64), distances

    def _peq(self, encoded: Encoded, lengths: np.ndarray, words: int) -> np.ndarray:
        """uint64[count][symbols][words]: bit b of word w set when padded row 64w + b matches."""
        rows = words * WORD_BITS
        count = len(encoded.patterns)
        padded = np.zeros((count, rows), dtype=np.uint8)
        mask = np.arange(rows)[None, :] >= (rows - lengths)[:, None]
        padded[mask] = np.concatenate(encoded.patterns)
        codes = np.arange(encoded.symbols, dtype=np.uint8)
        matches = (padded[:, None, :] == codes[None, :, None]) | ~mask[:, None, :]
        packed = np.packbits(matches.reshape(count, encoded.symbols, words, WORD_BITS), axis=-1, bitorder="little")
        return np.ascontiguousarray(packed).view("<u8").reshape(count, encoded.symbols, words).astype(np.uint64)

    def _reduce(self, piece_best, pieces: int, count: int) -> np.ndarray:
        kernel = self._kernel("asm_reduce")
        largest, _ = _largest_group(kernel, self.device)
        size = 1 << (min(largest, max(1, pieces)).bit_length() - 1)  # a power of two <= both
        best_device = self._best.at_least(count * 8)
        kernel(self.queue, (size * count,), (size,), piece_best, np.uint32(pieces), best_device, cl.LocalMemory(size * 8))
        wait_idle(self.queue)  # asleep, not in a blocking call: a signal is handled while the kernels run
        best = np.empty(count, dtype=np.uint64)
        cl.enqueue_copy(self.queue, best, best_device, is_blocking=True)
        return best


def approximate_match(device: DeviceContext, patterns: list[bytes], text: bytes, method: str = "dp",
                      pieces: int | None = None, starts: bool = True, all_distances: bool = False,
                      matcher: ApproximateMatcher | None = None) -> Matches:
    """ASM of every pattern against ``text`` on ``device``: distance, end and (with ``starts``)
    start of the reported best match of each, 0-based half-open, by the reference's rule.

    ``all_distances`` also returns the best distance of a match ending at each text position
    (patterns x text length in memory: for large inputs, :func:`distance_slices` yields them a
    slice of patterns at a time)."""
    matcher = matcher if matcher is not None else ApproximateMatcher(device)
    encoded = encode(patterns, text)
    count = len(patterns)
    distance = np.zeros(count, dtype=np.int64)
    end = np.zeros(count, dtype=np.int64)
    tables = []
    for first, part_distance, part_end, table in _slices(matcher, encoded, method, pieces, all_distances):
        distance[first : first + len(part_distance)] = part_distance
        end[first : first + len(part_end)] = part_end
        if table is not None:
            tables.append(table)
    start = np.full(count, -1, dtype=np.int64)
    if starts:
        for index in range(count):
            start[index] = match_start(encoded.patterns[index], encoded.text, int(end[index]), int(distance[index]))
    return Matches(distance, start, end, np.concatenate(tables) if all_distances else None)


def distance_slices(device: DeviceContext, patterns: list[bytes], text: bytes, method: str = "dp",
                    pieces: int | None = None, matcher: ApproximateMatcher | None = None):
    """(first pattern, int32[slice][len(text)] best distance of a match ending at each position)
    for consecutive slices of the patterns, each table under DISTANCE_TABLE_BYTES where one
    pattern's row allows: memory stays bounded whatever the number of patterns."""
    matcher = matcher if matcher is not None else ApproximateMatcher(device)
    for first, _, _, table in _slices(matcher, encode(patterns, text), method, pieces, True):
        yield first, table


def _slices(matcher: ApproximateMatcher, encoded: Encoded, method: str, pieces: int | None, all_distances: bool):
    count = len(encoded.patterns)
    slice_size = max(1, DISTANCE_TABLE_BYTES // (4 * max(1, len(encoded.text)))) if all_distances else max(1, count)
    for first in range(0, count, slice_size):
        part = Encoded(encoded.text, encoded.patterns[first : first + slice_size], encoded.symbols)
        part_distance, part_end, table = matcher.ends(part, method, pieces, all_distances)
        yield first, part_distance, part_end, table
