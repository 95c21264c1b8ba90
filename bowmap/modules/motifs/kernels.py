"""All-to-all motif finding with multi-level hash tables: table construction (vectorised NumPy),
the owner of ``opencl/modules/motifs.cl``, and the Python API of ``bowmap motifs``.

Method (after the University of Missouri group's multi-level hash tables):

* Each region's k-mers (windows of k bases holding no ambiguous base) are packed, first base in
  the most significant bits: 3 bits a base in a 64-bit key (``encoding="64"``, k <= 20) or 2 bits
  a base in a 32-bit key (``encoding="32"``, k <= 15). Codes: A 0, C 1, G 2, T 3.
* Distance class δ = 0..d has one sub-table per wildcard configuration, a set of δ positions of
  the k-mer (``itertools.combinations(range(k), δ)`` order; class 0 has the one empty
  configuration). In a sub-table the wildcard positions are written as the fixed base A (code 0).
* A sub-table has ``buckets`` buckets; a key goes to bucket hash(key) mod buckets with the hash
  ``djb2`` (h = 5381, h = 33 h + code over the k base codes, 32-bit), ``universal``
  (((a key + b) mod p) mod buckets, p = 2^61 - 1, a in [1, p) and b in [0, p) drawn from
  ``numpy.random.default_rng(seed)``) or ``xor`` (the key's 32-bit halves XORed, then the result
  XORed with itself shifted right by 16). Buckets hold distinct keys in ascending order with
  their occurrence counts, so two buckets are compared by a linear merge.
* S_δ(i, j) = Σ over configurations of class δ, Σ over keys in both regions' sub-tables of
  min(count_i, count_j); the edge weight is Σ_δ w_δ S_δ (default w_δ = 2^-δ). S_δ for δ >= 1 also
  counts exact matches: a k-mer shared exactly is shared under each of its C(k, δ) maskings.

Kernels (``KERNELS``; work-item mappings in opencl/modules/motifs.cl): ``thread-to-pair`` (a work-item
per pair, row i's sub-table cached in local memory in chunks, j's streamed and merged bucket by
bucket), ``thread-to-pair-hash`` (the same, with i's sub-table as a local open-addressing hash
table that j's keys probe), and ``thread-to-bucket`` / ``warp-to-bucket`` / ``sequential-bucket``
(a work-group per pair; slices of 1, a warp's worth, or all of its work-items per bucket).
Tables are built on the host (:func:`build_tables`); :func:`pipelined_scores` builds them in
batches of configurations while the device compares the batch before.

Pairs are (i, j) with i < j in row-major upper-triangle order; score arrays are uint32[d + 1, P]
with P = n (n - 1) / 2. All positions are 0-based.
"""

from __future__ import annotations

import itertools
import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from bowmap.runtime.errors import BowmapError

SOURCE = "modules/motifs.cl"
ENCODINGS = {"64": (3, np.uint64, 20), "32": (2, np.uint32, 15)}  # bits a base, key dtype, largest k
HASHES = ("djb2", "universal", "xor")
KERNELS = ("thread-to-pair", "thread-to-pair-hash", "sequential-bucket", "warp-to-bucket", "thread-to-bucket")
MERSENNE_61 = (1 << 61) - 1
DJB2_START = 5381
AMBIGUOUS = 4

# Byte -> base code: ACGT (any case) 0..3, everything else ambiguous.
BASE_CODES = np.full(256, AMBIGUOUS, dtype=np.uint8)
for _code, _letters in enumerate((b"Aa", b"Cc", b"Gg", b"Tt")):
    BASE_CODES[list(_letters)] = _code


@dataclass(frozen=True)
class TableOptions:
    """How tables are built: k-mer length, largest distance class, key encoding, hash, buckets."""

    k: int = 12
    distance: int = 1
    encoding: str = "64"
    hash: str = "djb2"
    buckets: int = 8  # per sub-table
    seed: int = 0  # for the universal hash's a and b

    def check(self) -> None:
        """Raises ValueError naming the first impossible setting."""
        if self.encoding not in ENCODINGS:
            raise ValueError(f"encoding must be one of {', '.join(ENCODINGS)}, not {self.encoding!r}")
        largest = ENCODINGS[self.encoding][2]
        if not 1 <= self.k <= largest:
            raise ValueError(f"k must be 1..{largest} with the {self.encoding}-bit encoding, not {self.k}")
        if not 0 <= self.distance <= self.k:
            raise ValueError(f"distance must be 0..k, not {self.distance}")
        if self.hash not in HASHES:
            raise ValueError(f"hash must be one of {', '.join(HASHES)}, not {self.hash!r}")
        if not 1 <= self.buckets <= 1 << 16:
            raise ValueError(f"buckets must be 1..65536, not {self.buckets}")


def configurations(k: int, distance: int) -> list[tuple[int, ...]]:
    """Wildcard configurations of classes 0..distance, class by class, in combinations order."""
    return [combo for delta in range(distance + 1) for combo in itertools.combinations(range(k), delta)]


def level_config_ends(k: int, distance: int) -> list[int]:
    """For each class δ, the number of configurations of classes 0..δ."""
    return list(itertools.accumulate(math.comb(k, delta) for delta in range(distance + 1)))


def default_weights(distance: int) -> list[float]:
    return [0.5**delta for delta in range(distance + 1)]


def pair_count(regions: int) -> int:
    return regions * (regions - 1) // 2


def row_starts(regions: int) -> np.ndarray:
    """Packed index of the first pair of each row i (pairs (i, i+1..n-1)), and P at the end."""
    rows = np.arange(regions + 1, dtype=np.int64)
    return np.minimum(rows, regions) * regions - rows * (rows + 1) // 2


def pair_indexes(regions: int, first: int = 0, last: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(i, j) of the packed pairs first..last-1 (default: all), int64 arrays."""
    last = pair_count(regions) if last is None else last
    pairs = np.arange(first, last, dtype=np.int64)
    starts = row_starts(regions)
    rows = np.searchsorted(starts, pairs, side="right") - 1
    return rows, pairs - starts[rows] + rows + 1


def encode_sequence(sequence: bytes) -> np.ndarray:
    """Base codes (uint8) of a DNA sequence: ACGT in any case 0..3, anything else 4 (ambiguous)."""
    return BASE_CODES[np.frombuffer(sequence, dtype=np.uint8)]


def reverse_complement(codes: np.ndarray) -> np.ndarray:
    reverse = codes[::-1].copy()
    bases = reverse < AMBIGUOUS
    reverse[bases] = 3 - reverse[bases]
    return reverse


# ---------------------------------------------------------------- hashing (vectorised)

def _mulmod_61(a: int, x: np.ndarray) -> np.ndarray:
    """(a * x) mod 2^61-1 for a < 2^61 and uint64 x < 2^61, without 128-bit integers:
    products of 32-bit halves, folded with 2^61 = 1 (mod p)."""
    p = np.uint64(MERSENNE_61)
    low_mask = np.uint64(0xFFFFFFFF)
    a_high, a_low = np.uint64(a >> 32), np.uint64(a & 0xFFFFFFFF)
    x_high, x_low = x >> np.uint64(32), x & low_mask

    def fold(value):
        return (value & p) + (value >> np.uint64(61))

    high = a_high * x_high  # < 2^58: its weight 2^64 = 8 (mod p)
    middle = a_high * x_low + a_low * x_high  # < 2^62: weight 2^32
    low = a_low * x_low  # < 2^64: weight 1
    middle_part = (middle >> np.uint64(29)) + ((middle & np.uint64((1 << 29) - 1)) << np.uint64(32))
    total = fold(high << np.uint64(3)) + fold(middle_part) + fold(low)
    total = fold(total)
    return np.where(total >= p, total - p, total)


def universal_parameters(seed: int) -> tuple[int, int]:
    """(a, b) of the 2-universal hash: a in [1, p), b in [0, p), p = 2^61 - 1."""
    rng = np.random.default_rng(seed)
    return int(rng.integers(1, MERSENNE_61)), int(rng.integers(0, MERSENNE_61))


def bucket_of(keys: np.ndarray, options: TableOptions) -> np.ndarray:
    """Bucket (int64) of each masked key under ``options.hash``."""
    keys = keys.astype(np.uint64)
    bits = ENCODINGS[options.encoding][0]
    if options.hash == "djb2":
        value = np.full(len(keys), DJB2_START, dtype=np.uint64)
        base_mask = np.uint64((1 << bits) - 1)
        for position in range(options.k):
            code = (keys >> np.uint64(bits * (options.k - 1 - position))) & base_mask
            value = (value * np.uint64(33) + code) & np.uint64(0xFFFFFFFF)
    elif options.hash == "universal":
        a, b = universal_parameters(options.seed)
        value = _mulmod_61(a, keys) + np.uint64(b)
        p = np.uint64(MERSENNE_61)
        value = np.where(value >= p, value - p, value)
    else:
        value = (keys ^ (keys >> np.uint64(32))) & np.uint64(0xFFFFFFFF)
        value = value ^ (value >> np.uint64(16))
    return (value % np.uint64(options.buckets)).astype(np.int64)


# ---------------------------------------------------------------- tables

@dataclass
class MotifTables:
    """Flat multi-level tables of n regions (layout in opencl/modules/motifs.cl's header):
    ``keys[E]``, ``counts[E]`` (uint32) and ``offsets[C * n * buckets + 1]`` (uint32),
    configuration-major, then region, bucket, key; configuration c here is configuration
    ``first_configuration + c`` of :func:`configurations`."""

    options: TableOptions
    regions: int
    keys: np.ndarray
    counts: np.ndarray
    offsets: np.ndarray
    first_configuration: int = 0  # the tables hold configurations first.. (a pipelined batch)

    @property
    def levels(self) -> int:
        return self.options.distance + 1

    @property
    def configuration_count(self) -> int:
        """Configurations held here (all of them, or one batch)."""
        return (len(self.offsets) - 1) // max(1, self.regions * self.options.buckets)

    def range_of(self, configuration: int, region: int) -> tuple[int, int]:
        """[start, end) in keys/counts of one region's sub-table."""
        base = (configuration * self.regions + region) * self.options.buckets
        return int(self.offsets[base]), int(self.offsets[base + self.options.buckets])

    def longest_range(self) -> int:
        """Most entries of any one region's sub-table (what the thread-to-pair cache may need)."""
        ends = self.offsets[:: self.options.buckets].astype(np.int64)
        return int(np.diff(ends).max()) if len(ends) > 1 else 0


def window_keys(codes: np.ndarray, starts: np.ndarray, lengths: np.ndarray, options: TableOptions):
    """Packed k-mers of every clean window: (region of each, key as uint64), region order,
    then position order. Regions lie at codes[starts[r] : starts[r] + lengths[r]]."""
    k = options.k
    bits = ENCODINGS[options.encoding][0]
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    window_counts = np.maximum(lengths - k + 1, 0)
    regions = np.repeat(np.arange(len(lengths)), window_counts)
    positions = np.arange(len(regions)) - np.repeat(np.cumsum(window_counts) - window_counts, window_counts)
    positions += starts[regions]
    ambiguous = np.concatenate(([0], np.cumsum(codes >= AMBIGUOUS, dtype=np.int64)))
    clean = ambiguous[positions + k] == ambiguous[positions]
    regions, positions = regions[clean], positions[clean]
    keys = np.zeros(len(positions), dtype=np.uint64)
    for offset in range(k):
        keys = (keys << np.uint64(bits)) | codes[positions + offset].astype(np.uint64)
    return regions, keys


def _sub_tables(regions: np.ndarray, keys: np.ndarray, region_count: int, configuration, options: TableOptions):
    """One configuration's sub-tables of every region: (keys, counts, entries per (region,
    bucket)), sorted by region, bucket, key."""
    bits = ENCODINGS[options.encoding][0]
    mask = 0
    for position in configuration:
        mask |= ((1 << bits) - 1) << (bits * (options.k - 1 - position))
    masked = keys & np.uint64(~mask & 0xFFFFFFFFFFFFFFFF)
    buckets = bucket_of(masked, options)
    region_bits = max(1, (region_count - 1).bit_length())
    bucket_bits = max(1, (options.buckets - 1).bit_length())
    key_bits = bits * options.k
    distinct = None
    if region_bits + bucket_bits + key_bits > 64:
        # Too wide for one 64-bit sort key: sort by the key's rank among the distinct keys.
        distinct, masked = np.unique(masked, return_inverse=True)
        masked = masked.astype(np.uint64)
        key_bits = max(1, (len(distinct) - 1).bit_length())
    if region_bits + bucket_bits + key_bits <= 64:
        composite = (
            (regions.astype(np.uint64) << np.uint64(bucket_bits + key_bits))
            | (buckets.astype(np.uint64) << np.uint64(key_bits))
            | masked
        )
        composite, counts = np.unique(composite, return_counts=True)
        table_keys = composite & np.uint64((1 << key_bits) - 1)
        segments = (composite >> np.uint64(key_bits)).astype(np.int64)
        segments = (segments >> bucket_bits) * options.buckets + (segments & ((1 << bucket_bits) - 1))
    else:  # pragma: no cover - needs > 2^40 regions x buckets
        order = np.lexsort((masked, buckets, regions))
        sorted_keys, segments = masked[order], regions[order] * options.buckets + buckets[order]
        new = np.concatenate(([True], (sorted_keys[1:] != sorted_keys[:-1]) | (segments[1:] != segments[:-1])))
        firsts = np.flatnonzero(new)
        counts = np.diff(np.append(firsts, len(order)))
        table_keys, segments = sorted_keys[firsts], segments[firsts]
    if distinct is not None:
        table_keys = distinct[table_keys.astype(np.int64)]
    segment_sizes = np.bincount(segments, minlength=region_count * options.buckets)
    return table_keys.astype(ENCODINGS[options.encoding][1]), counts.astype(np.uint32), segment_sizes


def build_tables(codes, starts, lengths, options: TableOptions, threads: int | None = None,
                 configuration_range: tuple[int, int] | None = None, windows=None) -> MotifTables:
    """Multi-level tables of the regions codes[starts[r] : starts[r] + lengths[r]] (base codes,
    4 or more ambiguous), for the configurations [first, last) of ``configuration_range``
    (default: all, in :func:`configurations` order). The work is split into (configuration,
    block of regions) pieces run in ``threads`` threads (default: the CPU count; NumPy's sorts
    release the GIL). ``windows``: :func:`window_keys` of these regions, when already made."""
    options.check()
    codes = np.ascontiguousarray(codes, dtype=np.uint8)
    region_count = len(lengths)
    regions, keys = windows if windows is not None else window_keys(codes, starts, lengths, options)
    every = configurations(options.k, options.distance)
    first, last = configuration_range if configuration_range is not None else (0, len(every))
    configs = every[first:last]
    workers = max(1, threads or os.cpu_count() or 1)
    # Enough pieces to keep every thread busy, yet large enough that NumPy's per-call costs vanish.
    blocks = int(np.clip(-(-4 * workers // max(1, len(configs))), 1, max(1, region_count // 64)))
    edges = np.linspace(0, region_count, blocks + 1).astype(np.int64)
    window_edges = np.searchsorted(regions, edges)

    def piece(task):
        config, block = task
        low, high = window_edges[block], window_edges[block + 1]
        return _sub_tables(regions[low:high] - edges[block], keys[low:high], int(edges[block + 1] - edges[block]), config, options)

    tasks = [(config, block) for config in configs for block in range(blocks)]
    with ThreadPoolExecutor(min(workers, max(1, len(tasks)))) as pool:
        parts = list(pool.map(piece, tasks))
    dtype = ENCODINGS[options.encoding][1]
    sizes = np.concatenate([part[2] for part in parts]) if parts else np.zeros(0, dtype=np.int64)
    total = int(sizes.sum())
    if total >= 1 << 32:
        raise BowmapError(f"the tables hold {total} entries; at most 2^32 - 1 fit (use fewer regions or a smaller d)")
    offsets = np.zeros(len(sizes) + 1, dtype=np.uint32)
    np.cumsum(sizes, out=offsets[1:])
    table_keys = np.concatenate([part[0] for part in parts]) if parts else np.zeros(0, dtype)
    counts = np.concatenate([part[1] for part in parts]) if parts else np.zeros(0, np.uint32)
    return MotifTables(options, region_count, table_keys, counts, offsets, first)


def concatenate_regions(regions: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(codes, starts, lengths) of a list of code arrays laid end to end."""
    lengths = np.array([len(region) for region in regions], dtype=np.int64)
    starts = np.cumsum(lengths) - lengths
    codes = np.concatenate(regions).astype(np.uint8) if regions else np.zeros(0, dtype=np.uint8)
    return codes, starts, lengths


# ---------------------------------------------------------------- device owner

class MotifComparer:
    """The comparison kernels, a command queue and the uploaded tables, for one device.

    Not thread-safe (one per thread). ``last_kernel_events`` holds the latest call's launches:
    with a profiling queue, benchmarks read their device time.
    """

    def __init__(self, device, tables: MotifTables, queue=None):
        import pyopencl as cl

        self._cl = cl
        self.device = device
        self.tables = tables
        self.queue = queue if queue is not None else device.queue()
        options = tables.options
        if tables.regions >= 1 << 31:
            raise BowmapError("too many regions (at most 2^31 - 1)")
        self._build_options = (
            f"-DKEY_BITS={32 if options.encoding == '32' else 64}",
            f"-DLEVELS={tables.levels}",
            "-DLEVEL_CONFIG_ENDS=" + ",".join(str(end) for end in level_config_ends(options.k, options.distance)),
        )
        flags = cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR
        context = device.context

        def upload(array):
            # A zero-size buffer is not allowed: pad empty tables with one unused element.
            array = array if array.size else np.zeros(1, dtype=array.dtype)
            if array.nbytes > device.info.max_allocation:
                raise BowmapError(f"a {array.nbytes}-byte table exceeds {device.info.name}'s largest buffer")
            return cl.Buffer(context, flags, hostbuf=np.ascontiguousarray(array))

        # Padded with whole vectors' worth of keys: thread_to_pair reads 16 aligned bytes at a time.
        self._keys = upload(np.concatenate([tables.keys, np.zeros(4, dtype=tables.keys.dtype)]))
        self._counts = upload(tables.counts)
        self._offsets = upload(tables.offsets)
        self.last_kernel_events: list = []

    def _kernel(self, name: str, extra: tuple[str, ...] = ()):
        program = self.device.program(SOURCE, self._build_options + extra)
        return self._cl.Kernel(program, name)

    # Tests and benchmarks: a work-group size to force on every kernel (within the kernel's
    # largest), in place of the one taken from the device's preferred multiple.
    work_group_size: int | None = None

    def _group_size(self, kernel, scale: int) -> tuple[int, int]:
        """(work-group size, preferred multiple): scale x the preferred multiple, within limits
        (``work_group_size`` when set); the multiple never exceeds the size."""
        info = self._cl.kernel_work_group_info
        multiple = kernel.get_work_group_info(info.PREFERRED_WORK_GROUP_SIZE_MULTIPLE, self.device.device)
        largest = kernel.get_work_group_info(info.WORK_GROUP_SIZE, self.device.device)
        width = max(1, min(largest, self.work_group_size or multiple * scale))
        return width, max(1, min(width, multiple))

    def _pair_range(self, rows):
        """(first row, last row, first packed pair, pair count) of the rows [first, last)."""
        n = self.tables.regions
        first_row, last_row = rows if rows is not None else (0, n)
        first_row, last_row = max(0, first_row), min(n, last_row)
        if first_row >= last_row:
            return first_row, first_row, 0, 0
        starts = row_starts(n)
        return first_row, last_row, int(starts[first_row]), int(starts[last_row] - starts[first_row])

    def new_scores(self, rows: tuple[int, int] | None = None):
        """A zeroed device score buffer for the pairs of ``rows`` (see :meth:`compare`)."""
        cl = self._cl
        _, _, _, count = self._pair_range(rows)
        size = max(4, self.tables.levels * count * 4)
        if size > self.device.info.max_allocation:
            raise BowmapError(
                f"{count} pairs need a {size}-byte score buffer, over {self.device.info.name}'s largest buffer: "
                "compare fewer regions"
            )
        scores_device = cl.Buffer(self.device.context, cl.mem_flags.READ_WRITE, size=size)
        cl.enqueue_fill_buffer(self.queue, scores_device, np.uint32(0), 0, size)
        return scores_device

    def enqueue(self, scores_device, kernel: str = "thread-to-pair", rows: tuple[int, int] | None = None,
                cache_bytes: int | None = None, vector_loads: bool = False) -> None:
        """Add these tables' part of the scores of the pairs of ``rows`` into ``scores_device``
        (from :meth:`new_scores`, possibly of another comparer of the same regions: pipelined
        batches of configurations add up). Returns at once; the launches are in
        ``last_kernel_events``."""
        first_row, last_row, pair_base, count = self._pair_range(rows)
        self.last_kernel_events = []
        if count == 0 or self.tables.configuration_count == 0:
            return
        first_config = self.tables.first_configuration
        config_range = (np.uint32(first_config), np.uint32(first_config + self.tables.configuration_count))
        common = (self._keys, self._counts, self._offsets, np.uint32(self.tables.regions), np.uint32(self.tables.options.buckets))
        if kernel in ("thread-to-pair", "thread-to-pair-hash"):
            self._thread_to_pair(
                kernel, common, first_row, last_row, scores_device, pair_base, count, cache_bytes, vector_loads, config_range
            )
        elif kernel in KERNELS:
            self._bucket_slices(kernel, common, scores_device, pair_base, count, config_range)
        else:
            raise ValueError(f"kernel must be one of {', '.join(KERNELS)}, not {kernel!r}")

    def download(self, scores_device, rows: tuple[int, int] | None = None) -> np.ndarray:
        """The scores of ``scores_device``: uint32[levels, pairs of rows] (waits for the queue)."""
        _, _, _, count = self._pair_range(rows)
        scores = np.zeros((self.tables.levels, count), dtype=np.uint32)
        if count:
            self._cl.enqueue_copy(self.queue, scores, scores_device, is_blocking=True)
        return scores

    def compare(self, kernel: str = "thread-to-pair", rows: tuple[int, int] | None = None,
                cache_bytes: int | None = None, vector_loads: bool = False) -> np.ndarray:
        """Scores uint32[levels, pairs] of the pairs (i, j), i < j, with i in ``rows`` = [first,
        last) (default: all), in packed order, from these tables' configurations. Thread-to-pair
        (-hash) only: ``cache_bytes`` sizes the local cache or hash table (default half the
        device's local memory); ``vector_loads`` False makes thread-to-pair read one key at a time."""
        scores_device = self.new_scores(rows)
        self.enqueue(scores_device, kernel, rows, cache_bytes, vector_loads)
        return self.download(scores_device, rows)

    def fastest_kernel(self, sample_pairs: int = 20_000) -> str:
        """The kernel that compares a slice of rows (2% of the pairs, at least ``sample_pairs``)
        fastest on this device, wall time after a warm-up; thread-to-pair when there are under
        100 samples' worth of pairs (the trial would cost more than it could save).

        The slice is taken from the middle of the triangle: the first rows are the longest and
        few, which favours the per-bucket kernels there and misleads (seen on an H200)."""
        import time

        regions = self.tables.regions
        pairs = pair_count(regions)
        if pairs < 100 * sample_pairs:
            return "thread-to-pair"
        starts = row_starts(regions)
        first = int(np.searchsorted(starts, pairs // 2))
        last = int(np.clip(np.searchsorted(starts, starts[first] + max(sample_pairs, pairs // 50)), first + 1, regions))
        rows = (first, last)
        seconds = {}
        for kernel in KERNELS:
            self.compare(kernel, rows=(0, 1))  # builds the program, compiles the launch shape
            started = time.perf_counter()
            self.compare(kernel, rows=rows)
            seconds[kernel] = time.perf_counter() - started
        return min(KERNELS, key=seconds.__getitem__)

    def _upload_temporary(self, array: np.ndarray):
        cl = self._cl
        return cl.Buffer(self.device.context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR, hostbuf=array)

    def _thread_to_pair(self, name, common, first_row, last_row, scores_device, pair_base, count, cache_bytes,
                        vector_loads, config_range):
        cl = self._cl
        hashed = name == "thread-to-pair-hash"
        if hashed:
            kernel = self._kernel("thread_to_pair_hash")
        else:
            kernel = self._kernel("thread_to_pair", (f"-DVECTOR_LOADS={int(vector_loads)}",))
        width, _ = self._group_size(kernel, 8)
        n = self.tables.regions
        # Column blocks of `width` columns, block-major: work-groups running at the same time
        # read the same few column tables, which then stay in the device's cache.
        blocks = np.arange(-(-n // width), dtype=np.int64)
        block_rows = np.clip(np.minimum((blocks + 1) * width - 1, last_row) - first_row, 0, None)
        group_blocks = np.repeat(blocks, block_rows)
        group_rows = first_row + np.arange(len(group_blocks)) - np.repeat(np.cumsum(block_rows) - block_rows, block_rows)
        group_columns = np.maximum(group_rows + 1, group_blocks * width)
        key_bytes = self.tables.keys.dtype.itemsize
        budget = cache_bytes if cache_bytes is not None else self.device.info.local_memory // 2
        longest = max(1, self.tables.longest_range())
        if hashed:
            # Slots of key + count; twice the longest sub-table (filled at most half), within budget.
            fitting = max(2, budget // (key_bytes + 4))
            table_bits = max(1, min((2 * longest - 1).bit_length(), fitting.bit_length() - 1))
            local = (cl.LocalMemory(key_bytes << table_bits), cl.LocalMemory(4 << table_bits), np.uint32(table_bits))
        else:
            capacity = max(1, min(longest, budget // key_bytes))
            local = (cl.LocalMemory(capacity * key_bytes), np.uint32(capacity))
        local += (cl.LocalMemory(4 * width),)  # each work-item's sum (see motifs.cl)
        rows_device = self._upload_temporary(group_rows.astype(np.uint32))
        columns_device = self._upload_temporary(group_columns.astype(np.uint32))
        launch = 1 << 16  # work-groups a launch: no single launch runs for long
        for offset in range(0, len(group_rows), launch):
            groups = min(launch, len(group_rows) - offset)
            self.last_kernel_events.append(kernel(
                self.queue, (groups * width,), (width,), *common, rows_device, columns_device,
                np.uint32(offset), *local, scores_device, np.uint64(pair_base), np.uint64(count),
                *config_range,
            ))

    def _bucket_slices(self, name, common, scores_device, pair_base, count, config_range):
        probe = self._kernel("bucket_slices", ("-DSLICE=1",))
        width, multiple = self._group_size(probe, 2)
        slice_size = {"thread-to-bucket": 1, "warp-to-bucket": multiple, "sequential-bucket": width}[name]
        kernel = self._kernel("bucket_slices", (f"-DSLICE={slice_size}",))
        launch = 1 << 20  # pairs (work-groups) a launch
        for offset in range(pair_base, pair_base + count, launch):
            last = min(offset + launch, pair_base + count)
            rows, columns = pair_indexes(self.tables.regions, offset, last)
            rows_device = self._upload_temporary(rows.astype(np.uint32))
            columns_device = self._upload_temporary(columns.astype(np.uint32))
            self.last_kernel_events.append(kernel(
                self.queue, ((last - offset) * width,), (width,), *common, rows_device, columns_device,
                np.uint32(0), scores_device, np.uint64(pair_base), np.uint64(count), *config_range,
            ))


# ---------------------------------------------------------------- API

def edge_weights(scores: np.ndarray, weights) -> np.ndarray:
    """Σ_δ weights[δ] S_δ for each pair: float64[pairs]."""
    weights = np.asarray(weights, dtype=np.float64)
    if len(weights) != scores.shape[0]:
        raise ValueError(f"{len(weights)} weights for {scores.shape[0]} distance classes")
    return weights @ scores.astype(np.float64)


def pipelined_scores(codes, starts, lengths, options: TableOptions, device, kernel: str = "auto",
                     batches: int | None = None, threads: int | None = None, timings: dict | None = None) -> np.ndarray:
    """All-pair scores uint32[d + 1, n (n - 1) / 2] of the regions codes[starts[r] : +lengths[r]],
    building the tables in ``batches`` batches of configurations (default: about one per
    distance class, at most 8) while the device compares the batch before: each batch's
    kernels are enqueued, then the host builds the next one. ``kernel`` "auto" takes
    :meth:`MotifComparer.fastest_kernel` on the first batch. ``timings``, when given, receives
    "build" (host seconds spent building), "total" (seconds until the scores are back) and
    "kernel" (the kernel used)."""
    # Scores are uint32 on the device: S_delta(i, j) <= C(k, delta) x (windows of the shorter region).
    windows = max(int(np.max(lengths, initial=0)) - options.k + 1, 0)
    if max(math.comb(options.k, delta) for delta in range(options.distance + 1)) * windows >= 1 << 32:
        raise BowmapError(
            f"regions of {int(np.max(lengths))} bases with k={options.k}, d={options.distance} could overflow "
            "the 32-bit scores: use shorter regions or a smaller d"
        )
    import time

    started = time.perf_counter()
    options.check()
    config_count = level_config_ends(options.k, options.distance)[-1]
    batches = batches or min(8, options.distance + 1)
    edges = np.unique(np.linspace(0, config_count, max(1, min(batches, config_count)) + 1).astype(np.int64))
    windows = window_keys(np.ascontiguousarray(codes, dtype=np.uint8), starts, lengths, options)
    queue = device.queue()
    build_seconds = 0.0
    scores_device = first = None
    for first_config, last_config in zip(edges[:-1], edges[1:]):
        built = time.perf_counter()
        tables = build_tables(codes, starts, lengths, options, threads, (int(first_config), int(last_config)), windows)
        build_seconds += time.perf_counter() - built
        comparer = MotifComparer(device, tables, queue)
        if first is None:
            first = comparer
            kernel = comparer.fastest_kernel() if kernel == "auto" else kernel
            scores_device = comparer.new_scores()
        # Not waited for: the host goes on to build the next batch while the device compares
        # this one (OpenCL keeps each batch's buffers alive until its kernels are done).
        comparer.enqueue(scores_device, kernel)
    scores = first.download(scores_device)
    if timings is not None:
        timings.update(build=build_seconds, total=time.perf_counter() - started, kernel=kernel)
    return scores


def dense_matrix(scores_or_weights: np.ndarray, regions: int) -> np.ndarray:
    """A packed per-pair array (float64 or integer) as a symmetric n x n matrix, diagonal 0."""
    matrix = np.zeros((regions, regions), dtype=scores_or_weights.dtype)
    rows, columns = np.triu_indices(regions, 1)
    matrix[rows, columns] = scores_or_weights
    matrix[columns, rows] = scores_or_weights
    return matrix
