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

import numpy as np

from bowmap.align.reads.chunk import Batch, Chunker, ReadChunk, concatenate_batches, slice_batch
from bowmap.align.reads.parse import Parser, _name
from bowmap.align.reads.stream import DEFAULT_BLOCK_BYTES, input_blocks, prefetched
from bowmap.runtime.arrays import segment_ranges
from bowmap.runtime.errors import BowmapError


def read_pairs(
    first: str,
    second: str | None,
    chunk_bases: int = 4 << 20,
    max_read_length: int = 1024,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> Iterator[ReadChunk]:
    """Chunks of whole pairs from ``first`` and ``second`` (R1 and R2 files), or from the
    interleaved file ``first`` when ``second`` is None. Chunks are cut by base count over the
    pairs (see :class:`Chunker`), so they depend on the input and ``chunk_bases`` alone."""
    if chunk_bases < 1 or max_read_length < 0 or block_bytes < 1:
        raise ValueError("chunk_bases and block_bytes must be positive, max_read_length not negative")
    chunker = Chunker(chunk_bases, unit=2)
    if second is None:
        mates = _Interleaved(first)
        for batch in _batches(first, max_read_length, block_bytes):
            yield from chunker.add(mates.pairs(batch))
        mates.finish()
    else:
        steps = _InStep(first, second)
        sources = [_batches(path, max_read_length, block_bytes) for path in (first, second)]
        for index, source in enumerate(sources):
            steps.fill(index, source)
        while True:
            batch = steps.pairs()
            if batch is None:
                break
            yield from chunker.add(batch)
            for index, source in enumerate(sources):
                steps.fill(index, source)
        steps.finish()
    yield from chunker.finish()


def _source(path: str) -> str:
    return "stdin" if path == "-" else path


def _batches(path: str, max_read_length: int, block_bytes: int) -> Iterator[Batch]:
    parser = Parser(_source(path), max_read_length)
    for block in prefetched(input_blocks(path, _source(path), block_bytes)):
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
    """One batch of the reads of ``first`` and ``second`` alternating (first[0], second[0], ...)."""
    joined = concatenate_batches([first, second])
    count = first.count
    order = np.empty(2 * count, dtype=np.int64)
    order[0::2] = np.arange(count)
    order[1::2] = count + np.arange(count)

    def gathered(offsets, values):
        lengths = np.diff(offsets)[order]
        new_offsets = np.concatenate(([0], np.cumsum(lengths)))
        return values[segment_ranges(offsets[:-1][order], lengths)], new_offsets

    names, name_offsets = gathered(joined.name_offsets, joined.names)
    codes, offsets = gathered(joined.offsets, joined.codes)
    qualities = None if joined.qualities is None else gathered(joined.offsets, joined.qualities)[0]
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
