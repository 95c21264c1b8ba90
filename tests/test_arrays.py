"""bowmap.arrays: the sort-based unique equals np.unique."""

from __future__ import annotations

import numpy as np
import pytest

from bowmap.arrays import unique


@pytest.mark.parametrize("size, high, dtype", [(0, 5, np.int64), (1, 5, np.int64), (1000, 7, np.uint64), (4097, 10**15, np.int64), (333, 3, np.uint8)])
def test_unique_equals_numpy(size, high, dtype):
    values = np.random.default_rng(size).integers(0, high, size).astype(dtype)
    assert np.array_equal(unique(values), np.unique(values))
    distinct, counts = unique(values, return_counts=True)
    expected, expected_counts = np.unique(values, return_counts=True)
    assert np.array_equal(distinct, expected) and np.array_equal(counts, expected_counts)
    assert distinct.dtype == values.dtype
