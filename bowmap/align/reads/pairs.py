"""Paired-end input: two files read in step (R1, R2, as bwa mem takes them) or one interleaved
file (R1, R2, R1, R2, ...; bwa's ``-p``), parsed into chunks that hold whole pairs.

A paired chunk is a :class:`ReadChunk` whose reads 2k and 2k + 1 are the mates of pair k, R1
first: every per-read stage (seeds, windows, Smith-Waterman) works on it unchanged, and the pairs
stage reads the mates side by side. Mates must carry one name (after the trailing ``/1`` ``/2``
and the comment are dropped, as the parser does for every read), and the two files the same
number of records: anything else stops the run with one line naming both files and the record.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from bowmap.align.reads.chunk import Batch, Chunker, ReadChunk, concatenate_batches, ramped, slice_batch
from bowmap.align.reads.parse import Parser, _name, longest_record
from bowmap.align.reads.ranges import RangeInputError, ReadRange, file_head, first_record, read_at, record_start, starts_record
from bowmap.align.reads.stream import DEFAULT_BLOCK_BYTES, GZIP_MAGIC, input_blocks, prefetched, warn_empty
from bowmap.runtime.arrays import segment_ranges
from bowmap.runtime.errors import BowmapError
from bowmap.runtime.files import open_for_reading


def read_pairs(
    first: str,
    second: str | None,
    chunk_bases: int = 4 << 20,
    max_read_length: int = 1024,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
    ramp: int = 0,
) -> Iterator[ReadChunk]:
    """Chunks of whole pairs from ``first`` and ``second`` (R1 and R2 files), or from the
    interleaved file ``first`` when ``second`` is None. Chunks are cut by base count over the
    pairs (see :class:`Chunker`; the first ``ramp`` smaller), so they depend on the input,
    ``chunk_bases`` and ``ramp`` alone."""
    if chunk_bases < 1 or max_read_length < 0 or block_bytes < 1:
        raise ValueError("chunk_bases and block_bytes must be positive, max_read_length not negative")
    chunker = Chunker(chunk_bases, unit=2, ramp=ramp)
    position = [0]  # bytes of the first file read so far (compressed for gzip): chunks' input_end
    chunks = 0

    def placed(made: Iterator[ReadChunk]) -> Iterator[ReadChunk]:
        nonlocal chunks
        for chunk in made:
            chunk.input_end, chunks = position[0], chunks + 1
            yield chunk

    if second is None:
        mates = _Interleaved(first)
        for batch in _batches(first, max_read_length, block_bytes, position):
            yield from placed(chunker.add(mates.pairs(batch)))
        mates.finish()
    else:
        steps = _InStep(first, second)
        sources = [_batches(path, max_read_length, block_bytes, mark) for path, mark in ((first, position), (second, [0]))]
        for index, source in enumerate(sources):
            steps.fill(index, source)
        while True:
            batch = steps.pairs()
            if batch is None:
                break
            yield from placed(chunker.add(batch))
            for index, source in enumerate(sources):
                steps.fill(index, source)
        steps.finish()
    yield from placed(chunker.finish())
    if chunks == 0:
        warn_empty(_source(first) if second is None else f"{_source(first)} (and {_source(second)})")


def _source(path: str) -> str:
    return "stdin" if path == "-" else path


def _batches(path: str, max_read_length: int, block_bytes: int, position: list[int]) -> Iterator[Batch]:
    """The batches of ``path``; ``position[0]``: bytes of it read so far (compressed for gzip)."""
    parser = Parser(_source(path), max_read_length)
    for block, position[0] in prefetched(input_blocks(path, _source(path), block_bytes)):
        yield from (batch for batch in parser.feed(block) if batch.count)
    batch = parser.finish()
    if batch is not None and batch.count:
        yield batch


def _where(path: str, batch: Batch, read: int, record: int) -> str:
    """``FILE:LINE`` (FASTQ) or ``FILE`` of a record, and its 1-based number in the file."""
    line = f":{batch.first_line + 4 * read}" if batch.first_line is not None else ""
    return f"{_source(path)}{line}: record {record + 1}"


def _check_names(first: Batch, second: Batch, describe) -> None:
    """BowmapError at the first pair whose mates' names differ (``describe(i)``: where pair i is)."""
    lengths = (np.diff(first.name_offsets), np.diff(second.name_offsets))
    same = lengths[0] == lengths[1]
    both = np.flatnonzero(same)
    if len(both):
        starts = [batch.name_offsets[both] for batch in (first, second)]
        count = lengths[0][both]
        unequal = first.names[segment_ranges(starts[0], count)] != second.names[segment_ranges(starts[1], count)]
        same[both] = np.bincount(np.repeat(np.arange(len(both)), count), weights=unequal, minlength=len(both)) == 0
    wrong = np.flatnonzero(~same)
    if len(wrong):
        i = int(wrong[0])
        names = (_name(first.names, first.name_offsets, i), _name(second.names, second.name_offsets, i))
        raise BowmapError(f"{describe(i)}: the mates' names differ: {names[0]!r} and {names[1]!r}")


def _interleave(first: Batch, second: Batch) -> Batch:
    """One batch of the reads of ``first`` and ``second`` alternating (first[0], second[0], ...),
    each field written once into its place (joining the two batches first copied every byte
    twice)."""
    count = first.count

    def gathered(one_offsets, one, two_offsets, two):
        one_lengths, two_lengths = np.diff(one_offsets), np.diff(two_offsets)
        lengths = np.empty(2 * count, dtype=np.int64)
        lengths[0::2], lengths[1::2] = one_lengths, two_lengths
        offsets = np.zeros(2 * count + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        one, two = one[int(one_offsets[0]) : int(one_offsets[-1])], two[int(two_offsets[0]) : int(two_offsets[-1])]
        if count and (one_lengths == one_lengths[0]).all() and (two_lengths == two_lengths[0]).all():
            # Every mate of a file as long as the others (reads straight from a sequencer): the
            # two files' rows side by side, no index an element.
            return np.concatenate((one.reshape(count, -1), two.reshape(count, -1)), axis=1).reshape(-1), offsets
        values = np.empty(int(offsets[-1]), dtype=one.dtype)
        values[segment_ranges(offsets[:-1:2], one_lengths)] = one
        values[segment_ranges(offsets[1::2], two_lengths)] = two
        return values, offsets

    names, name_offsets = gathered(first.name_offsets, first.names, second.name_offsets, second.names)
    codes, offsets = gathered(first.offsets, first.codes, second.offsets, second.codes)
    qualities = None if first.qualities is None else gathered(first.offsets, first.qualities, second.offsets, second.qualities)[0]
    return Batch(names, name_offsets, codes, offsets, qualities)


class _InStep:
    """Batches of two files taken record for record: as many pairs at a time as both have."""

    def __init__(self, first: str, second: str):
        self.paths = (first, second)
        self.held: list[list[Batch]] = [[], []]
        self.records = [0, 0]  # records of each file handed on as pairs
        self.ended = [False, False]

    def fill(self, index: int, source: Iterator[Batch]) -> None:
        """Reads a batch of file ``index`` when it holds fewer records than the other."""
        held = [sum(batch.count for batch in batches) for batches in self.held]
        while not self.ended[index] and (held[index] == 0 or held[index] < held[1 - index]):
            batch = next(source, None)
            if batch is None:
                self.ended[index] = True
            else:
                self.held[index].append(batch)
                held[index] += batch.count

    def pairs(self) -> Batch | None:
        """The pairs both files hold now, interleaved; None when one file has none left."""
        count = min(sum(batch.count for batch in batches) for batches in self.held)
        if count == 0:
            return None
        taken = []
        for index in (0, 1):
            joined = concatenate_batches(self.held[index])
            taken.append(slice_batch(joined, 0, count))
            rest = slice_batch(joined, count, joined.count)
            self.held[index] = [rest] if rest.count else []
        base = self.records[0]
        if (taken[0].qualities is None) != (taken[1].qualities is None):
            kinds = ["FASTA" if batch.qualities is None else "FASTQ" for batch in taken]
            raise BowmapError(
                f"{_source(self.paths[0])} is {kinds[0]}, {_source(self.paths[1])} {kinds[1]}: "
                "give both mates' files in one format (qualities for both, or for neither)"
            )
        _check_names(*taken, lambda i: f"{_where(self.paths[0], taken[0], i, base + i)} and {_where(self.paths[1], taken[1], i, base + i)}")
        self.records = [records + count for records in self.records]
        return _interleave(*taken)

    def finish(self) -> None:
        for index in (0, 1):
            if self.held[index]:
                batch = self.held[index][0]
                other = _source(self.paths[1 - index])
                raise BowmapError(
                    f"{_where(self.paths[index], batch, 0, self.records[index])}: {other} ends after "
                    f"{self.records[index]} records but {_source(self.paths[index])} goes on (read "
                    f"{_name(batch.names, batch.name_offsets, 0)!r}): the two files must hold the mates of the same pairs"
                )


class _Interleaved:
    """Pairs of an interleaved file: a record carried over when a batch ends between mates."""

    def __init__(self, path: str):
        self.path = path
        self.carried: Batch | None = None
        self.records = 0  # records handed on as pairs

    def pairs(self, batch: Batch) -> Batch:
        if self.carried is not None:
            batch = concatenate_batches([self.carried, batch])
            self.carried = None
        whole = batch.count - batch.count % 2
        if whole < batch.count:
            self.carried = slice_batch(batch, whole, batch.count)
            batch = slice_batch(batch, 0, whole)
        pairs = batch.count // 2
        if pairs:
            reads = np.arange(2 * pairs)
            first = _pick(batch, reads[0::2])
            second = _pick(batch, reads[1::2])
            base = self.records

            def where(i):
                return _where(self.path, batch, 2 * i + 1, base + 2 * i + 1)

            _check_names(first, second, where)
            self.records += batch.count
        return batch

    def finish(self) -> None:
        if self.carried is not None:
            raise BowmapError(
                f"{_where(self.path, self.carried, 0, self.records)}: an interleaved file holds an odd number of "
                f"records ({self.records + 1}): read {_name(self.carried.names, self.carried.name_offsets, 0)!r} has no mate"
            )


def _pick(batch: Batch, reads: np.ndarray) -> Batch:
    """The names of ``reads`` of ``batch`` (all the name check needs)."""
    lengths = np.diff(batch.name_offsets)[reads]
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    names = batch.names[segment_ranges(batch.name_offsets[:-1][reads], lengths)]
    empty = np.zeros(1, dtype=np.int64)
    return Batch(names, offsets, np.zeros(0, dtype=np.uint8), empty, None)


# ---------------------------------------------------------------------------------- byte ranges


@dataclass
class PairedRange:
    """Byte ranges of the R1 and R2 files holding the same pairs, whole records: a chunk the
    worker mapping it reads and parses itself (:meth:`chunk`), as :class:`ReadRange` for one
    file. Cut by :func:`paired_ranges`."""

    number: int
    first: ReadRange
    second: ReadRange
    insert_model: object = None  # as ReadChunk.insert_model, handed on to the chunk

    def chunk(self) -> ReadChunk:
        """The pairs of both ranges, interleaved; RangeInputError when the ranges do not hold
        the same pairs (the caller finds the input's first error with :func:`first_pair_error`)."""
        taken = [_batch(part.chunk()) for part in (self.first, self.second)]
        if taken[0].count != taken[1].count:
            raise RangeInputError(
                f"{self.first.path} bytes {self.first.start}..{self.first.end} hold {taken[0].count} records, "
                f"{self.second.path} bytes {self.second.start}..{self.second.end} {taken[1].count}"
            )
        try:
            _check_names(*taken, lambda i: f"{self.first.path} and {self.second.path}, record {i + 1} of bytes {self.first.start}.. and {self.second.start}..")
        except BowmapError as error:
            raise RangeInputError(str(error)) from None
        batch = _interleave(*taken)
        return ReadChunk(
            self.number, -1, batch.names, batch.name_offsets, batch.codes, batch.offsets, batch.qualities, paired=True, insert_model=self.insert_model,
            input_end=self.first.end,
        )


def _batch(chunk: ReadChunk) -> Batch:
    return Batch(chunk.names, chunk.name_offsets, chunk.codes, chunk.offsets, chunk.qualities)


def first_pair_error(first: str, second: str | None, max_read_length: int, found: RangeInputError) -> BowmapError:
    """The input's first error as :func:`read_pairs` reports it, after a range failed with
    ``found``; if the whole input reads as pairs, the ranges were cut out of step (read names
    that repeat can mislead the cuts): say so."""
    try:
        for _ in read_pairs(first, second, 1 << 22, max_read_length):
            pass
    except BowmapError as error:
        return error
    return BowmapError(f"{found}: the two files could not be cut in step (read names repeat?); gzip them to map them another way")


# Search for a mate's record this far around the place the files' sizes predict, doubling up to
# the last: R2 records a few bytes longer or shorter than R1's shift the place slowly.
_MATE_SEARCH_BYTES = [1 << 16, 1 << 20, 1 << 24, 1 << 27]
_RECORD_ROOM = 1 << 16  # bytes beyond a record's sequence and quality: its header and '+' line


def paired_ranges(first: str, second: str, chunk_bases: int, max_read_length: int, ramp: int = 0) -> list[PairedRange] | None:
    """Ranges of both files holding the same pairs, each pair about ``chunk_bases`` bases (R1
    ranges of ``chunk_bases`` bytes: a FASTQ base takes two; the first ``ramp`` ranges smaller,
    see :func:`bowmap.align.reads.chunk.ramped`); None unless both are uncompressed
    FASTQ files. R1 is cut as :func:`fastq_ranges` cuts; R2 before the record of the same name,
    looked for near the byte the files' sizes predict. Every cut is made before the first range
    is handed out, reading only a few KiB around each: if some R2 cut cannot be found, the whole
    input goes to the reader that parses both files in the first process (None)."""
    heads = [file_head(path, chunk_bases) for path in (first, second)]
    if any(head is None or head[1][:2] == GZIP_MAGIC or first_record(head[1]) is None for head in heads):
        return None
    (size1, head1), (size2, head2) = heads
    start1, start2 = first_record(head1), first_record(head2)
    cuts = [(start1, start2)]
    with open_for_reading(first, kind="read file") as one, open_for_reading(second, kind="read file") as two:
        while True:
            at1, at2 = cuts[-1]
            size = ramped(chunk_bases, len(cuts) - 1, ramp)
            cut1 = record_start(one.fileno(), first, at1 + size, size1, at1 + size + longest_record(max_read_length))
            if cut1 is None:
                break
            name = _header_name(read_at(one.fileno(), first, cut1, 4096))
            estimate = at2 + (cut1 - at1) * (size2 - at2) // max(size1 - at1, 1)
            cut2 = _mate_record(two.fileno(), second, name, estimate, at2, size2, max_read_length)
            if cut2 is None:
                return None
            cuts.append((cut1, cut2))
    ends = cuts[1:] + [(size1, size2)]
    return [
        PairedRange(number, ReadRange(number, first, a1, b1, b1 == size1, max_read_length), ReadRange(number, second, a2, b2, b2 == size2, max_read_length))
        for number, ((a1, a2), (b1, b2)) in enumerate(zip(cuts, ends))
    ]


def _header_name(data: bytes) -> bytes:
    """The read name of the header line ``data`` starts with, as the parser takes it."""
    line = data[1:].split(b"\n", 1)[0].rstrip(b"\r")
    name = line.replace(b"\t", b" ").split(b" ", 1)[0]
    if len(name) > 2 and name[-2:-1] == b"/" and name[-1:].isdigit():
        name = name[:-2]
    return name


def _mate_record(descriptor: int, path: str, name: bytes, estimate: int, low: int, size: int, max_read_length: int) -> int | None:
    """Where the record named ``name`` starts in the FASTQ file, searched at and after ``low``
    around ``estimate``; None if it is not found."""
    if not name:
        return None
    for reach in _MATE_SEARCH_BYTES:
        start = max(low, estimate - reach)
        # Room for the record found last to end inside what is read (a record cut short is
        # looked for again in the next, wider, search), not longest_record's 256 MiB: that
        # read 20 s of page cache before the first chunk of 2 M pairs.
        end = min(size, estimate + reach + 4 * max_read_length + _RECORD_ROOM)
        base = max(start - 1, 0)
        data = read_at(descriptor, path, base, end - base)
        needle = (b"@" if base == 0 and start == 0 else b"\n@") + name
        at = data.find(needle)
        while at >= 0:
            record = at + (0 if needle[:1] == b"@" else 1)
            after = data[record + len(name) + 1 : record + len(name) + 3]
            follows = after[:1] in (b"", b" ", b"\t", b"\r", b"\n") or (after[:1] == b"/" and after[1:2].isdigit())
            if follows and base + record > low and starts_record(data, record, base + len(data) >= size):
                return base + record
            at = data.find(needle, at + 1)
        if start == low and end == size:
            return None
    return None
