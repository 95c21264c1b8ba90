"""The on-disk and on-device layout of a bowmap index, shared by the builder, the loader, the
kernels' Python owners and the NumPy references.

Files of an index with prefix P (all little-endian):

* ``P.bmi`` -- the manifest, JSON: magic, format version, build parameters, contigs, ambiguous
  runs, blocks, and each data file's size and SHA-256. Written last, so an index without it is
  incomplete.
* ``P.pac`` -- the whole reference, 2 bits a base, base i in bits 2*(i%4)..2*(i%4)+1 of byte i//4
  (A=0, C=1, G=2, T=3). Ambiguous bases hold a pseudo-random base; their runs are in the manifest.
* ``P.<k>.occ``, ``P.<k>.mrk``, ``P.<k>.sa`` -- block k's BWT with occurrence counts, its
  sampled-row marks and its suffix-array samples (layouts below).

Block text and rows. A block is a slice ``text[start:start+n]`` of the concatenated contigs. Its
suffix array has n+1 rows: row 0 is the empty suffix ("$"), rows 1..n the real suffixes in order.
The BWT column has n+1 symbols, one of them "$" (at row ``primary``, where SA = 0); the stored
BWT drops it, so row i is stored at ``i - (i > primary)``.

Occurrence lines (``.occ``, uint32[lines, 16], 64 bytes a line, like BWA's cache-line blocks):
words 0..3 count A, C, G, T in the stored BWT before the line's first base; words 4..15 hold the
line's 192 bases, 16 per word, base j of a word in bits 2j..2j+1. One rank query reads one line.
There are ``n // 192 + 1`` lines, so a query at the very end still has a line to read.

Marks (``.mrk``, uint32[groups, 4]): a row is marked when its suffix starts at a multiple of
``sa_sample``. Group g covers rows 96g..96g+95: word 0 counts marked rows before the group, words
1..3 are the group's mark bits (row 96g + 32w + b is bit b of word 1+w).

Samples (``.sa``, uint32[marked rows]): the text offset (within the block) of each marked row's
suffix, in row order. Locating a row takes fewer than ``sa_sample`` LF steps.
"""

from __future__ import annotations

import re

import numpy as np

MAGIC = "bowmap-index"
FORMAT_VERSION = 1
MANIFEST_SUFFIX = ".bmi"

BASES_PER_LINE = 192
WORDS_PER_LINE = 16
COUNT_WORDS = 4
BASES_PER_WORD = 16
ROWS_PER_GROUP = 96

DEFAULT_SA_SAMPLE = 32
DEFAULT_MAX_READ_LENGTH = 1024
# Neighbouring blocks share max_read_length + SEAM_MARGIN bases, so that an alignment of the
# longest read with up to SEAM_MARGIN bases of gaps lies wholly inside at least one block.
SEAM_MARGIN = 256
# Blocks stay below 2^31 bases: suffix arrays are int32 and counts uint32.
MAX_BLOCK_BASES = (1 << 31) - 1

# SAM's rule for reference names (SAM v1 specification, section 1.2.1): checked on the FASTA when
# an index is built and on the manifest when it is loaded.
SAM_REFERENCE_NAME = re.compile(r"[0-9A-Za-z!#$%&+./:;?@^_|~-][0-9A-Za-z!#$%&*+./:;=?@^_|~-]*")

ENCODE = np.full(256, 255, dtype=np.uint8)
for _letters, _code in (("Aa", 0), ("Cc", 1), ("Gg", 2), ("Tt", 3), ("RYSWKMBDHVNUrysw" "kmbdhvnu", 4)):
    ENCODE[np.frombuffer(_letters.encode(), dtype=np.uint8)] = _code
AMBIGUOUS = 4  # code of every IUPAC symbol other than A, C, G, T (U included: no RNA references)
INVALID = 255


def index_bytes_per_base(sa_sample: int) -> float:
    """Device bytes one block base costs: occurrence lines, marks and SA samples."""
    return 4 * WORDS_PER_LINE / BASES_PER_LINE + 16 / ROWS_PER_GROUP + 4 / sa_sample


def line_count(n: int) -> int:
    return n // BASES_PER_LINE + 1


def group_count(n: int) -> int:
    return (n + 1) // ROWS_PER_GROUP + 1


def pack_2bit(codes: np.ndarray) -> np.ndarray:
    """Bases 0..3 -> bytes holding 4 bases each, first base in the low bits."""
    padded = np.zeros(-(-len(codes) // 4) * 4, dtype=np.uint8)
    padded[: len(codes)] = codes
    quads = padded.reshape(-1, 4)
    return quads[:, 0] | (quads[:, 1] << 2) | (quads[:, 2] << 4) | (quads[:, 3] << 6)


# Row b: the four codes packed in byte b, first base in the low bits.
UNPACK_2BIT = ((np.arange(256)[:, None] >> np.array([0, 2, 4, 6])) & 3).astype(np.uint8)


def unpack_2bit(packed: np.ndarray, start: int, length: int) -> np.ndarray:
    """Bases ``start .. start+length`` of a 2-bit packed array, as codes 0..3."""
    first, last = start // 4, -(-(start + length) // 4)
    codes = UNPACK_2BIT[np.asarray(packed[first:last], dtype=np.uint8)]
    offset = start - 4 * first
    return codes.reshape(-1)[offset : offset + length]


# Lines converted per step: 2^14 lines (3.1 Mbases) keep the temporaries near 10 MB.
_CHUNK_LINES = 1 << 14


def build_occ_lines(stored_bwt: np.ndarray) -> np.ndarray:
    """Interleave counts and packed bases of a stored BWT (codes 0..3) into occurrence lines."""
    n = len(stored_bwt)
    lines = line_count(n)
    occ = np.empty((lines, WORDS_PER_LINE), dtype=np.uint32)
    running = np.zeros(4, dtype=np.uint64)
    for first in range(0, lines, _CHUNK_LINES):
        last = min(first + _CHUNK_LINES, lines)
        occ[first:last] = occ_line_piece(stored_bwt[first * BASES_PER_LINE : last * BASES_PER_LINE], last - first, running)
    return occ


def occ_line_piece(bases: np.ndarray, lines: int, running: np.ndarray) -> np.ndarray:
    """``lines`` consecutive occurrence lines holding ``bases`` (codes 0..3, at most
    ``lines * BASES_PER_LINE`` of them; the rest of the last line is padding), counts starting at
    ``running`` (uint64[4], the bases of every earlier line), which is advanced in place. A BWT
    built piece by piece in whole lines gives the same lines as :func:`build_occ_lines`."""
    padded = np.zeros(lines * BASES_PER_LINE, dtype=np.uint8)
    padded[: len(bases)] = bases
    per_line = np.stack(
        [np.count_nonzero(padded.reshape(-1, BASES_PER_LINE) == code, axis=1) for code in range(4)], axis=1
    )
    per_line[-1, 0] -= len(padded) - len(bases)  # padding past base n is code 0: not a base
    piece = np.empty((lines, WORDS_PER_LINE), dtype=np.uint32)
    piece[:, :COUNT_WORDS] = np.cumsum(per_line, axis=0, dtype=np.uint64) - per_line + running
    running += per_line.sum(axis=0, dtype=np.uint64)
    # Four bases a byte, first base lowest, read as little-endian words: 16 bases a word,
    # base j in bits 2j..2j+1, as the line layout wants.
    piece[:, COUNT_WORDS:] = pack_2bit(padded).view("<u4").reshape(lines, -1)
    return piece


def build_marks(marked_rows: np.ndarray, n: int) -> np.ndarray:
    """Mark groups for the sorted row numbers ``marked_rows`` of a block of n bases (n+1 rows)."""
    groups = group_count(n)
    marks = np.zeros((groups, 4), dtype=np.uint32)
    group = marked_rows // ROWS_PER_GROUP
    word = (marked_rows % ROWS_PER_GROUP) // 32
    bit = (marked_rows % 32).astype(np.uint32)
    # Each (group, word) receives distinct bits, so OR-ing them is adding them.
    np.add.at(marks[:, 1:], (group, word), np.left_shift(np.uint32(1), bit))
    per_group = np.bincount(group, minlength=groups)
    marks[1:, 0] = np.cumsum(per_group[:-1])
    return marks
