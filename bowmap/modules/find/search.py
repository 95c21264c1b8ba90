"""`bowmap find`'s driver: patterns read and encoded for the index's alphabet, searched block by
block on one or more devices, occurrences located, filtered and counted, lines formatted.

Coordinates: text positions are 0-based offsets in the concatenated contigs; the output's
CONTIG:OFFSET is 1-based. Each occurrence is reported once: block k keeps only those starting
in [start_k, start_{k+1}) (the part no later block covers), which a pattern no longer than the
blocks' overlap always fits inside block k. An occurrence that spans two contigs or (DNA) touches
an ambiguous run is dropped.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from bowmap.index.alphabet import encode_table
from bowmap.index.format import ENCODE
from bowmap.index.load import FMIndex
from bowmap.modules.find.kernels import FindBlock, FindSearch, block_device_bytes
from bowmap.modules.find.sampled import SampledRank
from bowmap.runtime.errors import BowmapError
from bowmap.runtime.fasta import decompressed_bytes, iter_fasta

log = logging.getLogger("bowmap.modules.find")

SEARCH_BATCH = 1 << 16  # patterns a find_search launch
LOCATE_ROWS = 1 << 22  # rows a find_locate launch (16 MiB of positions)
PART_PATTERNS = 1 << 18  # patterns a device takes through every block before the next part
RESIDENT_SHARE = 0.5  # of device memory the blocks may keep resident; else one block at a time


@dataclass
class Patterns:
    """Patterns concatenated: pattern i is ``codes[offsets[i]:][:lengths[i]]`` (the index's
    symbol codes), named ``ids[i]``, from line ``lines[i]`` of its file."""

    ids: list[str]
    lines: np.ndarray  # int64
    codes: np.ndarray  # uint8
    offsets: np.ndarray  # int64
    lengths: np.ndarray  # int64

    def __len__(self) -> int:
        return len(self.ids)


def symbol_table(index: FMIndex) -> np.ndarray:
    """uint8[256]: a pattern byte's code (DNA: A, C, G, T in any case -> 0..3; anything else,
    N included, matches nothing)."""
    if index.alphabet == "dna":
        return ENCODE.copy()  # 4 (ambiguous) and 255 are no symbol of find_search's
    return encode_table(index.symbols, index.alphabet)


def read_patterns(path: str, index: FMIndex) -> Patterns:
    """FASTA (a file whose first byte is '>'; gzipped or not) or one pattern a line, its id its
    1-based line number (a trailing CR is dropped). An empty pattern, or one longer than the
    index's block overlap, is an error naming the file and line."""
    data = decompressed_bytes(path)
    if data[:1] == b">":
        records = list(iter_fasta(path, unique_names=False))
        ids = [record.name for record in records]
        lines = [record.line for record in records]
        sequences = [record.sequence for record in records]
    else:
        if not data:
            raise BowmapError(f"{path}: empty file, expected patterns (FASTA or one a line)")
        sequences = data.split(b"\n")
        if data.endswith(b"\n"):
            sequences.pop()
        sequences = [line[:-1] if line.endswith(b"\r") else line for line in sequences]
        lines = list(range(1, len(sequences) + 1))
        ids = [str(line) for line in lines]
        empty = [line for line, sequence in zip(lines, sequences) if not sequence]
        if empty:
            raise BowmapError(f"{path}:{empty[0]}: empty pattern")
    lengths = np.fromiter((len(sequence) for sequence in sequences), dtype=np.int64, count=len(sequences))
    longest = int(index.manifest["parameters"]["overlap"])
    if len(lengths) and lengths.max() > longest:
        bad = int(np.argmax(lengths > longest))
        raise BowmapError(
            f"{path}:{lines[bad]}: pattern {ids[bad]!r} has {int(lengths[bad])} symbols, more than this index allows "
            f"({longest}: its --max-read-length + 256)"
        )
    codes = symbol_table(index)[np.frombuffer(b"".join(sequences), dtype=np.uint8)]
    offsets = np.cumsum(lengths) - lengths
    return Patterns(ids, np.array(lines, dtype=np.int64), codes, offsets, lengths)


@dataclass
class FindResult:
    """Per pattern its occurrence count; ``positions[first[i]:first[i + 1]]`` its text positions
    in order when it has at most max_hits, else none."""

    counts: np.ndarray  # int64[patterns]
    first: np.ndarray  # int64[patterns + 1]
    positions: np.ndarray  # int64


def _owned_ends(index: FMIndex) -> np.ndarray:
    starts = [block.start for block in index.blocks]
    return np.array(starts[1:] + [index.total_length], dtype=np.int64)


class _DeviceWorker:
    """One device's kernels and its copies of the blocks (kept when they fit ``resident_bytes``)."""

    def __init__(self, device, index: FMIndex, resident_bytes: int, sampled: list[SampledRank] | None = None):
        self.device = device
        self.index = index
        self.sampled = sampled
        step = None if sampled is None else sampled[0].step
        self.search = FindSearch(device, wavelet=index.alphabet != "dna", sampled_step=step)
        total = sum(block_device_bytes(block, None if sampled is None else sampled[number])
                    for number, block in enumerate(index.blocks))
        self.resident = total <= resident_bytes
        self.blocks: dict[int, FindBlock] = {}

    def block(self, number: int) -> FindBlock:
        found = self.blocks.get(number)
        if found is None:
            found = FindBlock(self.device, self.index.blocks[number], None if self.sampled is None else self.sampled[number])
            if self.resident:
                self.blocks[number] = found
        return found

    def run(self, patterns: Patterns, first: int, last: int, max_hits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Patterns first..last-1: (counts, owner pattern, text position) of kept hits."""
        index = self.index
        count = last - first
        counts = np.zeros(count, dtype=np.int64)
        owners, places = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
        owned_ends = _owned_ends(index)
        # With one block, one contig and no ambiguous run nothing is filtered: a pattern with
        # more than max_hits rows needs its count only, not its positions.
        filtered = len(index.blocks) > 1 or len(index.contig_names) > 1 or len(index.ambiguous_starts) > 0
        lengths = patterns.lengths[first:last]
        for number, block in enumerate(index.blocks):
            device_block = self.block(number)
            for low in range(0, count, SEARCH_BATCH):
                high = min(low + SEARCH_BATCH, count)
                # Only this batch's codes travel: offsets taken from its first pattern's.
                offsets = patterns.offsets[first + low : first + high]
                codes = patterns.codes[offsets[0] : offsets[-1] + lengths[high - 1]]
                lo, hi = self.search.search(device_block, codes, offsets - offsets[0], lengths[low:high])
                sizes = hi.astype(np.int64) - lo
                if not filtered:
                    counts[low:high] += sizes
                    sizes = np.where(sizes <= max_hits, sizes, 0)
                found_owners, found_places = self._locate(device_block, lo.astype(np.int64), sizes)
                found_owners += low
                found_places += block.start
                keep = (found_places < owned_ends[number]) & index.span_is_clean(found_places, lengths[found_owners])
                owners.append(found_owners[keep])
                places.append(found_places[keep])
                if filtered:
                    counts += np.bincount(found_owners[keep], minlength=count)
            if not self.resident:
                device_block.release()
            # Patterns already past max_hits keep only their count (bounded memory for "e" in prose).
            owners, places = [np.concatenate(owners)], [np.concatenate(places)]
            small = counts[owners[0]] <= max_hits
            owners, places = [owners[0][small]], [places[0][small]]
        return counts, owners[0], places[0]

    def _locate(self, block: FindBlock, lo: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(pattern within the batch, block offset) of every row of every interval, in launches
        of at most LOCATE_ROWS rows (a larger interval is cut into pieces)."""
        pieces = -(-sizes // LOCATE_ROWS)
        owner = np.repeat(np.arange(len(sizes)), pieces)
        piece_in = np.arange(len(owner)) - np.repeat(np.cumsum(pieces) - pieces, pieces)
        piece_lo = lo[owner] + piece_in * LOCATE_ROWS
        piece_size = np.minimum(sizes[owner] - piece_in * LOCATE_ROWS, LOCATE_ROWS)
        owners, places = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
        ends = np.cumsum(piece_size)
        start = 0
        while start < len(owner):
            # As many pieces as fit LOCATE_ROWS rows (at least one).
            stop = max(start + 1, int(np.searchsorted(ends, (ends[start - 1] if start else 0) + LOCATE_ROWS, side="right")))
            positions = self.search.locate(block, piece_lo[start:stop], piece_size[start:stop])
            owners.append(np.repeat(owner[start:stop], piece_size[start:stop]))
            places.append(positions.astype(np.int64))
            start = stop
        return np.concatenate(owners), np.concatenate(places)


def find(index: FMIndex, devices: list, patterns: Patterns, max_hits: int, device_memory: int | None = None,
         sampled: list[SampledRank] | None = None) -> FindResult:
    """Every exact occurrence of every pattern (forward strand), on ``devices`` (contexts).
    ``device_memory``: bytes of each device to plan for (default: its global memory); blocks
    stay resident when they fit half of it, else each is uploaded for its turn. ``sampled``: a
    protein or text index's sampled counts a block (one step), ranked through in place of its
    wavelet matrix (bench/find.py measures the two; the CLI always takes the wavelet matrix)."""
    started = time.perf_counter()
    if sampled is not None and (index.alphabet == "dna" or len(sampled) != len(index.blocks)
                                or len({item.step for item in sampled}) != 1):
        raise ValueError("sampled counts: one a block of a protein or text index, all of one step")
    workers = [
        _DeviceWorker(device, index, int(RESIDENT_SHARE * (device_memory or device.info.global_memory)), sampled)
        for device in devices
    ]
    parts = [(first, min(first + PART_PATTERNS, len(patterns))) for first in range(0, len(patterns), PART_PATTERNS)]

    def run_device(number: int) -> list:
        worker = workers[number]
        return [(first, worker.run(patterns, first, last, max_hits)) for first, last in parts[number :: len(workers)]]

    with ThreadPoolExecutor(max_workers=len(workers)) as pool:
        results = [item for done in pool.map(run_device, range(len(workers))) for item in done]
    counts = np.zeros(len(patterns), dtype=np.int64)
    owners, places = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
    for first, (part_counts, part_owners, part_places) in results:
        counts[first : first + len(part_counts)] = part_counts
        owners.append(part_owners + first)
        places.append(part_places)
    owners, places = np.concatenate(owners), np.concatenate(places)
    keep = counts[owners] <= max_hits
    owners, places = owners[keep], places[keep]
    order = np.lexsort((places, owners))
    first = np.zeros(len(patterns) + 1, dtype=np.int64)
    np.cumsum(np.bincount(owners, minlength=len(patterns)), out=first[1:])
    log.info(
        "find: %d pattern(s), %d occurrence(s), %d block(s) on %d device(s)%s [%.2f s]",
        len(patterns), int(counts.sum()), len(index.blocks), len(devices),
        "" if workers[0].resident else ", blocks uploaded in turn", time.perf_counter() - started,
    )
    return FindResult(counts, first, places[order])


def format_lines(index: FMIndex, ids: list[str], result: FindResult, max_hits: int) -> str:
    """``ID COUNT POSITIONS`` lines, POSITIONS ``CONTIG:OFFSET`` (1-based) comma-separated, or
    ``*`` for none or more than max_hits; built by NumPy for the whole set, joined once."""
    patterns = len(ids)
    contigs, offsets = index.to_contig(result.positions)
    names = np.array(index.contig_names, dtype=object)
    hits = names[contigs] + ":" + (offsets + 1).astype(str).astype(object)
    listed = (result.counts > 0) & (result.counts <= max_hits)
    # One token a hit ("name:offset" and "," or a line end), one head a pattern ("id\tcount\t"
    # and "*\n" where nothing is listed), laid out by a stable sort on the pattern.
    hit_owner = np.repeat(np.arange(patterns), np.diff(result.first))
    last = np.zeros(len(hits), dtype=bool)
    last[result.first[1:][np.diff(result.first) > 0] - 1] = True
    hits = hits + np.where(last, "\n", ",").astype(object)
    heads = np.array(ids, dtype=object) + "\t" + result.counts.astype(str).astype(object) + "\t"
    heads = heads + np.where(listed, "", "*\n").astype(object)
    owners = np.concatenate((np.arange(patterns), hit_owner))
    order = np.argsort(owners, kind="stable")
    return "".join(np.concatenate((heads, hits))[order].tolist())
