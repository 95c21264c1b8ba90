"""NumPy helpers shared by the hot paths."""

from __future__ import annotations

import numpy as np


def unique(values: np.ndarray, return_counts: bool = False):
    """``np.unique`` of a 1-D array (sorted distinct values, optionally their counts), by sorting.

    NumPy 2.3+ makes ``np.unique`` hash its input: on millions of int64 keys spread over a wide
    range that took 2.6 s where a sort and a comparison take 0.02 s (NumPy 2.4.6), and it was
    the largest single cost of mapping a chunk."""
    ordered = np.sort(values)
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]) if len(ordered) else np.zeros(0, dtype=np.int64)
    distinct = ordered[starts]
    if not return_counts:
        return distinct
    return distinct, np.diff(np.append(starts, len(ordered)))


def lexsort(keys) -> np.ndarray:
    """``np.lexsort(keys)``: the order by the last key, then the one before it, ...; ties keep
    their order. Where the keys' ranges (integers or booleans) fit in 63 bits together, one
    stable argsort of a packed int64 key, several times faster than NumPy's lexsort (3 keys of
    30,000 rows: 2.9 ms against under 1); else NumPy's. A packed key of at most 16 bits is sorted
    as uint16, which NumPy sorts stably by radix: 150,000 rows 0.9 ms against 7-10 ms as int64
    (the sort of every Smith-Waterman call's pairs by length was 2% of a host worker)."""
    keys = [np.asarray(key) for key in keys]
    if len(keys) == 0 or len(keys[0]) < 2:
        return np.lexsort(keys) if keys else np.zeros(0, dtype=np.intp)
    if any(key.dtype.kind not in "biu" for key in keys):
        return np.lexsort(keys)
    packed = np.zeros(len(keys[0]), dtype=np.int64)
    shift = 0
    for key in keys:  # the first key the least significant
        low, high = int(key.min()), int(key.max())
        width = (high - low).bit_length()
        if shift + width > 63:
            return np.lexsort(keys)
        if width:
            if key.dtype.kind == "b":
                field = key.astype(np.int64)
            elif key.dtype.kind == "u":  # in unsigned arithmetic: uint64 keys may lie above 2**63
                field = (key - key.dtype.type(low)).astype(np.int64)
            else:
                field = key.astype(np.int64) - np.int64(low)
            packed |= field << shift if shift else field
            shift += width
    if shift <= 16:
        packed = packed.astype(np.uint16)
    return np.argsort(packed, kind="stable")


def exclusive_cumsum(values: np.ndarray) -> np.ndarray:
    """Sums of the values before each one (int64; 0 first)."""
    values = np.asarray(values, dtype=np.int64)
    return np.cumsum(values) - values


def segment_ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(start, start + length)`` for each segment (int64)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    before = np.cumsum(lengths) - lengths
    return np.repeat(np.asarray(starts, dtype=np.int64) - before, lengths) + np.arange(int(lengths.sum()), dtype=np.int64)


def windows(flat: np.ndarray, starts: np.ndarray, width: int) -> np.ndarray:
    """Rows ``flat[start : start + width]`` for every start, as a new (len(starts), width) array;
    elements past the end of ``flat`` read as 0.

    A copy of whole rows through a strided view, with no index array of one entry an element
    (``flat[segment_ranges(...)]`` builds one, 8 bytes for each byte gathered)."""
    starts = np.asarray(starts, dtype=np.int64)
    if len(starts) == 0 or width == 0:
        return np.zeros((len(starts), width), dtype=flat.dtype)
    last = len(flat) - width  # the last start whose row lies inside flat
    over = starts > last
    if not over.any():
        return np.lib.stride_tricks.sliding_window_view(flat, width)[starts]
    # Rows that run past the end come from a zero-padded copy of the end only (under 2 widths).
    tail_start = int(starts[over].min())
    tail = np.concatenate((flat[tail_start:], np.zeros(width, dtype=flat.dtype)))
    if last < 0:
        return np.lib.stride_tricks.sliding_window_view(tail, width)[starts - tail_start]
    rows = np.lib.stride_tricks.sliding_window_view(flat, width)[np.minimum(starts, last)]
    rows[over] = np.lib.stride_tricks.sliding_window_view(tail, width)[starts[over] - tail_start]
    return rows


def prefix_mask(lengths: np.ndarray, width: int) -> np.ndarray:
    """Boolean (len(lengths), width) matrix, row i True in its first ``lengths[i]`` columns
    (``arange(width) < lengths[:, None]``, but rows copied from a window of a step rather than
    compared element by element: several times faster). Lengths must lie in 0..width."""
    step = np.zeros(2 * width, dtype=bool)
    step[:width] = True
    return windows(step, width - np.asarray(lengths, dtype=np.int64), width)


def run_ranks(groups: np.ndarray) -> np.ndarray:
    """Each element's place within its run of equal values (``groups`` sorted): 0, 1, 2, ..."""
    if len(groups) == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.r_[True, groups[1:] != groups[:-1]]
    positions = np.arange(len(groups))
    return positions - np.maximum.accumulate(np.where(starts, positions, 0))
