"""The k-difference primer problem: the two sequential references against the brute-force
definition, every kernel variant against the references (lengths and comparison counts exactly),
and the `bowmap primers` command."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import write_fasta

from bowmap.cli import main
from bowmap.modules.primers import reference
from bowmap.modules.primers.kernels import PrimerOptions, PrimerSearch, solutions

PAPER_ALPHA, PAPER_BETA = b"ACTG", b"AGCAAG"
PAPER_LENGTHS = [3, 3, 0, 0]  # ACT from 1, CTG from 2 (1-based), none from 3 and 4

# Kernel variants: the default tiled form, the tiled form with tiny tiles (many tile seams, a
# tile narrower than the halo) and small batches (several launches, a recount across batches),
# with a 4-symbol alpha cache (slides cross from local to global memory), and the fine form with
# small batches; the conventional kernel in one launch and in small batches.
VARIANTS = {
    "coarse": dict(parallelism="coarse"),
    "coarse-small-tiles": dict(parallelism="coarse", tile_width=3, batch_starts=5, alpha_cache=4),
    "coarse-odd-tiles": dict(parallelism="coarse", tile_width=37, batch_starts=16),
    "fine": dict(parallelism="fine", batch_starts=7),
    "conventional": dict(method="conventional", parallelism="coarse"),
    "conventional-batches": dict(method="conventional", parallelism="coarse", batch_starts=6),
    "conventional-fine": dict(method="conventional", parallelism="fine", batch_starts=5),
}


def method_of(variant: str) -> str:
    return VARIANTS[variant].get("method", "landau-vishkin")


def random_text(rng, length: int, symbols: bytes = b"ACGT") -> bytes:
    return bytes(np.frombuffer(symbols, dtype=np.uint8)[rng.integers(0, len(symbols), size=length)])


def mutate(rng, text: bytes, rate: float) -> bytes:
    """Substitutions, insertions and deletions, each at about rate / 3 a symbol."""
    out = bytearray()
    for symbol in text:
        draw = rng.random()
        if draw < rate / 3:
            out += random_text(rng, 1)
        elif draw < 2 * rate / 3:
            out += bytes([symbol]) + random_text(rng, 1)
        elif draw >= rate:
            out.append(symbol)
    return bytes(out) or text[:1]


def test_paper_example_by_every_sequential_solution():
    for method in ("landau-vishkin", "conventional"):
        lengths, comparisons = reference.solve(PAPER_ALPHA, PAPER_BETA, 2, method)
        assert lengths.tolist() == PAPER_LENGTHS
        assert comparisons > 0
    assert reference.brute_force(PAPER_ALPHA, PAPER_BETA, 2)[0].tolist() == PAPER_LENGTHS


def test_references_equal_brute_force_on_random_inputs():
    rng = np.random.default_rng(2024)
    for trial in range(120):
        m, n = int(rng.integers(1, 8)), int(rng.integers(1, 8))
        k = int(rng.integers(1, 6))
        symbols = (b"A", b"AC", b"ACG", b"ACGT")[trial % 4]
        alpha, beta = random_text(rng, m, symbols), random_text(rng, n, symbols)
        if trial % 5 == 0:
            alpha = beta[: m]  # a substring of beta
        expected = reference.brute_force(alpha, beta, k)[0]
        for method in ("landau-vishkin", "conventional"):
            lengths, _ = reference.solve(alpha, beta, k, method)
            assert lengths.tolist() == expected.tolist(), (alpha, beta, k, method)


def test_landau_vishkin_levels_and_counts():
    alpha, beta = b"ACGTACGTTT", b"GGACGTACGTATGG"
    c, comparisons, hit = reference.landau_vishkin_start(np.frombuffer(alpha, np.uint8), np.frombuffer(beta, np.uint8), 4)
    assert (c, hit) == (10, 1)  # the whole suffix occurs with 1 difference: stop after level 1
    # Level 0 alone on "A" against "A": diagonal 0 compares once and reaches the end (no mismatch).
    assert reference.landau_vishkin_start(np.frombuffer(b"A", np.uint8), np.frombuffer(b"A", np.uint8), 1)[:2] == (1, 1)


def adversarial_cases():
    rng = np.random.default_rng(99)
    cases = [("paper", PAPER_ALPHA, PAPER_BETA, 2)]
    cases.append(("k=1", random_text(rng, 33), random_text(rng, 40), 1))
    cases.append(("k>m", random_text(rng, 6), random_text(rng, 20), 9))
    # k far above m: kernels run with min(k, m + 1), which must change nothing.
    cases.append(("huge k", random_text(rng, 5), random_text(rng, 7), 70_000))
    # A halo of k - 1 diagonals too large for 48 KiB of local memory: coarse falls back to fine.
    cases.append(("halo past local memory", random_text(rng, 3100), random_text(rng, 10), 3500))
    beta = random_text(rng, 127)
    cases.append(("alpha in beta", beta[50:81], beta, 3))
    cases.append(("no shared symbol", random_text(rng, 31, b"AC"), random_text(rng, 65, b"GT"), 3))
    cases.append(("length 1", b"A", b"C", 1))
    cases.append(("length 1 equal", b"G", b"G", 1))
    cases.append(("alpha 1, beta 2^k+1", b"T", random_text(rng, 33), 2))
    cases.append(("2^k-1 vs 2^k", random_text(rng, 63), random_text(rng, 64), 5))
    cases.append(("2^k+1 vs 2^k-1", random_text(rng, 65), random_text(rng, 127), 3))
    cases.append(("repetitive", b"ACACACACACACACACAGACACACACACAC", b"AC" * 40, 2))
    cases.append(("homopolymers", b"A" * 20 + b"C" * 20, b"A" * 17 + b"T" + b"A" * 9, 3))
    cases.append(("tandem vs shifted", b"ACGTT" * 9, b"CGTTA" * 5 + b"GG" + b"ACGTT" * 4, 5))
    homologous = random_text(rng, 120)
    cases.append(("homologous", homologous, random_text(rng, 30) + mutate(rng, homologous, 0.1) + random_text(rng, 30), 5))
    return cases


CASES = adversarial_cases()


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("case", CASES, ids=[case[0] for case in CASES])
def test_kernels_equal_references_on_adversarial_inputs(device, variant, case):
    name, alpha, beta, k = case
    search = PrimerSearch(device)
    lengths, comparisons = search.find(alpha, beta, PrimerOptions(k=k, **VARIANTS[variant]))
    if name == "halo past local memory" and method_of(variant) == "landau-vishkin":
        assert search.last_layout["parallelism"] == "fine"
    expected, expected_comparisons = reference.solve(alpha, beta, k, method_of(variant))
    assert lengths.tolist() == expected.tolist()
    assert comparisons == expected_comparisons
    other = "conventional" if method_of(variant) == "landau-vishkin" else "landau-vishkin"
    assert reference.solve(alpha, beta, k, other)[0].tolist() == expected.tolist()
    if len(alpha) * len(beta) <= 64 * 64 and len(alpha) <= 8:
        assert expected.tolist() == reference.brute_force(alpha, beta, k)[0].tolist()


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_kernels_equal_reference_on_random_inputs(device, variant):
    rng = np.random.default_rng(7)
    search = PrimerSearch(device)
    for m, n, k in ((1, 1, 1), (15, 16, 2), (16, 17, 3), (17, 255, 3), (64, 63, 5), (129, 31, 2), (40, 257, 5)):
        for symbols in (b"ACGT", b"AC"):
            alpha, beta = random_text(rng, m, symbols), random_text(rng, n, symbols)
            lengths, comparisons = search.find(alpha, beta, PrimerOptions(k=k, **VARIANTS[variant]))
            expected, expected_counts = reference.solve_starts(alpha, beta, k, method_of(variant))
            assert lengths.tolist() == expected.tolist(), (m, n, k, symbols)
            assert search.start_comparisons.tolist() == expected_counts.tolist(), (m, n, k, symbols)
            assert comparisons == expected_counts.sum()
            # A slice of the starts: the same lengths and counts for those starts.
            lengths, _ = search.find(alpha, beta, PrimerOptions(k=k, starts=m // 2, **VARIANTS[variant]))
            assert lengths[: m // 2].tolist() == expected[: m // 2].tolist()
            assert search.start_comparisons[: m // 2].tolist() == expected_counts[: m // 2].tolist()
            assert not search.start_comparisons[m // 2 :].any()


def test_coarse_kernel_on_homologous_sequences_with_long_slides(device):
    """Slides longer than the alpha cache (rows past ALPHA_CACHE read global memory)."""
    rng = np.random.default_rng(11)
    alpha = random_text(rng, 700)
    beta = random_text(rng, 50) + mutate(rng, alpha[:400], 0.004) + random_text(rng, 80) + alpha[300:] + random_text(rng, 20)
    for k in (3, 5):
        expected, expected_comparisons = reference.solve(alpha, beta, k)
        for options in (PrimerOptions(k=k), PrimerOptions(k=k, tile_width=37, batch_starts=64, alpha_cache=64)):
            lengths, comparisons = PrimerSearch(device).find(alpha, beta, options)
            assert lengths.tolist() == expected.tolist()
            assert comparisons == expected_comparisons
        # The fine conventional kernel takes a barrier a DP anti-diagonal: slow on PoCL, k = 3 only.
        for parallelism in ("coarse", "fine") if k == 3 else ("coarse",):
            conventional = PrimerSearch(device).find(alpha, beta, PrimerOptions(k=k, method="conventional", parallelism=parallelism))
            assert conventional[0].tolist() == expected.tolist()
            assert conventional[1] == reference.solve(alpha, beta, k, "conventional")[1]
        assert expected.max() > 256  # some solutions do run past the cache


def test_conventional_kernels_with_uint_cells(device, monkeypatch):
    """k >= 65535 stores uint DP entries; such a k needs m > 65534 to matter, so force it here."""
    import bowmap.modules.primers.kernels

    monkeypatch.setattr(bowmap.modules.primers.kernels, "SHORT_CELL_LIMIT", 1)
    rng = np.random.default_rng(5)
    alpha, beta = random_text(rng, 77, b"AC"), random_text(rng, 40, b"AC")
    expected = reference.solve(alpha, beta, 4, "conventional")
    for parallelism in ("coarse", "fine"):
        search = PrimerSearch(device)
        lengths, comparisons = search.find(alpha, beta, PrimerOptions(k=4, method="conventional", parallelism=parallelism))
        assert search.last_layout["CELL"] == "uint"
        assert (lengths.tolist(), comparisons) == (expected[0].tolist(), expected[1])


def test_solutions_and_bad_options(device):
    starts, ends = solutions(np.array([3, 3, 0, 0]))
    assert starts.tolist() == [0, 1] and ends.tolist() == [3, 4]
    from bowmap.runtime.errors import UsageError

    with pytest.raises(UsageError):
        PrimerSearch(device).find(b"AC", b"AC", PrimerOptions(k=0))
    with pytest.raises(UsageError):
        PrimerSearch(device).find(b"AC", b"AC", PrimerOptions(k=1, method="smith-waterman"))


# ---------------------------------------------------------------- command line

def run_cli(capsys, *argv):
    code = main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line_error(err: str, *needles: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bowmap: error: "), err
    for needle in needles:
        assert needle in lines[0], err


def test_cli_paper_example(tmp_path, capsys):
    alpha = write_fasta(tmp_path / "alpha.fa", [("alpha", "actg")])
    beta = write_fasta(tmp_path / "beta.fa", [("beta", "AGCAAG")])
    out = tmp_path / "out.tsv"
    code, _, err = run_cli(capsys, "primers", alpha, beta, "-k", 2, "-o", out, "--devices", "cpu")
    assert code == 0, err
    lines = out.read_text().splitlines()
    assert lines[0].startswith("#start\tend\tlength\tprimer") and "1-based inclusive" in lines[0]
    assert lines[1:] == ["1\t3\t3\tACT", "2\t4\t3\tCTG"]
    assert not [path for path in tmp_path.iterdir() if path.name.startswith(".primers.")]
    code, stdout, err = run_cli(capsys, "primers", alpha, beta, "-k", 2, "--parallelism", "sequential", "--method", "conventional")
    assert code == 0, err
    assert stdout.splitlines()[1:] == lines[1:]


def test_cli_multi_record_and_concat(tmp_path, capsys):
    alpha = write_fasta(tmp_path / "alpha.fa", [("one", "AC"), ("two", "TG")])
    beta = write_fasta(tmp_path / "beta.fa", [("beta", "AGCAAG")])
    code, _, err = run_cli(capsys, "primers", alpha, beta, "-k", 2, "--devices", "cpu")
    assert code == 1
    one_line_error(err, str(alpha), "2 records", "--concat")
    code, stdout, err = run_cli(capsys, "primers", alpha, beta, "-k", 2, "--concat", "--devices", "cpu")
    assert code == 0, err
    assert stdout.splitlines()[1:] == ["1\t3\t3\tACT", "2\t4\t3\tCTG"]


def test_cli_bad_input(tmp_path, capsys):
    good = write_fasta(tmp_path / "good.fa", [("good", "ACGT")])
    bad = write_fasta(tmp_path / "bad.fa", [("bad", "ACGT" * 20 + "AC-GT")])
    code, _, err = run_cli(capsys, "primers", bad, good, "-k", 2)
    assert code == 1
    one_line_error(err, f"{bad}:3", "'-'", "'bad'")
    code, _, err = run_cli(capsys, "primers", good, tmp_path / "missing.fa", "-k", 2)
    assert code == 1
    one_line_error(err, "missing.fa")
    code, _, err = run_cli(capsys, "primers", good, good, "-k", "x")
    assert code == 2
    one_line_error(err, "-k")
    code, _, err = run_cli(capsys, "primers", good, good, "-k", 2, "-o", tmp_path / "no" / "out.tsv")
    assert code == 1
    one_line_error(err, "out.tsv")
