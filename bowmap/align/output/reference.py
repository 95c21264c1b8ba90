"""The reference as the SAM stage reads it: contig names and lengths for the header
(:func:`sam_header`) and RNAME, and reference codes for NM and MD (:class:`ReferenceText`).
"""

from __future__ import annotations

import numpy as np

from bowmap import __version__
from bowmap.runtime.arrays import exclusive_cumsum, segment_ranges, windows
from bowmap.runtime.errors import BowmapError, UsageError


class ReferenceText:
    """Reference codes (0..3, 4 = ambiguous) looked up for many positions at once.

    Reads either a loaded index (its packed text, with ambiguous runs read as 4) or one code a
    byte (``codes``, for tests).
    """

    def __init__(self, names, starts, lengths, *, codes=None, index=None):
        self.contig_names = [str(name) for name in names]
        self.contig_starts = np.asarray(starts, dtype=np.int64)
        self.contig_lengths = np.asarray(lengths, dtype=np.int64)
        self._codes = None if codes is None else np.asarray(codes, dtype=np.uint8)
        self._index = index
        if (self._codes is None) == (self._index is None):
            raise ValueError("ReferenceText needs exactly one of codes and index")
        self._rname_table = None

    @classmethod
    def from_index(cls, index) -> ReferenceText:
        """From a loaded :class:`bowmap.index.FMIndex` (no copy of the packed text)."""
        return cls(index.contig_names, index.contig_starts, index.contig_lengths, index=index)

    @classmethod
    def from_sequences(cls, names, sequences) -> ReferenceText:
        """From one code array (0..3, 4 = ambiguous) per contig."""
        lengths = np.array([len(sequence) for sequence in sequences], dtype=np.int64)
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
        codes = np.concatenate([np.asarray(s, dtype=np.uint8) for s in sequences]) if sequences else np.zeros(0, np.uint8)
        return cls(names, starts, lengths, codes=codes)

    def spans(self, text_starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """Codes of many spans (0-based text starts, lengths), concatenated."""
        if self._codes is not None:
            return self._codes[segment_ranges(text_starts, lengths)]
        return self._index.spans(text_starts, lengths)

    def span_rows(self, text_starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """Codes of many spans as a matrix, row i holding span i from column 0 (what lies past
        its length is not specified); as wide as the longest span, at least one column."""
        width = max(int(lengths.max(initial=0)), 1)
        if self._codes is not None:
            return windows(self._codes, text_starts, width)
        # Spans of one length come back as rows already, with no cutting apart: ask for the
        # width at every start (less where the text ends before).
        wanted = np.minimum(width, self.contig_starts[-1] + self.contig_lengths[-1] - text_starts)
        codes = self.spans(text_starts, wanted)
        if (wanted == width).all():
            return codes.reshape(len(text_starts), width)
        return windows(codes, exclusive_cumsum(wanted), width)

    def rname_table(self) -> np.ndarray:
        """Padded RNAME bytes: row c is contig c's name, the last row is '*'."""
        if self._rname_table is None:
            encoded = [name.encode() for name in self.contig_names] + [b"*"]
            self._rname_table = np.array(encoded, dtype=f"S{max(len(name) for name in encoded)}")
            self._rname_table = self._rname_table.view(np.uint8).reshape(len(encoded), -1)
        return self._rname_table


# ---------------------------------------------------------------------------------- header


def _check_header_text(text: str, what: str) -> None:
    if not text or any(character in text for character in "\t\n\r") or not text.isprintable():
        raise UsageError(f"{what} {text!r}: must be non-empty printable text without tabs or newlines")


def sam_header(contig_names, contig_lengths, command_line: str, read_group: tuple[str, list[str]] | None) -> str:
    """The SAM header: @HD VN:1.6 SO:unsorted, one @SQ a contig, @RG when ``read_group`` is
    (ID, ["TAG:VALUE", ...]), and @PG with the command line. A bad read-group field or contig
    name raises a one-line :class:`UsageError` / :class:`BowmapError`."""
    lines = ["@HD\tVN:1.6\tSO:unsorted"]
    for name, length in zip(contig_names, contig_lengths):
        # htslib reads any other printable name; these would break SAM parsing.
        if not name or name[0] in "*=" or not name.isprintable() or any(c.isspace() for c in name):
            raise BowmapError(f"reference name {name!r} cannot be written to SAM (empty, starts with '*' or '=', or has spaces)")
        lines.append(f"@SQ\tSN:{name}\tLN:{int(length)}")
    if read_group is not None:
        identifier, fields = read_group
        _check_header_text(identifier, "--rg-id")
        seen = {"ID"}
        for field in fields:
            tag, colon, value = field.partition(":")
            if not (len(tag) == 2 and tag[0].isascii() and tag[0].isalpha() and tag.isascii() and tag.isalnum()) or not colon:
                raise UsageError(f"--rg {field!r}: expected TAG:VALUE with a two-character tag such as SM:sample")
            _check_header_text(value, f"--rg {tag}")
            if tag in seen:
                raise UsageError(f"--rg {field!r}: tag {tag} given twice (ID comes from --rg-id)")
            seen.add(tag)
        lines.append("\t".join(["@RG", f"ID:{identifier}", *fields]))
    # CL is one header field: tabs or newlines inside the command line would split it.
    command = " ".join(command_line.split())
    lines.append(f"@PG\tID:bowmap\tPN:bowmap\tVN:{__version__}\tCL:{command}")
    return "\n".join(lines) + "\n"
