"""Indexes over other alphabets than DNA (``bowmap index --alphabet protein|text``): the symbols,
and the wavelet-matrix rank structure that stands in for DNA's 2-bit occurrence lines.

Alphabets:

* ``dna`` -- today's index (:mod:`bowmap.index.format`), unchanged: its manifest has no
  ``alphabet`` key and format version 1.
* ``protein`` -- FASTA records of amino-acid letters: A-Z and ``*``, lowercase read as uppercase.
  Every letter is a symbol of its own (X matches only X; no ambiguity rule).
* ``text`` -- the reference file's raw bytes, values 1..255 (a 0 byte is refused), one contig.

A protein or text index has format version 2 and ``"alphabet"`` in its manifest, so a bowmap that
knows only DNA refuses it. Its ``symbols`` are the byte values that occur in the reference, in
increasing order; the BWT holds each symbol's *code*, its place in that list (0..sigma-1), which
keeps the byte order, so suffixes sort the same over codes as over bytes. A pattern byte that is
not a symbol matches nothing.

Files of such an index (prefix P): ``P.sym`` the reference's symbols, one byte each, contigs
concatenated (the bytes themselves, not codes); per block k ``P.k.wm`` (wavelet lines, below),
``P.k.mrk`` and ``P.k.sa`` (as for DNA: :mod:`bowmap.index.format`).

Wavelet matrix (``.wm``, uint32[levels][lines][16]). ``levels = max(1, ceil(log2(sigma)))``. Level
0's sequence is the stored BWT's codes; level l holds bit ``levels - 1 - l`` (highest first) of
each code of its sequence, and level l + 1's sequence is level l's, stably parted: codes with a
0 bit first, then those with a 1 (``zeros[l]`` of them have a 0). Each level's bits lie in lines
of 64 bytes: word 0 counts the 1 bits before the line, words 1..15 hold its 480 bits, bit j of
word w the sequence's element 480 * line + 32 * w + j. ``n // 480 + 1`` lines a level, so a rank
at n has a line. One rank over the whole alphabet reads one line a level.

rank(c, s) (occurrences of code c in stored BWT [0, s)): p = s; at each level, with b the level's
bit of c, p = zeros[l] + rank1_l(p) when b else p - rank1_l(p); then rank = p - start[c], where
start[c] is where c's run begins in the last level's order (codes sorted by their bits reversed).
LF(row) = C[c] + rank(c, s) = lf_base[c] + p, with ``lf_base[c] = C[c] - start[c]`` (mod 2^32).

Why a wavelet matrix: see docs/find.md ("The rank structure"): the least device memory; per-symbol
sampled counts (bowmap/modules/find/sampled.py, built in memory from these lines) are measured
against it by bench/find.py.
"""

from __future__ import annotations

import numpy as np

ALPHABETS = ("dna", "protein", "text")
ALPHABET_FORMAT_VERSION = 2  # manifests of protein and text indexes

BITS_PER_LINE = 480
WAVELET_LINE_WORDS = 16

# Protein FASTA: the 26 letters and '*' (stop), lowercase read as uppercase.
PROTEIN_UPPER = np.arange(256, dtype=np.uint8)
PROTEIN_UPPER[ord("a") : ord("z") + 1] -= 32
PROTEIN_VALID = np.zeros(256, dtype=bool)
PROTEIN_VALID[np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz*", dtype=np.uint8)] = True

ABSENT = 255  # code of a pattern byte that is no symbol of the index (sigma <= 255, codes <= 254)


def levels_for(sigma: int) -> int:
    """Bit levels of the wavelet matrix of ``sigma`` symbols."""
    return max(1, int(sigma - 1).bit_length())


def line_count(n: int) -> int:
    """Lines of one level for a stored BWT of ``n`` symbols."""
    return n // BITS_PER_LINE + 1


def index_bytes_per_symbol(levels: int, sa_sample: int) -> float:
    """Device bytes one block symbol costs: wavelet lines, marks and SA samples."""
    return levels * 4 * WAVELET_LINE_WORDS / BITS_PER_LINE + 16 / 96 + 4 / sa_sample


def encode_table(symbols: np.ndarray, alphabet: str) -> np.ndarray:
    """uint8[256]: a pattern byte's code in an index with ``symbols``; ABSENT for any other byte.
    Protein patterns are read as uppercase, as the reference was."""
    table = np.full(256, ABSENT, dtype=np.uint8)
    table[np.asarray(symbols, dtype=np.uint8)] = np.arange(len(symbols), dtype=np.uint8)
    if alphabet == "protein":
        table = table[PROTEIN_UPPER]
    return table


def bit_lines(bits: np.ndarray) -> np.ndarray:
    """One level's bits (bool or 0/1, n of them) as uint32[lines, 16] (layout above)."""
    n = len(bits)
    lines = line_count(n)
    padded = np.zeros(lines * BITS_PER_LINE, dtype=np.uint8)
    padded[:n] = bits
    packed = np.packbits(padded.reshape(lines, BITS_PER_LINE), axis=1, bitorder="little")
    out = np.empty((lines, WAVELET_LINE_WORDS), dtype=np.uint32)
    out[:, 1:] = packed.view("<u4")
    ones = np.bitwise_count(out[:, 1:]).sum(axis=1, dtype=np.int64)
    out[:, 0] = np.cumsum(ones) - ones
    return out


def build_wavelet(codes: np.ndarray, levels: int) -> tuple[np.ndarray, np.ndarray]:
    """The wavelet matrix of ``codes`` (a stored BWT, uint8 codes below 2^levels):
    (uint32[levels, lines, 16], zeros int64[levels])."""
    sequence = np.asarray(codes, dtype=np.uint8)
    lines = np.empty((levels, line_count(len(sequence)), WAVELET_LINE_WORDS), dtype=np.uint32)
    zeros = np.empty(levels, dtype=np.int64)
    for level in range(levels):
        bits = (sequence >> (levels - 1 - level)) & 1
        lines[level] = bit_lines(bits)
        ones = bits.astype(bool)
        zeros[level] = len(sequence) - int(np.count_nonzero(ones))
        if level + 1 < levels:
            sequence = np.concatenate((sequence[~ones], sequence[ones]))  # stable: zeros first
    return lines, zeros


def reverse_bits(values: np.ndarray, levels: int) -> np.ndarray:
    values = np.asarray(values, dtype=np.int64)
    out = np.zeros_like(values)
    for bit in range(levels):
        out |= ((values >> bit) & 1) << (levels - 1 - bit)
    return out


def lf_base(symbol_counts: np.ndarray, levels: int) -> np.ndarray:
    """uint32[sigma]: C[c] - start[c] mod 2^32 (see above), from a block's count of each code.
    C[c] = 1 + the symbols of smaller codes (row 0 is the empty suffix); start[c] = the symbols
    whose reversed bits are smaller than c's (the last level's order)."""
    counts = np.asarray(symbol_counts, dtype=np.int64)
    codes = np.arange(len(counts))
    first_rows = 1 + np.cumsum(counts) - counts
    order = np.argsort(reverse_bits(codes, levels), kind="stable")
    starts = np.empty(len(counts), dtype=np.int64)
    starts[order] = np.cumsum(counts[order]) - counts[order]
    return ((first_rows - starts) % (1 << 32)).astype(np.uint32)


def wavelet_meta(symbol_counts: np.ndarray, zeros: np.ndarray) -> np.ndarray:
    """The kernel's uint32 table of one block: sigma, zeros[levels], lf_base[sigma]."""
    levels = len(zeros)
    return np.concatenate(
        ([len(symbol_counts)], np.asarray(zeros, dtype=np.int64), lf_base(symbol_counts, levels))
    ).astype(np.uint32)
