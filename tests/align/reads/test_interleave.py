"""reads.pairs' interleaving of two files' batches into mates side by side: the same whether the
mates of a file share one length (the fast path) or not."""

from __future__ import annotations

import numpy as np
import pytest

from bowmap.align.reads.chunk import Batch
from bowmap.align.reads.pairs import _interleave


def random_batch(rng, count: int, lengths, qualities: bool = True) -> Batch:
    lengths = np.asarray(lengths, dtype=np.int64)
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    name_lengths = rng.integers(0, 12, size=count)
    name_offsets = np.concatenate(([0], np.cumsum(name_lengths)))
    return Batch(
        rng.integers(33, 127, size=int(name_offsets[-1])).astype(np.uint8), name_offsets,
        rng.integers(0, 5, size=int(offsets[-1])).astype(np.uint8), offsets,
        rng.integers(33, 75, size=int(offsets[-1])).astype(np.uint8) if qualities else None,
    )


def plain_interleave(first: Batch, second: Batch):
    """Record by record: mate 1 of pair i, then its mate 2."""
    def rows(batch, offsets, values):
        return [values[offsets[i] : offsets[i + 1]] for i in range(batch.count)]

    result = []
    for field in (("name_offsets", "names"), ("offsets", "codes"), ("offsets", "qualities")):
        if getattr(first, field[1]) is None:
            result += [None, None]
            continue
        one, two = (rows(b, getattr(b, field[0]), getattr(b, field[1])) for b in (first, second))
        mixed = [row for pair in zip(one, two) for row in pair]
        result += [np.concatenate(mixed) if mixed else np.zeros(0, np.uint8), np.concatenate(([0], np.cumsum([len(r) for r in mixed])))]
    return result


@pytest.mark.parametrize("case", ["one length each", "the same length", "lengths vary", "one mate varies", "empty reads", "no pairs", "fasta"])
def test_interleaving_equals_a_record_by_record_reference(case):
    rng = np.random.default_rng(hash(case) % 2**32)
    count = 0 if case == "no pairs" else 257
    lengths = {
        "one length each": (np.full(count, 150), np.full(count, 151)),
        "the same length": (np.full(count, 100), np.full(count, 100)),
        "lengths vary": (rng.integers(1, 200, count), rng.integers(1, 200, count)),
        "one mate varies": (np.full(count, 150), np.r_[rng.integers(1, 150, 1), np.full(max(count - 1, 0), 150)])[:count],
        "empty reads": (np.zeros(count, dtype=np.int64), np.full(count, 3)),
        "no pairs": (np.zeros(0), np.zeros(0)),
        "fasta": (np.full(count, 90), np.full(count, 90)),
    }[case]
    first = random_batch(rng, count, lengths[0], qualities=case != "fasta")
    second = random_batch(rng, count, lengths[1], qualities=case != "fasta")
    got = _interleave(first, second)
    names, name_offsets, codes, offsets, qualities, quality_offsets = plain_interleave(first, second)
    np.testing.assert_array_equal(got.names, names)
    np.testing.assert_array_equal(got.name_offsets, name_offsets)
    np.testing.assert_array_equal(got.codes, codes)
    np.testing.assert_array_equal(got.offsets, offsets)
    if qualities is None:
        assert got.qualities is None
    else:
        np.testing.assert_array_equal(got.qualities, qualities)
