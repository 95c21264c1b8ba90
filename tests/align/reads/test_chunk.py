"""A chunk's reverse strand (ReadChunk.reverse_codes, both_codes; reads.chunk.reverse_complement)
against the definition, read by read: reads of one length (the fast path) and of many, empty
reads and Ns among them."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from bowmap.align.reads.chunk import AMBIGUOUS, ReadChunk


def plain_reverse_complement(codes: np.ndarray) -> np.ndarray:
    """One read: reversed, A<->T and C<->G swapped, N kept."""
    return np.array([AMBIGUOUS if code == AMBIGUOUS else 3 - code for code in codes[::-1]], dtype=np.uint8)


@pytest.mark.parametrize("lengths", [[], [0, 0], [150] * 7, [1], [0, 5, 1, 151, 0, 33], [64] * 3 + [63]])
def test_the_reverse_strand_is_each_reads_reverse_complement(lengths):
    rng = np.random.default_rng(len(lengths))
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    codes = rng.integers(0, 5, size=int(offsets[-1])).astype(np.uint8)
    count = len(lengths)
    chunk = ReadChunk(0, 0, np.zeros(0, np.uint8), np.zeros(count + 1, np.int64), codes, offsets, None)
    expected = [plain_reverse_complement(codes[offsets[i] : offsets[i + 1]]) for i in range(count)]
    expected = np.concatenate(expected) if expected else np.zeros(0, np.uint8)
    assert np.array_equal(chunk.reverse_codes, expected)
    assert np.array_equal(chunk.both_codes, np.concatenate((codes, expected)))
    assert np.array_equal(chunk.codes, codes)  # untouched
    sent = pickle.loads(pickle.dumps(chunk))  # made anew where it is needed, not sent
    assert "both_codes" not in sent.__dict__ and np.array_equal(sent.reverse_codes, expected)
