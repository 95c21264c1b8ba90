"""Closest substring: kernels against the sequential reference, the exact search against brute
force, planted motifs, and the command line."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import write_fasta

from bowmap.cli import main
from bowmap.modules.closest_substring import reference
from bowmap.modules.closest_substring.kernels import (
    ALPHABETS,
    ClosestSubstringSearch,
    closest_substring,
    decode,
    exact_key,
)

DEVICE_METHODS = ("s-gpu", "pp-gpu")


def random_strings(rng, count: int, shortest: int, longest: int, alphabet_size: int) -> list[np.ndarray]:
    return [rng.integers(0, alphabet_size, size=int(rng.integers(shortest, longest + 1)), dtype=np.uint8) for _ in range(count)]


def plant(rng, strings: list[np.ndarray], centre: np.ndarray, mutations: int, alphabet_size: int = 4) -> None:
    """In place: a copy of ``centre`` with exactly ``mutations`` substitutions at a random place
    of every string."""
    for string in strings:
        copy = centre.copy()
        where = rng.choice(len(centre), size=mutations, replace=False)
        copy[where] = (copy[where] + rng.integers(1, alphabet_size, size=mutations)) % alphabet_size
        start = int(rng.integers(0, len(string) - len(centre) + 1))
        string[start : start + len(centre)] = copy


# (alphabet, L, strings, shortest, longest, d, symbols used): awkward string counts around
# work-group sizes, unequal lengths, strings exactly L long (one window), multi-word windows
# (DNA L > 16, protein L > 6), and two-symbol strings full of ties.
CASES = [
    ("dna", 1, 2, 1, 9, 0, 4),
    ("dna", 3, 33, 3, 40, 1, 4),
    ("dna", 16, 32, 16, 60, 4, 4),
    ("dna", 17, 31, 17, 50, 5, 4),
    ("dna", 33, 9, 33, 45, 10, 4),
    ("dna", 5, 64, 5, 20, 1, 2),
    ("protein", 6, 65, 6, 30, 3, 20),
    ("protein", 13, 7, 13, 40, 8, 20),
    ("protein", 4, 17, 4, 25, 1, 2),
]


@pytest.mark.parametrize("alphabet, length, count, shortest, longest, max_distance, symbols", CASES)
def test_chord_keys_match_reference(device, alphabet, length, count, shortest, longest, max_distance, symbols):
    rng = np.random.default_rng(length * 1000 + count)
    strings = random_strings(rng, count, shortest, longest, symbols)
    search = ClosestSubstringSearch(device, strings, length, alphabet)
    excess, total = reference.chord_keys(strings, length, max_distance)
    expected = reference.pack_keys(excess, total)
    expected_pitch = reference.best_pitch(strings, length, max_distance)
    for method in DEVICE_METHODS:
        np.testing.assert_array_equal(search.chord_keys(method, max_distance), expected, err_msg=method)
        pitch, key = search.best_pitch(method, max_distance)
        assert (pitch, key) == (expected_pitch, int(expected[expected_pitch])), method


@pytest.mark.parametrize("alphabet, length, count, shortest, longest, max_distance, symbols", CASES[::2])
def test_whole_method_matches_reference(device, alphabet, length, count, shortest, longest, max_distance, symbols):
    rng = np.random.default_rng(7 + length + count)
    strings = random_strings(rng, count, shortest, longest, symbols)
    expected = reference.pitch_chord(strings, length, max_distance, len(ALPHABETS[alphabet]))
    reference.check_report(strings, expected["root"], expected["root_distances"], expected["root_positions"])
    for method in DEVICE_METHODS + ("sequential",):
        result = closest_substring(strings, length, max_distance, alphabet, method, device=device)
        assert result.pitch_position == expected["pitch_position"]
        assert result.pitch.centre == decode(expected["pitch"], alphabet)
        assert result.root.centre == decode(expected["root"], alphabet)
        np.testing.assert_array_equal(result.pitch.distances, expected["note_distances"])
        np.testing.assert_array_equal(result.pitch.positions, expected["note_positions"])
        np.testing.assert_array_equal(result.root.distances, expected["root_distances"])
        np.testing.assert_array_equal(result.root.positions, expected["root_positions"])
        assert result.chord_distance == int(expected["note_distances"].sum())
        assert result.root.valid == (int(expected["root_distances"].max()) <= max_distance)


def test_closest_windows_match_reference_and_naive(device):
    rng = np.random.default_rng(5)
    for alphabet, length, symbols in (("dna", 7, 2), ("dna", 20, 4), ("protein", 7, 20)):
        strings = random_strings(rng, 31, length, 50, symbols)
        search = ClosestSubstringSearch(device, strings, length, alphabet)
        centres = np.stack([strings[3][:length], rng.integers(0, symbols, size=length, dtype=np.uint8)])
        distances, positions = search.closest_windows(centres)
        for row, centre in enumerate(centres):
            want_distances, want_positions = reference.closest_windows(strings, centre)
            np.testing.assert_array_equal(distances[row], want_distances)
            np.testing.assert_array_equal(positions[row], want_positions)
            reference.check_report(strings, centre, distances[row], positions[row])


@pytest.mark.parametrize(
    "length, count, shortest, longest, centres_per_launch, tile_size",
    [
        (1, 2, 1, 5, 1 << 22, None),
        (2, 3, 2, 9, 4, 1),  # launches and tiles far smaller than the work
        (4, 17, 4, 30, 64, 7),
        (5, 5, 5, 40, 1 << 22, 3),
        (6, 4, 6, 25, 1000, None),
    ],
)
def test_exact_matches_brute_force(device, length, count, shortest, longest, centres_per_launch, tile_size):
    rng = np.random.default_rng(100 + length)
    strings = random_strings(rng, count, shortest, longest, 4)
    if length >= 4:
        plant(rng, strings, rng.integers(0, 4, size=length, dtype=np.uint8), 1)
    centre, worst, total = reference.brute_force_optimum(strings, length)
    search = ClosestSubstringSearch(device, strings, length, "dna")
    for bound in (None, (worst << 24) | total, ((worst + 1) << 24)):
        got_centre, key = search.exact_centre(bound, centres_per_launch, tile_size)
        np.testing.assert_array_equal(got_centre, centre)
        assert key == (worst << 24) | total


def test_exact_breaks_ties_to_the_smallest_centre(device):
    # Every centre with the same symbols as both strings' only windows ties; AC < CA.
    strings = [np.array([0, 1], dtype=np.uint8), np.array([1, 0], dtype=np.uint8)]
    search = ClosestSubstringSearch(device, strings, 2, "dna")
    centre, key = search.exact_centre()
    assert decode(centre, "dna") == "AA" and key == (1 << 24) | 2
    assert reference.brute_force_optimum(strings, 2)[0].tolist() == centre.tolist()


@pytest.mark.parametrize("method", DEVICE_METHODS)
def test_planted_motif_is_recovered(device, method):
    rng = np.random.default_rng(2024)
    length, max_distance = 12, 2
    motif = rng.integers(0, 4, size=length, dtype=np.uint8)
    strings = random_strings(rng, 40, 150, 260, 4)
    plant(rng, strings, motif, max_distance)
    strings[0][70 : 70 + length] = motif  # one exact copy: its chord is valid
    result = closest_substring(strings, length, max_distance, "dna", method, exact=True, device=device)
    assert result.root.centre == decode(motif, "dna")
    assert result.root.valid and result.pitch.valid
    assert result.exact.valid
    assert exact_key(result.exact) <= exact_key(result.root)
    reference.check_report(strings, motif, result.root.distances, result.root.positions)


def test_planted_motif_recovered_by_majority_without_an_exact_copy(device):
    rng = np.random.default_rng(77)
    length, mutations = 15, 2
    motif = rng.integers(0, 4, size=length, dtype=np.uint8)
    strings = random_strings(rng, 30, 200, 300, 4)
    plant(rng, strings, motif, mutations)
    # Every pitch-to-note distance can reach 2 x mutations: that is the d that makes chords valid.
    result = closest_substring(strings, length, 2 * mutations, "dna", "s-gpu", device=device)
    assert result.pitch.valid
    assert result.root.centre == decode(motif, "dna")
    assert result.root.max_distance <= mutations


def test_api_errors(device):
    from bowmap.runtime.errors import BowmapError

    with pytest.raises(BowmapError, match="at least 2"):
        closest_substring(["ACGT"], 2, 1, device=device)
    with pytest.raises(BowmapError, match="fewer than the window length"):
        closest_substring(["ACGT", "AC"], 3, 1, device=device)
    with pytest.raises(BowmapError, match="invalid dna symbol 'N' at position 2"):
        closest_substring(["ACGT", "ANGT"], 3, 1, device=device)
    with pytest.raises(BowmapError, match="values below 4"):
        closest_substring([np.array([0, 4], dtype=np.uint8), np.array([0, 1], dtype=np.uint8)], 1, 1, device=device)
    with pytest.raises(BowmapError, match="exact"):
        closest_substring(["MKVL", "MKVL"], 2, 1, "protein", exact=True, device=device)
    with pytest.raises(BowmapError, match="unknown method"):
        closest_substring(["ACGT", "ACGT"], 2, 1, method="fast", device=device)


# ---------------------------------------------------------------- command line


def run_cli(capsys, *argv):
    code = main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def motif_fasta(tmp_path, name="motif.fa"):
    rng = np.random.default_rng(11)
    motif = rng.integers(0, 4, size=10, dtype=np.uint8)
    strings = random_strings(rng, 6, 40, 70, 4)
    plant(rng, strings, motif, 1)
    strings[0][5:15] = motif
    records = [(f"seq{i + 1}", decode(s, "dna")) for i, s in enumerate(strings)]
    return write_fasta(tmp_path / name, records), decode(motif, "dna")


def test_cli_text_and_tsv(tmp_path, capsys):
    fasta, motif = motif_fasta(tmp_path)
    code, out, err = run_cli(capsys, "closest-substring", fasta, "-L", 10, "-d", 1, "--exact", "--devices", "cpu")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[1].split()[:2] == ["root", motif]
    assert lines[2].startswith(f"pitch  {motif}  pitch at seq1:6,")
    assert lines[3].split()[:2] == ["exact", motif]
    assert len([line for line in lines if line.split()[0:1] and line.split()[0][3:].isdigit()]) == 6

    output = tmp_path / "out.tsv"
    code, out, err = run_cli(capsys, "closest-substring", fasta, "-L", 10, "-d", 1, "--format", "tsv", "-o", output, "--method", "pp-gpu", "--devices", "cpu")
    assert code == 0 and out == "", err
    rows = output.read_text().splitlines()
    assert rows[0].split("\t")[:4] == ["#closest-substring", "L=10", "d=1", "alphabet=dna"]
    assert rows[1].split("\t")[0] == f"#root={motif}" and rows[1].endswith("valid=yes")
    assert rows[2].split("\t")[:2] == [f"#pitch={motif}", "start=6"]
    assert rows[3].split("\t") == ["sequence", "root_start", "root_distance", "pitch_start", "pitch_distance"]
    assert rows[4].split("\t")[:3] == ["seq1", "6", "0"]
    assert len(rows) == 4 + 6
    assert sorted(p.name for p in tmp_path.iterdir()) == ["motif.fa", "out.tsv"]  # no temporary left

    code, sequential, err = run_cli(capsys, "closest-substring", fasta, "-L", 10, "-d", 1, "--format", "tsv", "--method", "sequential")
    assert code == 0, err
    assert sequential.split("\n", 1)[1] == output.read_text().split("\n", 1)[1]


def test_cli_protein(tmp_path, capsys):
    fasta = write_fasta(tmp_path / "p.fa", [("a", "MKVLAAGIWwy"), ("b", "QQMKVLSAGIWPP"), ("c", "MRVLAAGIW")])
    code, out, err = run_cli(capsys, "closest-substring", fasta, "-L", 9, "-d", 2, "--alphabet", "protein", "--devices", "cpu")
    assert code == 0, err
    assert out.splitlines()[1].split()[:2] == ["root", "MKVLAAGIW"]


def assert_one_line_error(err: str, *needles: str):
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bowmap: error: ") and "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], err


@pytest.mark.parametrize(
    "records, argv, code, needles",
    [
        ([("one", "ACGTACGT")], ["-L", 4, "-d", 1], 1, ["1 record", "at least 2"]),
        ([("a", "ACGTACGT"), ("short", "ACG")], ["-L", 4, "-d", 1], 1, [":3:", "'short'", "fewer than -L 4"]),
        ([("a", "ACGTACGT"), ("b", "ACGTNCGT")], ["-L", 4, "-d", 1], 1, [":4:", "'N'", "'b'"]),
        ([("a", "MKVL"), ("b", "MKXL")], ["-L", 2, "-d", 1, "--alphabet", "protein"], 1, [":4:", "'X'"]),
        ([("a", "ACGT"), ("b", "ACGT")], ["-L", 0, "-d", 1], 2, ["-L", "0 is out of range"]),
        ([("a", "ACGT"), ("b", "ACGT")], ["-L", 2, "-d", -1], 2, ["-d", "-1 is out of range"]),
        ([("a", "ACGT"), ("b", "ACGT")], ["-L", 2, "-d", 1, "--exact", "--alphabet", "protein"], 2, ["--exact"]),
        ([("a", "ACGT" * 5), ("b", "ACGT" * 5)], ["-L", 15, "-d", 1, "--exact"], 2, ["--exact", "15"]),
        ([("a", "ACGT"), ("b", "ACGT")], ["-L", 2, "-d", 1, "--method", "fast"], 2, ["--method"]),
    ],
)
def test_cli_errors(tmp_path, capsys, records, argv, code, needles):
    fasta = write_fasta(tmp_path / "in.fa", records)
    got, out, err = run_cli(capsys, "closest-substring", fasta, *argv, "-o", tmp_path / "out.txt")
    assert got == code
    assert_one_line_error(err, *needles)
    assert not (tmp_path / "out.txt").exists()
