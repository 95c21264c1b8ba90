"""Splitting the reference text into index blocks that fit one device's memory."""

from __future__ import annotations

from bowmap.index.alphabet import BITS_PER_LINE, WAVELET_LINE_WORDS, index_bytes_per_symbol
from bowmap.index.format import (
    BASES_PER_LINE,
    MAX_BLOCK_BASES,
    WORDS_PER_LINE,
    index_bytes_per_base,
)
from bowmap.runtime.errors import UsageError

# The share of device memory an index block may take; the rest is for the align stage's buffers
# (reads, seeds, candidate windows, Smith-Waterman scores) of several command queues.
INDEX_SHARE = 0.5


def block_bases_for_memory(device_memory: int, max_allocation: int, sa_sample: int, levels: int | None = None) -> int:
    """The most bases (symbols) one block may hold on a device with ``device_memory`` bytes of
    global memory, of which one buffer may take at most ``max_allocation`` bytes. ``levels``:
    None for DNA's occurrence lines, else the wavelet matrix's bit levels (protein, text)."""
    if levels is None:
        by_total = int(device_memory * INDEX_SHARE / index_bytes_per_base(sa_sample))
        by_allocation = max_allocation // (4 * WORDS_PER_LINE) * BASES_PER_LINE  # the occ buffer is the largest
    else:
        by_total = int(device_memory * INDEX_SHARE / index_bytes_per_symbol(levels, sa_sample))
        # The wavelet lines (all levels, one buffer) are the largest buffer.
        by_allocation = max_allocation // (levels * 4 * WAVELET_LINE_WORDS) * BITS_PER_LINE
    return min(by_total, by_allocation, MAX_BLOCK_BASES)


def plan_blocks(total: int, block_bases: int, overlap: int) -> list[tuple[int, int]]:
    """(start, length) of each block over a text of ``total`` bases.

    Consecutive blocks share ``overlap`` bases, so any span of at most ``overlap`` bases lies
    wholly inside some block.
    """
    if total <= block_bases:
        return [(0, total)]
    if block_bases <= overlap:
        raise UsageError(
            f"--device-mem leaves room for blocks of {block_bases} bases, not more than the "
            f"{overlap}-base overlap between blocks: give more memory or a smaller --max-read-length"
        )
    blocks = []
    start = 0
    while True:
        end = min(start + block_bases, total)
        blocks.append((start, end - start))
        if end == total:
            return blocks
        start = end - overlap
