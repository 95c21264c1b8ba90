"""Reading FASTA files (multi-record, gzipped or not) into raw sequences, any alphabet.

The reference indexer and the kernel modules (primers, asm, closest substring, motifs) all read
FASTA through :func:`read_fasta`; each then checks the symbols its alphabet allows and reports a
bad one with :meth:`FastaRecord.line_of`.
"""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass

import numpy as np

from bowmap.runtime.errors import BowmapError
from bowmap.runtime.files import read_bytes


@dataclass
class FastaRecord:
    name: str  # first word of the header line
    line: int  # 1-based line number of the header
    sequence: bytes  # the record's lines joined, line breaks removed
    _source: bytes  # the whole (decompressed) file
    _body: tuple[int, int]  # byte range of the record's sequence lines in _source

    def line_of(self, index: int) -> int:
        """1-based file line of ``sequence[index]``."""
        body = np.frombuffer(self._source, dtype=np.uint8)[self._body[0] : self._body[1]]
        kept = np.flatnonzero((body != ord("\n")) & (body != ord("\r")))
        return self.line + 1 + int(np.count_nonzero(body[: kept[index]] == ord("\n")))


def decompressed_bytes(path: str) -> bytes:
    """The file's bytes, gunzipped when it starts with the gzip magic."""
    data = read_bytes(path)
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as error:
            raise BowmapError(f"{path}: damaged gzip data ({error})") from None
    return data


def read_fasta(path: str, unique_names: bool = True) -> list[FastaRecord]:
    """Every record of ``path``; raises :class:`BowmapError` naming the file and line for a
    missing or empty file, text before the first header, a record with no name or no sequence,
    and (with ``unique_names``) a repeated name. Symbols are not checked here."""
    return list(iter_fasta(path, unique_names))


def iter_fasta(path: str, unique_names: bool = True):
    """The records of :func:`read_fasta` one at a time, each sequence made only when its record
    is reached, so a caller that drops each one holds the file and one record's sequence (the
    reference indexer of a 3 Gbp genome); the same errors, raised when their record is reached."""
    data = decompressed_bytes(path)
    if not data.strip():
        raise BowmapError(f"{path}: empty file, expected FASTA")
    array = np.frombuffer(data, dtype=np.uint8)
    line_starts = np.concatenate(([0], np.flatnonzero(array == ord("\n")) + 1))
    line_starts = line_starts[line_starts < len(data)]
    headers = line_starts[array[line_starts] == ord(">")]
    first_text = int(np.argmax(~np.isin(array[line_starts], (ord("\n"), ord("\r")))))
    if len(headers) == 0 or headers[0] != line_starts[first_text]:
        raise BowmapError(f"{path}:{first_text + 1}: not a FASTA file (expected a '>' header line)")
    header_lines = np.searchsorted(line_starts, headers, side="right")
    seen: dict[str, int] = {}
    ends = np.append(headers[1:], len(data))
    for header, end, line in zip(headers.tolist(), ends.tolist(), header_lines.tolist()):
        header_end = data.find(b"\n", header, end)
        header_end = end if header_end < 0 else header_end
        words = data[header + 1 : header_end].split()
        if not words:
            raise BowmapError(f"{path}:{line}: record with no name")
        name = words[0].decode("ascii", errors="replace")
        if unique_names and name in seen:
            raise BowmapError(f"{path}:{line}: duplicate record name {name!r} (first at line {seen[name]})")
        seen.setdefault(name, line)
        sequence = data[header_end + 1 : end].translate(None, b"\r\n")
        if not sequence.strip():
            raise BowmapError(f"{path}:{line}: record {name!r} has no sequence")
        yield FastaRecord(name, line, sequence, data, (header_end + 1, end))


def invalid_symbol_error(path: str, record: FastaRecord, valid: np.ndarray) -> BowmapError | None:
    """An error naming the first byte of ``record`` whose ``valid[byte]`` is False, or None."""
    codes = np.frombuffer(record.sequence, dtype=np.uint8)
    bad = np.flatnonzero(~valid[codes])
    if len(bad) == 0:
        return None
    byte = int(codes[bad[0]])
    symbol = chr(byte) if 32 < byte < 127 else f"byte 0x{byte:02x}"
    return BowmapError(f"{path}:{record.line_of(int(bad[0]))}: invalid character {symbol!r} in record {record.name!r}")
