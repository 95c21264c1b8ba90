"""What the align pipeline hands its workers (:func:`input_chunks`): byte ranges they parse
themselves, or chunks; and the input's first error found again when a range did not parse.
"""

from __future__ import annotations

from collections.abc import Iterator

from bowmap.align.reads.chunk import ReadChunk
from bowmap.align.reads.pairs import PairedRange
from bowmap.align.reads.ranges import RangeInputError, ReadRange, fastq_ranges, gzip_ranges
from bowmap.align.reads.stream import read_chunks
from bowmap.runtime.errors import BowmapError


def as_chunk(item: ReadChunk | ReadRange | PairedRange) -> ReadChunk:
    """The reads of a chunk, or of a byte range (parsed here: in the worker that maps it)."""
    return item.chunk() if isinstance(item, (ReadRange, PairedRange)) else item


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
