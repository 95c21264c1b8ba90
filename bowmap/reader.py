"""The align pipeline's reader stage: FASTQ or FASTA reads, parsed in chunks of NumPy arrays.

:func:`read_chunks` streams the input (a path or ``-`` for stdin; gzip detected by its magic
bytes, several gzip members accepted as bgzip writes them) in blocks of ``block_bytes``. Each
block is parsed with NumPy alone: newline positions from ``np.flatnonzero``, the record structure
by arithmetic on line indexes (FASTQ: line 4r is the header of read r) or on header-line indexes
(FASTA), the bytes of each field gathered in one vectorised copy (:func:`_gather`). An incomplete
record at the end of a block is carried over to the next one, so memory stays flat however large
the input. There is no Python loop over reads or lines: only over blocks and chunks. Chunks are
cut by base count alone, so they do not depend on the block size (see :func:`read_chunks`).

Accepted input:

* FASTQ of 4-line records (multi-line FASTQ is refused with a clear error: a wrapped sequence
  would otherwise be misread), an empty sequence (a read of length 0) allowed;
* FASTA with multi-line sequences, an empty sequence allowed;
* the format is decided by the first non-blank byte (``@`` FASTQ, ``>`` FASTA); blank lines
  before the first record and after the last one are ignored;
* Windows line endings, lowercase bases; any letter other than ACGT, and ``.``, reads as
  ambiguous (code 4); quality characters must lie in ``!``..``~`` (Phred+33).

A read's name is the first word of its header (up to a space or tab) without the ``@``/``>``,
and, as BWA does (``trim_readno`` in bwa.c), without a trailing ``/`` and digit (``/1``, ``/2``)
when the name is longer than two characters, so the mates of a pair get one name.

Bad input raises :class:`BowmapError` with one line ``FILE:LINE: what is wrong (record NAME)``
whose line number is the file's own (1-based), across block boundaries.
"""

from __future__ import annotations

import functools
import io
import os
import stat
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from bowmap.errors import BowmapError
from bowmap.files import open_for_reading

GZIP_MAGIC = b"\x1f\x8b"
DEFAULT_BLOCK_BYTES = 4 << 20  # input bytes parsed at once (decompressed bytes for gzip)
AMBIGUOUS = 4
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


@dataclass
class ReadChunk:
    """A batch of consecutive reads, every field concatenated over the reads.

    Read i (0-based within the chunk; ``first_read + i`` in the whole input) has the codes
    ``codes[offsets[i]:offsets[i+1]]`` and the name ``names[name_offsets[i]:name_offsets[i+1]]``.
    """

    number: int  # 0-based chunk number in input order
    first_read: int  # 0-based input index of the chunk's first read
    names: np.ndarray  # uint8: read names (first header word, see module docstring) concatenated
    name_offsets: np.ndarray  # int64[count + 1]
    codes: np.ndarray  # uint8: A=0 C=1 G=2 T=3, any other letter or '.' = 4; reads concatenated
    offsets: np.ndarray  # int64[count + 1]
    qualities: np.ndarray | None  # uint8 Phred+33 characters as in the file, offsets as codes; None for FASTA

    @property
    def count(self) -> int:
        return len(self.offsets) - 1

    @property
    def lengths(self) -> np.ndarray:
        """int64[count]: bases in each read."""
        return np.diff(self.offsets)

    @functools.cached_property
    def reverse_codes(self) -> np.ndarray:
        """Each read's reverse complement (4 stays 4), offsets as ``codes``: made where it is first
        needed (a worker process, not the reader), and not sent between processes."""
        return reverse_complement(self.codes, self.offsets)

    @functools.cached_property
    def both_codes(self) -> np.ndarray:
        """``codes`` then ``reverse_codes``, one array: the layout the seeds, the Smith-Waterman
        reads and the SAM text take, made once a chunk."""
        return np.concatenate((self.codes, self.reverse_codes))

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("reverse_codes", None)
        state.pop("both_codes", None)
        return state

    def name(self, i: int) -> str:
        """Read i's name, for error messages and tests (not for hot paths)."""
        return self.names[self.name_offsets[i] : self.name_offsets[i + 1]].tobytes().decode("ascii", "replace")


def reverse_complement(codes: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """The reverse complement of every read of ``codes`` (uint8, reads at ``offsets``), same offsets."""
    lengths = np.diff(offsets)
    if len(codes) == 0:
        return codes.copy()
    if np.all(lengths == lengths[0]):
        # Reads of one length (the usual case): a 2-D view reversed along its rows.
        reverse = codes.reshape(len(lengths), -1)[:, ::-1].reshape(-1)
    else:
        # Position p of read i comes from position offsets[i] + offsets[i+1] - 1 - (p - offsets[i]).
        mirror = np.repeat(offsets[:-1] + offsets[1:] - 1, lengths)
        reverse = codes[mirror - np.arange(len(codes), dtype=np.int64)]
    # Complement: code ^ 3 swaps A<->T and C<->G; 4 ^ 3 = 7, brought back to 4 by the minimum.
    complement = np.bitwise_xor(reverse, np.uint8(3))
    return np.minimum(complement, np.uint8(AMBIGUOUS), out=complement)


def read_chunks(
    path: str,
    chunk_bases: int = 4 << 20,
    max_read_length: int = 1024,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> Iterator[ReadChunk]:
    """Chunks of the reads of ``path`` (``-``: stdin) in input order.

    A chunk ends with the first read that brings its base count (a read of length 0 counting as
    1) to ``chunk_bases`` or more, so chunks depend only on the input and ``chunk_bases``, never
    on ``block_bytes``; a record is never split. Empty input (or blank lines only) yields no
    chunk. A read longer than ``max_read_length`` is an error, as is any malformed record.
    """
    if chunk_bases < 1 or max_read_length < 0 or block_bytes < 1:
        raise ValueError("chunk_bases and block_bytes must be positive, max_read_length not negative")
    source = "stdin" if path == "-" else path
    parser = _Parser(source, max_read_length)
    chunker = _Chunker(chunk_bases)
    for block in _prefetched(_blocks(path, source, block_bytes)):
        for batch in parser.feed(block):
            yield from chunker.add(batch)
    batch = parser.finish()
    if batch is not None:
        yield from chunker.add(batch)
    yield from chunker.finish()


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

    def chunk(self) -> ReadChunk:
        """The range's reads (``first_read`` is -1: the reads before it were never counted)."""
        if self.text is not None:
            data = self.text
        else:
            with open_for_reading(self.path, kind="read file") as handle:
                data = _read_at(handle.fileno(), self.path, self.start, self.end - self.start)
        if len(data) < self.end - self.start:
            raise BowmapError(f"{self.path}: the file changed while it was read (it now ends before byte {self.end})")
        if len(data) > _longest_line(self.max_read_length) and _has_longer_line(data, _longest_line(self.max_read_length)):
            # (The whole-file reader refuses such a line, which no range parse would notice.)
            raise RangeInputError(f"{self.path}: a line longer than {LONGEST_OTHER_LINE >> 20} MiB in bytes {self.start}..{self.end}")
        parser = _Parser(self.path, self.max_read_length)
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
            batches = [_Batch(empty, np.zeros(1, dtype=np.int64), empty, np.zeros(1, dtype=np.int64), empty)]
        batch = _concatenate(batches)
        return ReadChunk(self.number, -1, batch.names, batch.name_offsets, batch.codes, batch.offsets, batch.qualities)


def _has_longer_line(data: bytes, longest: int) -> bool:
    newlines = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == NEWLINE)
    return int(np.diff(newlines, prepend=-1, append=len(data)).max()) - 1 > longest


def as_chunk(item: ReadChunk | ReadRange) -> ReadChunk:
    """The reads of a chunk, or of a byte range (parsed here: in the worker that maps it)."""
    return item.chunk() if isinstance(item, ReadRange) else item


def input_chunks(path: str, chunk_bases: int, max_read_length: int) -> Iterator[ReadChunk | ReadRange]:
    """What the align pipeline hands its workers: :func:`fastq_ranges` for an uncompressed
    FASTQ file, :func:`gzip_ranges` for a gzipped one, else (FASTA, stdin) the chunks of
    :func:`read_chunks`. A FASTQ record takes about two bytes a base, so ranges of
    ``2 * chunk_bases`` bytes are chunks of about ``chunk_bases`` bases. Either way the reads
    and their order are the same, and the aligner's output does not depend on where chunks are
    cut."""
    ranges = fastq_ranges(path, 2 * chunk_bases, max_read_length)
    if ranges is None:
        ranges = gzip_ranges(path, 2 * chunk_bases, max_read_length)
    return ranges if ranges is not None else read_chunks(path, chunk_bases, max_read_length)


def first_input_error(path: str, max_read_length: int, found: RangeInputError) -> BowmapError:
    """The input's first error as :func:`read_chunks` reports it (file line and record), after
    a range failed with ``found``; ``found`` itself if the whole file parses (not expected)."""
    try:
        for _ in read_chunks(path, 1 << 22, max_read_length):
            pass
    except BowmapError as error:
        return error
    return BowmapError(str(found))


_PROBE_BYTES = 1 << 16  # bytes read at a time around a cut (grown for longer records)


def chunk_bound(path: str | None, chunk_bases: int) -> int | None:
    """At most how many pieces :func:`input_chunks` makes of an uncompressed file: every piece
    but the last holds ``chunk_bases`` bases or more (a FASTQ range, 2 x ``chunk_bases`` bytes
    or more), and a base takes a byte of a FASTA file, two of a FASTQ file (its quality). None
    for standard input, a pipe or a gzip file, whose size does not tell."""
    file = None if path is None else _file_head(path, max(1, chunk_bases))
    if file is None or file[1][:2] == GZIP_MAGIC:
        return None
    size, head = file
    bytes_a_base = 2 if _first_record(head) is not None else 1
    return size // (bytes_a_base * max(1, chunk_bases)) + 1


def fastq_ranges(path: str, target_bytes: int, max_read_length: int) -> Iterator[ReadRange] | None:
    """Byte ranges of about ``target_bytes`` covering an uncompressed FASTQ file, cut before
    records; None when ``path`` is not one (stdin, gzip, FASTA, not a regular file, empty).

    Only a few KiB around each cut are read here. A cut goes before the first line at or after
    ``k * target_bytes`` that starts with ``@`` and whose next-but-one line starts with ``+``
    (its sequence and quality lines as long as each other). In 4-line FASTQ only a header line
    can be such a line: a quality line may start with ``@``, but two lines on comes a sequence
    line, which cannot start with ``+``. Malformed input may be cut elsewhere; some range then
    fails to parse, and :func:`first_input_error` reports the error as the whole-file reader
    would."""
    file = _file_head(path, target_bytes)
    if file is None:
        return None
    size, head = file
    first = _first_record(head)
    if head[:2] == GZIP_MAGIC or first is None:
        return None
    return _ranges(path, first, size, target_bytes, max_read_length)


def _file_head(path: str, target_bytes: int) -> tuple[int, bytes] | None:
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


def _first_record(text: bytes) -> int | None:
    """Where the first FASTQ record of ``text`` starts, after blank lines (which the whole-file
    reader skips too); None when the first text there is not an '@' at a line start."""
    first = len(text) - len(text.lstrip(b" \t\r\n"))
    if text[first : first + 1] != b"@" or text[first - 1 : first] not in (b"", b"\n"):
        return None
    return first


def _longest_line(max_read_length: int) -> int:
    """The longest line the whole-file reader takes (see _Parser._carried_fastq)."""
    return LONGEST_OTHER_LINE + max_read_length


def _longest_record(max_read_length: int) -> int:
    """A record of valid FASTQ is at most four such lines: a stretch of text this long without a
    record start is not FASTQ, and the search for one stops there rather than go on through the
    file."""
    return 4 * (_longest_line(max_read_length) + 2)


def _ranges(path: str, start: int, size: int, target_bytes: int, max_read_length: int) -> Iterator[ReadRange]:
    with open_for_reading(path, kind="read file") as handle:
        number = 0
        while True:
            give_up = start + target_bytes + _longest_record(max_read_length)
            cut = _record_start(handle.fileno(), path, start + target_bytes, size, give_up)
            if cut is None:
                yield ReadRange(number, path, start, size, True, max_read_length)
                return
            yield ReadRange(number, path, start, cut, False, max_read_length)
            start, number = cut, number + 1


def _record_start(descriptor: int, path: str, offset: int, size: int, give_up: int) -> int | None:
    """The first FASTQ record start at or after ``offset`` (see :func:`fastq_ranges`), None if
    there is none before the end of the file; :class:`RangeInputError` if there is none before
    byte ``give_up``."""
    probe = max(2, _PROBE_BYTES)
    while offset < size:
        if offset > give_up:
            raise RangeInputError(f"{path}: no FASTQ record starts before byte {offset}")
        base = offset - 1  # the byte before: a line starts after a newline
        data = _read_at(descriptor, path, base, min(probe, size - base))
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
        verdict = _starts_record(data, at + 1, reaches_end)
        if verdict is None:
            return None, at + 1
        if verdict:
            return at + 1, None
        at = data.find(b"\n@", at + 1)
    return None, None


def gzip_ranges(path: str, target_bytes: int, max_read_length: int) -> Iterator[ReadChunk | ReadRange] | None:
    """Ranges of about ``target_bytes`` of a gzipped FASTQ file's text, cut before records as
    :func:`fastq_ranges` cuts and carrying their text (or, if the text is not FASTQ, the chunks
    of :func:`read_chunks`); None when ``path`` is not a gzipped regular file. This process only
    decompresses and cuts; the workers parse. Damaged gzip data raises
    :class:`RangeInputError`: a range before it may hold the input's first error."""
    file = _file_head(path, target_bytes)
    if file is None or file[1][:2] != GZIP_MAGIC:
        return None
    return _gzip_ranges(path, target_bytes, max_read_length)


def _gzip_ranges(path: str, target_bytes: int, max_read_length: int) -> Iterator[ReadChunk | ReadRange]:
    blocks = _prefetched(_blocks(path, path, DEFAULT_BLOCK_BYTES))
    try:
        try:
            head = next(blocks, b"")
            first = _first_record(head)
            if first is not None:
                yield from _cut_text(blocks, head[first:], first, path, target_bytes, max_read_length)
                return
        except RangeInputError:
            raise
        except BowmapError as error:  # damaged gzip data: a range before it may hold the first error
            raise RangeInputError(str(error)) from None
    finally:
        blocks.close()
    # Not FASTQ, or blank lines for a whole block: the whole-file reader takes it.
    yield from read_chunks(path, max(1, target_bytes // 2), max_read_length)


def _cut_text(blocks, pending: bytes, start: int, path: str, target_bytes: int, max_read_length: int) -> Iterator[ReadRange]:
    """Ranges of the text of ``blocks``, ``pending`` (starting with a record, at ``start`` in
    the text) first."""
    number, ended = 0, False
    while True:
        found, _ = _find_record(pending, target_bytes, ended)
        if found is not None:
            yield ReadRange(number, path, start, start + found, False, max_read_length, pending[:found])
            pending, start, number = pending[found:], start + found, number + 1
        elif ended:
            if pending:
                yield ReadRange(number, path, start, start + len(pending), True, max_read_length, pending)
            return
        elif len(pending) > target_bytes + _longest_record(max_read_length):
            raise RangeInputError(f"{path}: no FASTQ record starts before byte {start + len(pending)} of its text")
        else:
            block = next(blocks, None)
            if block is None:
                ended = True
            else:
                pending += block


def _starts_record(data: bytes, at: int, reaches_end: bool) -> bool | None:
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


def _read_at(descriptor: int, path: str, offset: int, count: int) -> bytes:
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


# ---------------------------------------------------------------------------------------- input


def _blocks(path: str, source: str, block_bytes: int) -> Iterator[bytes]:
    """The input's (decompressed) bytes in blocks of about ``block_bytes``."""
    if path == "-":
        yield from _decoded(_raw_stdin(), source, block_bytes)
        return
    with open_for_reading(path, kind="read file") as handle:
        yield from _decoded(handle, source, block_bytes)


_PREFETCH_DEPTH = 2


def _prefetched(blocks: Iterator[bytes]) -> Iterator[bytes]:
    """``blocks``, drawn by a helper thread up to ``_PREFETCH_DEPTH`` blocks ahead: reading and
    gunzipping (zlib lets other threads run meanwhile) overlap with parsing, which roughly
    halves the reader's time on gzipped input. Errors are raised here, in input order."""
    import queue
    import threading

    channel: queue.Queue = queue.Queue(maxsize=_PREFETCH_DEPTH)
    stop = threading.Event()
    end = object()

    def offer(item) -> bool:
        while not stop.is_set():
            try:
                channel.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False  # the consumer has gone

    def fill():
        try:
            for block in blocks:
                if not offer((block, None)):
                    return
            offer((end, None))
        except BaseException as error:  # noqa: BLE001 - raised again in the consumer's thread
            offer((end, error))

    # A daemon: one blocked reading a terminal or a pipe must not hold the exit up.
    threading.Thread(target=fill, daemon=True, name="bowmap-read-ahead").start()
    try:
        while True:
            block, error = channel.get()
            if block is end:
                if error is not None:
                    raise error
                return
            yield block
    finally:
        stop.set()


def _raw_stdin():
    """Standard input without Python's buffered reader: a reader thread blocked in a buffered
    read holds its lock, and an interrupted run then aborts at exit waiting for that lock."""
    try:
        return _FullReads(io.FileIO(sys.stdin.fileno(), "rb", closefd=False))
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return sys.stdin.buffer  # not a file descriptor (tests, embedding): the buffered stream


class _FullReads:
    """``read(n)`` of a raw stream that returns n bytes unless the stream ends first (a pipe
    gives at most its buffer a read: blocks that small would slow the parser down)."""

    def __init__(self, raw):
        self.raw = raw

    def read(self, size: int) -> bytes:
        parts, count = [], 0
        while count < size:
            part = self.raw.read(size - count)
            if not part:
                break
            parts.append(part)
            count += len(part)
        return b"".join(parts)


def _decoded(stream, source: str, block_bytes: int) -> Iterator[bytes]:
    def raw_blocks(first: bytes) -> Iterator[bytes]:
        block = first
        while block:
            yield block
            try:
                block = stream.read(block_bytes)
            except OSError as error:
                raise BowmapError(f"{source}: cannot read ({error.strerror or error})") from None

    try:
        first = stream.read(block_bytes)
    except OSError as error:
        raise BowmapError(f"{source}: cannot read ({error.strerror or error})") from None
    # Two bytes decide; a read of fewer (a pipe's first write) is topped up first.
    while 0 < len(first) < 2:
        more = stream.read(block_bytes)
        if not more:
            break
        first += more
    if first[:2] == GZIP_MAGIC:
        yield from _gunzip(raw_blocks(first), source, block_bytes)
    else:
        yield from raw_blocks(first)


def _gunzip(raw_blocks: Iterator[bytes], source: str, block_bytes: int) -> Iterator[bytes]:
    """Decompress gzip members one after another (``cat a.gz b.gz`` and bgzip write several),
    at most ``block_bytes`` of output per call so a highly compressed file cannot flood memory."""
    decompressor = zlib.decompressobj(wbits=31)
    fed = False
    try:
        for raw in raw_blocks:
            data = raw
            while data:
                fed = True
                output = decompressor.decompress(data, block_bytes)
                if output:
                    yield output
                if decompressor.eof:
                    data = decompressor.unused_data
                    decompressor = zlib.decompressobj(wbits=31)
                    fed = False
                else:
                    data = decompressor.unconsumed_tail
        if fed:
            # Output held back by the size limit when the input ran out.
            while not decompressor.eof:
                output = decompressor.decompress(b"", block_bytes)
                if not output:
                    break
                yield output
            if not decompressor.eof:
                raise BowmapError(f"{source}: truncated gzip data (the file ends inside a compressed stream)")
    except zlib.error as error:
        raise BowmapError(f"{source}: damaged gzip data ({error})") from None


# --------------------------------------------------------------------------------------- parsing


@dataclass
class _Batch:
    """Parsed reads before they are cut into chunks (the fields of :class:`ReadChunk`)."""

    names: np.ndarray
    name_offsets: np.ndarray
    codes: np.ndarray
    offsets: np.ndarray
    qualities: np.ndarray | None

    @property
    def count(self) -> int:
        return len(self.offsets) - 1


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


class _Parser:
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

    def feed(self, block: bytes) -> list[_Batch]:
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

    def finish(self) -> _Batch | None:
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

    def _parse(self, final: bool) -> _Batch | None:
        if self.format is None and not self._detect_format():
            return None
        data = np.frombuffer(self.pending, dtype=np.uint8)
        if self.format == "fastq":
            batch, used_bytes, used_lines = self._parse_fastq(data, final)
        else:
            batch, used_bytes, used_lines = self._parse_fasta(data, final)
        self.pending = self.pending[used_bytes:]
        self.line_base += used_lines
        if batch is not None and batch.count:
            self.last_name = _name(batch.names, batch.name_offsets, batch.count - 1)
        return batch

    def _detect_format(self) -> bool:
        """Drop blank lines before the first record and decide the format from its first line."""
        data = np.frombuffer(self.pending, dtype=np.uint8)
        text = np.flatnonzero(~_BLANK[data])
        if len(text) == 0:
            # Only whitespace so far: drop its complete lines, keeping their count.
            line_start = self.pending.rfind(b"\n") + 1
            self.line_base += int(np.count_nonzero(data[:line_start] == NEWLINE))
            self.pending = self.pending[line_start:]
            return False
        first = int(text[0])
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
            return (_Batch(names, name_offsets, codes, offsets, qualities) if reads else None), len(data), len(starts)
        used_bytes = int(newlines[complete - 1]) + 1 if complete else 0
        return (_Batch(names, name_offsets, codes, offsets, qualities) if reads else None), used_bytes, complete

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
            return (_Batch(names, name_offsets, codes, offsets, None) if records else None), len(data), line_count
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
        return (_Batch(names, name_offsets, codes, offsets, None) if records else None), used_bytes, end_line


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
    unprintable = np.concatenate(([0], np.cumsum((names < ord("!")) | (names > ord("~")))))
    per_read = unprintable[name_offsets[1:]] - unprintable[name_offsets[:-1]]
    starts_with_at = np.zeros(len(lengths), dtype=bool)
    named = np.flatnonzero(lengths > 0)
    starts_with_at[named] = names[name_offsets[:-1][named]] == ord("@")
    return np.flatnonzero((lengths > 254) | (per_read > 0) | starts_with_at)


def _name(names: np.ndarray, name_offsets: np.ndarray, read: int) -> str:
    return names[name_offsets[read] : name_offsets[read + 1]].tobytes().decode("ascii", "replace")


def _header_message(data: np.ndarray, start: int, end: int) -> str:
    return f"expected a FASTQ header line starting with '@', found {_text(data, start, end)}"


def _plus_message(data: np.ndarray, start: int, end: int) -> str:
    return (
        f"expected a '+' line after the sequence, found {_text(data, start, end)} "
        "(multi-line FASTQ is not supported)"
    )


# -------------------------------------------------------------------------------------- chunking


class _Chunker:
    """Cuts batches into chunks of about ``chunk_bases`` bases, independently of batch sizes."""

    def __init__(self, chunk_bases: int):
        self.chunk_bases = chunk_bases
        self.held: list[_Batch] = []
        self.held_weight = 0
        self.number = 0
        self.first_read = 0

    def add(self, batch: _Batch) -> Iterator[ReadChunk]:
        if batch.count == 0:
            return
        self.held.append(batch)
        self.held_weight += int(np.maximum(np.diff(batch.offsets), 1).sum())
        if self.held_weight >= self.chunk_bases:
            yield from self._cut(final=False)

    def finish(self) -> Iterator[ReadChunk]:
        if self.held:
            yield from self._cut(final=True)

    def _cut(self, final: bool) -> Iterator[ReadChunk]:
        batch = _concatenate(self.held)
        weights = np.cumsum(np.maximum(np.diff(batch.offsets), 1))
        start = 0
        while start < batch.count:
            before = int(weights[start - 1]) if start else 0
            end = int(np.searchsorted(weights, before + self.chunk_bases, side="left")) + 1
            if end > batch.count:
                if not final:
                    break
                end = batch.count
            yield self._chunk(_slice(batch, start, end))
            start = end
        rest = _slice(batch, start, batch.count)
        self.held = [rest] if rest.count else []
        self.held_weight = int(weights[-1] - (weights[start - 1] if start else 0)) if rest.count else 0

    def _chunk(self, batch: _Batch) -> ReadChunk:
        chunk = ReadChunk(
            number=self.number,
            first_read=self.first_read,
            names=batch.names,
            name_offsets=batch.name_offsets,
            codes=batch.codes,
            offsets=batch.offsets,
            qualities=batch.qualities,
        )
        self.number += 1
        self.first_read += batch.count
        return chunk


def _slice(batch: _Batch, start: int, end: int) -> _Batch:
    low, high = batch.offsets[start], batch.offsets[end]
    name_low, name_high = batch.name_offsets[start], batch.name_offsets[end]
    return _Batch(
        names=batch.names[name_low:name_high],
        name_offsets=batch.name_offsets[start : end + 1] - name_low,
        codes=batch.codes[low:high],
        offsets=batch.offsets[start : end + 1] - low,
        qualities=None if batch.qualities is None else batch.qualities[low:high],
    )


def _concatenate(batches: list[_Batch]) -> _Batch:
    if len(batches) == 1:
        return batches[0]

    def joined_offsets(offset_arrays):
        shifts = np.cumsum([0] + [int(o[-1]) for o in offset_arrays[:-1]])
        return np.concatenate([offset_arrays[0][:1]] + [o[1:] + s for o, s in zip(offset_arrays, shifts)])

    return _Batch(
        names=np.concatenate([b.names for b in batches]),
        name_offsets=joined_offsets([b.name_offsets for b in batches]),
        codes=np.concatenate([b.codes for b in batches]),
        offsets=joined_offsets([b.offsets for b in batches]),
        qualities=None if batches[0].qualities is None else np.concatenate([b.qualities for b in batches]),
    )
