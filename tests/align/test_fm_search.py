"""The FM search kernels against their NumPy reference and a naive substring search, on PoCL."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import build_test_index, codes_to_text, random_genome

from bowmap.align.seed.fm_search import DeviceBlock, FMSearch, exact_matches, interval_rows
from bowmap.align.references import fm_search as reference

LONGEST_SEED = 32


def naive_positions(text: bytes, pattern: bytes) -> list[int]:
    positions, start = [], text.find(pattern)
    while start >= 0:
        positions.append(start)
        start = text.find(pattern, start + 1)
    return positions


def make_patterns(rng, text: np.ndarray, count: int):
    """Present substrings, random (mostly absent) patterns, ambiguous bases, the empty pattern
    and the longest seed, concatenated as the kernels take them."""
    pieces = []
    for number in range(count):
        length = int(rng.integers(1, LONGEST_SEED + 1)) if number % 7 else LONGEST_SEED
        kind = number % 5
        if kind < 3 and len(text) >= length:
            start = int(rng.integers(0, len(text) - length + 1))
            piece = text[start : start + length].copy()
        else:
            piece = rng.integers(0, 4, size=length, dtype=np.uint8)
        if kind == 4 and length > 1:
            piece[int(rng.integers(0, length))] = 4
        pieces.append(piece)
    edge_cases = [
        np.zeros(0, dtype=np.uint8),
        text[:1].copy(),
        text[-LONGEST_SEED:].copy(),  # reaches the block's last base
        np.full(5, 4, dtype=np.uint8),  # all ambiguous
    ]
    pieces[: len(edge_cases)] = edge_cases
    pieces = pieces[:count]
    lengths = np.array([len(piece) for piece in pieces], dtype=np.uint32)
    offsets = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.uint32)
    return np.concatenate(pieces), offsets, lengths


@pytest.mark.parametrize(
    "genome_length, device_memory, sa_sample, pattern_count",
    [
        (5_000, 1 << 30, 32, 255),  # one block; pattern count one short of a work-group multiple
        (40_000, 24_000, 7, 256),  # several blocks, odd sampling
        (12_345, 9_000, 1, 257),  # every suffix sampled
        (3_001, 1 << 30, 64, 1),
    ],
)
def test_search_and_locate_match_reference_and_naive(tmp_path, device, genome_length, device_memory, sa_sample, pattern_count):
    rng = np.random.default_rng(genome_length + sa_sample)
    genome = random_genome(rng, genome_length)
    index = build_test_index(tmp_path, [("chr", codes_to_text(genome))], device_memory, sa_sample)
    if device_memory < 1 << 20:
        assert len(index.blocks) > 2
    searcher = FMSearch(device)
    for block in index.blocks:
        text = genome[block.start : block.start + block.length]
        codes, offsets, lengths = make_patterns(rng, text, pattern_count)
        device_block = DeviceBlock(device, block)
        lo, hi, depth = searcher.search(device_block, codes, offsets, lengths)
        expected = reference.search(block, codes, offsets, lengths)
        for got, want in zip((lo, hi, depth), expected):
            np.testing.assert_array_equal(got, want)

        owners, rows = interval_rows(lo, hi)
        located = searcher.locate(device_block, rows)
        np.testing.assert_array_equal(located, reference.locate(block, rows))
        np.testing.assert_array_equal(searcher.locate_intervals(device_block, lo, hi), located)
        np.testing.assert_array_equal(reference.locate_intervals(block, lo, hi), located)

        text_bytes = text.tobytes()
        for number, (offset, length) in enumerate(zip(offsets, lengths)):
            pattern = codes[offset : offset + length]
            if length == 0:
                assert (lo[number], hi[number], depth[number]) == (1, block.length + 1, 0)
                continue
            want = [] if (pattern > 3).any() else naive_positions(text_bytes, pattern.tobytes())
            assert sorted(located[owners == number].tolist()) == want
            if not want:
                assert lo[number] == hi[number] == 0
            # depth: the longest occurring suffix
            suffix = pattern[length - depth[number] :]
            assert (suffix <= 3).all() and (depth[number] == 0 or text_bytes.find(suffix.tobytes()) >= 0)
            if depth[number] < length:
                longer = pattern[length - depth[number] - 1 :]
                assert (longer > 3).any() or text_bytes.find(longer.tobytes()) < 0


def test_exact_matches_across_blocks_equal_naive(tmp_path, device):
    rng = np.random.default_rng(7)
    contigs = [random_genome(rng, size) for size in (9_000, 1, 15_500, 700)]
    index = build_test_index(
        tmp_path, [(f"c{i}", codes_to_text(c)) for i, c in enumerate(contigs)], device_memory=20_000, sa_sample=5
    )
    assert len(index.blocks) >= 3
    genome = np.concatenate(contigs)
    codes, offsets, lengths = make_patterns(rng, genome, 300)
    lengths[0] = 3  # no empty pattern here: it would match everywhere
    assert (lengths > 0).all()
    patterns, positions = exact_matches(index, device, codes, offsets, lengths)
    expected = [
        (number, position)
        for number, (offset, length) in enumerate(zip(offsets, lengths))
        if (codes[offset : offset + length] <= 3).all()
        for position in naive_positions(genome.tobytes(), codes[offset : offset + length].tobytes())
    ]
    assert list(zip(patterns.tolist(), positions.tolist())) == sorted(expected)
    contig, offset = index.to_contig(positions)
    np.testing.assert_array_equal(index.contig_starts[contig] + offset, positions)


@pytest.mark.parametrize("seed", range(4))
def test_locate_intervals_matches_reference_on_awkward_intervals(tmp_path, device, seed):
    """Random intervals of the whole row range, many empty, runs of empty ones first and last,
    one interval alone, sizes 1 and a whole block: each row of each interval in order."""
    rng = np.random.default_rng(seed)
    genome = random_genome(rng, int(rng.integers(300, 3_000)))
    index = build_test_index(tmp_path, [("chr", codes_to_text(genome))], sa_sample=int(rng.integers(1, 40)))
    block = index.blocks[0]
    device_block = DeviceBlock(device, block)
    searcher = FMSearch(device)
    n = block.length
    count = int(rng.integers(1, 700))
    lo = rng.integers(1, n + 1, count)
    hi = np.minimum(lo + rng.integers(0, 9, count) * (rng.random(count) < 0.6), n + 1)
    hi[:3] = lo[:3]  # empty intervals first
    hi[-2:] = lo[-2:]  # and last
    cases = [(lo, hi), (lo[:1], lo[:1] + 1), (np.array([1]), np.array([n + 1])), (lo[:0], hi[:0]), (lo[:5], lo[:5])]
    for case_lo, case_hi in cases:
        got = searcher.locate_intervals(device_block, case_lo, case_hi)
        np.testing.assert_array_equal(got, reference.locate_intervals(block, case_lo, case_hi))
        np.testing.assert_array_equal(got, searcher.locate(device_block, interval_rows(case_lo, case_hi)[1]))
    assert sorted(searcher.locate_intervals(device_block, [1], [n + 1]).tolist()) == list(range(n))
    with pytest.raises(ValueError):
        searcher.locate_intervals(device_block, [0], [2])  # row 0 is no suffix
    with pytest.raises(ValueError):
        searcher.locate_intervals(device_block, [n], [n + 2])  # past the last row
    with pytest.raises(ValueError):
        searcher.locate_intervals(device_block, [5], [4])


def test_search_rejects_patterns_past_the_codes(device, tmp_path):
    index = build_test_index(tmp_path, [("chr", "ACGTACGTTT")])
    searcher = FMSearch(device)
    with pytest.raises(ValueError):
        searcher.search(DeviceBlock(device, index.blocks[0]), np.zeros(4, np.uint8), [2], [3])
    with pytest.raises(ValueError):
        searcher.locate(DeviceBlock(device, index.blocks[0]), [0])
