"""bowmap.runtime.arrays: the sort-based unique equals np.unique; windows and prefix_mask equal their
element-by-element definitions."""

from __future__ import annotations

import numpy as np
import pytest

from bowmap.runtime.arrays import lexsort, prefix_mask, unique, windows


@pytest.mark.parametrize("size, high, dtype", [(0, 5, np.int64), (1, 5, np.int64), (1000, 7, np.uint64), (4097, 10**15, np.int64), (333, 3, np.uint8)])
def test_unique_equals_numpy(size, high, dtype):
    values = np.random.default_rng(size).integers(0, high, size).astype(dtype)
    assert np.array_equal(unique(values), np.unique(values))
    distinct, counts = unique(values, return_counts=True)
    expected, expected_counts = np.unique(values, return_counts=True)
    assert np.array_equal(distinct, expected) and np.array_equal(counts, expected_counts)
    assert distinct.dtype == values.dtype


@pytest.mark.parametrize("size, width", [(0, 3), (1, 1), (5, 8), (255, 16), (256, 1), (257, 40)])
def test_windows_equal_slices_padded_with_zeros(size, width):
    rng = np.random.default_rng(size + width)
    flat = rng.integers(1, 256, size).astype(np.uint8)
    starts = np.concatenate((rng.integers(0, size + 1, 50), [0, size, max(size - 1, 0)]))
    expected = np.array([np.pad(flat[start : start + width], (0, width - len(flat[start : start + width]))) for start in starts])
    assert np.array_equal(windows(flat, starts, width), expected.reshape(len(starts), width))
    assert windows(flat, np.zeros(0, dtype=np.int64), width).shape == (0, width)


@pytest.mark.parametrize("width", [1, 2, 7, 150])
def test_prefix_mask_is_column_below_length(width):
    lengths = np.random.default_rng(width).integers(0, width + 1, 100)
    assert np.array_equal(prefix_mask(lengths, width), np.arange(width) < lengths[:, None])


def _random_key(rng, kind: int, size: int) -> np.ndarray:
    if kind == 0:
        return rng.integers(0, 2, size).astype(bool)
    if kind == 1:
        return rng.integers(-5, 5, size)
    if kind == 2:  # uint64 above 2**63, in a narrow range: packed, in unsigned arithmetic
        return np.uint64(2**63 + 7) + rng.integers(0, 2**20, size).astype(np.uint64)
    if kind == 3:  # a full-range uint64 hash: NumPy's lexsort
        return rng.integers(0, 2**63, size).astype(np.uint64) * np.uint64(2) + rng.integers(0, 2, size).astype(np.uint64)
    if kind == 4:  # int64's extremes
        return np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max, 0])[rng.integers(0, 3, size)]
    return rng.integers(0, 256, size).astype(np.uint8)


@pytest.mark.parametrize("seed", range(6))
def test_lexsort_equals_numpy(seed):
    rng = np.random.default_rng(seed)
    for _ in range(300):
        size = int(rng.choice([0, 1, 2, 3, 17, 64, 3000]))  # 3000: NumPy's radix sort, not its insertion sort
        keys = [_random_key(rng, int(rng.integers(0, 6)), size) for _ in range(int(rng.integers(1, 5)))]
        assert np.array_equal(lexsort(keys), np.lexsort(keys))
    # Ties keep their order; the last key is the primary one.
    assert lexsort([np.array([3, 1, 2, 1]), np.array([1, 1, 0, 0])]).tolist() == [3, 2, 1, 0]
    assert lexsort([np.array([5, 5, 5], dtype=np.uint64)]).tolist() == [0, 1, 2]
