"""Reading a reference FASTA (multi-record, gzipped or not) into base codes and contigs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bowmap.index.format import AMBIGUOUS, ENCODE, INVALID, SAM_REFERENCE_NAME
from bowmap.runtime.errors import BowmapError
from bowmap.runtime.fasta import invalid_symbol_error, iter_fasta

@dataclass
class Reference:
    """Contigs concatenated into one array of codes (A=0, C=1, G=2, T=3, ambiguous=4).

    ``starts[i]`` is contig i's offset in ``codes`` (0-based); ``lengths[i]`` its length in bases.
    """

    path: str
    names: list[str]
    lengths: np.ndarray  # int64
    starts: np.ndarray  # int64
    codes: np.ndarray  # uint8

    def ambiguous_runs(self) -> tuple[np.ndarray, np.ndarray]:
        """(starts, lengths) of the maximal runs of ambiguous bases, in concatenated coordinates.
        Worked through in steps of 64 M bases, so the temporaries stay small beside the text."""
        edges = []
        previous = False
        for first in range(0, len(self.codes), _RUNS_STEP):
            flags = self.codes[first : first + _RUNS_STEP] == AMBIGUOUS
            changes = np.flatnonzero(flags[1:] != flags[:-1]) + 1
            if flags[0] != previous:
                changes = np.concatenate(([0], changes))
            edges.append(changes + first)
            previous = bool(flags[-1])
        if previous:
            edges.append(np.array([len(self.codes)]))
        edges = np.concatenate(edges).astype(np.int64) if edges else np.zeros(0, dtype=np.int64)
        return edges[0::2], edges[1::2] - edges[0::2]


_ENCODE_STEP = 1 << 24  # bases encoded per step
_RUNS_STEP = 1 << 26  # bases scanned per step for ambiguous runs


def read_reference(path: str) -> Reference:
    """Parse ``path``; raise :class:`BowmapError` naming the file and line on any problem.

    Lowercase is accepted; IUPAC codes other than ACGT become ambiguous (code 4); any other
    character, an empty file, text before the first header, a record with no name or no
    sequence, duplicate names and names SAM does not allow are errors.
    """
    # One copy of the genome besides the file's bytes: each record is encoded into ``codes`` as
    # it is reached and dropped. The file's size bounds the bases; the few bytes of headers and
    # line breaks over-allocated are left unused rather than copied away.
    codes = None
    names, lengths = [], []
    total = 0
    for record in iter_fasta(path, unique_names=True):
        if codes is None:
            codes = np.empty(len(record._source), dtype=np.uint8)  # the whole file's bytes
        if not SAM_REFERENCE_NAME.fullmatch(record.name):
            raise BowmapError(f"{path}:{record.line}: record name {record.name!r} is not a valid SAM reference name")
        piece = codes[total : total + len(record.sequence)]
        letters = np.frombuffer(record.sequence, dtype=np.uint8)
        for first in range(0, len(letters), _ENCODE_STEP):  # temporaries of one step, not of a chromosome
            step = piece[first : first + _ENCODE_STEP]
            step[:] = ENCODE[letters[first : first + _ENCODE_STEP]]
            if np.any(step == INVALID):
                raise invalid_symbol_error(path, record, ENCODE != INVALID)
        names.append(record.name)
        lengths.append(len(piece))
        total += len(piece)
        del record, piece, letters, step  # the sequence's bytes go before the next record's are made
    lengths = np.array(lengths, dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    return Reference(path=path, names=names, lengths=lengths, starts=starts, codes=codes[:total])
