"""Scoring of ``bowmap sw-search``: substitution matrices, gap penalties and residue codes.

Gaps follow BLAST's convention: a gap of L residues costs ``gap_open + L * gap_extend`` (so
BLAST's 11/1 is parasail's open 12, extend 1). Residues are coded 0 .. len(alphabet) - 1 in the
matrix's order; :data:`PAD_CODE` pads targets and tiles in the kernels and scores at most 0
against everything (see ``opencl/modules/sw_search.cl``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from bowmap.modules.sw_search.matrices import ALPHABET, TABLES

MATRICES = tuple(TABLES)
CODES = 32  # the kernels' code space (profile rows): alphabet codes, then PAD_CODE last
PAD_CODE = CODES - 1
INVALID = 255  # a byte that is no residue: a one-line error names it
DNA_ALPHABET = "ACGTN"
LARGEST_PENALTY = 1000  # gap penalties and |scores| stay far from 16-bit lanes' limits


def parse_matrix(text: str) -> tuple[str, np.ndarray]:
    """(alphabet, int32 square scores) of a matrix in NCBI's text layout: a header line of
    residues, then one line a residue, its letter first; ``#`` lines are comments."""
    lines = [line.split() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    alphabet = "".join(lines[0])
    rows = [line[1:] for line in lines[1:]]
    if [line[0] for line in lines[1:]] != list(alphabet) or any(len(row) != len(alphabet) for row in rows):
        raise ValueError("a substitution matrix must be square, rows in the header's order")
    return alphabet, np.array(rows, dtype=np.int32)


@dataclass(frozen=True)
class Scoring:
    """A substitution matrix (``matrix``: one of :data:`MATRICES`, or ``None`` with ``match``
    and ``mismatch`` for DNA) and BLAST-style gap penalties (positive costs)."""

    matrix: str | None = "BLOSUM62"
    gap_open: int = 11
    gap_extend: int = 1
    match: int | None = None
    mismatch: int | None = None
    alphabet: str = field(init=False)
    scores: np.ndarray = field(init=False, repr=False, compare=False)  # int32[len(alphabet)]^2
    codes: np.ndarray = field(init=False, repr=False, compare=False)  # uint8[256]: byte -> code

    def __post_init__(self):
        if self.matrix is None:
            if self.match is None or self.mismatch is None:
                raise ValueError("DNA scoring needs both match and mismatch")
            alphabet = DNA_ALPHABET
            scores = np.full((5, 5), self.mismatch, dtype=np.int32)
            scores[np.arange(4), np.arange(4)] = self.match  # N scores a mismatch, even against N
            unknown = "N"
        else:
            if self.matrix not in TABLES:
                raise ValueError(f"unknown matrix {self.matrix!r} (known: {', '.join(MATRICES)})")
            alphabet, scores = parse_matrix(TABLES[self.matrix])
            unknown = "X"
        if self.gap_open < 0 or self.gap_extend < 0 or self.gap_open + self.gap_extend < 1:
            raise ValueError("gap penalties must be >= 0 and open + extend >= 1")
        if max(self.gap_open, self.gap_extend, int(np.abs(scores).max())) > LARGEST_PENALTY:
            raise ValueError(f"gap penalties and scores must lie within {LARGEST_PENALTY}")
        codes = np.full(256, INVALID, dtype=np.uint8)
        letters = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", dtype=np.uint8)
        codes[letters] = codes[letters + 32] = alphabet.index(unknown)  # any other letter
        for code, residue in enumerate(alphabet):
            codes[ord(residue)] = code
            if residue.isalpha():
                codes[ord(residue.lower())] = code  # lowercase (soft-masked) scores as uppercase
        object.__setattr__(self, "alphabet", alphabet)
        object.__setattr__(self, "scores", scores)
        object.__setattr__(self, "codes", codes)

    @property
    def open_extend(self) -> int:
        """The cost of a gap of one residue."""
        return self.gap_open + self.gap_extend

    @property
    def largest(self) -> int:
        return int(self.scores.max())

    @property
    def pad_score(self) -> int:
        """The score of anything against PAD_CODE: <= 0, so padding never raises a best."""
        return min(0, int(self.scores.min()))

    def table(self) -> np.ndarray:
        """int32[CODES][CODES]: the matrix in the kernels' code space, PAD scores elsewhere."""
        table = np.full((CODES, CODES), self.pad_score, dtype=np.int32)
        size = len(self.alphabet)
        table[:size, :size] = self.scores
        return table

    def encode(self, sequence: bytes) -> np.ndarray:
        """uint8 codes of ``sequence``; a byte that is no residue (a digit, '-', a space, '*'
        for DNA) gets INVALID, for the caller to report."""
        return self.codes[np.frombuffer(bytes(sequence), dtype=np.uint8)]


def pyopal_gaps(scoring: Scoring) -> tuple[int, int]:
    """(gap_open, gap_extend) for pyopal and parasail, whose gap of L costs open + (L-1) extend."""
    return scoring.open_extend, scoring.gap_extend


__all__ = ["ALPHABET", "CODES", "INVALID", "MATRICES", "PAD_CODE", "Scoring", "parse_matrix", "pyopal_gaps"]
