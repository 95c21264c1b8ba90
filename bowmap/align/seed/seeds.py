"""Seeds: how reads are cut into exact seeds (bowtie2's interval, both strands) and which seeds
are located (fewest occurrences first, within a budget), for a whole chunk at once.

Coordinates: ``read_offset`` is where a seed starts in its strand's read (0-based).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SeedOptions:
    """How reads are seeded and filtered (defaults after bowtie2's --local preset)."""

    seed_length: int = 20
    # Located positions per read: whole seeds are taken, those with the fewest occurrences
    # first, while the read's positions are under this budget (bowtie2 extends up to ~15-20
    # seed hits a try; a wider budget finds the true place of reads whose seeds are repetitive:
    # on human chr20, 256 rather than 64 placed 0.1% more reads right and halved the wrong
    # ones at MAPQ >= 20).
    positions_per_read: int = 256
    # Seeds occurring more often than this are skipped, as BWA-MEM's -c 500.
    max_occurrences: int = 500
    # Windows per read kept for Smith-Waterman, most seed hits first.
    windows_per_read: int = 16
    # Bases added on each side of a read's diagonal: room for indels.
    margin: int = 32
    # Seed length of the second round, for reads whose first seeds all failed (0: none).
    reseed_length: int = 16
    # Seed length for reads with a seed too repetitive to locate (0: none); at most 32.
    long_seed_length: int = 32
    # Rescue (see SeedFilter.rescue_windows): seeds every this many bases (0: no rescue) for
    # reads whose best alignment scores this many mismatches or more below a perfect match.
    rescue_interval: int = 4
    rescue_mismatches: int = 5

    def seed_interval(self, read_length: np.ndarray) -> np.ndarray:
        """bowtie2's seed spacing I(x) = floor(1 + 1.15 sqrt(x)) for reads of length x."""
        return np.floor(1 + 1.15 * np.sqrt(read_length)).astype(np.int64)


class Seeds:
    """Seeds of a chunk, both strands: every read's forward seeds, then as many reverse ones in
    the same order and places of the reverse codes. Seed i is ``codes[offset[i] : offset[i] +
    length[i]]``. Made from the forward seeds' reads (``seed_first``: read r's are
    ``seed_first[r] .. seed_first[r + 1] - 1``) and offsets in their reads (``within``); the
    both-strand arrays the host path takes are made when first asked for (the device path sends
    the forward ones only)."""

    def __init__(self, codes: np.ndarray, read_starts: np.ndarray, seed_first: np.ndarray, within: np.ndarray, seed_length: int):
        self.codes = codes  # uint8: the chunk's forward codes, then its reverse-complement codes
        self.read_starts = read_starts  # int64[reads + 1]: where each read starts in codes (reverse ones: + read_starts[-1])
        self.seed_first = seed_first  # int64[reads + 1]
        self.within = within  # int64: the forward seeds' offsets in their reads
        self.seed_length = seed_length

    @functools.cached_property
    def read(self) -> np.ndarray:  # int64
        reads = np.repeat(np.arange(len(self.seed_first) - 1), np.diff(self.seed_first))
        return np.concatenate((reads, reads))

    @functools.cached_property
    def reverse(self) -> np.ndarray:  # bool
        return np.repeat([False, True], len(self.within))

    @functools.cached_property
    def read_offset(self) -> np.ndarray:  # int64: where the seed starts in its (strand's) read
        return np.concatenate((self.within, self.within))

    @functools.cached_property
    def offset(self) -> np.ndarray:  # int64 into codes
        forward = self.read_starts[:-1][self.read[: len(self.within)]] + self.within
        return np.concatenate((forward, forward + self.read_starts[-1]))

    @functools.cached_property
    def length(self) -> np.ndarray:  # int64
        return np.full(2 * len(self.within), self.seed_length, dtype=np.int64)


def pack_codes(codes: np.ndarray) -> np.ndarray:
    """Rows of at most 32 codes (0..3) -> uint64 keys, first code in the highest bits."""
    shifts = (2 * np.arange(codes.shape[1] - 1, -1, -1)).astype(np.uint64)
    return np.bitwise_or.reduce((codes.astype(np.uint64) & np.uint64(3)) << shifts, axis=1)


def kmer_keys(text: np.ndarray, length: int) -> np.ndarray:
    """Keys of every ``length``-base window of ``text`` (codes 0..3)."""
    if len(text) < length:
        return np.zeros(0, dtype=np.uint64)
    return pack_codes(np.lib.stride_tricks.sliding_window_view(text, length))


def _uniform(*columns: np.ndarray) -> bool:
    """Whether each column holds one value throughout."""
    return all(int(column.min()) == int(column.max()) for column in columns)


def extract_seeds(codes, reverse_codes, read_offsets, options: SeedOptions, seed_length=None, first=None, only=None,
                  interval=None, joined=None) -> Seeds:
    """Seeds of ``seed_length`` every ``interval`` (default I(read length)) bases from offset ``first`` (default 0) of
    each read and of its reverse complement, plus one ending at the read's last base where the
    spacing leaves the end uncovered (otherwise up to I - 1 bases at the end are never seeded,
    and a read with a few errors spread over the rest finds no exact seed at all). A read
    shorter than a seed, or not in the boolean mask ``only``, has none. ``joined``: ``codes`` and
    ``reverse_codes`` as one array already (the seeds' codes; made here otherwise)."""
    seed_length = options.seed_length if seed_length is None else seed_length
    lengths = np.diff(read_offsets)
    interval = options.seed_interval(lengths) if interval is None else np.full(len(lengths), interval, dtype=np.int64)
    first = np.zeros(len(lengths), dtype=np.int64) if first is None else np.asarray(first, dtype=np.int64)
    seedable = lengths - first >= seed_length
    if only is not None:
        seedable &= only
    spaced = np.where(seedable, (lengths - first - seed_length) // interval + 1, 0)
    last = first + (spaced - 1) * interval
    tail = seedable & (last < lengths - seed_length)  # the spaced seeds stop short of the end
    per_read = spaced + tail
    seed_first = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(per_read, out=seed_first[1:])
    if len(lengths) and _uniform(lengths, first, interval) and seedable.all():
        # Every read of one length seeded alike (the usual chunk): one read's offsets, tiled.
        # Gathering each seed's read's values took 2% of a host worker.
        rank = np.arange(int(per_read[0]))
        within = np.tile(np.minimum(first[0] + rank * interval[0], lengths[0] - seed_length), len(lengths))
    else:
        reads = np.repeat(np.arange(len(lengths)), per_read)
        rank = np.arange(len(reads)) - np.repeat(seed_first[:-1], per_read)
        within = np.minimum(first[reads] + rank * interval[reads], lengths[reads] - seed_length)
    joined = np.concatenate((codes, reverse_codes)) if joined is None else joined
    return Seeds(joined, np.asarray(read_offsets, dtype=np.int64), seed_first, within, seed_length)


def choose_seeds(occurrences: np.ndarray, seed_read: np.ndarray, count: int, max_occurrences: int, budget: int):
    """The seeds of a round to locate, as bowtie2 takes them: narrowest first (ties: seed
    order), whole seeds while the read's located positions are under ``budget``; seeds more
    repetitive than ``max_occurrences`` are skipped. Returns the chosen seeds (sorted by read,
    then occurrences, then seed) and the mask of the ``count`` reads that had a seed occurring
    but left out. (The reference of fm_search.cl's choose_seeds.)"""
    eligible = np.flatnonzero((occurrences > 0) & (occurrences <= max_occurrences))
    # Sorted by (read, occurrences, seed): one int64 key, stably (about 5x faster than lexsort).
    eligible = eligible[np.argsort(seed_read[eligible] * (max_occurrences + 1) + occurrences[eligible], kind="stable")]
    read = seed_read[eligible]
    before = np.cumsum(occurrences[eligible]) - occurrences[eligible]
    per_read = np.bincount(read, minlength=count)
    read_first = np.cumsum(per_read) - per_read  # each read's first place in `eligible`
    used_before = before - before[read_first[read]]
    chosen = eligible[used_before < budget]
    left_out = occurrences > 0
    left_out[chosen] = False
    crowded = np.zeros(count, dtype=bool)
    crowded[seed_read[left_out]] = True
    return chosen, crowded
