"""A chunk of reads as NumPy arrays (:class:`ReadChunk`), and how parsed batches are cut into chunks
by base count alone, so chunks never depend on how the input was read.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

AMBIGUOUS = 4


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
    # Paired-end: reads 2k and 2k + 1 are the two mates of pair k (R1 first, one name), and the
    # insert-size model the pairs stage uses travels with the chunk (None: this chunk is the
    # model's sample, see bowmap.align.extend.pairs).
    paired: bool = False
    insert_model: object = None
    # Bytes of the input file (compressed bytes for gzip, R1's for pairs) read through this
    # chunk's last record, about (the reader's current block end): the progress bar's position.
    input_end: int | None = None

    @property
    def count(self) -> int:
        return len(self.offsets) - 1

    @property
    def lengths(self) -> np.ndarray:
        """int64[count]: bases in each read."""
        return np.diff(self.offsets)

    @property
    def reverse_codes(self) -> np.ndarray:
        """Each read's reverse complement (4 stays 4), offsets as ``codes``: the second half of
        :attr:`both_codes`."""
        return self.both_codes[len(self.codes) :]

    @functools.cached_property
    def both_codes(self) -> np.ndarray:
        """``codes`` then ``reverse_codes``, one array: the layout the seeds, the Smith-Waterman
        reads and the SAM text take. Made once a chunk, where it is first needed (a worker
        process, not the reader), the reverse complement written straight into its half (not
        made apart and copied in), and not sent between processes."""
        both = np.empty(2 * len(self.codes), dtype=np.uint8)
        both[: len(self.codes)] = self.codes
        reverse_complement(self.codes, self.offsets, out=both[len(self.codes) :])
        return both

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("reverse_codes", None)
        state.pop("both_codes", None)
        return state

    def name(self, i: int) -> str:
        """Read i's name, for error messages and tests (not for hot paths)."""
        return self.names[self.name_offsets[i] : self.name_offsets[i + 1]].tobytes().decode("ascii", "replace")


def reverse_complement(codes: np.ndarray, offsets: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """The reverse complement of every read of ``codes`` (uint8, reads at ``offsets``), same
    offsets; written into ``out`` (as long as ``codes``) when given."""
    lengths = np.diff(offsets)
    out = np.empty_like(codes) if out is None else out
    if len(codes) == 0:
        return out
    # Complement: code ^ 3 swaps A<->T and C<->G; 4 ^ 3 = 7, brought back to 4 below.
    if np.all(lengths == lengths[0]):
        # Reads of one length (the usual case): a 2-D view reversed along its rows, complemented
        # straight into ``out``.
        rows = len(lengths)
        np.bitwise_xor(codes.reshape(rows, -1)[:, ::-1], np.uint8(3), out=out.reshape(rows, -1))
    else:
        # Position p of read i comes from position offsets[i] + offsets[i+1] - 1 - (p - offsets[i]).
        mirror = np.repeat(offsets[:-1] + offsets[1:] - 1, lengths)
        np.bitwise_xor(codes[mirror - np.arange(len(codes), dtype=np.int64)], np.uint8(3), out=out)
    if int(codes.max()) > 3:
        # Only the Ns' bytes: NumPy's minimum with a scalar does not vectorise on uint8, and took
        # as long as the rest (1.4 ms for 28 k reads of 150 bp, against 0.2 ms).
        out[np.flatnonzero(out > 3)] = AMBIGUOUS
    return out


# --------------------------------------------------------------------------------------- parsing


@dataclass
class Batch:
    """Parsed reads before they are cut into chunks (the fields of :class:`ReadChunk`)."""

    names: np.ndarray
    name_offsets: np.ndarray
    codes: np.ndarray
    offsets: np.ndarray
    qualities: np.ndarray | None
    first_line: int | None = None  # FASTQ: the file line of the first record (record i: + 4i)

    @property
    def count(self) -> int:
        return len(self.offsets) - 1


# -------------------------------------------------------------------------------------- chunking


def ramped(size: int, number: int, ramp: int) -> int:
    """The size of piece ``number`` (0-based) when the first ``ramp`` pieces grow to ``size``,
    each twice the one before: ``size / 2**ramp``, ``size / 2**(ramp - 1)``, ... then ``size``
    (at least 1). A run's first chunks are small so that its first records come out early
    (see bowmap.align.run.FIRST_CHUNKS_RAMP); where chunks are cut never changes the output."""
    return max(1, size >> max(0, ramp - number))


class Chunker:
    """Cuts batches into chunks of about ``chunk_bases`` bases, independently of batch sizes
    (the first ``ramp`` chunks smaller: see :func:`ramped`).

    Chunks end only after a whole ``unit`` of reads (2 for pairs: a chunk holds whole pairs);
    batches must hold whole units."""

    def __init__(self, chunk_bases: int, unit: int = 1, ramp: int = 0):
        self.chunk_bases = chunk_bases
        self.ramp = ramp
        self.unit = unit
        self.held: list[Batch] = []
        self.held_weight = 0
        self.number = 0
        self.first_read = 0

    def add(self, batch: Batch) -> Iterator[ReadChunk]:
        if batch.count == 0:
            return
        self.held.append(batch)
        self.held_weight += int(np.maximum(np.diff(batch.offsets), 1).sum())
        if self.held_weight >= ramped(self.chunk_bases, self.number, self.ramp):
            yield from self._cut(final=False)

    def finish(self) -> Iterator[ReadChunk]:
        if self.held:
            yield from self._cut(final=True)

    def _cut(self, final: bool) -> Iterator[ReadChunk]:
        batch = concatenate_batches(self.held)
        unit = self.unit
        # Cumulative weight at the end of each unit (a read of length 0 weighs 1).
        weights = np.cumsum(np.maximum(np.diff(batch.offsets), 1))[unit - 1 :: unit]
        units = len(weights)
        start = 0
        while start < units:
            before = int(weights[start - 1]) if start else 0
            end = int(np.searchsorted(weights, before + ramped(self.chunk_bases, self.number, self.ramp), side="left")) + 1
            if end > units:
                if not final:
                    break
                end = units
            yield self._chunk(slice_batch(batch, start * unit, end * unit))
            start = end
        rest = slice_batch(batch, start * unit, batch.count)
        self.held = [rest] if rest.count else []
        self.held_weight = int(weights[-1] - (weights[start - 1] if start else 0)) if rest.count else 0

    def _chunk(self, batch: Batch) -> ReadChunk:
        chunk = ReadChunk(
            number=self.number,
            first_read=self.first_read,
            names=batch.names,
            name_offsets=batch.name_offsets,
            codes=batch.codes,
            offsets=batch.offsets,
            qualities=batch.qualities,
            paired=self.unit == 2,
        )
        self.number += 1
        self.first_read += batch.count
        return chunk


def slice_batch(batch: Batch, start: int, end: int) -> Batch:
    low, high = batch.offsets[start], batch.offsets[end]
    name_low, name_high = batch.name_offsets[start], batch.name_offsets[end]
    return Batch(
        names=batch.names[name_low:name_high],
        name_offsets=batch.name_offsets[start : end + 1] - name_low,
        codes=batch.codes[low:high],
        offsets=batch.offsets[start : end + 1] - low,
        qualities=None if batch.qualities is None else batch.qualities[low:high],
        first_line=None if batch.first_line is None else batch.first_line + 4 * start,
    )


def concatenate_batches(batches: list[Batch]) -> Batch:
    if len(batches) == 1:
        return batches[0]

    def joined_offsets(offset_arrays):
        shifts = np.cumsum([0] + [int(o[-1]) for o in offset_arrays[:-1]])
        return np.concatenate([offset_arrays[0][:1]] + [o[1:] + s for o, s in zip(offset_arrays, shifts)])

    return Batch(
        names=np.concatenate([b.names for b in batches]),
        name_offsets=joined_offsets([b.name_offsets for b in batches]),
        codes=np.concatenate([b.codes for b in batches]),
        offsets=joined_offsets([b.offsets for b in batches]),
        qualities=None if batches[0].qualities is None else np.concatenate([b.qualities for b in batches]),
        first_line=batches[0].first_line,
    )
