"""Reading a reference FASTA (multi-record, gzipped or not) into base codes and contigs."""

from __future__ import annotations

import gzip
import re
import zlib
from dataclasses import dataclass

import numpy as np

from bowmap.errors import BowmapError
from bowmap.files import read_bytes
from bowmap.index_format import AMBIGUOUS, ENCODE, INVALID

# SAM's rule for reference names (SAM v1 specification, section 1.2.1).
_SAM_NAME = re.compile(rb"[0-9A-Za-z!#$%&+./:;?@^_|~-][0-9A-Za-z!#$%&*+./:;=?@^_|~-]*")


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


def _read_bytes(path: str) -> bytes:
    data = read_bytes(path)
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as error:
            raise BowmapError(f"{path}: damaged gzip data ({error})") from None
    return data


def read_reference(path: str) -> Reference:
    """Parse ``path``; raise :class:`BowmapError` naming the file and line on any problem.

    Lowercase is accepted; IUPAC codes other than ACGT become ambiguous (code 4); any other
    character, an empty file, text before the first header, a record with no name or no
    sequence, and duplicate names are errors.
    """
    data = _read_bytes(path)
    if not data.strip():
        raise BowmapError(f"{path}: empty file, expected FASTA")
    array = np.frombuffer(data, dtype=np.uint8)
    line_starts = np.concatenate(([0], np.flatnonzero(array == ord("\n")) + 1))
    line_starts = line_starts[line_starts < len(data)]
    headers = line_starts[array[line_starts] == ord(">")]
    first_text = int(np.argmax(~np.isin(array[line_starts], (ord("\n"), ord("\r")))))
    if len(headers) == 0 or headers[0] != line_starts[first_text]:
        raise BowmapError(f"{path}:{first_text + 1}: not a FASTA file (expected a '>' header line)")

    def line_of(offset: int) -> int:
        return int(np.searchsorted(line_starts, offset, side="right"))

    names: list[str] = []
    seen: dict[str, int] = {}
    pieces: list[np.ndarray] = []
    ends = np.append(headers[1:], len(data))
    for header, end in zip(headers.tolist(), ends.tolist()):
        header_end = data.find(b"\n", header, end)
        header_end = end if header_end < 0 else header_end
        line = line_of(header)
        words = data[header + 1 : header_end].split()
        if not words:
            raise BowmapError(f"{path}:{line}: record with no name")
        name_bytes = words[0]
        name = name_bytes.decode("ascii", errors="replace")
        if not _SAM_NAME.fullmatch(name_bytes):
            raise BowmapError(f"{path}:{line}: record name {name!r} is not a valid SAM reference name")
        if name in seen:
            raise BowmapError(f"{path}:{line}: duplicate record name {name!r} (first at line {seen[name]})")
        seen[name] = line
        sequence = data[header_end + 1 : end].translate(None, b"\r\n")
        if not sequence.strip():
            raise BowmapError(f"{path}:{line}: record {name!r} has no sequence")
        codes = ENCODE[np.frombuffer(sequence, dtype=np.uint8)]
        if codes.size and codes.max() == INVALID:
            raw = ENCODE[array[header_end + 1 : end]]
            raw_text = array[header_end + 1 : end]
            bad = np.flatnonzero((raw == INVALID) & (raw_text != ord("\n")) & (raw_text != ord("\r")))[0]
            character = chr(raw_text[bad]) if 32 < raw_text[bad] < 127 else f"byte 0x{raw_text[bad]:02x}"
            raise BowmapError(
                f"{path}:{line_of(header_end + 1 + int(bad))}: invalid character {character!r} in record {name!r}"
            )
        names.append(name)
        pieces.append(codes)
    lengths = np.array([len(piece) for piece in pieces], dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    codes = np.concatenate(pieces) if len(pieces) > 1 else pieces[0]
    return Reference(path=path, names=names, lengths=lengths, starts=starts, codes=codes)
