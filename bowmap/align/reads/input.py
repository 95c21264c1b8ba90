"""What the align pipeline hands its workers (:func:`input_chunks`): byte ranges they parse
themselves, or chunks; a window of consecutive records of them (:func:`record_window`, for
``--skip``/``--upto``); the input's first error found again when a range did not parse; and the
reads files checked before a run opens a device or writes a byte (:func:`check_reads`).
"""

from __future__ import annotations

import dataclasses
import os
import stat
from collections.abc import Iterable, Iterator

from bowmap.align.reads.chunk import Batch, ReadChunk, slice_batch
from bowmap.align.reads.pairs import PairedRange
from bowmap.align.reads.parse import Parser
from bowmap.align.reads.ranges import RangeInputError, ReadRange, fastq_ranges, gzip_ranges
from bowmap.align.reads.stream import input_blocks, read_chunks
from bowmap.runtime.errors import BowmapError

# check_reads parses the first CHECKED_BYTES of each reads file (decompressed for gzip; a few
# thousand short reads, some milliseconds), read in blocks of CHECK_BLOCK_BYTES.
CHECK_BLOCK_BYTES = 1 << 16
CHECKED_BYTES = 1 << 20


def as_chunk(item: ReadChunk | ReadRange | PairedRange) -> ReadChunk:
    """The reads of a chunk, or of a byte range (parsed here: in the worker that maps it)."""
    return item.chunk() if isinstance(item, (ReadRange, PairedRange)) else item


def input_chunks(path: str, chunk_bases: int, max_read_length: int, ramp: int = 0) -> Iterator[ReadChunk | ReadRange]:
    """What the align pipeline hands its workers: :func:`fastq_ranges` for an uncompressed
    FASTQ file, :func:`gzip_ranges` for a gzipped one, else (FASTA, stdin) the chunks of
    :func:`read_chunks`. A FASTQ record takes about two bytes a base, so ranges of
    ``2 * chunk_bases`` bytes are chunks of about ``chunk_bases`` bases. Either way the reads
    and their order are the same, and the aligner's output does not depend on where chunks are
    cut. The first ``ramp`` pieces are smaller (:func:`bowmap.align.reads.chunk.ramped`)."""
    ranges = fastq_ranges(path, 2 * chunk_bases, max_read_length, ramp)
    if ranges is None:
        ranges = gzip_ranges(path, 2 * chunk_bases, max_read_length, ramp)
    return ranges if ranges is not None else read_chunks(path, chunk_bases, max_read_length, ramp=ramp)


def check_reads(paths: Iterable[str | None], max_read_length: int) -> None:
    """Open each reads file of ``paths`` (None: no such file, as a run without mates) and parse
    its first records as the run will, raising the run's own one-line :class:`BowmapError` for a
    missing, unreadable or malformed file: the run calls this before it opens a device, reads the
    index's checksums or writes a byte, so that such a file is reported at once and leaves no
    output (a SAM header on standard output would make `| samtools sort` write a valid, empty
    BAM). Standard input and files that are no regular file or folder (a named pipe, a process
    substitution's /dev/fd/N) are only looked up: reading them here would take their data from
    the run. Their first records are checked before any output all the same, since the writer
    holds the SAM header back until the first chunk is mapped (:class:`bowmap.runtime.output.SamWriter`)."""
    for path in paths:
        if path is None or path == "-":
            continue
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            raise BowmapError(f"{path}: no such file") from None
        except OSError as error:
            raise BowmapError(f"{path}: cannot read ({error.strerror or error})") from None
        if stat.S_ISREG(mode) or stat.S_ISDIR(mode):  # a folder: opening it gives the run's error
            _check_head(path, max_read_length)


def _check_head(path: str, max_read_length: int) -> None:
    """Parse the first CHECKED_BYTES of ``path`` as :func:`read_chunks` does (the same errors,
    line numbers and record names); the whole of a smaller file, its end included."""
    parser = Parser(path, max_read_length)
    blocks = input_blocks(path, path, CHECK_BLOCK_BYTES)
    try:
        checked = 0
        for block, _ in blocks:
            parser.feed(block)
            checked += len(block)
            if checked >= CHECKED_BYTES:
                return  # the rest is checked as the run reads it
        parser.finish()
    finally:
        blocks.close()


def first_input_error(path: str, max_read_length: int, found: RangeInputError) -> BowmapError:
    """The input's first error as :func:`read_chunks` reports it (file line and record), after
    a range failed with ``found``; ``found`` itself if the whole file parses (not expected)."""
    try:
        for _ in read_chunks(path, 1 << 22, max_read_length):
            pass
    except BowmapError as error:
        return error
    return BowmapError(str(found))


def record_window(items: Iterable[ReadChunk | ReadRange], skip: int, upto: int | None, unit: int = 1) -> Iterator[ReadChunk]:
    """The chunks of ``items`` cut to records ``skip`` .. ``skip + upto`` (all to the end when
    ``upto`` is None), numbered again from 0. A record is ``unit`` reads (2: a pair, whose mates
    a chunk holds together). Byte ranges are parsed here, since a range's record count is known
    only once parsed; the items after the window are never read. Chunks keep ``first_read``
    (their first read in the whole input). Mapping a window gives the same records as mapping
    everything and keeping the window's: the aligner's output does not depend on chunking."""
    if skip < 0 or (upto is not None and upto < 0) or unit < 1:
        raise ValueError("skip and upto must not be negative, unit must be positive")
    start, end = unit * skip, None if upto is None else unit * (skip + upto)
    seen, number = 0, 0  # reads before the current chunk; chunks yielded
    if end == start:
        return
    for item in items:
        chunk = as_chunk(item)
        low, high = max(start - seen, 0), chunk.count if end is None else min(end - seen, chunk.count)
        seen += chunk.count
        if low >= high:
            continue
        if (low, high) != (0, chunk.count):
            batch = slice_batch(Batch(chunk.names, chunk.name_offsets, chunk.codes, chunk.offsets, chunk.qualities), low, high)
            chunk = dataclasses.replace(
                chunk, names=batch.names, name_offsets=batch.name_offsets, codes=batch.codes, offsets=batch.offsets,
                qualities=batch.qualities, first_read=-1 if chunk.first_read < 0 else chunk.first_read + low,
            )
        yield dataclasses.replace(chunk, number=number)
        number += 1
        if end is not None and seen >= end:
            return  # the rest of the input is not read
