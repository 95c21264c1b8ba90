"""The align pipeline's first stage: FASTQ or FASTA reads, parsed in chunks of NumPy arrays.

Modules, in the order the bytes pass through them: :mod:`.ranges` (byte ranges of the input
for the workers), :mod:`.stream` (blocks of the whole input, decompressed), :mod:`.parse`
(records from bytes), :mod:`.chunk` (the chunks), :mod:`.input` (what the pipeline reads).
This package imports :mod:`bowmap.runtime` only.

:func:`read_chunks` streams the input (a path or ``-`` for stdin; gzip detected by its magic
bytes, several gzip members accepted as bgzip writes them) in blocks of ``block_bytes``. Each
block is parsed with NumPy alone: newline positions from ``np.flatnonzero``, the record structure
by arithmetic on line indexes (FASTQ: line 4r is the header of read r) or on header-line indexes
(FASTA), the bytes of each field gathered in one vectorised copy (:func:`.parse._gather`). An incomplete
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

from bowmap.align.reads.chunk import ReadChunk, reverse_complement
from bowmap.align.reads.input import as_chunk, check_reads, first_input_error, input_chunks, record_window
from bowmap.align.reads.ranges import RangeInputError, ReadRange, chunk_bound, fastq_ranges, gzip_ranges
from bowmap.align.reads.stream import read_chunks

__all__ = [
    "RangeInputError",
    "ReadChunk",
    "ReadRange",
    "as_chunk",
    "check_reads",
    "chunk_bound",
    "fastq_ranges",
    "first_input_error",
    "gzip_ranges",
    "input_chunks",
    "read_chunks",
    "record_window",
    "reverse_complement",
]
