"""The windows' ranking kernel (opencl/align/rank.cl, RankKernel) against its reference,
extender._ranked (best_two with tie-breakers and places, rival_scores, suboptimal_counts), exactly."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from bowmap.align.extend.extender import SAME_ALIGNMENT_BASES, _ranked
from bowmap.align.extend.mapq import NO_SCORE
from bowmap.cli import main
from tests.conftest import write_fasta


def random_case(seed: int, count: int, far: bool = False):
    """``count`` reads of awkward lengths (Ns among their bases, some empty) and their windows,
    sorted by read: none, one or many a read, clustered around a few places per read (copies
    within SAME_ALIGNMENT_BASES of each other, on either strand) so that places repeat, with
    scores from a small set (ties; negative ones) and text positions past 2^32 when ``far``."""
    rng = np.random.default_rng(seed)
    lengths = rng.choice([0, 1, 31, 100, 150, 151, 250], size=count)
    offsets = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    codes = rng.integers(0, 5, size=int(offsets[-1]), dtype=np.uint8)
    per_read = rng.choice([0, 0, 1, 1, 2, 3, 5, 9, 40], size=count)
    per_read[rng.random(count) < 0.01] = 150  # a few reads in repeats: many windows
    read = np.repeat(np.arange(count), per_read)
    n = len(read)
    places = rng.integers(0, 4, size=n)
    base = rng.integers(0, 6_000_000_000 if far else 3_000_000, size=count)
    start = (base[read] + places * rng.choice([5, 20, 400], size=n) + rng.integers(-SAME_ALIGNMENT_BASES - 4, SAME_ALIGNMENT_BASES + 4, size=n))
    start = np.maximum(start, 0).astype(np.int64)
    reverse = rng.random(n) < np.where(places % 2 == 0, 0.1, 0.9)
    score = rng.choice([-3, 0, 1, 29, 30, 31, 60, 61, 100, 145, 150], size=n).astype(np.int64)
    top = rng.random(n) < 0.3
    score[top] = 150  # many reads with tied bests
    read_end = np.minimum(rng.integers(0, 260, size=n), np.maximum(lengths[read], 0)).astype(np.int32)
    window_end = rng.integers(0, 320, size=n).astype(np.int32)
    windows = SimpleNamespace(read=read, start=start, reverse=reverse)
    chunk = SimpleNamespace(codes=codes, offsets=offsets)
    return chunk, windows, score, read_end, window_end


@pytest.mark.parametrize("seed, count, delta, match, far", [
    (0, 1, 5, 1, False), (1, 255, 5, 1, False), (2, 256, 6, 2, True), (3, 257, 1, 1, False), (4, 1000, 5, 1, True), (5, 77, 0, 3, False),
])  # fmt: skip
def test_the_kernel_equals_its_reference(device, seed, count, delta, match, far):
    import pyopencl as cl

    from bowmap.align.extend.ranking import RankKernel
    from bowmap.runtime.devices import DeviceArray, make_buffer

    chunk, windows, score, read_end, window_end = random_case(seed, count, far)
    pool = np.concatenate((chunk.codes, np.full(5, 2, np.uint8)))  # (codes past the reads', as a chunk's reverse strand)
    on_device = DeviceArray(make_buffer(device.context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR, hostbuf=pool), pool)
    kernel = RankKernel(device, device.queue())
    expected = _ranked(chunk, windows, score, read_end, window_end, count, delta, match)
    got = _ranked(chunk, windows, score, read_end, window_end, count, delta, match, (kernel, on_device))
    for name, mine, theirs in zip(("best", "best score", "second", "suboptimal"), got[:4], expected[:4]):
        assert mine.dtype == np.int64 and mine.tolist() == theirs.tolist(), name
    assert got[4] is None
    best, best_score, second, suboptimal = expected[:4]
    has = np.bincount(windows.read, minlength=count) > 0
    # The case is not trivial: ties, rivals at other places and at none, suboptimal places.
    assert (best[~has] == -1).all() and (best_score[~has] == NO_SCORE).all()
    if count > 200:
        assert (second[has] == NO_SCORE).any() and (second[has] != NO_SCORE).any() and (suboptimal > 0).any()
        tied = np.bincount(windows.read[score == best_score[windows.read]], minlength=count) > 1
        assert tied.sum() > 10


def test_no_reads_and_no_windows(device):
    import pyopencl as cl

    from bowmap.align.extend.ranking import RankKernel
    from bowmap.runtime.devices import DeviceArray, make_buffer

    pool = np.zeros(4, np.uint8)
    on_device = DeviceArray(make_buffer(device.context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR, hostbuf=pool), pool)
    kernel = RankKernel(device, device.queue())
    none = np.zeros(0, dtype=np.int64)
    assert [a.tolist() for a in kernel.ranked(on_device, [0], none, none, none.astype(bool), none, none, none, 0, 5, 1)] == [[]] * 4
    best, best_score, second, suboptimal = kernel.ranked(on_device, [0, 2, 4], none, none, none.astype(bool), none, none, none, 2, 5, 1)
    assert best.tolist() == [-1, -1] and best_score.tolist() == second.tolist() == [NO_SCORE] * 2 and suboptimal.tolist() == [0, 0]


# ------------------------------------------------------------------------ whole runs

DATA = Path(__file__).resolve().parents[2] / "data"


@pytest.fixture(scope="module")
def lambda_index(tmp_path_factory):
    """Lambda phage, a copy of it with 1% substitutions (a read over none ties, one over some has
    a rival a mismatch or two below) and a copy of its first half with 3%: where the ranking
    decides."""
    rng = np.random.default_rng(21)
    text = "".join(line.strip() for line in (DATA / "lambda_virus.fa").read_text().splitlines()[1:])

    def mutated(piece: str, rate: float) -> str:
        bases = np.frombuffer(piece.encode(), dtype=np.uint8).copy()
        changed = np.flatnonzero(rng.random(len(bases)) < rate)
        bases[changed] = np.frombuffer(b"ACGT", dtype=np.uint8)[rng.integers(0, 4, size=len(changed))]
        return bases.tobytes().decode()

    folder = tmp_path_factory.mktemp("ranking")
    reference = write_fasta(folder / "ref.fa", [("lambda", text), ("copy", mutated(text, 0.01)), ("half", mutated(text[: len(text) // 2], 0.03))])
    assert main(["-q", "index", reference, str(folder / "ref")]) == 0
    return folder / "ref"


@pytest.mark.parametrize("reads", [["lambda_reads_100bp.fq.gz"], ["lambda_pairs_R1.fq.gz", "lambda_pairs_R2.fq.gz"]])
def test_ranking_on_the_device_writes_the_same_sam(lambda_index, reads, tmp_path, monkeypatch):
    """BOWMAP_RANK_ON_DEVICE=1 (the workers rank with RankKernel) changes no byte, single-end
    and paired, with rescues (small chunks: several of them)."""
    outputs = []
    for switch in ("0", "1"):
        monkeypatch.setenv("BOWMAP_RANK_ON_DEVICE", switch)
        out = tmp_path / f"ranked{switch}.sam"
        arguments = ["-q", "align", str(lambda_index), *(str(DATA / name) for name in reads), "-o", str(out), "--devices", "cpu",
                     "--chunk-bases", "30000", "-p", "1"]
        assert main(arguments) == 0
        outputs.append([line for line in out.read_text().splitlines() if not line.startswith("@PG")])
    assert outputs[0] == outputs[1] and len(outputs[0]) > 1000
    mapq = [line.split("\t")[4] for line in outputs[0] if not line.startswith("@")]
    assert mapq.count("0") > 100 and len(mapq) - mapq.count("0") > 100 and sum("XS:i:" in line for line in outputs[0]) > 1000


@pytest.mark.parametrize("seed, count, far", [(0, 1, False), (1, 300, False), (2, 1000, True), (3, 2000, False)])
def test_rival_scores_are_the_best_score_at_another_place_read_by_read(seed, count, far):
    """rival_scores' rounds against the definition, a read at a time: the best score among the
    read's other rows not at its chosen row's place, for every read, for a mask and with the rows
    in any order."""
    from bowmap.align.extend.extender import Places, rival_scores

    chunk, windows, score, read_end, window_end = random_case(seed, count, far)
    rng = np.random.default_rng(seed)
    places = Places.estimated(windows.reverse, score, read_end, windows.start + window_end, 1)
    read = windows.read
    chosen = np.full(count, -1, dtype=np.int64)
    rows_of = [np.flatnonzero(read == r) for r in range(count)]
    for r, rows in enumerate(rows_of):
        if len(rows) and rng.random() < 0.9:
            chosen[r] = rng.choice(rows)
    score = np.where(rng.random(len(score)) < 0.05, NO_SCORE, score)  # masked rows, as records masks them
    mask = rng.random(count) < 0.5
    expected = np.full(count, NO_SCORE, dtype=np.int64)
    for r, rows in enumerate(rows_of):
        for row in rows:
            if chosen[r] >= 0 and row != chosen[r] and not places.same(np.array([row]), np.array([chosen[r]]))[0]:
                expected[r] = max(expected[r], score[row])
    assert np.array_equal(rival_scores(read, score, count, places, chosen), expected)
    assert np.array_equal(rival_scores(read, score, count, places, chosen, mask), np.where(mask, expected, NO_SCORE))
    # Rows in any order (Extender.add puts a rescue's windows after the others).
    order = rng.permutation(len(read))
    moved_to = np.empty(len(read), dtype=np.int64)
    moved_to[order] = np.arange(len(read))
    moved_chosen = np.where(chosen >= 0, moved_to[np.maximum(chosen, 0)], -1)
    assert np.array_equal(rival_scores(read[order], score[order], count, places.take(order), moved_chosen), expected)


@pytest.mark.parametrize("copies", [0, 3, 4, 5, 9])
def test_a_rival_below_many_copies_of_the_chosen_alignment_is_found(copies):
    """Copies of the chosen alignment at falling scores above the rival: a round for each, then
    the rows left after RIVAL_ROUNDS rounds."""
    from bowmap.align.extend.extender import Places, rival_scores

    n = copies + 3  # the chosen, its copies, a row elsewhere and a lower row elsewhere
    shift = np.r_[0, np.arange(1, copies + 1), 5000, 9000]  # copies a base apart
    score = np.r_[100, 99 - np.arange(copies), 10, 3].astype(np.int64)
    places = Places(np.zeros(n, dtype=bool), np.zeros(n, dtype=np.int64), np.full(n, 150), 1000 + shift, 1150 + shift)
    read = np.zeros(n, dtype=np.int64)
    assert rival_scores(read, score, 1, places, np.array([0]))[0] == 10
    assert rival_scores(read, score, 1, places, np.array([n - 1]))[0] == 100  # chosen elsewhere: the best
    assert rival_scores(read, score, 1, places, np.array([-1]))[0] == NO_SCORE
