"""FASTQ and FASTA parsing with NumPy alone (see :mod:`bowmap.align.reads` for what is accepted).

Each block is parsed without a Python loop over reads or lines: newline positions from
``np.flatnonzero``, the record structure by arithmetic on line indexes (FASTQ: line 4r is the
header of read r) or on header-line indexes (FASTA), the bytes of each field gathered in one
vectorised copy (:func:`_gather`). An incomplete record at the end of a block is carried over to
the next one. Bad input raises :class:`BowmapError` with one line ``FILE:LINE: what is wrong
(record NAME)`` whose line number is the file's own (1-based), across block boundaries.
"""

from __future__ import annotations

import numpy as np

from bowmap.align.reads.chunk import AMBIGUOUS, Batch
from bowmap.runtime.errors import BowmapError

INVALID = 255
NEWLINE = ord("\n")
CARRIAGE_RETURN = ord("\r")
# A line that is not a sequence (a header, a '+' line) may run over blocks; past this size the
# input is not reads at all, and carrying it over any further would only eat memory.
LONGEST_OTHER_LINE = 64 << 20

# Read byte -> code: A C G T (either case) 0..3, any other letter and '.' 4, anything else invalid.
READ_CODES = np.full(256, INVALID, dtype=np.uint8)
READ_CODES[np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz.", dtype=np.uint8)] = AMBIGUOUS
for _letters, _code in ((b"Aa", 0), (b"Cc", 1), (b"Gg", 2), (b"Tt", 3)):
    READ_CODES[np.frombuffer(_letters, dtype=np.uint8)] = _code


def _encode(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Codes of sequence bytes (as READ_CODES maps them) and the positions of invalid bytes.

    A, C, G, T in either case map to ((byte >> 1) ^ (byte >> 2)) & 3: shifts and a mask over the
    whole array, then only the other bytes (N and the rare rest) go through the table. About 4x
    faster than indexing the table with every byte, which made a quarter of the reader's time."""
    codes = ((raw >> np.uint8(1)) ^ (raw >> np.uint8(2))) & np.uint8(3)
    folded = raw | np.uint8(32)  # lower case
    acgt = (folded == ord("a")) | (folded == ord("c")) | (folded == ord("g")) | (folded == ord("t"))
    if acgt.all():
        return codes, np.zeros(0, dtype=np.intp)
    other = np.flatnonzero(~acgt)
    codes[other] = READ_CODES[raw[other]]
    return codes, other[codes[other] == INVALID]


def _outside(values: np.ndarray, low: int, high: int) -> np.ndarray:
    """Positions of ``values`` (uint8) outside low..high; two reductions when there are none."""
    if len(values) == 0 or (int(values.min()) >= low and int(values.max()) <= high):
        return np.zeros(0, dtype=np.intp)
    return np.flatnonzero((values < low) | (values > high))


_BLANK = np.zeros(256, dtype=bool)
_BLANK[np.frombuffer(b" \t\r\n", dtype=np.uint8)] = True


def _first_text(data: np.ndarray) -> int:
    """Where the first byte that is not blank lies in ``data``, or -1: looked for in a prefix
    growing fourfold, since it is almost always the first byte (the whole of a first block of
    reads was scanned, 40 ms of a run's start on 12 MB)."""
    start, size = 0, 4096
    while start < len(data):
        text = np.flatnonzero(~_BLANK[data[start : start + size]])
        if len(text):
            return start + int(text[0])
        start, size = start + size, 4 * size
    return -1


def has_longer_line(data: bytes, longest: int) -> bool:
    newlines = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == NEWLINE)
    return int(np.diff(newlines, prepend=-1, append=len(data)).max()) - 1 > longest


def longest_line(max_read_length: int) -> int:
    """The longest line the whole-file reader takes (see Parser._carried_fastq)."""
    return LONGEST_OTHER_LINE + max_read_length


def longest_record(max_read_length: int) -> int:
    """A record of valid FASTQ is at most four such lines: a stretch of text this long without a
    record start is not FASTQ, and the search for one stops there rather than go on through the
    file."""
    return 4 * (longest_line(max_read_length) + 2)


def _gather(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The bytes ``data[starts[i]:ends[i]]`` for every i, concatenated, and their offsets.

    The ranges must be disjoint and in increasing order. Ranges of one length (the reads of one
    run of a sequencer) are rows picked from a sliding-window view, copied row by row; otherwise a
    mask repeated out of alternating gap/range runs selects them (no per-byte index array).
    """
    lengths = ends - starts
    offsets = np.zeros(len(starts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] == 0:
        return np.zeros(0, dtype=np.uint8), offsets
    if np.all(lengths == lengths[0]):
        windows = np.lib.stride_tricks.sliding_window_view(data, int(lengths[0]))
        return windows[starts].reshape(-1), offsets
    runs = np.empty(2 * len(starts) + 1, dtype=np.int64)
    runs[0] = starts[0]
    runs[1:-1:2] = lengths
    runs[2:-1:2] = starts[1:] - ends[:-1]
    runs[-1] = len(data) - ends[-1]
    inside = np.zeros(len(runs), dtype=bool)
    inside[1::2] = True
    return data[np.repeat(inside, runs)], offsets


def _lines(data: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For the complete lines of ``data`` (those ending in a newline): start, content end (before
    ``\\r\\n`` or ``\\n``) and the newline's position."""
    newlines = np.flatnonzero(data == NEWLINE)
    starts = np.zeros(len(newlines), dtype=np.int64)
    starts[1:] = newlines[:-1] + 1
    ends = newlines.copy()
    if len(newlines):
        carriage = data[np.maximum(newlines - 1, 0)] == CARRIAGE_RETURN
        ends -= carriage & (newlines > starts)
    return starts, ends, newlines


def _text(data: np.ndarray, start: int, end: int, limit: int = 40) -> str:
    text = data[start : min(end, start + limit)].tobytes().decode("ascii", "replace")
    return repr(text + ("..." if end - start > limit else ""))


def _symbol(byte: int) -> str:
    return repr(chr(byte)) if 32 <= byte < 127 else f"byte 0x{byte:02x}"


class Parser:
    """Turns blocks of text into batches of reads, carrying an incomplete record over."""

    def __init__(self, source: str, max_read_length: int):
        self.source = source
        self.max_read_length = max_read_length
        self.format: str | None = None  # "fastq" or "fasta" once the first non-blank byte is seen
        # Text not parsed yet (bytes, or a memoryview of the last block): starts at a line start
        # (a record start once the format is known).
        self.pending: bytes | memoryview = b""
        self.line_base = 1  # file line number of the first line of ``pending``
        self.last_name: str | None = None  # the last read parsed, to name where a bad header sits

    def feed(self, block: bytes) -> list[Batch]:
        """The batches of the records ``block`` completes (none, one or two)."""
        if self.format == "fastq" and self.pending:
            # The carried record is completed by the block's first lines and parsed alone; the
            # rest of the block is then parsed in place. Putting the carried text in front of the
            # whole block would copy the block (a tenth of the reader's time, which bounds a
            # GPU run). Parsing is the same record by record, so errors and line numbers are too.
            cut = 0
            for _ in range(4 - bytes(self.pending).count(b"\n")):
                cut = block.find(b"\n", cut) + 1
                if cut == 0:
                    break
            if cut:
                self.pending = bytes(self.pending) + block[:cut]
                batches = [self._parse(final=False)]
                if len(self.pending):  # not taken as a whole record (not expected): one text
                    self.pending = bytes(self.pending) + block[cut:]
                else:
                    self.pending = memoryview(block)[cut:]
                if len(self.pending):
                    batches.append(self._parse(final=False))
                return [batch for batch in batches if batch is not None]
        self.pending = bytes(self.pending) + block if len(self.pending) else block
        batch = self._parse(final=False)
        return [] if batch is None else [batch]

    def finish(self) -> Batch | None:
        if self.format is None:
            return None
        self.pending = bytes(self.pending)
        if self.pending and not self.pending.endswith(b"\n"):
            self.pending += b"\n"
        return self._parse(final=True)

    def _record(self, name: str) -> str:
        return f" (record {name})"

    def _after(self, names: np.ndarray, name_offsets: np.ndarray, read: int) -> str:
        """Where a record whose header is unreadable sits: after the read before it."""
        if read > 0:
            return f" (after record {_name(names, name_offsets, read - 1)})"
        return f" (after record {self.last_name})" if self.last_name is not None else ""

    def _parse(self, final: bool) -> Batch | None:
        if self.format is None and not self._detect_format():
            return None
        data = np.frombuffer(self.pending, dtype=np.uint8)
        if self.format == "fastq":
            batch, used_bytes, used_lines = self._parse_fastq(data, final)
        else:
            batch, used_bytes, used_lines = self._parse_fasta(data, final)
        self.pending = self.pending[used_bytes:]
        if batch is not None and self.format == "fastq":
            batch.first_line = self.line_base  # every FASTQ record is four lines
        self.line_base += used_lines
        if batch is not None and batch.count:
            self.last_name = _name(batch.names, batch.name_offsets, batch.count - 1)
        return batch

    def _detect_format(self) -> bool:
        """Drop blank lines before the first record and decide the format from its first line."""
        data = np.frombuffer(self.pending, dtype=np.uint8)
        first = _first_text(data)
        if first < 0:
            # Only whitespace so far: drop its complete lines, keeping their count.
            line_start = self.pending.rfind(b"\n") + 1
            self.line_base += int(np.count_nonzero(data[:line_start] == NEWLINE))
            self.pending = self.pending[line_start:]
            return False
        line_start = int(self.pending.rfind(b"\n", 0, first)) + 1
        self.line_base += int(np.count_nonzero(data[:line_start] == NEWLINE))
        self.pending = self.pending[line_start:]
        byte = int(data[line_start])
        if byte == ord("@"):
            self.format = "fastq"
        elif byte == ord(">"):
            self.format = "fasta"
        else:
            raise BowmapError(
                f"{self.source}:{self.line_base}: not a FASTQ or FASTA file (the first line with text starts with "
                f"{_symbol(byte)}, expected '@' or '>')"
            )
        return True

    def _too_long(self) -> str:
        # No length in the message: a read carried over a block boundary is reported before its
        # end is seen, and the message must not depend on where blocks fall.
        return (
            f"read longer than the index's maximum read length {self.max_read_length} "
            "(rebuild the index with a larger --max-read-length)"
        )

    def _raise_first(self, found: list[tuple[int, str, str]]) -> None:
        """Raise the earliest error in file order; ``found`` holds (line index in the data,
        message, record suffix)."""
        if found:
            line, message, record = min(found, key=lambda entry: entry[0])
            raise BowmapError(f"{self.source}:{self.line_base + line}: {message}{record}")

    # ----------------------------------------------------------------------------------- FASTQ

    def _parse_fastq(self, data: np.ndarray, final: bool):
        starts, ends, newlines = _lines(data)
        line_count = len(starts)
        if final:
            # Blank lines after the last record are ignored; a blank line inside one is not
            # (it is the sequence or quality of an empty read).
            text_lines = np.flatnonzero(ends > starts)
            last_text = int(text_lines[-1]) if len(text_lines) else -1
            line_count = min(line_count, -(-(last_text + 1) // 4) * 4)
        reads = line_count // 4
        complete = 4 * reads
        header, sequence, plus, quality = (slice(k, complete, 4) for k in range(4))
        names, name_offsets = _names(data, starts[header], ends[header])
        raw, offsets = _gather(data, starts[sequence], ends[sequence])
        qualities, quality_offsets = _gather(data, starts[quality], ends[quality])
        codes, invalid = _encode(raw)
        lengths = np.diff(offsets)
        quality_lengths = np.diff(quality_offsets)

        def record(read: int) -> str:
            return self._record(_name(names, name_offsets, read))

        found: list[tuple[int, str, str]] = []
        bad = np.flatnonzero(data[starts[header]] != ord("@"))
        if len(bad):
            line = 4 * int(bad[0])
            found.append((line, _header_message(data, starts[line], ends[line]), self._after(names, name_offsets, int(bad[0]))))
        bad = np.flatnonzero(np.diff(name_offsets) == 0)
        if len(bad):
            found.append((4 * int(bad[0]), "read with no name after '@'", self._after(names, name_offsets, int(bad[0]))))
        bad = _unusable_names(names, name_offsets)
        if len(bad):
            found.append((4 * int(bad[0]), SAM_NAME_MESSAGE, record(int(bad[0]))))
        bad = np.flatnonzero(data[starts[plus]] != ord("+"))
        if len(bad):
            line = 4 * int(bad[0]) + 2
            found.append((line, _plus_message(data, starts[line], ends[line]), record(int(bad[0]))))
        bad = np.flatnonzero(lengths != quality_lengths)
        if len(bad):
            read = int(bad[0])
            message = f"quality length {int(quality_lengths[read])} differs from sequence length {int(lengths[read])}"
            found.append((4 * read + 3, message, record(read)))
        bad = np.flatnonzero(lengths > self.max_read_length)
        if len(bad):
            found.append((4 * int(bad[0]) + 1, self._too_long(), record(int(bad[0]))))
        bad = invalid
        if len(bad):
            read = int(np.searchsorted(offsets, bad[0], side="right")) - 1
            found.append((4 * read + 1, f"invalid character {_symbol(int(raw[bad[0]]))} in the sequence", record(read)))
        bad = _outside(qualities, ord("!"), ord("~"))
        if len(bad):
            read = int(np.searchsorted(quality_offsets, bad[0], side="right")) - 1
            found.append((4 * read + 3, f"invalid quality character {_symbol(int(qualities[bad[0]]))}", record(read)))
        self._raise_first(found)
        # What follows the complete records: at the end a truncated record, else a carried one.
        after = self._after(names, name_offsets, reads)
        if final and line_count - complete == 3 and ends[complete + 1] == starts[complete + 1] and (
            data[starts[complete + 2]] == ord("+")
        ):
            # An empty read at the very end with no newline after its '+' line: its quality is
            # the empty last line (kseq, used by BWA, reads it so too).
            return self._parse_fastq(np.append(data, np.uint8(NEWLINE)), final)
        if final and line_count > complete:
            self._raise_first([self._partial_fastq(data, starts, ends, complete, line_count - complete, after)])
        if not final:
            self._raise_first(self._carried_fastq(data, starts, ends, newlines, complete, after))
        if final:
            return (Batch(names, name_offsets, codes, offsets, qualities) if reads else None), len(data), len(starts)
        used_bytes = int(newlines[complete - 1]) + 1 if complete else 0
        return (Batch(names, name_offsets, codes, offsets, qualities) if reads else None), used_bytes, complete

    def _check_header(self, data, starts, ends, first: int, after: str) -> tuple[tuple[int, str, str] | None, str]:
        """For a record not parsed with the others (the last or a carried one) whose header line
        ``first`` is complete: its header error, if any, and the suffix naming it."""
        if data[starts[first]] != ord("@"):
            return (first, _header_message(data, starts[first], ends[first]), after), after
        names, name_offsets = _names(data, starts[first : first + 1], ends[first : first + 1])
        if name_offsets[1] == 0:
            return (first, "read with no name after '@'", after), after
        return None, self._record(_name(names, name_offsets, 0))

    def _partial_fastq(self, data, starts, ends, first: int, count: int, after: str) -> tuple[int, str, str]:
        """The error for a last record of fewer than 4 lines (the file ends inside it)."""
        error, record = self._check_header(data, starts, ends, first, after)
        if error is not None:
            return error
        if count >= 3 and data[starts[first + 2]] != ord("+"):
            return first + 2, _plus_message(data, starts[first + 2], ends[first + 2]), record
        return first, f"truncated record: the file ends after {count} of its 4 lines", record

    def _carried_fastq(self, data, starts, ends, newlines, first: int, after: str) -> list[tuple[int, str, str]]:
        """Errors told before a record carried over to the next block is complete, so that a
        runaway line cannot make the carried text grow without bound."""
        line_count = len(starts)
        partial_start = int(newlines[-1]) + 1 if line_count else 0
        partial_length = len(data) - partial_start
        if line_count > first:
            length = int(ends[first + 1] - starts[first + 1]) if line_count - first >= 2 else partial_length
            if length > self.max_read_length:
                # Only now is the header checked: blank lines may yet turn out to end the file.
                error, record = self._check_header(data, starts, ends, first, after)
                return [error or (first + 1, self._too_long(), record)]
        if partial_length > LONGEST_OTHER_LINE + self.max_read_length:
            return [(line_count, f"line longer than {LONGEST_OTHER_LINE >> 20} MiB: not a FASTQ file", after)]
        return []

    # ----------------------------------------------------------------------------------- FASTA

    def _parse_fasta(self, data: np.ndarray, final: bool):
        starts, ends, newlines = _lines(data)
        line_count = len(starts)
        is_header = data[starts] == ord(">")
        headers = np.flatnonzero(is_header)  # headers[0] == 0: the pending text starts at a record
        if final:
            records, end_line = len(headers), line_count
        else:
            # The last record may go on in the next block: only those followed by a header are done.
            records = max(len(headers) - 1, 0)
            end_line = int(headers[-1]) if len(headers) else 0
        header_lines = headers[:records]
        next_lines = np.append(headers[1:records], end_line).astype(np.int64) if records else header_lines
        sequence_lines = np.flatnonzero(~is_header[:end_line])
        # Sequence bytes before each line (header lines count 0).
        content = np.where(is_header[:end_line], 0, ends[:end_line] - starts[:end_line])
        before = np.zeros(end_line + 1, dtype=np.int64)
        np.cumsum(content, out=before[1:])
        lengths = before[next_lines] - before[header_lines]
        offsets = np.zeros(records + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        names, name_offsets = _names(data, starts[header_lines], ends[header_lines])
        raw, _ = _gather(data, starts[sequence_lines], ends[sequence_lines])
        codes, invalid = _encode(raw)

        def record(read: int) -> str:
            return self._record(_name(names, name_offsets, read))

        found: list[tuple[int, str, str]] = []
        bad = np.flatnonzero(np.diff(name_offsets) == 0)
        if len(bad):
            found.append((int(header_lines[bad[0]]), "read with no name after '>'", self._after(names, name_offsets, int(bad[0]))))
        bad = _unusable_names(names, name_offsets)
        if len(bad):
            found.append((int(header_lines[bad[0]]), SAM_NAME_MESSAGE, record(int(bad[0]))))
        bad = np.flatnonzero(lengths > self.max_read_length)
        if len(bad):
            found.append((int(header_lines[bad[0]]), self._too_long(), record(int(bad[0]))))
        bad = invalid
        if len(bad):
            read = int(np.searchsorted(offsets, bad[0], side="right")) - 1
            line = int(np.searchsorted(before, bad[0], side="right")) - 1
            found.append((line, f"invalid character {_symbol(int(raw[bad[0]]))} in the sequence", record(read)))
        self._raise_first(found)
        if final:
            return (Batch(names, name_offsets, codes, offsets, None) if records else None), len(data), line_count
        # The carried record's bases so far (its complete lines, then the partial last line): a
        # record that is already too long is reported now rather than carried on and on.
        partial_start = int(newlines[-1]) + 1 if line_count else 0
        carried = int(np.sum(ends[end_line + 1 :] - starts[end_line + 1 :])) + len(data) - partial_start
        if len(headers) and carried > self.max_read_length:
            tail_names, tail_offsets = _names(data, starts[end_line : end_line + 1], ends[end_line : end_line + 1])
            if tail_offsets[1] == 0:
                self._raise_first([(end_line, "read with no name after '>'", self._after(names, name_offsets, records))])
            name = self._record(_name(tail_names, tail_offsets, 0))
            self._raise_first([(end_line, self._too_long(), name)])
        used_bytes = int(starts[end_line]) if end_line < line_count else partial_start
        return (Batch(names, name_offsets, codes, offsets, None) if records else None), used_bytes, end_line


def _names(data: np.ndarray, header_starts: np.ndarray, header_ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Read names (concatenated, with offsets) from header lines starting at the '@' or '>'."""
    headers, header_offsets = _gather(data, header_starts + 1, np.maximum(header_ends, header_starts + 1))
    blanks = np.flatnonzero((headers == ord(" ")) | (headers == ord("\t")))
    blanks = np.append(blanks, len(headers))
    name_ends = np.minimum(blanks[np.searchsorted(blanks, header_offsets[:-1])], header_offsets[1:])
    # BWA's trim_readno: drop a trailing '/' and digit from names longer than two characters.
    last = headers[np.maximum(name_ends - 1, 0)] if len(headers) else name_ends.astype(np.uint8)
    slash = headers[np.maximum(name_ends - 2, 0)] if len(headers) else name_ends.astype(np.uint8)
    mate = (name_ends - header_offsets[:-1] > 2) & (slash == ord("/")) & (last >= ord("0")) & (last <= ord("9"))
    return _gather(headers, header_offsets[:-1], name_ends - 2 * mate)


# SAM's QNAME is [!-?A-~]{1,254}. '@' inside a name is widely accepted (htslib reads it), but a
# name starting with '@' turns its SAM line into a header line, and a longer name breaks htslib.
SAM_NAME_MESSAGE = "read name not usable in SAM (at most 254 printable characters, not starting with '@')"


def _unusable_names(names: np.ndarray, name_offsets: np.ndarray) -> np.ndarray:
    """Indexes of the reads whose names SAM cannot carry."""
    lengths = np.diff(name_offsets)
    unusable = lengths > 254
    # Unprintable bytes are rare: two reductions find there are none (a running count of them
    # over every byte of the names took a tenth of a chunk's parsing).
    unprintable = _outside(names, ord("!"), ord("~"))
    if len(unprintable):
        unusable[np.searchsorted(name_offsets, unprintable, side="right") - 1] = True
    named = np.flatnonzero(lengths > 0)
    unusable[named] |= names[name_offsets[:-1][named]] == ord("@")
    return np.flatnonzero(unusable)


def _name(names: np.ndarray, name_offsets: np.ndarray, read: int) -> str:
    return names[name_offsets[read] : name_offsets[read + 1]].tobytes().decode("ascii", "replace")


def _header_message(data: np.ndarray, start: int, end: int) -> str:
    return f"expected a FASTQ header line starting with '@', found {_text(data, start, end)}"


def _plus_message(data: np.ndarray, start: int, end: int) -> str:
    return (
        f"expected a '+' line after the sequence, found {_text(data, start, end)} "
        "(multi-line FASTQ is not supported)"
    )
