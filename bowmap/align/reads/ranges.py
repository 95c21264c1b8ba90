"""Byte ranges of a FASTQ file, cut before a record, that the workers read and parse themselves
(:class:`ReadRange`): from an uncompressed file the first process reads only a few KiB around
each cut; from a gzipped one it decompresses and cuts the text, which the range carries.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from bowmap.align.reads.chunk import Batch, ReadChunk, concatenate_batches, ramped
from bowmap.align.reads.parse import LONGEST_OTHER_LINE, Parser, has_longer_line, longest_line, longest_record
from bowmap.align.reads.stream import DEFAULT_BLOCK_BYTES, GZIP_MAGIC, input_blocks, prefetched, read_chunks
from bowmap.runtime.errors import BowmapError
from bowmap.runtime.files import open_for_reading

# ----------------------------------------------------------------------------------- byte ranges


class RangeInputError(BowmapError):
    """A byte range of the input (see :class:`ReadRange`) did not parse. Its line numbers count
    from the range's start, so the caller finds the input's first error again with
    :func:`first_input_error`, which reads the file as :func:`read_chunks` does."""


@dataclass
class ReadRange:
    """Bytes ``start:end`` of a FASTQ file, whole records: a chunk that the worker mapping it
    parses itself (:meth:`chunk`). From an uncompressed file the worker reads the bytes too, so
    the bulk of the input never passes through the process that hands the chunks out (see
    :func:`fastq_ranges`); from a gzipped one that process decompresses and cuts the text, which
    the range carries (see :func:`gzip_ranges`)."""

    number: int  # 0-based chunk number in input order
    path: str
    start: int  # (offsets in the decompressed text for gzip input)
    end: int
    last: bool  # the file's last range: it may end without a newline or with blank lines
    max_read_length: int
    text: bytes | None = None  # the range's text, or None: read from the file
    # Compressed bytes of a gzipped file read through ``end`` (about; see _cut_text); for an
    # uncompressed file ``end`` itself. The progress bar's position.
    input_end: int | None = None

    def chunk(self) -> ReadChunk:
        """The range's reads (``first_read`` is -1: the reads before it were never counted)."""
        if self.text is not None:
            data = self.text
        else:
            with open_for_reading(self.path, kind="read file") as handle:
                data = read_at(handle.fileno(), self.path, self.start, self.end - self.start)
        if len(data) < self.end - self.start:
            raise BowmapError(f"{self.path}: the file changed while it was read (it now ends before byte {self.end})")
        if len(data) > longest_line(self.max_read_length) and has_longer_line(data, longest_line(self.max_read_length)):
            # (The whole-file reader refuses such a line, which no range parse would notice.)
            raise RangeInputError(f"{self.path}: a line longer than {LONGEST_OTHER_LINE >> 20} MiB in bytes {self.start}..{self.end}")
        parser = Parser(self.path, self.max_read_length)
        parser.format = "fastq"  # a range starts with a record (see fastq_ranges): nothing to detect
        try:
            batches = parser.feed(data)
            if self.last:
                batches.append(parser.finish())
            elif len(parser.pending):
                raise BowmapError(f"{self.path}: a record runs past byte {self.end}")
        except BowmapError as error:
            raise RangeInputError(f"{error} (in bytes {self.start}..{self.end})") from None
        batches = [batch for batch in batches if batch is not None and batch.count]
        if not batches:  # only where the input is malformed (a range holds a record start)
            empty = np.zeros(0, dtype=np.uint8)
            batches = [Batch(empty, np.zeros(1, dtype=np.int64), empty, np.zeros(1, dtype=np.int64), empty)]
        batch = concatenate_batches(batches)
        return ReadChunk(self.number, -1, batch.names, batch.name_offsets, batch.codes, batch.offsets, batch.qualities, input_end=self.position)

    @property
    def position(self) -> int:
        """Bytes of the input file read through this range's end (compressed bytes for gzip)."""
        return self.end if self.input_end is None else self.input_end


_PROBE_BYTES = 1 << 16  # bytes read at a time around a cut (grown for longer records)


def chunk_bound(path: str | None, chunk_bases: int) -> int | None:
    """At most how many pieces :func:`input_chunks` makes of an uncompressed file without a ramp
    of smaller first chunks (the caller adds those): every piece but the last holds
    ``chunk_bases`` bases or more (a FASTQ range, 2 x ``chunk_bases`` bytes
    or more), and a base takes a byte of a FASTA file, two of a FASTQ file (its quality). None
    for standard input, a pipe or a gzip file, whose size does not tell."""
    file = None if path is None else file_head(path, max(1, chunk_bases))
    if file is None or file[1][:2] == GZIP_MAGIC:
        return None
    size, head = file
    bytes_a_base = 2 if first_record(head) is not None else 1
    return size // (bytes_a_base * max(1, chunk_bases)) + 1


def fastq_ranges(path: str, target_bytes: int, max_read_length: int, ramp: int = 0) -> Iterator[ReadRange] | None:
    """Byte ranges of about ``target_bytes`` covering an uncompressed FASTQ file, cut before
    records; None when ``path`` is not one (stdin, gzip, FASTA, not a regular file, empty).

    Only a few KiB around each cut are read here. A cut goes before the first line at or after
    ``k * target_bytes`` that starts with ``@`` and whose next-but-one line starts with ``+``
    (its sequence and quality lines as long as each other). In 4-line FASTQ only a header line
    can be such a line: a quality line may start with ``@``, but two lines on comes a sequence
    line, which cannot start with ``+``. Malformed input may be cut elsewhere; some range then
    fails to parse, and :func:`first_input_error` reports the error as the whole-file reader
    would. The first ``ramp`` ranges are smaller (:func:`bowmap.align.reads.chunk.ramped`)."""
    file = file_head(path, target_bytes)
    if file is None:
        return None
    size, head = file
    first = first_record(head)
    if head[:2] == GZIP_MAGIC or first is None:
        return None
    return _ranges(path, first, size, target_bytes, max_read_length, ramp)


def file_head(path: str, target_bytes: int) -> tuple[int, bytes] | None:
    """(size, first 64 KiB) of a regular file, None for stdin, anything else or an unreadable
    file (read_chunks reports it). The path is stat'ed before it is opened: opening a named pipe
    would take its data."""
    if path == "-" or target_bytes < 1:
        return None
    try:
        status = os.stat(path)
        if not stat.S_ISREG(status.st_mode):
            return None
        with open(path, "rb") as handle:
            return status.st_size, os.pread(handle.fileno(), 1 << 16, 0)
    except OSError:
        return None


def first_record(text: bytes) -> int | None:
    """Where the first FASTQ record of ``text`` starts, after blank lines (which the whole-file
    reader skips too); None when the first text there is not an '@' at a line start."""
    first = len(text) - len(text.lstrip(b" \t\r\n"))
    if text[first : first + 1] != b"@" or text[first - 1 : first] not in (b"", b"\n"):
        return None
    return first


def _ranges(path: str, start: int, size: int, target_bytes: int, max_read_length: int, ramp: int) -> Iterator[ReadRange]:
    with open_for_reading(path, kind="read file") as handle:
        number = 0
        while True:
            target = ramped(target_bytes, number, ramp)
            give_up = start + target + longest_record(max_read_length)
            cut = record_start(handle.fileno(), path, start + target, size, give_up)
            if cut is None:
                yield ReadRange(number, path, start, size, True, max_read_length)
                return
            yield ReadRange(number, path, start, cut, False, max_read_length)
            start, number = cut, number + 1


def record_start(descriptor: int, path: str, offset: int, size: int, give_up: int) -> int | None:
    """The first FASTQ record start at or after ``offset`` (see :func:`fastq_ranges`), None if
    there is none before the end of the file; :class:`RangeInputError` if there is none before
    byte ``give_up``."""
    probe = max(2, _PROBE_BYTES)
    while offset < size:
        if offset > give_up:
            raise RangeInputError(f"{path}: no FASTQ record starts before byte {offset}")
        base = offset - 1  # the byte before: a line starts after a newline
        data = read_at(descriptor, path, base, min(probe, size - base))
        reaches_end = base + len(data) >= size
        found, cut_short = _find_record(data, 1, reaches_end)
        if found is not None:
            return base + found
        if cut_short is not None:  # a record longer than what was read: read more
            offset, probe = base + cut_short, 2 * probe
        elif reaches_end:
            return None
        else:
            offset = base + len(data)  # its last byte is read again: a newline before an '@'
    return None


def _find_record(data: bytes, offset: int, reaches_end: bool) -> tuple[int | None, int | None]:
    """(the first record start at or after ``offset`` in ``data``, None), or (None, the start
    of a candidate that ``data`` cuts short, unless it reaches the end of the input), or (None,
    None) when there is no record start."""
    at = data.find(b"\n@", max(offset - 1, 0))
    while at >= 0:
        verdict = starts_record(data, at + 1, reaches_end)
        if verdict is None:
            return None, at + 1
        if verdict:
            return at + 1, None
        at = data.find(b"\n@", at + 1)
    return None, None


def gzip_ranges(path: str, target_bytes: int, max_read_length: int, ramp: int = 0) -> Iterator[ReadChunk | ReadRange] | None:
    """Ranges of about ``target_bytes`` of a gzipped FASTQ file's text, cut before records as
    :func:`fastq_ranges` cuts and carrying their text (or, if the text is not FASTQ, the chunks
    of :func:`read_chunks`); None when ``path`` is not a gzipped regular file. This process only
    decompresses and cuts; the workers parse. Damaged gzip data raises
    :class:`RangeInputError`: a range before it may hold the input's first error. The first
    ``ramp`` ranges are smaller (:func:`bowmap.align.reads.chunk.ramped`)."""
    file = file_head(path, target_bytes)
    if file is None or file[1][:2] != GZIP_MAGIC:
        return None
    return _gzip_ranges(path, target_bytes, max_read_length, ramp)


def _gzip_ranges(path: str, target_bytes: int, max_read_length: int, ramp: int) -> Iterator[ReadChunk | ReadRange]:
    blocks = prefetched(input_blocks(path, path, DEFAULT_BLOCK_BYTES))
    try:
        try:
            head, position = next(blocks, (b"", 0))
            first = first_record(head)
            if first is not None:
                yield from _cut_text(blocks, head[first:], first, _TextPositions(len(head), position), path, target_bytes, max_read_length, ramp)
                return
        except RangeInputError:
            raise
        except BowmapError as error:  # damaged gzip data: a range before it may hold the first error
            raise RangeInputError(str(error)) from None
    finally:
        blocks.close()
    # Not FASTQ, or blank lines for a whole block: the whole-file reader takes it.
    yield from read_chunks(path, max(1, target_bytes // 2), max_read_length, ramp=ramp)


class _TextPositions:
    """Where in the compressed file a text offset lies, about: linear between the ends of the
    decompressed blocks, whose compressed positions the reader gives (input_blocks)."""

    def __init__(self, text_end: int, position: int):
        self.marks = [(0, 0), (text_end, position)]  # (text offset, compressed offset), rising

    def add(self, length: int, position: int) -> None:
        self.marks.append((self.marks[-1][0] + length, position))

    def at(self, offset: int) -> int:
        while len(self.marks) > 2 and self.marks[1][0] < offset:
            self.marks.pop(0)  # offsets asked for only rise
        (low_text, low), (high_text, high) = self.marks[0], self.marks[1]
        if offset >= high_text or high_text == low_text:
            return high
        return low + (high - low) * (offset - low_text) // (high_text - low_text)


def _cut_text(blocks, pending: bytes, start: int, positions: _TextPositions, path: str, target_bytes: int, max_read_length: int, ramp: int) -> Iterator[ReadRange]:
    """Ranges of the text of ``blocks`` ((text, compressed position) pairs), ``pending``
    (starting with a record, at ``start`` in the text) first."""
    number, ended = 0, False
    while True:
        target = ramped(target_bytes, number, ramp)
        found, _ = _find_record(pending, target, ended)
        if found is not None:
            end = start + found
            yield ReadRange(number, path, start, end, False, max_read_length, pending[:found], positions.at(end))
            pending, start, number = pending[found:], end, number + 1
        elif ended:
            if pending:
                end = start + len(pending)
                yield ReadRange(number, path, start, end, True, max_read_length, pending, positions.at(end))
            return
        elif len(pending) > target + longest_record(max_read_length):
            raise RangeInputError(f"{path}: no FASTQ record starts before byte {start + len(pending)} of its text")
        else:
            block = next(blocks, None)
            if block is None:
                ended = True
            else:
                pending += block[0]
                positions.add(len(block[0]), block[1])


def starts_record(data: bytes, at: int, reaches_end: bool) -> bool | None:
    """Whether the line at ``data[at:]`` (an '@' line) is followed by a sequence, a '+' line and
    a quality line as long as the sequence; None when ``data`` ends before the record does (and
    the file goes on)."""
    ends = []
    for _ in range(4):
        end = data.find(b"\n", ends[-1] + 1 if ends else at)
        if end < 0:
            if not reaches_end:
                return None
            if len(ends) < 3:
                return False
            end = len(data)  # the last record, without a final newline
        ends.append(end)
    sequence = data[ends[0] + 1 : ends[1]].rstrip(b"\r")
    quality = data[ends[2] + 1 : ends[3]].rstrip(b"\r")
    return data[ends[1] + 1 : ends[1] + 2] == b"+" and len(sequence) == len(quality)


def read_at(descriptor: int, path: str, offset: int, count: int) -> bytes:
    """``count`` bytes of the file at ``offset`` (fewer only at its end)."""
    parts, got = [], 0
    try:
        while got < count:
            part = os.pread(descriptor, count - got, offset + got)
            if not part:
                break
            parts.append(part)
            got += len(part)
    except OSError as error:
        raise BowmapError(f"{path}: cannot read ({error.strerror})") from None
    return parts[0] if len(parts) == 1 else b"".join(parts)
