"""bowmap.runtime.arrays: the sort-based unique equals np.unique; windows and prefix_mask equal their
element-by-element definitions."""

from __future__ import annotations

import numpy as np
import pytest

from bowmap.runtime.arrays import prefix_mask, unique, windows


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
