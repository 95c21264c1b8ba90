"""Per-symbol sampled occurrence counts: the alternative rank structure for protein and text
blocks (``opencl/fm/sampled_rank.h``), built in memory from a loaded block to measure it against
the wavelet matrix the index stores (bench/find.py; docs/find.md, "The rank structure"). No file
holds it: the production path is the wavelet matrix.

Layout (uint32[lines, line_words], ``lines = n // step + 1`` so a rank at n has a line): words
``0 .. sigma-1`` of line k hold ``C[c] + occurrences of code c in stored BWT [0, k * step)``
(C[c] = 1 + symbols of smaller codes, row 0 being the empty suffix), then, from word
``byte_words`` (sigma rounded up to 4), the line's ``step`` BWT codes a byte each, little-endian;
bytes past n are 0 and never counted. Rows and stored positions as in the wavelet matrix
(:mod:`bowmap.index.alphabet`): row r is stored at ``r - (r > primary)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bowmap.index.load import IndexBlock

STEPS = (64, 128, 256)  # symbols a line the kernel is built for (a multiple of 16)


@dataclass
class SampledRank:
    """One block's sampled counts (layout above)."""

    step: int
    sigma: int
    byte_words: int
    lines: np.ndarray  # uint32[lines, byte_words + step // 4]

    @property
    def line_words(self) -> int:
        return self.lines.shape[1]

    def bytes_a_symbol(self, n: int) -> float:
        return self.lines.nbytes / max(n, 1)


def wavelet_bwt(block: IndexBlock) -> np.ndarray:
    """The stored BWT's codes (uint8[n]) of a protein or text block, read back from its wavelet
    matrix: each position followed down the levels at once, a bit a level (the index keeps no
    BWT file; this is the exact inverse of ``alphabet.build_wavelet``)."""
    n, levels = block.length, len(block.zeros)
    position = np.arange(n, dtype=np.int64)
    codes = np.zeros(n, dtype=np.uint8)
    for level in range(levels):
        bits = np.unpackbits(block.occ[level, :, 1:].astype("<u4").view(np.uint8), axis=1, bitorder="little").reshape(-1)[:n]
        ones_before = np.cumsum(bits, dtype=np.int64) - bits
        bit = bits[position]
        codes = (codes << 1) | bit
        ones = ones_before[position]
        position = np.where(bit == 1, block.zeros[level] + ones, position - ones)
    return codes


def build_sampled(block: IndexBlock, step: int) -> SampledRank:
    """The sampled counts of a protein or text ``block``, a line every ``step`` symbols."""
    if step not in STEPS:
        raise ValueError(f"step must be one of {STEPS}")
    codes = wavelet_bwt(block)
    sigma, n = len(block.symbol_counts), len(codes)
    lines = n // step + 1
    byte_words = -(-sigma // 4) * 4
    # Occurrences a line, then before each line: one bincount, not sigma passes over the BWT.
    per_line = np.bincount((np.arange(n) // step) * sigma + codes, minlength=lines * sigma).reshape(lines, sigma)
    before = np.cumsum(per_line, axis=0, dtype=np.int64) - per_line
    out = np.zeros((lines, byte_words + step // 4), dtype=np.uint32)
    out[:, :sigma] = before + block.first_rows[None, :]
    padded = np.zeros(lines * step, dtype=np.uint8)
    padded[:n] = codes
    out[:, byte_words:] = padded.reshape(lines, step).view("<u4")
    return SampledRank(step, sigma, byte_words, out)


def _line_bytes(sampled: SampledRank, line: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(sampled.lines[line, sampled.byte_words :]).astype("<u4").view(np.uint8)


def lf_rank(sampled: SampledRank, primary: int, rows: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """C[code] + rank(code, row) of each (row, code), by a plain byte comparison (the kernel's
    four-at-a-time test is not reused here)."""
    rows, codes = np.asarray(rows, dtype=np.int64), np.asarray(codes, dtype=np.int64)
    stored = rows - (rows > primary)
    line, within = stored // sampled.step, stored % sampled.step
    before = np.arange(sampled.step) < within[:, None]
    counted = np.count_nonzero((_line_bytes(sampled, line) == codes[:, None]) & before, axis=1)
    return sampled.lines[line, codes].astype(np.int64) + counted


def lf_step(sampled: SampledRank, primary: int, rows: np.ndarray) -> np.ndarray:
    """LF of each row (none of them ``primary``)."""
    rows = np.asarray(rows, dtype=np.int64)
    stored = rows - (rows > primary)
    line, within = stored // sampled.step, stored % sampled.step
    codes = _line_bytes(sampled, line)[np.arange(len(rows)), within].astype(np.int64)
    return lf_rank(sampled, primary, rows, codes)

