"""Approximate string matching: the references against brute force, both kernels against the
reference DP on the `device` fixture, the reported positions re-checked, and the CLI."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import write_fasta

from bowmap.cli import main
from bowmap.modules.asm import reference
from bowmap.modules.asm.kernels import ApproximateMatcher, approximate_match, encode

METHODS = ("dp", "bitvector")
PAPER_X, PAPER_Y = b"ababa", b"aaabbbaa"


@pytest.fixture(scope="module")
def matcher(device):
    return ApproximateMatcher(device)


def random_bytes(rng, length: int, alphabet: bytes) -> bytes:
    symbols = np.frombuffer(alphabet, dtype=np.uint8)
    return symbols[rng.integers(0, len(symbols), size=length)].tobytes()


def test_paper_example_in_references():
    assert reference.best_match(PAPER_X, PAPER_Y) == (1, 2, 7)  # "abbba", 1-based 3..7
    assert reference.brute_force(PAPER_X, PAPER_Y)[:3] == (1, 2, 7)


def test_references_equal_brute_force():
    rng = np.random.default_rng(8)
    for trial in range(250):
        alphabet = (b"01", b"ACGT", b"ab\x00\xff")[trial % 3]
        pattern = random_bytes(rng, int(rng.integers(1, 7)), alphabet)
        text = random_bytes(rng, int(rng.integers(1, 11)), alphabet)
        distance, start, end, per_end = reference.brute_force(pattern, text)
        assert reference.best_match(pattern, text) == (distance, start, end)
        assert reference.last_row(pattern, text)[1:].tolist() == per_end
        ends, distances = reference.matches_within(pattern, text, distance + 1)
        assert ends.tolist() == [e for e in range(1, len(text) + 1) if per_end[e - 1] <= distance + 1]


@pytest.mark.parametrize("method", METHODS)
def test_paper_example_on_device(device, matcher, method):
    matches = approximate_match(device, [PAPER_X], PAPER_Y, method, all_distances=True, matcher=matcher)
    assert (matches.distance[0], matches.start[0], matches.end[0]) == (1, 2, 7)
    assert matches.distances[0].tolist() == [4, 3, 2, 2, 2, 2, 1, 2]


def check_batch(device, matcher, method, patterns, text, pieces):
    matches = approximate_match(device, patterns, text, method, pieces, all_distances=True, matcher=matcher)
    for index, pattern in enumerate(patterns):
        row = reference.last_row(pattern, text)
        distance, end = reference.best_end(row)
        start = reference.match_start(pattern, text, end, distance)
        got = (int(matches.distance[index]), int(matches.start[index]), int(matches.end[index]))
        assert got == (distance, start, end), (method, len(pattern), len(text), pieces)
        np.testing.assert_array_equal(matches.distances[index], row[1:])
        # The reported substring really has the reported distance, and no longer one does.
        # (Pure-Python edit distances: only for short patterns.)
        if len(pattern) <= 40:
            assert reference.edit_distance(pattern, text[start:end]) == distance
            if start > 0:
                assert reference.edit_distance(pattern, text[start - 1 : end]) > distance


# Pattern lengths around the word size (64) and PoCL's and NVIDIA's strip sizes (32, 128), texts
# not a multiple of the piece count, m = n, m = 1, a pattern longer than the text.
CASES = [
    (1, 1, 1, b"01"),
    (1, 37, 5, b"ACGT"),
    (5, 5, 2, b"01"),
    (31, 255, 7, b"01"),
    (32, 256, 3, b"ACGT"),
    (33, 257, 9, b"01"),
    (63, 500, 11, b"ACGT"),
    (64, 64, 1, b"01"),
    (65, 1001, 6, b"ACGT"),
    (127, 999, 4, b"01"),
    (129, 777, 13, b"ACGT"),
    (200, 150, 3, b"ACGT"),
    (1023, 1100, 2, b"01"),  # around NVIDIA's largest work-group (1024)
    (1025, 1200, 3, b"01"),
    (4095, 4200, 2, b"01"),  # around PoCL's (4096): one row, then two rows a work-item
    (4097, 4300, 1, b"01"),
]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("length, text_length, pieces, alphabet", CASES)
def test_kernels_equal_reference(device, matcher, method, length, text_length, pieces, alphabet):
    rng = np.random.default_rng(length * 1000 + text_length)
    text = random_bytes(rng, text_length, alphabet)
    patterns = [random_bytes(rng, length, alphabet)]
    if text_length >= length:
        start = int(rng.integers(0, text_length - length + 1))
        planted = bytearray(text[start : start + length])  # a near occurrence with a few edits
        for _ in range(max(1, length // 10)):
            planted[int(rng.integers(0, length))] = alphabet[0]
        patterns.append(bytes(planted))
    check_batch(device, matcher, method, patterns, text, pieces)


@pytest.mark.parametrize("method", METHODS)
def test_batch_of_mixed_lengths_and_default_pieces(device, matcher, method):
    """Many patterns of different lengths in one launch (shorter ones padded with free rows),
    byte symbols absent from the patterns in the text, and the device's default piece count."""
    rng = np.random.default_rng(77)
    text = random_bytes(rng, 3001, b"ACGTN\x00")
    patterns = [random_bytes(rng, int(length), b"ACGT") for length in (1, 2, 17, 64, 65, 130, 3, 100)]
    check_batch(device, matcher, method, patterns, text, None)


def test_pieces_at_most_text_length_and_equal_results(device, matcher):
    rng = np.random.default_rng(3)
    text = random_bytes(rng, 50, b"01")
    pattern = random_bytes(rng, 7, b"01")
    results = {
        (method, pieces): approximate_match(device, [pattern], text, method, pieces, matcher=matcher)
        for method in METHODS for pieces in (1, 2, 49, 50, 1000)
    }
    want = reference.best_match(pattern, text)
    for matches in results.values():
        assert (matches.distance[0], matches.start[0], matches.end[0]) == want


def test_encode_dense_codes():
    encoded = encode([b"GATTACA", b"CC"], b"NACGTx")
    assert encoded.symbols == 5  # A C G T, and 0 for text bytes in no pattern
    assert encoded.text.tolist() == [0, 1, 2, 3, 4, 0]
    assert encode([bytes(range(256))], b"\x00\x01").symbols == 256


def test_bitvector_takes_all_256_byte_values_dp_refuses(device, matcher):
    pattern = bytes(range(256))
    text = bytes(range(100, 256)) + bytes(range(0, 120))
    matches = approximate_match(device, [pattern], text, "bitvector", 3, matcher=matcher)
    assert (matches.distance[0], matches.start[0], matches.end[0]) == reference.best_match(pattern, text)
    with pytest.raises(ValueError, match="bitvector"):
        approximate_match(device, [pattern], text, "dp", matcher=matcher)


# ---------------------------------------------------------------- command line

def run_cli(capsys, *argv):
    code = main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_best_and_all(tmp_path, capsys, monkeypatch):
    patterns = write_fasta(tmp_path / "x.fa", [("paper", "ababa"), ("run", "bbb")])
    texts = write_fasta(tmp_path / "y.fa", [("y", "aaabbbaa"), ("z", "bab")])
    devices = ["--devices", "cpu"]  # the kernels are tested on every device above; this is the CLI
    for method in METHODS:
        code, out, err = run_cli(capsys, "-q", "asm", patterns, texts, "--method", method, *devices)
        assert code == 0, err
        assert out.splitlines() == [
            "#pattern\ttext\tdistance\tstart\tend\t(positions 1-based, inclusive)",
            "paper\ty\t1\t3\t7",
            "run\ty\t0\t4\t6",
            "paper\tz\t2\t1\t3",
            "run\tz\t1\t1\t3",
        ]
    output = tmp_path / "hits.tsv"
    for table_bytes in (1 << 28, 1):  # one slice of patterns, or one pattern a slice
        monkeypatch.setattr("bowmap.modules.asm.kernels.DISTANCE_TABLE_BYTES", table_bytes)
        code, _, err = run_cli(capsys, "-q", "asm", patterns, texts, "--all", "--max-dist", "1", "-o", output, *devices)
        assert code == 0, err
        assert output.read_text().splitlines() == [
            "#pattern\ttext\tend\tdistance\t(end 1-based, inclusive)",
            "paper\ty\t7\t1",
            "run\ty\t5\t1",
            "run\ty\t6\t0",
            "run\ty\t7\t1",
            "run\tz\t3\t1",
        ]
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith(".asm-")] == []


@pytest.mark.parametrize(
    "arguments, code, needle",
    [
        (["--all"], 2, "--max-dist"),
        (["--max-dist", "2"], 2, "--all"),
        (["--pieces", "0"], 2, "--pieces"),
        (["--method", "fast"], 2, "invalid choice"),
    ],
)
def test_cli_usage_errors(tmp_path, capsys, arguments, code, needle):
    patterns = write_fasta(tmp_path / "x.fa", [("x", "ACGT")])
    texts = write_fasta(tmp_path / "y.fa", [("y", "ACGTACGT")])
    got, _, err = run_cli(capsys, "asm", patterns, texts, *arguments)
    assert got == code
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bowmap: error: ") and needle in lines[0]


def test_cli_bad_input_files(tmp_path, capsys):
    patterns = write_fasta(tmp_path / "x.fa", [("x", "ACGT")])
    empty = tmp_path / "empty.fa"
    empty.write_text("")
    duplicate = tmp_path / "dup.fa"
    duplicate.write_text(">a\nAC\n>a\nGT\n")
    for texts, needle in ((tmp_path / "missing.fa", "no such file"), (empty, "empty file"), (duplicate, "duplicate")):
        code, _, err = run_cli(capsys, "asm", patterns, texts, "--devices", "cpu")
        assert code == 1
        lines = err.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0], err


@pytest.mark.parametrize("method", METHODS)
def test_pieces_are_clamped_and_long_jobs_launch_in_slices(device, matcher, method, monkeypatch):
    """`--pieces 1e9` ran 159 s for a 0.2 s job: a piece now owns at least a pattern's length
    of text. With one DP cell a launch, every piece (or group) is a launch of its own, and the
    result is the same."""
    rng = np.random.default_rng(8)
    text, pattern = random_bytes(rng, 50, b"ACGT"), random_bytes(rng, 7, b"ACGT")
    want = reference.best_match(pattern, text)
    monkeypatch.setattr("bowmap.modules.asm.kernels.CELLS_PER_LAUNCH", 1)
    for pieces in (10**9, 7, 3):
        matches = approximate_match(device, [pattern, pattern[:5]], text, method, pieces, matcher=matcher)
        assert (matches.distance[0], matches.start[0], matches.end[0]) == want
        assert (matches.distance[1], matches.start[1], matches.end[1]) == reference.best_match(pattern[:5], text)
        launches = len(matcher.last_kernel_events)
        if method == "dp":
            assert launches == min(pieces, 50 // 7)  # one piece a launch, at most n // m pieces
        else:
            assert launches > 1


def test_lowercase_is_read_as_bases(tmp_path, capsys):
    """Soft-masked (lowercase) text gave a meaningless distance: case is ignored now."""
    patterns = write_fasta(tmp_path / "x.fa", [("upper", "ACGTTGCA"), ("lower", "acgttgca")])
    texts = write_fasta(tmp_path / "y.fa", [("masked", "ggggacgtTGCAgggg")])
    code, out, err = run_cli(capsys, "-q", "asm", patterns, texts, "--devices", "cpu")
    assert code == 0, err
    assert out.splitlines()[1:] == ["upper\tmasked\t0\t5\t12", "lower\tmasked\t0\t5\t12"]


def test_sigterm_stops_a_long_run_promptly(tmp_path):
    """A long job answered SIGTERM only when its one kernel launch ended (50 s late)."""
    import signal
    import subprocess
    import sys
    import time

    rng = np.random.default_rng(2)
    patterns = write_fasta(tmp_path / "x.fa", [("p", random_bytes(rng, 3000, b"ACGT").decode())])
    texts = write_fasta(tmp_path / "y.fa", [("t", random_bytes(rng, 3_000_000, b"ACGT").decode())])
    process = subprocess.Popen([sys.executable, "-m", "bowmap", "-q", "asm", patterns, texts, "--devices", "cpu", "-o", str(tmp_path / "out.tsv")],
                               stderr=subprocess.PIPE, text=True)
    time.sleep(4)  # past the start-up and the kernel build, into the 9e9-cell DP
    if process.poll() is not None:
        pytest.skip("the job finished before the signal: a fast device")
    process.send_signal(signal.SIGTERM)
    sent = time.perf_counter()
    try:
        err = process.communicate(timeout=30)[1]
    except subprocess.TimeoutExpired:
        process.kill()
        pytest.fail("no exit 30 s after SIGTERM")
    assert process.returncode == 143 and "terminated" in err, err
    assert time.perf_counter() - sent < 10
    assert not (tmp_path / "out.tsv").exists()
