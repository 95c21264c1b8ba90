"""bowmap find: find.cl against its NumPy twin exactly, and `bowmap find` against Python's
substring search (one position at a time) on DNA, protein and text, across block seams, with
blocks uploaded in turn, and its one-line errors."""

from __future__ import annotations

import numpy as np
import pytest
from bowmap.index_builder.build import IndexOptions, build_index
from conftest import write_fasta

from bowmap.cli import main
from bowmap.index.load import load_index
from bowmap.modules.find import reference
from bowmap.modules.find.kernels import FindBlock, FindSearch
from bowmap.modules.find.search import symbol_table

AMINO = b"ACDEFGHIKLMNPQRSTVWY"


def build(tmp_path, path, alphabet, device_memory=1 << 30, max_read_length=64, sa_sample=8, name="ix"):
    prefix = str(tmp_path / name)
    build_index(IndexOptions(reference=str(path), prefix=prefix, device_memory=device_memory, sa_sample=sa_sample,
                             max_read_length=max_read_length, alphabet=alphabet, threads=1))
    return load_index(prefix)


def text_file(tmp_path, data: bytes, name="corpus.bin"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def prose(rng, size: int) -> bytes:
    words = ["naïve", "café", "the", "über", "résumé", "ß", "日本語", "a", "text", "søren", "e", "ee"]
    out = " ".join(rng.choice(words) for _ in range(size // 4)).encode()
    return out[:size].rstrip(b"\x80\xbf") or b"x"


def patterns_from(rng, contigs: list[bytes], count: int, longest: int, extra: bytes) -> list[bytes]:
    """Substrings of the reference (some across contigs when joined), and random strings."""
    joined = b"".join(contigs)
    found = []
    for _ in range(count):
        length = int(rng.integers(1, longest + 1))
        if rng.random() < 0.75:
            start = int(rng.integers(0, max(1, len(joined) - length)))
            found.append(joined[start : start + length] or joined[:1])
        else:
            found.append(bytes(rng.choice(np.frombuffer(extra, dtype=np.uint8), size=length)))
    return found


def expected_lines(contigs, names, patterns, max_hits, valid=None) -> str:
    lines = []
    for number, pattern in enumerate(patterns, start=1):
        hits = [] if valid is not None and not valid(pattern) else reference.python_find(contigs, pattern)
        listed = ",".join(f"{names[c]}:{o + 1}" for c, o in hits) if 0 < len(hits) <= max_hits else "*"
        lines.append(f"{number}\t{len(hits)}\t{listed}\n")
    return "".join(lines)


def run_find(tmp_path, prefix, patterns: list[bytes], capsys, *options) -> str:
    path = tmp_path / "patterns.txt"
    path.write_bytes(b"\n".join(patterns) + b"\n")
    capsys.readouterr()
    assert main(["-q", "find", prefix, str(path), "--devices", "cpu", *options]) == 0
    return capsys.readouterr().out


# ---------------------------------------------------------------- kernels against the NumPy twin

def kernel_case(tmp_path, rng, alphabet: str, length: int):
    if alphabet == "dna":
        sequence = "".join(rng.choice(list("ACGT"), size=length))
        index = build(tmp_path, write_fasta(tmp_path / "r.fa", [("c", sequence)]), "dna")
    elif alphabet == "protein":
        sequence = bytes(rng.choice(np.frombuffer(AMINO, dtype=np.uint8), size=length)).decode()
        index = build(tmp_path, write_fasta(tmp_path / "r.fa", [("c", sequence)]), "protein")
    else:
        sequence = rng.integers(1, 256, size=length, dtype=np.uint8).tobytes()
        index = build(tmp_path, text_file(tmp_path, sequence), "text")
    return index


@pytest.mark.parametrize("alphabet", ["dna", "protein", "text"])
@pytest.mark.parametrize("length", [1, 479, 480, 481, 1537])
def test_kernels_equal_the_numpy_twin(tmp_path, device, alphabet, length):
    rng = np.random.default_rng(length * 7 + len(alphabet))
    index = kernel_case(tmp_path, rng, alphabet, length)
    block = index.blocks[0]
    text = index.packed if alphabet != "dna" else None
    table = symbol_table(index)
    # Patterns: substrings (present), random ones, one with a symbol the index lacks; 1..9 long.
    count = int(rng.choice([1, 63, 65, 257]))
    lengths = rng.integers(1, 10, size=count)
    pieces = []
    for size in lengths:
        if text is not None and rng.random() < 0.6:
            start = int(rng.integers(0, max(1, length - size + 1)))
            piece = table[np.asarray(text[start : start + size])]
            piece = np.resize(piece, size) if len(piece) else np.zeros(size, dtype=np.uint8)
        else:
            piece = rng.integers(0, 4 if alphabet == "dna" else len(index.symbols), size=size).astype(np.uint8)
        pieces.append(piece)
    pieces[-1][0] = 255  # absent symbol
    codes = np.concatenate(pieces)
    offsets = np.cumsum(lengths) - lengths
    searcher = FindSearch(device, wavelet=alphabet != "dna")
    device_block = FindBlock(device, block)
    lo, hi = searcher.search(device_block, codes, offsets, lengths)
    want_lo, want_hi = reference.search(block, codes, offsets, lengths)
    np.testing.assert_array_equal(lo, want_lo)
    np.testing.assert_array_equal(hi, want_hi)
    assert hi[-1] == lo[-1] == 0
    # Locate every row of the block (and an interval list with empty ones) against the twin.
    rows = np.arange(1, block.length + 1)
    positions = searcher.locate(device_block, [1, 5, 1], [block.length, 0, min(3, block.length)])
    want = reference.locate(block, np.concatenate((rows, np.arange(1, min(3, block.length) + 1))))
    np.testing.assert_array_equal(positions, want)
    assert sorted(positions[: block.length].tolist()) == list(range(block.length))  # a permutation: SA is right


# ---------------------------------------------------------------- find against Python's search

def test_dna_find_equals_python_search_across_blocks_and_n_runs(tmp_path, capsys):
    rng = np.random.default_rng(11)
    contigs = []
    for size in (3000, 1, 2500):
        sequence = bytearray(rng.choice(np.frombuffer(b"ACGT", dtype=np.uint8), size=size).tobytes())
        if size > 100:
            sequence[500:530] = b"N" * 30
            sequence[1200:1400] = sequence[100:300]  # a repeat
        contigs.append(bytes(sequence))
    names = ["chrA", "chrB", "chrC"]
    write_fasta(tmp_path / "r.fa", [(n, c.decode()) for n, c in zip(names, contigs)])
    index = build(tmp_path, tmp_path / "r.fa", "dna", device_memory=2400, max_read_length=8)
    assert len(index.blocks) > 3
    patterns = patterns_from(rng, contigs, 300, 40, b"ACGT")
    patterns = [p for p in patterns if len(p) <= 8 + 256] + [b"A", b"ACGTN", b"acg"]
    want = expected_lines([c.upper() for c in contigs], names, [p.upper() for p in patterns], 100,
                          valid=lambda p: set(p) <= set(b"ACGT"))
    assert run_find(tmp_path, str(tmp_path / "ix"), patterns, capsys) == want
    # Blocks uploaded one at a time (a device memory that holds none), and few hits listed.
    want = expected_lines([c.upper() for c in contigs], names, [p.upper() for p in patterns], 3,
                          valid=lambda p: set(p) <= set(b"ACGT"))
    assert run_find(tmp_path, str(tmp_path / "ix"), patterns, capsys, "--device-mem", "1K", "--max-hits", "3") == want


def test_protein_find_equals_python_search(tmp_path, capsys):
    rng = np.random.default_rng(12)
    contigs = [bytes(rng.choice(np.frombuffer(AMINO + b"XBZ*", dtype=np.uint8), size=s)) for s in (700, 3, 1500, 90)]
    contigs[2] = contigs[2][:200] + contigs[0][:300] + contigs[2][500:]  # a shared stretch
    names = [f"sp|P{n}|PROT_{n}" for n in range(len(contigs))]
    write_fasta(tmp_path / "p.fa", [(n, c.decode().lower() if k == 1 else c.decode()) for k, (n, c) in enumerate(zip(names, contigs))])
    index = build(tmp_path, tmp_path / "p.fa", "protein", device_memory=6000, max_read_length=10)
    assert len(index.blocks) > 1 and index.alphabet == "protein"
    patterns = patterns_from(rng, contigs, 300, 30, AMINO + b"OU")
    patterns = [p for p in patterns if len(p) <= 266]
    patterns[0] = patterns[0].lower()
    want = expected_lines(contigs, names, [p.upper() for p in patterns], 100)
    assert run_find(tmp_path, str(tmp_path / "ix"), patterns, capsys) == want


@pytest.mark.parametrize("kind", ["prose", "binary"])
def test_text_find_equals_python_search(tmp_path, capsys, kind):
    rng = np.random.default_rng(13)
    data = prose(rng, 20000) if kind == "prose" else rng.integers(1, 256, size=9000, dtype=np.uint8).tobytes()
    if kind == "binary":
        data = data[:3000] + data[100:1100] + data[3000:]  # a repeat
    index = build(tmp_path, text_file(tmp_path, data, "corpus file.txt"), "text", device_memory=20000, max_read_length=16)
    assert len(index.blocks) > 1 and index.contig_names == ["corpus file.txt"]
    alphabet = bytes(sorted(set(data) - {10, 13}))
    patterns = [p for p in patterns_from(rng, [data], 400, 24, alphabet) if b"\n" not in p and not p.endswith(b"\r")]
    patterns += [b"e", b" ", "é".encode()]
    for max_hits in ("100", "0"):
        want = expected_lines([data], ["corpus file.txt"], patterns, int(max_hits))
        assert run_find(tmp_path, str(tmp_path / "ix"), patterns, capsys, "--max-hits", max_hits) == want


def test_fasta_patterns_keep_their_names(tmp_path, capsys):
    write_fasta(tmp_path / "r.fa", [("one", "ACGTACGTTT")])
    build(tmp_path, tmp_path / "r.fa", "dna")
    write_fasta(tmp_path / "q.fa", [("first", "ACG"), ("second", "GGGG")])
    assert main(["-q", "find", str(tmp_path / "ix"), str(tmp_path / "q.fa"), "--devices", "cpu"]) == 0
    assert capsys.readouterr().out == "first\t2\tone:1,one:5\nsecond\t0\t*\n"


# ---------------------------------------------------------------- errors

def test_text_with_a_zero_byte_is_refused_in_one_line(tmp_path, capsys):
    path = text_file(tmp_path, b"abc\x00def")
    assert main(["index", "--alphabet", "text", str(path), str(tmp_path / "ix")]) == 1
    error = capsys.readouterr().err.strip().splitlines()
    assert error[-1].startswith("bowmap: error:") and "byte 3" in error[-1]
    assert not list(tmp_path.glob("ix*"))


def test_a_pattern_longer_than_the_index_allows_is_one_line(tmp_path, capsys):
    write_fasta(tmp_path / "r.fa", [("one", "ACGT" * 100)])
    build(tmp_path, tmp_path / "r.fa", "dna", max_read_length=8)
    (tmp_path / "q.txt").write_text("ACGT\n" + "A" * 265 + "\n")
    capsys.readouterr()
    assert main(["-q", "find", str(tmp_path / "ix"), str(tmp_path / "q.txt"), "-o", str(tmp_path / "out.tsv")]) == 1
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "q.txt:2" in error and "264" in error
    assert not (tmp_path / "out.tsv").exists()


def test_align_refuses_a_protein_index_and_inspect_names_the_alphabet(tmp_path, capsys):
    write_fasta(tmp_path / "p.fa", [("p", "MKVLA*")])
    build(tmp_path, tmp_path / "p.fa", "protein")
    (tmp_path / "r.fq").write_text("@r\nACGT\n+\nIIII\n")
    assert main(["-q", "align", str(tmp_path / "ix"), str(tmp_path / "r.fq")]) == 1
    assert "a protein index" in capsys.readouterr().err
    assert main(["-q", "inspect", str(tmp_path / "ix")]) == 0
    assert "alphabet protein" in capsys.readouterr().out
