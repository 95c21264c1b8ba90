"""Reading a reference FASTA (multi-record, gzipped or not) into base codes and contigs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bowmap.index.format import AMBIGUOUS, ENCODE, INVALID, SAM_REFERENCE_NAME
from bowmap.runtime.errors import BowmapError
from bowmap.runtime.fasta import invalid_symbol_error, read_fasta

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
        """(starts, lengths) of the maximal runs of ambiguous bases, in concatenated coordinates."""
        flags = np.zeros(len(self.codes) + 2, dtype=np.int8)
        flags[1:-1] = self.codes == AMBIGUOUS
        edges = np.flatnonzero(np.diff(flags))
        return edges[0::2].astype(np.int64), (edges[1::2] - edges[0::2]).astype(np.int64)


def read_reference(path: str) -> Reference:
    """Parse ``path``; raise :class:`BowmapError` naming the file and line on any problem.

    Lowercase is accepted; IUPAC codes other than ACGT become ambiguous (code 4); any other
    character, an empty file, text before the first header, a record with no name or no
    sequence, duplicate names and names SAM does not allow are errors.
    """
    records = read_fasta(path, unique_names=True)
    pieces = []
    for record in records:
        if not SAM_REFERENCE_NAME.fullmatch(record.name):
            raise BowmapError(f"{path}:{record.line}: record name {record.name!r} is not a valid SAM reference name")
        error = invalid_symbol_error(path, record, ENCODE != INVALID)
        if error:
            raise error
        pieces.append(ENCODE[np.frombuffer(record.sequence, dtype=np.uint8)])
        record.sequence = b""  # keep one copy of the genome: the codes
    lengths = np.array([len(piece) for piece in pieces], dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    codes = np.concatenate(pieces) if len(pieces) > 1 else pieces[0]
    return Reference(path=path, names=[record.name for record in records], lengths=lengths, starts=starts, codes=codes)
