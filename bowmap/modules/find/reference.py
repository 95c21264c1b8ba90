"""Plain references of `bowmap find`: the NumPy twin of find.cl (backward search and locate over
one block's arrays, vectorised over patterns and rows), and the ground truth, Python's substring
search stepping one position at a time over each contig's text."""

from __future__ import annotations

import numpy as np

from bowmap.index.alphabet import BITS_PER_LINE
from bowmap.index.format import BASES_PER_LINE, ROWS_PER_GROUP, UNPACK_2BIT
from bowmap.index.load import IndexBlock
from bowmap.modules.find import sampled as sampled_rank
from bowmap.modules.find.kernels import block_meta
from bowmap.modules.find.sampled import SampledRank


def _dna_rank(block: IndexBlock, rows: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Occurrences of each code in stored BWT [0, row - (row > primary))."""
    stored = rows - (rows > block.primary)
    line, within = stored // BASES_PER_LINE, stored % BASES_PER_LINE
    words = block.occ[line, 4:].astype("<u4")
    bases = UNPACK_2BIT[words.view(np.uint8)].reshape(len(rows), BASES_PER_LINE)
    before = np.arange(BASES_PER_LINE) < within[:, None]
    return block.occ[line, codes].astype(np.int64) + np.count_nonzero((bases == codes[:, None]) & before, axis=1)


def _dna_symbol(block: IndexBlock, rows: np.ndarray) -> np.ndarray:
    stored = rows - (rows > block.primary)
    line, within = stored // BASES_PER_LINE, stored % BASES_PER_LINE
    word = block.occ[line, 4 + within // 16]
    return ((word >> (2 * (within % 16)).astype(np.uint32)) & 3).astype(np.int64)


def _rank1(level: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """1 bits before each p in one wavelet level, and the bit at p."""
    line, within = p // BITS_PER_LINE, p % BITS_PER_LINE
    bits = np.unpackbits(level[line, 1:].astype("<u4").view(np.uint8), axis=1, bitorder="little")
    ones = level[line, 0].astype(np.int64) + np.count_nonzero(bits & (np.arange(BITS_PER_LINE) < within[:, None]), axis=1)
    return ones, bits[np.arange(len(p)), within].astype(np.int64)


def lf_rank(block: IndexBlock, rows: np.ndarray, codes: np.ndarray, sampled: SampledRank | None = None) -> np.ndarray:
    """C[code] + rank(code, row): one backward-search step of each (row, code); through
    ``sampled`` counts of the block when given, else its own rank structure."""
    rows, codes = np.asarray(rows, dtype=np.int64), np.asarray(codes, dtype=np.int64)
    if sampled is not None:
        return sampled_rank.lf_rank(sampled, block.primary, rows, codes)
    meta = block_meta(block).astype(np.int64)
    if block.zeros is None:
        return meta[codes] + _dna_rank(block, rows, codes)
    levels = len(block.zeros)
    p = rows - (rows > block.primary)
    for level in range(levels):
        ones, _ = _rank1(block.occ[level], p)
        bit = (codes >> (levels - 1 - level)) & 1
        p = np.where(bit == 1, meta[1 + level] + ones, p - ones)
    return (meta[1 + levels + codes] + p) % (1 << 32)


def lf_step(block: IndexBlock, rows: np.ndarray, sampled: SampledRank | None = None) -> np.ndarray:
    """LF of each row (none of them ``primary``)."""
    rows = np.asarray(rows, dtype=np.int64)
    if sampled is not None:
        return sampled_rank.lf_step(sampled, block.primary, rows)
    if block.zeros is None:
        return lf_rank(block, rows, _dna_symbol(block, rows))
    meta = block_meta(block).astype(np.int64)
    levels = len(block.zeros)
    p = rows - (rows > block.primary)
    code = np.zeros(len(rows), dtype=np.int64)
    for level in range(levels):
        ones, bit = _rank1(block.occ[level], p)
        code = (code << 1) | bit
        p = np.where(bit == 1, meta[1 + level] + ones, p - ones)
    return (meta[1 + levels + code] + p) % (1 << 32)


def search(block: IndexBlock, codes: np.ndarray, offsets: np.ndarray, lengths: np.ndarray,
           sampled: SampledRank | None = None) -> tuple[np.ndarray, np.ndarray]:
    """find_search's rows [lo, hi) of each pattern (uint32; 0, 0 when absent), ranked through
    ``sampled`` counts when given."""
    offsets, lengths = np.asarray(offsets, dtype=np.int64), np.asarray(lengths, dtype=np.int64)
    symbols = 4 if block.zeros is None else len(block.symbol_counts)
    count = len(offsets)
    lo, hi = np.zeros(count, dtype=np.int64), np.full(count, block.length + 1, dtype=np.int64)
    alive = np.ones(count, dtype=bool)
    for step in range(int(lengths.max()) if count else 0):
        active = np.flatnonzero(alive & (lengths > step))
        code = np.asarray(codes)[offsets[active] + lengths[active] - 1 - step].astype(np.int64)
        known = code < symbols
        dead = active[~known]
        active, code = active[known], code[known]
        new_lo, new_hi = lf_rank(block, lo[active], code, sampled), lf_rank(block, hi[active], code, sampled)
        empty = new_lo >= new_hi
        lo[active], hi[active] = new_lo, new_hi
        dead = np.concatenate((dead, active[empty]))
        alive[dead] = False
        lo[dead] = hi[dead] = 0
    return lo.astype(np.uint32), hi.astype(np.uint32)


def locate(block: IndexBlock, rows: np.ndarray, sampled: SampledRank | None = None) -> np.ndarray:
    """find_locate's block offset (uint32) of the suffix at each row (1..n)."""
    rows = np.asarray(rows, dtype=np.int64).copy()
    steps = np.zeros(len(rows), dtype=np.int64)
    positions = np.zeros(len(rows), dtype=np.int64)
    pending = np.arange(len(rows))
    while len(pending):
        row = rows[pending]
        group = block.marks[row // ROWS_PER_GROUP].astype(np.int64)
        within = row % ROWS_PER_GROUP
        word, bit = within // 32, within % 32
        bits = group[np.arange(len(row)), 1 + word]
        marked = ((bits >> bit) & 1) == 1
        below = bits & ((1 << bit) - 1)
        index = group[:, 0] + np.bitwise_count(below) + np.where(word > 0, np.bitwise_count(group[:, 1]), 0) \
            + np.where(word > 1, np.bitwise_count(group[:, 2]), 0)
        done = pending[marked]
        positions[done] = block.samples[index[marked]].astype(np.int64) + steps[done]
        pending = pending[~marked]
        rows[pending] = lf_step(block, rows[pending], sampled)
        steps[pending] += 1
    return positions.astype(np.uint32)


def python_find(contigs: list[bytes], pattern: bytes) -> list[tuple[int, int]]:
    """(contig, 0-based offset) of every occurrence of ``pattern``, overlapping ones too, in
    reference order: ``bytes.find`` from each hit's start plus one."""
    hits = []
    for number, text in enumerate(contigs):
        at = text.find(pattern)
        while at >= 0:
            hits.append((number, at))
            at = text.find(pattern, at + 1)
    return hits
