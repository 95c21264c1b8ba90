"""NumPy reference of ``opencl/align/fm_search.cl`` (``fm_search`` and ``fm_locate``).

Written from the index layout (:mod:`bowmap.index.format`) without the kernel's bit tricks: a
line's bases are unpacked and compared, mark bits are unpacked and summed. Vectorised across
patterns (or rows); the loop runs over pattern positions (or LF steps).
"""

from __future__ import annotations

import numpy as np

from bowmap.index.format import (
    BASES_PER_LINE,
    BASES_PER_WORD,
    COUNT_WORDS,
    ROWS_PER_GROUP,
)
from bowmap.index.load import IndexBlock

_SHIFTS = (2 * np.arange(BASES_PER_WORD)).astype(np.uint32)


def _line_bases(block: IndexBlock, lines: np.ndarray) -> np.ndarray:
    """The 192 bases of each given occurrence line, as codes: int64[len(lines), 192]."""
    words = block.occ[lines, COUNT_WORDS:].astype(np.uint32)
    return ((words[:, :, None] >> _SHIFTS) & 3).reshape(len(lines), BASES_PER_LINE).astype(np.int64)


def rank(block: IndexBlock, rows: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Occurrences of codes[i] in BWT rows [0, rows[i]) (the "$" row holds none)."""
    rows = np.asarray(rows, dtype=np.int64)
    codes = np.asarray(codes, dtype=np.int64)
    stored = rows - (rows > block.primary)
    lines, within = np.divmod(stored, BASES_PER_LINE)
    counts = block.occ[lines, codes].astype(np.int64)
    before = np.arange(BASES_PER_LINE) < within[:, None]
    return counts + np.count_nonzero((_line_bases(block, lines) == codes[:, None]) & before, axis=1)


def bwt_symbol(block: IndexBlock, rows: np.ndarray) -> np.ndarray:
    stored = np.asarray(rows, dtype=np.int64)
    stored = stored - (stored > block.primary)
    lines, within = np.divmod(stored, BASES_PER_LINE)
    return _line_bases(block, lines)[np.arange(len(lines)), within]


def search(block: IndexBlock, codes, offsets, lengths) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Same contract as :meth:`bowmap.align.seed.fm_search.FMSearch.search`."""
    codes = np.asarray(codes, dtype=np.int64)
    offsets = np.asarray(offsets, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    count = len(offsets)
    first_rows = block.first_rows
    lo = np.zeros(count, dtype=np.int64)  # [0, n + 1): every row, the empty suffix's included
    hi = np.full(count, block.length + 1, dtype=np.int64)
    depth = np.zeros(count, dtype=np.int64)
    alive = np.ones(count, dtype=bool)
    for step in range(int(lengths.max(initial=0))):
        active = np.flatnonzero(alive & (step < lengths))
        if len(active) == 0:
            break
        symbol = codes[offsets[active] + lengths[active] - 1 - step]
        ambiguous = symbol > 3
        symbol = np.where(ambiguous, 0, symbol)
        new_lo = first_rows[symbol] + rank(block, lo[active], symbol)
        new_hi = first_rows[symbol] + rank(block, hi[active], symbol)
        failed = ambiguous | (new_lo >= new_hi)
        alive[active[failed]] = False
        moved = active[~failed]
        lo[moved], hi[moved] = new_lo[~failed], new_hi[~failed]
        depth[moved] += 1
    lo = np.where(lengths == 0, 1, lo)  # the empty pattern: every real suffix
    lo[~alive] = 0
    hi[~alive] = 0
    return lo.astype(np.uint32), hi.astype(np.uint32), depth.astype(np.uint32)


def _marked(block: IndexBlock, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(is the row marked, number of marked rows before it) for each row."""
    groups, within = np.divmod(rows, ROWS_PER_GROUP)
    bits = (block.marks[groups, 1:, None].astype(np.uint32) >> np.arange(32, dtype=np.uint32)) & 1
    bits = bits.reshape(len(rows), ROWS_PER_GROUP)
    before = np.count_nonzero(bits & (np.arange(ROWS_PER_GROUP) < within[:, None]), axis=1)
    return bits[np.arange(len(rows)), within] == 1, block.marks[groups, 0].astype(np.int64) + before


def locate(block: IndexBlock, rows) -> np.ndarray:
    """Same contract as :meth:`bowmap.align.seed.fm_search.FMSearch.locate`."""
    rows = np.asarray(rows, dtype=np.int64).copy()
    positions = np.zeros(len(rows), dtype=np.int64)
    steps = np.zeros(len(rows), dtype=np.int64)
    pending = np.arange(len(rows))
    while len(pending):
        marked, rank_of_mark = _marked(block, rows[pending])
        done = pending[marked]
        positions[done] = block.samples[rank_of_mark[marked]].astype(np.int64) + steps[done]
        pending = pending[~marked]
        symbol = bwt_symbol(block, rows[pending])
        rows[pending] = block.first_rows[symbol] + rank(block, rows[pending], symbol)
        steps[pending] += 1
    return positions.astype(np.uint32)


def locate_intervals(block: IndexBlock, lo, hi) -> np.ndarray:
    """Same contract as :meth:`bowmap.align.seed.fm_search.FMSearch.locate_intervals`: every row of every
    interval [lo, hi), interval after interval, located."""
    lo = np.asarray(lo, dtype=np.int64)
    sizes = np.asarray(hi, dtype=np.int64) - lo
    rows = np.concatenate([np.arange(start, start + size) for start, size in zip(lo, sizes)] or [np.zeros(0, np.int64)])
    return locate(block, rows.astype(np.int64))
