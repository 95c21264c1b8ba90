"""The sampled-count rank structure of `bowmap find` (fm/sampled_rank.h, bowmap.modules.find.sampled):
the BWT read back from the wavelet matrix, the NumPy rank equal to the wavelet matrix's at every
row and code, and the -DSAMPLED kernels equal to that reference and to the wavelet kernels, on
protein and text blocks of awkward sizes around the line steps, and through `find` over several
blocks."""

from __future__ import annotations

import numpy as np
import pytest
from bowmap.index_builder.build import IndexOptions, build_index
from conftest import write_fasta

from bowmap.index.alphabet import build_wavelet
from bowmap.index.load import load_index
from bowmap.modules.find import reference, sampled
from bowmap.modules.find.kernels import FindBlock, FindSearch
from bowmap.modules.find.search import Patterns, find, symbol_table

AMINO = b"ACDEFGHIKLMNPQRSTVWY"


def make_index(tmp_path, rng, alphabet: str, length: int, device_memory=1 << 30, max_read_length=64):
    prefix = str(tmp_path / f"{alphabet}{length}")
    if alphabet == "protein":
        data = bytes(rng.choice(np.frombuffer(AMINO + b"XBZ*", dtype=np.uint8), size=length))
        if length > 300:
            data = data[:100] + data[150:250] + data[200:]  # a repeat
        path = write_fasta(tmp_path / f"p{length}.fa", [("c", data.decode())])
    else:
        data = rng.integers(1, 256, size=length, dtype=np.uint8).tobytes()
        if length > 300:
            data = data[:100] + data[150:250] + data[200:]
        path = tmp_path / f"t{length}.bin"
        path.write_bytes(data)
    build_index(IndexOptions(reference=str(path), prefix=prefix, device_memory=device_memory, sa_sample=8,
                             max_read_length=max_read_length, alphabet=alphabet, threads=1))
    return load_index(prefix), data


def naive_bwt(codes: np.ndarray) -> tuple[np.ndarray, int]:
    """Stored BWT (row of the empty suffix's predecessor left out) by sorting suffixes."""
    text = codes.tolist()
    order = sorted(range(len(text) + 1), key=lambda start: text[start:])
    rows = [text[start - 1] if start else None for start in order]
    primary = rows.index(None)
    return np.array([code for code in rows if code is not None], dtype=np.uint8), primary


SIZES = [1, 15, 16, 63, 64, 65, 127, 128, 129, 255, 256, 257, 700]


@pytest.mark.parametrize("alphabet", ["protein", "text"])
@pytest.mark.parametrize("length", SIZES)
def test_reference_equals_the_wavelet_matrix_at_every_row_and_code(tmp_path, alphabet, length):
    rng = np.random.default_rng(length * 3 + len(alphabet))
    index, data = make_index(tmp_path, rng, alphabet, length)
    block = index.blocks[0]
    codes = sampled.wavelet_bwt(block)
    # The BWT read back is the one the wavelet matrix was built from, and the text's own.
    lines, zeros = build_wavelet(codes, len(block.zeros))
    np.testing.assert_array_equal(lines, block.occ)
    np.testing.assert_array_equal(zeros, block.zeros)
    bwt, primary = naive_bwt(symbol_table(index)[np.frombuffer(data, dtype=np.uint8)])
    np.testing.assert_array_equal(codes, bwt)
    assert primary == block.primary
    sigma = len(block.symbol_counts)
    rows = np.repeat(np.arange(block.length + 1), sigma)
    every = np.tile(np.arange(sigma), block.length + 1)
    want = reference.lf_rank(block, rows, every)
    steps = [r for r in range(1, block.length + 1) if r != block.primary]
    for step in sampled.STEPS:
        counts = sampled.build_sampled(block, step)
        assert counts.lines.shape == (block.length // step + 1, -(-sigma // 4) * 4 + step // 4)
        np.testing.assert_array_equal(sampled.lf_rank(counts, block.primary, rows, every), want)
        np.testing.assert_array_equal(reference.lf_step(block, steps, counts), reference.lf_step(block, steps))


def random_patterns(rng, index, data: bytes, count: int):
    table = symbol_table(index)
    text = table[np.frombuffer(data, dtype=np.uint8)]
    lengths = rng.integers(1, 12, size=count)
    lengths[0] = min(lengths[0], len(text))
    pieces = []
    for number, size in enumerate(lengths):
        if number == 0 or rng.random() < 0.6:  # the first one present (the last one absent)
            start = int(rng.integers(0, max(1, len(text) - size + 1)))
            piece = np.resize(text[start : start + size], size)
        else:
            piece = rng.integers(0, len(index.symbols), size=size).astype(np.uint8)
        pieces.append(piece)
    pieces[-1][-1] = 255  # a symbol the index lacks
    return np.concatenate(pieces), np.cumsum(lengths) - lengths, lengths


@pytest.mark.parametrize("alphabet", ["protein", "text"])
@pytest.mark.parametrize("length", [1, 63, 64, 65, 128, 129, 257, 1537])
def test_sampled_kernels_equal_the_reference_and_the_wavelet_kernels(tmp_path, device, alphabet, length):
    rng = np.random.default_rng(length * 5 + len(alphabet))
    index, data = make_index(tmp_path, rng, alphabet, length)
    block = index.blocks[0]
    codes, offsets, lengths = random_patterns(rng, index, data, int(rng.choice([2, 65, 257])))
    wavelet = FindSearch(device, wavelet=True)
    wavelet_block = FindBlock(device, block)
    want_lo, want_hi = wavelet.search(wavelet_block, codes, offsets, lengths)
    rows = np.arange(1, block.length + 1)
    want_positions = wavelet.locate(wavelet_block, [1, 2], [block.length, min(2, block.length - 1)])
    assert want_hi[-1] == want_lo[-1] == 0 and want_hi[0] > want_lo[0]
    for step in sampled.STEPS:
        counts = sampled.build_sampled(block, step)
        searcher = FindSearch(device, wavelet=True, sampled_step=step)
        device_block = FindBlock(device, block, counts)
        lo, hi = searcher.search(device_block, codes, offsets, lengths)
        ref_lo, ref_hi = reference.search(block, codes, offsets, lengths, counts)
        for got, ref, want in ((lo, ref_lo, want_lo), (hi, ref_hi, want_hi)):
            np.testing.assert_array_equal(got, ref)
            np.testing.assert_array_equal(got, want)
        positions = searcher.locate(device_block, [1, 2], [block.length, min(2, block.length - 1)])
        located = np.concatenate((rows, np.arange(2, 2 + min(2, block.length - 1))))
        np.testing.assert_array_equal(positions, reference.locate(block, located, counts))
        np.testing.assert_array_equal(positions, want_positions)
        with pytest.raises(ValueError, match="rank structure"):
            searcher.search(wavelet_block, codes, offsets, lengths)


@pytest.mark.parametrize("alphabet", ["protein", "text"])
def test_find_through_sampled_counts_equals_the_wavelet_matrix_across_blocks(tmp_path, device, alphabet):
    rng = np.random.default_rng(41 + len(alphabet))
    index, data = make_index(tmp_path, rng, alphabet, 6000, device_memory=5000, max_read_length=12)
    assert len(index.blocks) > 2
    codes, offsets, lengths = random_patterns(rng, index, data, 500)
    patterns = Patterns([str(i) for i in range(len(lengths))], np.arange(len(lengths)), codes, offsets, lengths)
    want = find(index, [device], patterns, 5)
    assert want.counts.sum() > len(lengths) // 2
    for step in (64, 256):
        counts = [sampled.build_sampled(block, step) for block in index.blocks]
        for memory in (None, 1024):  # resident, and each block uploaded in its turn
            got = find(index, [device], patterns, 5, device_memory=memory, sampled=counts)
            np.testing.assert_array_equal(got.counts, want.counts)
            np.testing.assert_array_equal(got.first, want.first)
            np.testing.assert_array_equal(got.positions, want.positions)


def test_sampled_counts_are_refused_where_they_do_not_apply(tmp_path, device):
    write_fasta(tmp_path / "r.fa", [("c", "ACGTACGTAC")])
    build_index(IndexOptions(reference=str(tmp_path / "r.fa"), prefix=str(tmp_path / "dna"), threads=1))
    dna = load_index(str(tmp_path / "dna"))
    rng = np.random.default_rng(3)
    index, _ = make_index(tmp_path, rng, "protein", 100)
    with pytest.raises(ValueError, match="step"):
        sampled.build_sampled(index.blocks[0], 100)
    with pytest.raises(ValueError, match="protein and text"):
        FindSearch(device, wavelet=False, sampled_step=64)
    with pytest.raises(ValueError, match="protein and text"):
        FindBlock(device, dna.blocks[0], sampled.build_sampled(index.blocks[0], 64))
    patterns = Patterns(["1"], np.arange(1), np.zeros(1, dtype=np.uint8), np.zeros(1, dtype=np.int64), np.ones(1, dtype=np.int64))
    with pytest.raises(ValueError, match="one a block"):
        find(dna, [device], patterns, 5, sampled=[sampled.build_sampled(index.blocks[0], 64)])
