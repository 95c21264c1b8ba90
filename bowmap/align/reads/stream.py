"""The whole input read in blocks and parsed into chunks (:func:`read_chunks`): files or stdin, gzip
detected by its magic bytes (several gzip members accepted, as bgzip writes them) and
decompressed in blocks, read ahead in a thread. Each block comes with how far into the input it
reaches (bytes of the file, compressed bytes for gzip): the progress bar's one unit.
"""

from __future__ import annotations

import io
import logging
import sys
import zlib
from collections.abc import Iterator

from bowmap.align.reads.chunk import Chunker, ReadChunk
from bowmap.align.reads.parse import Parser
from bowmap.runtime.errors import BowmapError
from bowmap.runtime.files import open_for_reading

GZIP_MAGIC = b"\x1f\x8b"
DEFAULT_BLOCK_BYTES = 4 << 20  # input bytes parsed at once (decompressed bytes for gzip)

log = logging.getLogger("bowmap.align")


def warn_empty(source: str) -> None:
    """An input without a record maps to a header-only SAM: say so (a truncated download, a
    wrong file) rather than exit 0 silently."""
    log.warning("%s holds no reads: the output holds the header only", source)


def read_chunks(
    path: str,
    chunk_bases: int = 4 << 20,
    max_read_length: int = 1024,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
    ramp: int = 0,
) -> Iterator[ReadChunk]:
    """Chunks of the reads of ``path`` (``-``: stdin) in input order.

    A chunk ends with the first read that brings its base count (a read of length 0 counting as
    1) to ``chunk_bases`` or more, so chunks depend only on the input and ``chunk_bases``, never
    on ``block_bytes``; a record is never split. The first ``ramp`` chunks are smaller
    (:func:`bowmap.align.reads.chunk.ramped`). Empty input (or blank lines only) yields no
    chunk. A read longer than ``max_read_length`` is an error, as is any malformed record.
    """
    if chunk_bases < 1 or max_read_length < 0 or block_bytes < 1:
        raise ValueError("chunk_bases and block_bytes must be positive, max_read_length not negative")
    source = "stdin" if path == "-" else path
    parser = Parser(source, max_read_length)
    chunker = Chunker(chunk_bases, ramp=ramp)
    position, chunks = 0, 0
    for block, position in prefetched(input_blocks(path, source, block_bytes)):
        for batch in parser.feed(block):
            for chunk in chunker.add(batch):
                chunk.input_end, chunks = position, chunks + 1
                yield chunk
    batch = parser.finish()
    for chunk in [*(chunker.add(batch) if batch is not None else ()), *chunker.finish()]:
        chunk.input_end, chunks = position, chunks + 1
        yield chunk
    if chunks == 0:
        warn_empty(source)


# ---------------------------------------------------------------------------------------- input


def input_blocks(path: str, source: str, block_bytes: int) -> Iterator[tuple[bytes, int]]:
    """The input's (decompressed) bytes in blocks of about ``block_bytes``, each with the bytes
    of the input read to make it (compressed bytes for gzip; zlib's own few KiB of look-ahead
    aside), counted from the start of the file."""
    if path == "-":
        yield from _decoded(_raw_stdin(), source, block_bytes)
        return
    with open_for_reading(path, kind="read file") as handle:
        yield from _decoded(handle, source, block_bytes)


_PREFETCH_DEPTH = 2


def prefetched(blocks: Iterator[bytes]) -> Iterator[bytes]:
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


def _decoded(stream, source: str, block_bytes: int) -> Iterator[tuple[bytes, int]]:
    read = [0]  # bytes of the input read so far

    def raw_blocks(first: bytes) -> Iterator[bytes]:
        block = first
        while block:
            read[0] += len(block)
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
        yield from _gunzip(raw_blocks(first), read, source, block_bytes)
    else:
        yield from ((block, read[0]) for block in raw_blocks(first))


def _gunzip(raw_blocks: Iterator[bytes], read: list[int], source: str, block_bytes: int) -> Iterator[tuple[bytes, int]]:
    """Decompress gzip members one after another (``cat a.gz b.gz`` and bgzip write several),
    at most ``block_bytes`` of output per call so a highly compressed file cannot flood memory.
    Each output block comes with the compressed bytes consumed to make it (``read[0]``: bytes
    read so far, less those not yet fed to zlib)."""
    decompressor = zlib.decompressobj(wbits=31)
    fed = False
    try:
        for raw in raw_blocks:
            data = raw
            while data:
                fed = True
                output = decompressor.decompress(data, block_bytes)
                if output:
                    left = decompressor.unused_data if decompressor.eof else decompressor.unconsumed_tail
                    yield output, read[0] - len(left)
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
                yield output, read[0]
            if not decompressor.eof:
                raise BowmapError(f"{source}: truncated gzip data (the file ends inside a compressed stream)")
    except zlib.error as error:
        raise BowmapError(f"{source}: damaged gzip data ({error})") from None
