"""Text matrices for SAM formatting (bowmap.align.output.sam): NUL-padded ``uint8`` rows, one a line,
built with NumPy for many lines at once; the NUL padding is dropped when lines are joined."""

from __future__ import annotations

import numpy as np

from bowmap.runtime.arrays import exclusive_cumsum, prefix_mask, windows


def segment_sum(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Sums of consecutive segments of ``values`` with ``counts`` elements each (0 allowed)."""
    totals = np.concatenate(([0], np.cumsum(values, dtype=np.int64)))
    ends = np.cumsum(counts, dtype=np.int64)
    return totals[ends] - totals[ends - counts]


def text_rows(flat: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Rows ``flat[start : start + length]`` as a NUL-padded matrix (at least one column)."""
    return cut_rows(windows(flat, starts, max(int(lengths.max(initial=0)), 1)), lengths)


def cut_rows(matrix: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``matrix`` with each row's bytes from its length on set to NUL (in place)."""
    if (lengths < matrix.shape[1]).any():
        matrix *= prefix_mask(lengths, matrix.shape[1])
    return matrix


def padded_rows(flat: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Rows of a NUL-padded matrix from concatenated rows (``flat`` holds exactly the rows)."""
    return text_rows(flat, exclusive_cumsum(lengths), lengths)


# Decimal text of 0..9999 as little-endian 32-bit words of four bytes, unpadded (NULs after the
# digits) and zero-padded to four digits: a number is one word gathered, not four bytes.
_SMALL_NUMBERS = np.array([str(number).encode() for number in range(10000)], dtype="S4").view("<u4")
_DIGIT_GROUPS = np.array([f"{number:04d}".encode() for number in range(10000)], dtype="S4").view("<u4")
_GROUP_SCALES = 10000 ** np.arange(5, dtype=np.int64)  # five groups of four digits hold any int64


def decimal_text(values: np.ndarray) -> np.ndarray:
    """Decimal text of integers as a NUL-padded (n, width) uint8 matrix; the text may start
    after some NULs (callers drop them). Table look-ups, four digits at a time: several times
    faster than ``astype('S')``."""
    values = np.asarray(values, dtype=np.int64)
    count = len(values)
    if count == 0:
        return np.zeros((0, 1), dtype=np.uint8)
    low, high = int(values.min()), int(values.max())
    if low >= 0 and high < 10000:
        return np.take(_SMALL_NUMBERS, values).view(np.uint8).reshape(count, 4)
    magnitude = np.abs(values)
    groups = -(-len(str(max(high, -low))) // 4)
    scales = _GROUP_SCALES[groups - 1 :: -1]  # most significant group first
    group_values = magnitude[:, None] // scales % 10000
    # The leading group is written unpadded, the groups after it zero-padded, none before it.
    leading = (groups - 1 - (magnitude[:, None] >= scales[:-1]).sum(axis=1))[:, None]
    column = np.arange(groups)
    words = np.where(column > leading, np.take(_DIGIT_GROUPS, group_values), np.take(_SMALL_NUMBERS, group_values))
    words[column < leading] = 0
    digits = words.astype("<u4", copy=False).view(np.uint8).reshape(count, 4 * groups)
    if low < 0:
        sign = np.where(values < 0, ord("-"), 0).astype(np.uint8)[:, None]
        digits = np.concatenate((sign, digits), axis=1)
    return digits


def constant_text(text: bytes, rows: int) -> np.ndarray:
    return np.broadcast_to(np.frombuffer(text, dtype=np.uint8), (rows, len(text)))


def tag_blocks(prefix: bytes, values: np.ndarray, present: np.ndarray) -> list[np.ndarray]:
    """A tag's column blocks: ``prefix`` then the padded ``values``, on rows where ``present``."""
    if present.all():
        return [constant_text(prefix, len(values)), values]
    block = np.concatenate((constant_text(prefix, len(values)), values), axis=1)
    block[~present] = 0
    return [block]
