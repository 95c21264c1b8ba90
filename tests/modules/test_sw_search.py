"""Smith-Waterman database search: the NumPy reference against naive Gotoh, parasail and pyopal;
every kernel against the reference on the `device` fixture at awkward sizes (1-residue
sequences, empty batches, one target, lengths around the bins' edges, 16-bit overflow); the
search API across batches and devices; the CLI and its errors."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
from conftest import write_fasta

from bowmap.cli import main
from bowmap.modules.sw_search import reference
from bowmap.modules.sw_search.kernels import SearchKernels, Targets
from bowmap.modules.sw_search.scoring import MATRICES, Scoring
from bowmap.modules.sw_search.search import INTRATASK_SPEED, RESIDENT_WAVEFRONTS, SearchOptions, auto_split, device_fill, intratask_speed, search

SERPINS = Path(__file__).resolve().parent.parent.parent / "data" / "serpins.fa"
AMINO = b"ARNDCQEGHILKMFPSTWYV"
GAPS = ((11, 1), (10, 2), (0, 1), (5, 0))


def random_protein(rng, length: int, alphabet: bytes = AMINO) -> bytes:
    symbols = np.frombuffer(alphabet, dtype=np.uint8)
    return symbols[rng.integers(0, len(symbols), size=length)].tobytes()


def related(rng, source: bytes, length: int) -> bytes:
    """A random sequence holding a mutated piece of ``source`` (so scores go past noise)."""
    piece = bytearray(source[int(rng.integers(0, max(1, len(source) - 5))):][: max(1, length // 2)])
    for _ in range(len(piece) // 8):
        piece[int(rng.integers(0, len(piece)))] = AMINO[int(rng.integers(0, 20))]
    left = int(rng.integers(0, max(1, length - len(piece)) + 1))
    return random_protein(rng, left) + bytes(piece) + random_protein(rng, max(0, length - left - len(piece)))


def serpins() -> list[bytes]:
    from bowmap.runtime.fasta import read_fasta

    return [record.sequence for record in read_fasta(str(SERPINS))]


# ---------------------------------------------------------------- references


@pytest.mark.parametrize("matrix", [*MATRICES, None])
def test_reference_equals_naive_gotoh(matrix):
    rng = np.random.default_rng(1)
    for gap_open, gap_extend in GAPS:
        scoring = Scoring(matrix, gap_open, gap_extend, match=3, mismatch=-2)
        size = len(scoring.alphabet)
        for _ in range(8):
            query = rng.integers(0, size, int(rng.integers(0, 14))).astype(np.uint8)
            targets = [rng.integers(0, size, int(rng.integers(0, 17))).astype(np.uint8) for _ in range(5)]
            expected = [reference.naive_score(query, target, scoring) for target in targets]
            assert reference.scores(query, targets, scoring).tolist() == expected


@pytest.mark.parametrize("matrix", MATRICES)
def test_reference_equals_parasail_and_pyopal(matrix):
    parasail = pytest.importorskip("parasail")
    pyopal = pytest.importorskip("pyopal")
    rng = np.random.default_rng(2)
    real = serpins()
    queries = real[:2] + [random_protein(rng, 1), related(rng, real[2], 150) + b"BZX*"]
    database = real + [related(rng, real[int(rng.integers(0, 4))], int(rng.integers(1, 400))) for _ in range(12)]
    database += [b"W", b"BZX*X", random_protein(rng, 3)]
    for gap_open, gap_extend in ((11, 1), (10, 2), (3, 3)):
        scoring = Scoring(matrix, gap_open, gap_extend)
        open_, extend = scoring.open_extend, scoring.gap_extend  # parasail's and pyopal's convention
        table = getattr(parasail, matrix.lower())
        for query in queries:
            ours = reference.scores(scoring.encode(query), [scoring.encode(target) for target in database], scoring)
            theirs = [parasail.sw_striped_32(query.decode(), target.decode(), open_, extend, table).score for target in database]
            assert ours.tolist() == theirs, (matrix, gap_open, gap_extend)
            if b"*" in query:
                continue  # pyopal 0.7.3 refuses '*' ("character outside ASCII range: 42")
            plain = [index for index, target in enumerate(database) if b"*" not in target]
            opal = [hit.score for hit in pyopal.align(query.decode(), [database[index].decode() for index in plain], matrix,
                                                       gap_open=open_, gap_extend=extend, algorithm="sw", threads=1, ordered=True)]
            assert ours[plain].tolist() == opal, (matrix, gap_open, gap_extend)


def test_dna_reference_equals_parasail():
    parasail = pytest.importorskip("parasail")
    rng = np.random.default_rng(3)
    scoring = Scoring(None, 5, 2, match=2, mismatch=-3)
    table = parasail.matrix_create("ACGT", 2, -3)
    query = random_protein(rng, 90, b"ACGT")
    database = [related(rng, query, int(rng.integers(1, 200))).translate(bytes.maketrans(AMINO, b"ACGT" * 5)) for _ in range(10)]
    ours = reference.scores(scoring.encode(query), [scoring.encode(target) for target in database], scoring)
    assert ours.tolist() == [parasail.sw_striped_32(query.decode(), t.decode(), 7, 2, table).score for t in database]


def test_residue_codes():
    scoring = Scoring()
    assert scoring.encode(b"arndBZX*").tolist() == scoring.encode(b"ARNDBZX*").tolist() == [0, 1, 2, 3, 20, 21, 22, 23]
    assert scoring.encode(b"UOJuoj").tolist() == [22] * 6  # U, O and other letters score as X
    assert scoring.encode(b"-1 ").tolist() == [255] * 3
    dna = Scoring(None, 1, 1, match=1, mismatch=-1)
    assert dna.encode(b"acgtNRU*").tolist() == [0, 1, 2, 3, 4, 4, 4, 255]
    with pytest.raises(ValueError, match="unknown matrix"):
        Scoring("BLOSUM99")


# ---------------------------------------------------------------- kernels


@pytest.fixture(scope="module")
def kernels(device):
    """Small work-groups: bins of 8 targets and intratask strips of 16 rows, so modest inputs
    cross many bin and strip edges."""
    return SearchKernels(device, Scoring(), group_size=4, intra_group_size=2)


def check(kernels, query, targets, method):
    batch = Targets.from_list(targets)
    kernels.load(batch, np.full(len(targets), method == "intratask") if method != "mixed" else np.arange(len(targets)) % 3 == 1)
    got = kernels.scores(query)
    assert got.tolist() == reference.scores(query, targets, kernels.scoring).tolist(), (method, len(query), [len(t) for t in targets])


@pytest.mark.parametrize("method", ["intertask", "intratask", "mixed"])
def test_kernels_equal_reference_at_awkward_sizes(kernels, method):
    rng = np.random.default_rng(4)
    for query_length in (1, 2, 7, 15, 16, 17, 31, 33, 64):
        # target lengths around multiples of 4 (a bin's column blocks) and 1-residue targets;
        # counts around the bin size (8) so bins run part-full
        for count in (1, 7, 8, 9, 17):
            lengths = rng.choice([1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 40], size=count)
            query = rng.integers(0, 24, query_length).astype(np.uint8)
            targets = [rng.integers(0, 24, int(length)).astype(np.uint8) for length in lengths]
            targets[0] = np.concatenate((query[: int(lengths[0]) // 2], targets[0]))[: max(1, int(lengths[0]))]
            check(kernels, query, targets, method)


def test_one_target_and_empty_batches(kernels):
    rng = np.random.default_rng(5)
    query = rng.integers(0, 24, 20).astype(np.uint8)
    for method in ("intertask", "intratask"):
        check(kernels, query, [query.copy()], method)
        check(kernels, query[:1], [query[:1].copy()], method)
    kernels.load(Targets.from_list([]))
    assert kernels.scores(query).tolist() == []
    kernels.load(Targets.from_list([query]))
    assert kernels.scores(np.zeros(0, dtype=np.uint8)).tolist() == [0]


@pytest.mark.parametrize("tile", [8, 32])
@pytest.mark.parametrize("gaps", [(10, 2), (0, 1), (5, 0)])
def test_tiles_matrices_and_gaps(device, tile, gaps):
    rng = np.random.default_rng(6)
    for matrix in MATRICES:
        scoring = Scoring(matrix, *gaps)
        kernels = SearchKernels(device, scoring, tile=tile, group_size=2, intra_group_size=3)
        query = rng.integers(0, 24, int(rng.integers(1, 3 * tile))).astype(np.uint8)
        targets = [rng.integers(0, 24, int(rng.integers(1, 60))).astype(np.uint8) for _ in range(6)]
        targets.append(np.concatenate((targets[0][:5], query, targets[1][:7])))
        for method in ("intertask", "intratask"):
            check(kernels, query, targets, method)


def test_dna_scores_on_device(device):
    rng = np.random.default_rng(7)
    kernels = SearchKernels(device, Scoring(None, 4, 1, match=2, mismatch=-3), group_size=4, intra_group_size=2)
    query = rng.integers(0, 5, 50).astype(np.uint8)
    targets = [rng.integers(0, 5, int(rng.integers(1, 80))).astype(np.uint8) for _ in range(9)] + [query[3:40].copy()]
    for method in ("intertask", "intratask"):
        check(kernels, query, targets, method)


def test_16_bit_overflow_runs_again_in_32_bits(device):
    """Scores past 32767 - the largest score wrap 16-bit lanes: those targets (only) are re-run."""
    rng = np.random.default_rng(8)
    scoring = Scoring(None, 50, 20, match=100, mismatch=-90)
    kernels = SearchKernels(device, scoring, tile=8, group_size=2)
    query = rng.integers(0, 4, 420).astype(np.uint8)
    targets = [query[:330].copy(), query[:300].copy(), query.copy(), rng.integers(0, 5, 200).astype(np.uint8), query[:1].copy()]
    check(kernels, query, targets, "intertask")
    assert kernels.reruns == 2  # 33,000 and 42,000; 30,000 stays below 32,667
    assert reference.scores(query, targets, scoring)[2] == 42000


@pytest.mark.parametrize("method", ["intertask", "intratask", "auto"])
def test_search_same_across_batches_and_devices(device, method):
    rng = np.random.default_rng(9)
    scoring = Scoring("BLOSUM50", 10, 1)
    queries = [rng.integers(0, 24, length).astype(np.uint8) for length in (1, 30, 70)]
    sequences = [rng.integers(0, 24, int(rng.integers(1, 120))).astype(np.uint8) for _ in range(40)]
    sequences += [queries[1].copy(), queries[1].copy(), queries[2][:50].copy()]  # ties: database order
    targets = Targets.from_list(sequences)
    expected = [reference.top_hits(reference.scores(query, sequences, scoring), 7) for query in queries]
    for devices, residues in (([device], None), ([device], 150), ([device, device], 400)):
        options = SearchOptions(method=method, top=7, crossover=60, batch_residues=residues, group_size=4, intra_group_size=2)
        hits = search(queries, targets, scoring, devices, options)
        for index, (order, best) in enumerate(expected):
            assert hits.targets[index].tolist() == order.tolist()
            assert hits.scores[index].tolist() == best.tolist()
        if method == "auto":
            assert hits.methods["intratask"] > 0 and hits.methods["intertask"] > 0


def test_auto_split_follows_the_h200_measurements():
    """auto's rule with an H200's properties (132 compute units, warps of 32) reproduces the
    measured winners (search.py's table): databases of 100 M residues of one length go to
    intertask up to 2,000 residues (50,000 sequences) and to intratask from 4,000 on."""
    fill = 2 * 132 * 32 * RESIDENT_WAVEFRONTS
    speed = INTRATASK_SPEED["GPU"] * 464 / 512  # a query of 464: 29 tiles of 16 rows, one strip of 64 x 8
    for length, expected in ((500, False), (1000, False), (2000, False), (4000, True), (8000, True), (16000, True), (32000, True)):
        chosen = auto_split(np.full(100_000_000 // length, length), fill, speed)
        assert chosen.all() if expected else not chosen.any(), length
    # Not length as such: 2,000 residues but only 20,000 of them (too few to fill), or 32,000
    # residues and a million of them (enough).
    assert auto_split(np.full(20_000, 2000), fill, speed).all()
    assert not auto_split(np.full(1_000_000, 32000), fill, speed).any()
    # A few long sequences among many short ones: the long ones alone, a whole length at a time.
    lengths = np.array([300] * 400_000 + [30_000] * 5 + [12_000] * 40 + [3_000] * 200)
    shuffled = np.random.default_rng(11).permutation(lengths)
    chosen = auto_split(shuffled, fill, speed)
    assert set(shuffled[chosen].tolist()) == {3_000, 12_000, 30_000} and set(shuffled[~chosen].tolist()) == {300}
    assert auto_split(np.zeros(0, dtype=np.int64), fill, speed).tolist() == []
    assert auto_split(np.array([7]), fill, speed).tolist() == [True]  # one short sequence: a work-group, not a lane


def test_auto_chooses_each_method_on_the_device(device):
    """method auto on PoCL: with the device's own fill (a CPU: 2 x compute units x work-group
    size; a GPU: 2 x compute units x preferred multiple x RESIDENT_WAVEFRONTS) a few sequences go
    to intratask and many short ones to intertask; with a small forced fill the long ones of a
    batch alone go to intratask. Scores: the reference's."""
    rng = np.random.default_rng(12)
    scoring = Scoring("BLOSUM62", 11, 1)
    query = rng.integers(0, 24, 40).astype(np.uint8)
    kernels = SearchKernels(device, scoring, group_size=4, intra_group_size=2)  # as search() builds them below
    fill, speed = device_fill(kernels), intratask_speed(kernels, [len(query)])
    # 40 rows: intertask computes 3 tiles of 16, intratask 3 strips of 2 x 8; 1 row: 16 and 16.
    share = INTRATASK_SPEED.get(device.info.kind, INTRATASK_SPEED["GPU"])
    assert speed == pytest.approx(share) and intratask_speed(kernels, [40, 1]) == pytest.approx(share)
    assert intratask_speed(SearchKernels(device, scoring, intra_group_size=16), [40]) == pytest.approx(share * 48 / 128)
    units = device.info.compute_units
    assert fill == 2 * units * (4 if device.info.kind == "CPU" else kernels.preferred_multiple * RESIDENT_WAVEFRONTS)
    few = [rng.integers(0, 24, 50).astype(np.uint8) for _ in range(2)]  # intratask for any fill >= 6
    many = [rng.integers(0, 24, 6).astype(np.uint8) for _ in range(fill)] + [query[:6].copy()]
    mixed = [rng.integers(0, 24, int(rng.integers(5, 30))).astype(np.uint8) for _ in range(60)]
    mixed[7], mixed[33] = rng.integers(0, 24, 400).astype(np.uint8), rng.integers(0, 24, 300).astype(np.uint8)
    mixed[50] = query.copy()
    cases = ((few, None, "intratask"), (many, None, "intertask"), (mixed, 8, "both"))
    for sequences, forced, expected in cases:
        targets = Targets.from_list(sequences)
        options = SearchOptions(method="auto", top=5, fill=forced, group_size=4, intra_group_size=2)
        hits = search([query], targets, scoring, [device], options)
        order, best = reference.top_hits(reference.scores(query, sequences, scoring), 5)
        assert hits.targets[0].tolist() == order.tolist() and hits.scores[0].tolist() == best.tolist()
        intratask = auto_split(targets.lengths, forced or fill, speed)
        assert hits.methods == {"intertask": int((~intratask).sum()), "intratask": int(intratask.sum())}
        if expected == "both":
            assert np.flatnonzero(intratask).tolist() == [7, 33]
        else:
            assert hits.methods[expected] == len(sequences)


# ---------------------------------------------------------------- command line


def run(capsys, *argv):
    code = main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_output_equals_reference(tmp_path, capsys):
    rng = np.random.default_rng(10)
    real = [sequence.decode() for sequence in serpins()]
    queries = [("q1", real[0][:200].lower()), ("q2", real[3][50:300] + "UOBZX*")]
    database = [(f"t{i}", related(rng, real[i % 4].encode(), int(rng.integers(1, 300))).decode()) for i in range(30)]
    database += [("dup", real[0][:200]), ("dup2", real[0][:200])]
    query_path = write_fasta(tmp_path / "q.fa", queries)
    database_path = tmp_path / "db.fa.gz"
    database_path.write_bytes(gzip.compress(Path(write_fasta(tmp_path / "db.fa", database)).read_bytes()))
    code, out, err = run(capsys, "sw-search", query_path, database_path, "--top", "4", "--devices", "cpu", "--method", "intertask")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "#query\ttarget\tscore\ttarget_length" and len(lines) == 9
    scoring = Scoring()
    codes = [scoring.encode(sequence.encode()) for _, sequence in database]
    for number, (name, sequence) in enumerate(queries):
        order, best = reference.top_hits(reference.scores(scoring.encode(sequence.encode()), codes, scoring), 4)
        assert lines[1 + 4 * number : 5 + 4 * number] == [
            f"{name}\t{database[i][0]}\t{s}\t{len(database[i][1])}" for i, s in zip(order.tolist(), best.tolist())]
    assert lines[1].startswith("q1\tdup\t") and lines[2].startswith("q1\tdup2\t")  # a tie: database order
    output = tmp_path / "hits.tsv"
    code, _, err = run(capsys, "sw-search", query_path, database_path, "--top", "4", "--devices", "cpu", "-o", output, "--method", "intratask")
    assert code == 0 and output.read_text() == out, err


@pytest.mark.parametrize(
    ("arguments", "needle", "status"),
    [
        (["--matrix", "BLOSUM99"], "--matrix", 2),
        (["--match", "2"], "--match and --mismatch", 2),
        (["--matrix", "PAM250", "--match", "2", "--mismatch", "-1"], "exclude", 2),
        (["--gap-open", "0", "--gap-extend", "0"], "at least 1", 2),
        (["--top", "0"], "--top", 2),
        (["--method", "fast"], "--method", 2),
    ],
)
def test_cli_usage_errors(tmp_path, capsys, arguments, needle, status):
    query = write_fasta(tmp_path / "q.fa", [("q", "MKV")])
    code, out, err = run(capsys, "sw-search", query, query, "--devices", "cpu", "-o", tmp_path / "out.tsv", *arguments)
    assert code == status and out == "" and not (tmp_path / "out.tsv").exists()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bowmap: error:") and needle in lines[0], err


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("", "empty file"),
        ("MKVLA\n", "not a FASTA file"),
        (">q\n\n", "has no sequence"),
        (">q\nMKV-LA\n", "invalid character '-'"),
        (">q\nMKV\n>r\nMK1\n", ":4: invalid character '1' in record 'r'"),
    ],
)
def test_cli_bad_fasta(tmp_path, capsys, content, needle):
    good = write_fasta(tmp_path / "good.fa", [("q", "MKVLA")])
    bad = tmp_path / "bad.fa"
    bad.write_text(content)
    for queries, database in ((bad, good), (good, bad)):
        code, out, err = run(capsys, "sw-search", queries, database, "--devices", "cpu", "-o", tmp_path / "out.tsv")
        assert code == 1 and out == "" and not (tmp_path / "out.tsv").exists()
        lines = err.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0] and "Traceback" not in err, err
