"""Paired-end reads: the pair reader, the insert-size model and the pair choice against plain
Python references, SAM pair fields against the SAM specification's rules, samtools, the same
output whatever the layout, mate rescue, and bad input."""

from __future__ import annotations

import gzip
import json
import math
import os
from pathlib import Path

import numpy as np
import pysam
import pytest

from bowmap.align.extend.pairs import InsertModel, Placed, _joined, best_pairs, estimate_model, pair_quality, parse_insert_size, rescue_anchors
from bowmap.align.reads.pairs import read_pairs
from bowmap.cli import main
from bowmap.runtime.errors import BowmapError, UsageError
from tests.conftest import write_fasta

DATA = Path(__file__).resolve().parents[2] / "data"
LAMBDA = DATA / "lambda_virus.fa"
R1, R2 = DATA / "lambda_pairs_R1.fq.gz", DATA / "lambda_pairs_R2.fq.gz"
TRUTH = DATA / "lambda_pairs.truth.tsv"


def run(capsys, *argv):
    code = main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def fastq_records(path) -> list[list[str]]:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as handle:
        lines = handle.read().splitlines()
    return [lines[i : i + 4] for i in range(0, len(lines), 4)]


def write_fastq(path, records) -> Path:
    Path(path).write_text("".join("\n".join(record) + "\n" for record in records))
    return Path(path)


# ------------------------------------------------------------------------------------ reading


@pytest.mark.parametrize("chunk_bases", [1, 150, 777, 1 << 22])
@pytest.mark.parametrize("block_bytes", [97, 4096, 1 << 22])
def test_pairs_are_read_in_step_whatever_the_chunks_and_blocks(tmp_path, chunk_bases, block_bytes):
    first, second = fastq_records(R1), fastq_records(R2)
    interleaved = write_fastq(tmp_path / "interleaved.fq", [record for pair in zip(first, second) for record in pair])
    for chunks in (read_pairs(str(R1), str(R2), chunk_bases, 150, block_bytes), read_pairs(str(interleaved), None, chunk_bases, 150, block_bytes)):
        names, sequences, numbers = [], [], []
        for chunk in chunks:
            assert chunk.paired and chunk.count % 2 == 0 and chunk.count > 0
            numbers.append(chunk.number)
            for read in range(chunk.count):
                names.append(chunk.name(read))
                sequences.append("".join("ACGTN"[code] for code in chunk.codes[chunk.offsets[read] : chunk.offsets[read + 1]]))
        assert numbers == list(range(len(numbers)))
        expected = [record for pair in zip(first, second) for record in pair]
        assert names == [record[0][1:].split()[0].rsplit("/", 1)[0] for record in expected]
        assert sequences == [record[1] for record in expected]


def test_pairs_that_do_not_match_are_named(tmp_path):
    first, second = fastq_records(R1)[:50], fastq_records(R2)[:50]
    short = write_fastq(tmp_path / "short.fq", second[:-3])
    with pytest.raises(BowmapError, match=r"short.fq ends after 47 records but .*R1.fq.gz goes on"):
        list(read_pairs(str(R1), str(short), 10_000, 150, 4096))
    renamed = [list(record) for record in second]
    renamed[20][0] = "@other/2"
    bad = write_fastq(tmp_path / "bad.fq", renamed)
    with pytest.raises(BowmapError, match=r"R1.fq.gz:81: record 21 and .*bad.fq:81: record 21: the mates' names differ: 'simulated.21' and 'other'"):
        list(read_pairs(str(R1), str(bad), 10_000, 150, 4096))
    odd = write_fastq(tmp_path / "odd.fq", [record for pair in zip(first, second) for record in pair][:-1])
    with pytest.raises(BowmapError, match=r"odd.fq:393: record 99: an interleaved file holds an odd number of records \(99\)"):
        list(read_pairs(str(odd), None, 10_000, 150, 4096))


def trimmed_pairs(tmp_path, seed=0):
    """Plain R1 and R2 files whose R2 records are trimmed to random lengths and carry a comment:
    the files' byte offsets drift apart, so cuts must be found by name."""
    rng = np.random.default_rng(seed)
    first, second = fastq_records(R1), fastq_records(R2)
    trimmed = []
    for record in second:
        keep = int(rng.integers(30, 101))
        trimmed.append([record[0] + (" comment=x" * int(rng.integers(0, 3))), record[1][:keep], "+", record[3][:keep]])
    return write_fastq(tmp_path / "r1.fq", first), write_fastq(tmp_path / "r2.fq", trimmed)


@pytest.mark.parametrize("chunk_bases", [1, 3000, 20_000, 1 << 22])
def test_byte_ranges_of_both_files_hold_the_same_pairs(tmp_path, chunk_bases):
    from bowmap.align.reads.input import as_chunk
    from bowmap.align.reads.pairs import paired_ranges

    r1, r2 = trimmed_pairs(tmp_path)
    ranges = paired_ranges(str(r1), str(r2), chunk_bases, 150)
    assert ranges is not None and [part.number for part in ranges] == list(range(len(ranges)))
    if chunk_bases < 1 << 22:
        assert len(ranges) > 3

    def reads(chunks):
        return [(chunk.name(i), chunk.codes[chunk.offsets[i] : chunk.offsets[i + 1]].tobytes()) for chunk in chunks for i in range(chunk.count)]

    assert reads(as_chunk(part) for part in ranges) == reads(read_pairs(str(r1), str(r2), 1 << 22, 150))
    assert paired_ranges(str(R1), str(R2), chunk_bases, 150) is None  # gzipped: parsed in the first process


def test_ranges_out_of_step_report_the_first_error(indexes, tmp_path, capsys):
    r1, r2 = trimmed_pairs(tmp_path)
    records = fastq_records(r2)
    records[700][0] = "@renamed/2"
    write_fastq(r2, records)
    out = tmp_path / "out.sam"
    code, _, err = run(capsys, "align", indexes[0], r1, r2, "-o", out, "--devices", "cpu", "--chunk-bases", "3000", "-I", "300,30")
    assert code == 1 and "r2.fq:2801: record 701: the mates' names differ: 'simulated.701' and 'renamed'" in err
    assert "Traceback" not in err and not out.exists()


# ---------------------------------------------------------------------------- insert-size model


def python_model(orientation, distance):
    """bwa's mem_pestat for the FR orientation, written plainly."""
    sizes = sorted(int(d) for o, d in zip(orientation, distance) if o == 1)
    n = len(sizes)
    if n < 10:
        return None
    p25, p75 = sizes[min(n - 1, int(0.25 * n + 0.499))], sizes[min(n - 1, int(0.75 * n + 0.499))]
    iqr = p75 - p25
    low, high = max(1, int(p25 - 2 * iqr + 0.499)), int(p75 + 2 * iqr + 0.499)
    kept = [x for x in sizes if low <= x <= high]
    mean = sum(kept) / len(kept)
    std = math.sqrt(sum((x - mean) ** 2 for x in kept) / len(kept))
    low = max(1, min(int(p25 - 3 * iqr + 0.499), int(mean - 4 * std + 0.499)))
    high = max(int(p75 + 3 * iqr + 0.499), int(mean + 4 * std + 0.499))
    return mean, std, low, high


@pytest.mark.parametrize("seed", range(8))
def test_the_model_is_bwas_estimate(seed):
    rng = np.random.default_rng(seed)
    count = int(rng.choice([0, 5, 9, 10, 11, 257, 4000]))
    orientation = rng.choice([0, 1, 2, 3], size=count, p=[0.02, 0.9, 0.06, 0.02]).astype(np.int8)
    distance = np.maximum(1, rng.normal(350, 35, size=count)).astype(np.int64)
    outliers = rng.random(count) < 0.03
    distance[outliers] = rng.integers(1, 10_000, size=int(outliers.sum()))
    model = estimate_model(orientation, distance, count)
    expected = python_model(orientation, distance)
    assert model.counts == tuple(int((orientation == o).sum()) for o in range(4))
    if expected is None:
        assert model.failed
        return
    mean, std, low, high = expected
    assert not model.failed and (model.low, model.high) == (low, high)
    assert model.mean == pytest.approx(mean, rel=1e-12) and model.std == pytest.approx(max(std, 1.0), rel=1e-9)


def test_the_model_does_not_depend_on_the_order_of_the_pairs():
    rng = np.random.default_rng(3)
    orientation = rng.choice([1, 2], size=5000, p=[0.95, 0.05]).astype(np.int8)
    distance = rng.integers(200, 600, size=5000)
    order = rng.permutation(5000)
    assert estimate_model(orientation, distance, 5000) == estimate_model(orientation[order], distance[order], 5000)


def test_insert_size_option():
    assert parse_insert_size("400") == InsertModel(mean=400.0, std=40.0, low=240, high=560)
    assert parse_insert_size("400,50") == InsertModel(mean=400.0, std=50.0, low=200, high=600)
    assert parse_insert_size("400,50,700,100") == InsertModel(mean=400.0, std=50.0, low=100, high=700)
    for bad in ("", "x", "400,", "-400,30", "400,-3", "400,30,100,200", "1,2,3,4,5", "nan", "400,0"):
        with pytest.raises(UsageError, match="--insert-size"):
            parse_insert_size(bad)


def test_insert_penalties_follow_the_normal_tail():
    model = InsertModel(mean=300.0, std=30.0, low=180, high=420)
    penalties = model.penalties(1)
    assert len(penalties) == 241
    assert penalties[300 - 180] == 0  # +0.5, rounded down as bwa's int(x + .499)
    assert penalties[360 - 180] == int(0.721 * math.log(2 * math.erfc(2 / math.sqrt(2))) + 0.499) == -1
    assert penalties[420 - 180] == int(0.721 * math.log(2 * math.erfc(4 / math.sqrt(2))) + 0.499)


# ------------------------------------------------------------------------------- pair choice


def python_best_pairs(candidates, model, pairs_count, key):
    """The best pair of each pair from plain loops: candidates are (read, reverse, start, end,
    contig, score) tuples; ``key(i, j)`` breaks ties (the largest wins)."""
    results = []
    for pair in range(pairs_count):
        ones = [i for i, c in enumerate(candidates) if c[0] == 2 * pair]
        twos = [j for j, c in enumerate(candidates) if c[0] == 2 * pair + 1]
        found = []
        for i in ones:
            for j in twos:
                x, y = candidates[i], candidates[j]
                if x[4] != y[4] or x[1] == y[1]:
                    continue
                forward, reverse = (x, y) if not x[1] else (y, x)
                forward_five, reverse_five = forward[2], reverse[3] - 1
                if not forward_five < reverse_five:
                    continue
                size = reverse_five - forward_five + 1
                if not model.low <= size <= model.high:
                    continue
                z = abs(size - model.mean) / model.std
                bonus = int(0.721 * math.log(max(2 * math.erfc(z / math.sqrt(2)), 1e-300)) + 0.499)
                found.append((max(0, x[5] + y[5] + bonus), key(i, j), i, j))
        if not found:
            results.append(None)
            continue
        found.sort()
        best = found[-1]
        second = found[-2][0] if len(found) > 1 else 0
        near = sum(1 for item in found[:-1] if item[0] >= second - 7)
        results.append((best[2], best[3], best[0], second, near))
    return results


def placed_from(candidates) -> Placed:
    columns = list(zip(*candidates)) if candidates else [()] * 6
    read, reverse, start, end, contig, score = (np.array(column, dtype=np.int64) for column in columns)
    return Placed(np.arange(len(candidates)), read, reverse.astype(bool), start, end, contig, score)


def check_against_python(candidates, model, pairs_count):
    placed = placed_from(candidates)
    hashes = {(i, j): (i * 7919 + j * 104729) % 1000 for i in range(len(candidates)) for j in range(len(candidates))}
    keys = lambda a, b: np.array([hashes[(int(i), int(j))] for i, j in zip(a, b)], dtype=np.uint64)  # noqa: E731
    a, b, best, score, second, near = best_pairs(placed, model, model.penalties(1), pairs_count, keys)
    expected = python_best_pairs(candidates, model, pairs_count, lambda i, j: hashes[(i, j)])
    for pair, want in enumerate(expected):
        if want is None:
            assert best[pair] == -1
        else:
            assert (int(a[best[pair]]), int(b[best[pair]]), int(score[pair]), int(second[pair]), int(near[pair])) == want
    return best, score, second, near


def candidate(read, reverse, start, contig=0, score=100, length=100):
    return (read, int(reverse), start, start + length, contig, score)


MODEL = InsertModel(mean=300.0, std=30.0, low=180, high=420)


def test_hand_made_pairs():
    cases = [
        # 0: a plain FR pair, R1 forward
        candidate(0, False, 1000), candidate(1, True, 1200),
        # 1: RF placement (the reverse mate left of the forward one): not concordant
        candidate(2, True, 1000), candidate(3, False, 1300),
        # 2: both mates in a two-copy repeat: two equally good pairs, a tie broken by the key
        candidate(4, False, 1000), candidate(4, False, 5000), candidate(5, True, 1200), candidate(5, True, 5200),
        # 3: one mate unmapped (no candidate)
        candidate(6, False, 1000),
        # 4: mates on different contigs
        candidate(8, False, 1000, contig=0), candidate(9, True, 1200, contig=1),
        # 5: mates overlapping (insert 180 for reads of 100) and R2 forward
        candidate(10, True, 1080), candidate(11, False, 1000),
        # 6: the mate's better hit is discordant, its worse one concordant
        candidate(12, False, 1000), candidate(13, True, 9000, score=100), candidate(13, True, 1190, score=90),
    ]
    best, score, second, near = check_against_python(cases, MODEL, 7)
    assert best[1] == best[3] == best[4] == -1
    assert min(best[0], best[2], best[5], best[6]) >= 0 and score[2] == second[2] and near[2] == 1


@pytest.mark.parametrize("seed", range(12))
def test_random_candidates_match_the_python_reference(seed):
    rng = np.random.default_rng(seed)
    pairs_count = int(rng.integers(1, 30))
    candidates = []
    for read in range(2 * pairs_count):
        for _ in range(int(rng.integers(0, 5))):
            start = int(rng.integers(0, 3000))
            candidates.append(candidate(read, bool(rng.integers(0, 2)), start, contig=int(rng.integers(0, 2)), score=int(rng.integers(20, 101)), length=int(rng.integers(1, 151))))
    rng.shuffle(candidates)  # in no order: windows added by a rescue come after the others
    model = InsertModel(mean=float(rng.integers(150, 400)), std=float(rng.integers(5, 80)), low=int(rng.integers(1, 150)), high=int(rng.integers(400, 900)))
    check_against_python(candidates, model, pairs_count)


@pytest.mark.parametrize("seed", range(16))
def test_searching_only_the_rescued_pairs_again_gives_the_whole_search(seed):
    # choose_pairs searches again only the pairs a rescue gave windows (their candidates before
    # the rescue are stale) and joins that to the first search: each pair's choice must be the
    # one a search over every pair's current candidates makes.
    rng = np.random.default_rng(100 + seed)
    pairs_count = int(rng.integers(1, 25))

    def random_candidates(reads):
        found = []
        for read in reads:
            for _ in range(int(rng.integers(0, 5))):
                start = int(rng.integers(0, 3000))
                found.append(candidate(read, bool(rng.integers(0, 2)), start, contig=int(rng.integers(0, 2)), score=int(rng.integers(20, 101)),
                                       length=int(rng.integers(1, 151))))
        return found

    def placed_of(candidates, first_window):
        placed = placed_from(candidates)
        placed.window = placed.window + first_window  # window numbers name candidates across the searches
        return placed

    def search(placed):
        keys = lambda a, b: (placed.window[a].astype(np.uint64) * np.uint64(7919) + placed.window[b].astype(np.uint64) * np.uint64(104729)) % np.uint64(1000)  # noqa: E731
        return best_pairs(placed, MODEL, MODEL.penalties(1), pairs_count, keys)

    def choices(placed, found):
        a, b, best, score, second, near = found
        return [None if best[pair] < 0 else (int(placed.window[a[best[pair]]]), int(placed.window[b[best[pair]]]), int(score[pair]), int(second[pair]), int(near[pair]))
                for pair in range(pairs_count)]

    redo = rng.random(pairs_count) < 0.4
    kept = random_candidates([read for read in range(2 * pairs_count) if not redo[read // 2]])
    stale = random_candidates([read for read in range(2 * pairs_count) if redo[read // 2]])
    current = random_candidates([read for read in range(2 * pairs_count) if redo[read // 2]])
    first = placed_of(kept + stale, 0)
    again = placed_of(current, 10_000)
    joined, found = _joined(first, search(first), again, search(again), redo)
    whole = placed_of(kept, 0)
    whole = Placed(*(np.concatenate((getattr(whole, name), getattr(again, name))) for name in Placed.__dataclass_fields__))
    assert choices(joined, found) == choices(whole, search(whole))


def python_pair_quality(pair_score, against, suboptimal, first_share, second_share, match):
    """bwa's mem_sam_pe q_pe, line by line."""
    quality = int(6.02 * (pair_score - against) / match + 0.499)
    if suboptimal > 0:
        quality -= int(4.343 * math.log(suboptimal + 1) + 0.499)
    quality = min(max(quality, 0), 60)
    return int(quality * (1.0 - 0.5 * (first_share + second_share)) + 0.499)


@pytest.mark.parametrize("seed", range(6))
def test_pair_quality_is_bwas_with_the_mates_repetitive_shares(seed):
    rng = np.random.default_rng(seed)
    count = 257
    pair_score = rng.integers(0, 320, size=count)
    against = pair_score - rng.integers(-5, 40, size=count)
    suboptimal = rng.integers(0, 4, size=count) * (rng.random(count) < 0.5)
    shares = [np.where(rng.random(count) < 0.5, 0.0, rng.random(count)) for _ in range(2)]
    shares[0][:3] = 1.0  # wholly periodic mates
    match = int(rng.integers(1, 3))
    got = pair_quality(pair_score, against, suboptimal, shares[0], shares[1], match)
    expected = [python_pair_quality(*values, match) for values in zip(pair_score, against, suboptimal, *shares)]
    assert got.tolist() == expected


def test_a_mate_wholly_in_a_microsatellite_halves_its_pair_quality():
    """A unique pair (q_pe 60) lifts a mate in a microsatellite by at most 30, as bwa's frac_rep
    of 1 would; a pair of two such mates lifts nothing."""
    got = pair_quality(np.array([300, 300, 300]), np.array([250, 250, 250]), np.zeros(3, dtype=np.int64),
                       np.array([0.0, 1.0, 1.0]), np.array([0.0, 0.0, 1.0]), 1)
    assert got.tolist() == [60, 30, 0]


def python_anchors(candidates, concordant, best, reportable, penalty, most):
    """Mate rescue's anchors from plain loops: per read, the candidates within ``penalty`` of
    ``best[read]``, reportable, with no concordant partner, best first (then leftmost, then
    forward, then input order), one a (strand, start), at most ``most``."""
    found = []
    for read in sorted({c[0] for c in candidates}):
        rows = [i for i, c in enumerate(candidates) if c[0] == read and not concordant[i] and reportable[i] and c[5] >= best[read] - penalty]
        rows.sort(key=lambda i: (-candidates[i][5], candidates[i][2], candidates[i][1], i))
        seen, kept = set(), []
        for i in rows:
            if (candidates[i][1], candidates[i][2]) not in seen:
                seen.add((candidates[i][1], candidates[i][2]))
                kept.append(i)
        found += kept[:most]
    return found


def check_anchors(candidates, concordant, reportable, penalty, most):
    reads = 1 + max((c[0] for c in candidates), default=0)
    best = [max((c[5] for c in candidates if c[0] == read), default=0) for read in range(reads)]
    got = rescue_anchors(placed_from(candidates), np.array(concordant, dtype=bool), np.array(best, dtype=np.int64),
                         np.array(reportable, dtype=bool), penalty, most)
    assert [int(row) for row in got] == python_anchors(candidates, concordant, best, reportable, penalty, most)
    return [int(row) for row in got]


def test_hand_made_anchors():
    cases = [
        candidate(0, False, 1000, score=100),  # 0: the best, concordant: no anchor
        candidate(0, False, 5000, score=90),  # 1: within the penalty, no partner: an anchor
        candidate(0, True, 7000, score=80),  # 2: 20 below the best: none
        candidate(0, False, 6000, score=90),  # 3: ties with 1, to its right
        candidate(0, False, 5000, score=88),  # 4: the place of 1 again (another window): none
        candidate(1, True, 1200, score=60),  # 5: read 1's best, not reportable: none
        candidate(1, True, 3000, score=59),  # 6: an anchor
    ]
    concordant = [True, False, False, False, False, False, False]
    reportable = [True, True, True, True, True, False, True]
    assert check_anchors(cases, concordant, reportable, 17, 50) == [1, 3, 6]
    assert check_anchors(cases, concordant, reportable, 17, 1) == [1, 6]  # at most one a read: the leftmost of a tie
    assert check_anchors(cases, [False] * 7, reportable, 0, 50) == [0]  # only the best, as before multi-anchor rescue
    assert check_anchors([], [], [], 17, 50) == []


@pytest.mark.parametrize("seed", range(12))
def test_random_anchors_match_the_python_reference(seed):
    rng = np.random.default_rng(seed)
    candidates = []
    for read in range(int(rng.integers(1, 40))):
        for _ in range(int(rng.integers(0, 8))):
            candidates.append(candidate(read, bool(rng.integers(0, 2)), int(rng.integers(0, 40)) * 50, score=int(rng.integers(60, 101))))
    rng.shuffle(candidates)
    concordant = list(rng.integers(0, 2, size=len(candidates)).astype(bool))
    reportable = list(rng.integers(0, 5, size=len(candidates)) > 0)
    check_anchors(candidates, concordant, reportable, int(rng.integers(0, 30)), int(rng.integers(1, 6)))


# ------------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def paired(indexes, tmp_path_factory):
    out = tmp_path_factory.mktemp("paired") / "pairs.sam"
    assert main(["-q", "align", str(indexes[0]), str(R1), str(R2), "-o", str(out), "--devices", "cpu"]) == 0
    return out


def indexed(tmp_path, genome: np.ndarray) -> str:
    """``genome`` (ASCII bases) as one contig "chr", indexed at tmp_path/ref; its text."""
    text = genome.tobytes().decode()
    assert main(["-q", "index", write_fasta(tmp_path / "ref.fa", [("chr", text)]), str(tmp_path / "ref")]) == 0
    return text


def records(path):
    with pysam.AlignmentFile(str(path)) as sam:
        return list(sam)


def test_pairs_map_to_their_true_places_and_are_proper(paired):
    truth = {}
    for line in TRUTH.read_text().splitlines()[1:]:
        name, mate, strand, position, _ = line.split("\t")
        truth[name, int(mate)] = (strand == "-", int(position) - 1)
    found = records(paired)
    assert len(found) == 2 * 1000
    correct = sum(
        1 for read in found
        if read.is_mapped and (read.is_reverse, ) == (truth[read.query_name, 1 if read.is_read1 else 2][0], )
        and abs(read.reference_start - truth[read.query_name, 1 if read.is_read1 else 2][1]) <= 5
    )
    assert correct >= 0.995 * len(found)
    assert sum(read.is_proper_pair for read in found) >= 0.99 * len(found)


def check_pair_fields(first, second):
    """The SAM specification's rules for the two records of a pair (R1 then R2)."""
    for read, mate in ((first, second), (second, first)):
        assert read.is_paired and read.query_name == mate.query_name
        assert read.mate_is_unmapped == mate.is_unmapped
        if mate.is_mapped:
            assert read.next_reference_id == mate.reference_id and read.next_reference_start == mate.reference_start
            assert read.mate_is_reverse == mate.is_reverse
            assert read.get_tag("MC") == mate.cigarstring and read.get_tag("MQ") == mate.mapping_quality
        else:
            assert not read.has_tag("MC") and not read.has_tag("MQ")
        if read.is_unmapped and mate.is_mapped:  # placed at its mate
            assert (read.reference_id, read.reference_start) == (mate.reference_id, mate.reference_start)
        if read.is_mapped and mate.is_unmapped:
            assert (read.next_reference_id, read.next_reference_start) == (read.reference_id, read.reference_start)
        if read.is_mapped and mate.is_mapped and read.reference_id == mate.reference_id:
            span = max(read.reference_end, mate.reference_end) - min(read.reference_start, mate.reference_start)
            leftmost = read.reference_start < mate.reference_start or (read.reference_start == mate.reference_start and read.is_read1)
            assert read.template_length == (span if leftmost else -span)
        else:
            assert read.template_length == 0
        if read.is_proper_pair:
            assert read.is_mapped and mate.is_mapped and mate.is_proper_pair
    assert first.is_read1 and second.is_read2 and not first.is_read2 and not second.is_read1
    assert first.template_length == -second.template_length


def test_pair_fields_follow_the_specification(paired):
    found = records(paired)
    for first, second in zip(found[0::2], found[1::2]):
        check_pair_fields(first, second)


def test_samtools_takes_the_pairs(paired, tmp_path):
    assert pysam.quickcheck(str(paired)) == ""
    flagstat = pysam.flagstat(str(paired))
    assert "2000 + 0 paired in sequencing" in flagstat and "1000 + 0 read1" in flagstat
    by_name = str(tmp_path / "name.bam")
    pysam.sort("-n", "-o", by_name, str(paired))
    fixed = str(tmp_path / "fixed.bam")
    pysam.fixmate("-m", by_name, fixed)
    ours = {(r.query_name, r.is_read1): (r.flag, r.next_reference_start, r.template_length, r.get_tag("MC") if r.has_tag("MC") else None) for r in records(paired)}
    theirs = {(r.query_name, r.is_read1): (r.flag, r.next_reference_start, r.template_length, r.get_tag("MC") if r.has_tag("MC") else None) for r in records(fixed)}
    assert ours == theirs  # fixmate finds nothing to fix
    by_position = str(tmp_path / "sorted.bam")
    pysam.sort("-o", by_position, fixed)
    marked = str(tmp_path / "marked.bam")
    pysam.markdup(by_position, marked)
    pysam.index(marked)
    assert os.path.exists(marked + ".bai")


def test_pairs_are_the_same_whatever_the_layout(indexes, paired, tmp_path, capsys):
    expected = [line for line in paired.read_text().splitlines() if not line.startswith("@PG")]
    first, second = fastq_records(R1), fastq_records(R2)
    interleaved = write_fastq(tmp_path / "interleaved.fq", [record for pair in zip(first, second) for record in pair])
    plain = write_fastq(tmp_path / "r1.fq", first), write_fastq(tmp_path / "r2.fq", second)
    layouts = [
        [indexes[0], R1, R2, "--serial"],
        [indexes[0], R1, R2, "-p", "2"],
        [indexes[0], R1, R2, "--chunk-bases", "1500", "--queues-per-device", "3"],
        [indexes[1], R1, R2, "--chunk-bases", "5000"],
        [indexes[0], interleaved, "--interleaved"],
        [indexes[0], plain[0], plain[1], "--chunk-bases", "4000", "-p", "2"],  # byte ranges the workers parse
        [indexes[0], plain[0], plain[1], "--chunk-bases", "2500"],
    ]
    for layout in layouts:
        out = tmp_path / "out.sam"
        code, _, err = run(capsys, "-q", "align", *layout, "-o", out, "--devices", "cpu")
        assert code == 0, err
        got = [line for line in out.read_text().splitlines() if not line.startswith("@PG")]
        assert got == expected, layout


def test_two_owners_a_device_give_the_same_records(indexes, paired, tmp_path, capsys, monkeypatch):
    """Developers' BOWMAP_OWNERS_PER_DEVICE=2 (two owner processes, each its own index copy,
    the host workers spread over them): the same pairs and single-end records as one process.
    Their usage files (BOWMAP_USAGE, read by the spawned processes) show both owners ran."""
    expected = [line for line in paired.read_text().splitlines() if not line.startswith("@PG")]
    out, single, usage = tmp_path / "out.sam", tmp_path / "single.sam", tmp_path / "usage"
    usage.mkdir()
    code, _, err = run(capsys, "-q", "align", indexes[0], R1, "-o", single, "--devices", "cpu", "-p", "1")
    assert code == 0, err
    monkeypatch.setenv("BOWMAP_OWNERS_PER_DEVICE", "2")
    monkeypatch.setenv("BOWMAP_USAGE", str(usage))
    code, _, err = run(capsys, "-q", "align", indexes[0], R1, R2, "-o", out, "--devices", "cpu", "-p", "2", "--chunk-bases", "4000")
    assert code == 0, err
    assert [line for line in out.read_text().splitlines() if not line.startswith("@PG")] == expected
    assert len(list(usage.glob("owner-*.usage.json"))) == 2
    code, _, err = run(capsys, "-q", "align", indexes[0], R1, "-o", out, "--devices", "cpu", "-p", "2", "--chunk-bases", "4000")
    assert code == 0, err
    body = [line for line in single.read_text().splitlines() if not line.startswith("@PG")]
    assert [line for line in out.read_text().splitlines() if not line.startswith("@PG")] == body
    monkeypatch.setenv("BOWMAP_OWNERS_PER_DEVICE", "two")
    code, _, err = run(capsys, "-q", "align", indexes[0], R1, "-o", tmp_path / "none.sam", "--devices", "cpu", "-p", "2")
    assert code == 2 and err.strip().splitlines() == ["bowmap: error: BOWMAP_OWNERS_PER_DEVICE='two': owner processes a device must be a positive integer"]
    assert not (tmp_path / "none.sam").exists()


def test_the_command_line_forks_its_owner_and_workers_and_gives_the_same_records(indexes, paired, tmp_path):
    """``python -m bowmap`` (a process that has asked OpenCL nothing yet) forks its device owner
    at the start and its host workers (bowmap.runtime.owner_process.OwnerProcess, runners.run_processes):
    the same records as the spawned layout, and one owner ran (its usage file)."""
    import subprocess
    import sys

    out, usage = tmp_path / "out.sam", tmp_path / "usage"
    usage.mkdir()
    environment = {**os.environ, "BOWMAP_USAGE": str(usage)}
    command = [sys.executable, "-m", "bowmap", "-q", "align", str(indexes[0]), str(R1), str(R2), "-o", str(out), "--devices", "cpu",
               "-p", "2", "--chunk-bases", "4000"]
    result = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=600)
    assert result.returncode == 0, result.stderr
    expected = [line for line in paired.read_text().splitlines() if not line.startswith("@PG")]
    assert [line for line in out.read_text().splitlines() if not line.startswith("@PG")] == expected
    assert len(list(usage.glob("owner-*.usage.json"))) == 1
    assert len(list(usage.glob("worker*.usage.json"))) == 2
    # the workers' modules came with the fork (workers.WORKER_MODULES): none imported a bowmap module
    for path in usage.glob("worker*.usage.json"):
        assert [name for name in json.loads(path.read_text())["imported"] if name.startswith("bowmap")] == []


def test_the_model_is_logged_and_can_be_given(indexes, tmp_path, capsys):
    out = tmp_path / "out.sam"
    code, _, err = run(capsys, "align", indexes[0], R1, R2, "-o", out, "--devices", "cpu")
    assert code == 0
    assert "insert size from 1000 of the first pairs: FR mean 302.01, sd 30.63, proper pairs 155..449 (FF 0, FR 1000, RF 0, RR 0)" in err
    assert "1000 pairs, 100.00% of reads properly paired" in err
    code, _, err = run(capsys, "align", indexes[0], R1, R2, "-o", out, "--devices", "cpu", "-I", "300,30")
    assert code == 0 and "insert size given: FR mean 300.00, sd 30.00, proper pairs 180..420" in err
    # A model that takes no pair as proper: the pairs are written unpaired, none proper.
    code, _, err = run(capsys, "-q", "align", indexes[0], R1, R2, "-o", out, "--devices", "cpu", "-I", "5000,10")
    assert code == 0 and not any(read.is_proper_pair for read in records(out))


def test_a_mate_whose_seeds_all_fail_is_rescued_by_its_pair(indexes, tmp_path, capsys):
    """R2 with a mismatch every 8 bases has no exact 16-base seed, so alone it cannot map; its
    mate's place and the model give Smith-Waterman its window."""
    first, second = fastq_records(R1)[:60], fastq_records(R2)[:60]
    damaged = []
    for record in second:
        bases = list(record[1])
        for position in range(3, len(bases), 8):
            bases[position] = {"A": "C", "C": "G", "G": "T", "T": "A"}.get(bases[position], "A")
        damaged.append([record[0], "".join(bases), record[2], record[3]])
    r1 = write_fastq(tmp_path / "r1.fq", first)
    r2 = write_fastq(tmp_path / "r2.fq", damaged)
    alone = tmp_path / "alone.sam"
    assert main(["-q", "align", str(indexes[0]), str(r2), "-o", str(alone), "--devices", "cpu", "--min-score", "20"]) == 0
    assert sum(read.is_mapped for read in records(alone)) <= 3
    out = tmp_path / "pairs.sam"
    assert main(["-q", "align", str(indexes[0]), str(r1), str(r2), "-o", str(out), "--devices", "cpu", "-I", "302,31", "--min-score", "20"]) == 0
    found = records(out)
    rescued = [read for read in found if read.is_read2 and read.is_mapped]
    assert len(rescued) >= 55
    assert all(read.is_proper_pair for read in rescued)
    for first_record, second_record in zip(found[0::2], found[1::2]):
        check_pair_fields(first_record, second_record)


def test_a_unique_mate_lifts_its_partner_in_a_repeat(tmp_path, capsys):
    """R2 lies in one of two identical copies; R1 is unique and picks the copy: R2's MAPQ is 0
    alone and lifted by its pair."""
    rng = np.random.default_rng(5)
    bases = np.frombuffer(b"ACGT", dtype=np.uint8)
    genome = bases[rng.integers(0, 4, size=6000)].copy()
    genome[4000:4400] = genome[1000:1400]  # the repeat: R2's region, twice
    text = indexed(tmp_path, genome)
    complement = str.maketrans("ACGT", "TGCA")
    r1_records, r2_records = [], []
    for k, start in enumerate(range(850, 950, 10)):
        r1 = text[start : start + 100]
        r2 = text[start + 250 : start + 350].translate(complement)[::-1]  # inside the repeat 1000..1400
        r1_records.append([f"@p{k}/1", r1, "+", "I" * 100])
        r2_records.append([f"@p{k}/2", r2, "+", "I" * 100])
    write_fastq(tmp_path / "r1.fq", r1_records)
    write_fastq(tmp_path / "r2.fq", r2_records)
    out = tmp_path / "out.sam"
    assert main(["-q", "align", str(tmp_path / "ref"), str(tmp_path / "r2.fq"), "-o", str(out), "--devices", "cpu"]) == 0
    assert all(read.mapping_quality == 0 for read in records(out))
    assert main(["-q", "align", str(tmp_path / "ref"), str(tmp_path / "r1.fq"), str(tmp_path / "r2.fq"), "-o", str(out), "--devices", "cpu", "-I", "350,35"]) == 0
    found = records(out)
    for first, second in zip(found[0::2], found[1::2]):
        assert first.is_proper_pair and second.is_proper_pair
        assert 1000 <= second.reference_start < 1400  # the copy next to its mate
        assert second.mapping_quality >= 40 and first.mapping_quality == 60
        check_pair_fields(first, second)


def test_rescue_starts_from_every_alignment_near_the_best(tmp_path):
    """R1 lies in two identical copies, D and T; R2 in three, next to D (an insert 3.5 sd long),
    X (no R1 near) and T (the insert's mean). With two windows a read, R2 keeps D's and X's
    windows only (ties: leftmost), so the pair at T, the better one by its insert, is found
    only by rescuing R2 from R1's copy at T, which is R1's best for some pairs and ties with
    it for the others (bwa's mem_matesw starts from every hit within the unpaired penalty of
    the best; rescuing from the best alone left about half these pairs at D)."""
    rng = np.random.default_rng(11)
    bases = np.frombuffer(b"ACGT", dtype=np.uint8)
    genome = bases[rng.integers(0, 4, size=16000)].copy()
    unit_one, unit_two = genome[1000:1130].copy(), genome[1305:1435].copy()
    genome[12000:12130] = unit_one  # R1's copy T
    genome[6000:6130] = unit_two  # R2's copy X: no R1 near
    genome[12200:12330] = unit_two  # R2's copy T: insert 300 from R1's
    text = indexed(tmp_path, genome)
    complement = str.maketrans("ACGT", "TGCA")
    r1_records, r2_records = [], []
    for k, start in enumerate(range(12000, 12030, 3)):
        r1_records.append([f"@p{k}/1", text[start : start + 100], "+", "I" * 100])
        r2_records.append([f"@p{k}/2", text[start + 200 : start + 300].translate(complement)[::-1], "+", "I" * 100])
    write_fastq(tmp_path / "r1.fq", r1_records)
    write_fastq(tmp_path / "r2.fq", r2_records)
    out = tmp_path / "out.sam"
    arguments = ["-q", "align", str(tmp_path / "ref"), str(tmp_path / "r1.fq"), str(tmp_path / "r2.fq"), "-o", str(out), "--devices", "cpu",
                 "-I", "300,30", "--windows-per-read", "2"]
    assert main(arguments) == 0
    found = records(out)
    assert len(found) == 20
    for first, second in zip(found[0::2], found[1::2]):
        assert first.is_proper_pair and second.is_proper_pair
        assert (first.reference_start, second.reference_start) == (int(first.query_name[1:]) * 3 + 12000, int(first.query_name[1:]) * 3 + 12200)
        check_pair_fields(first, second)


def test_no_unal_keeps_pairs_with_a_mapped_mate(indexes, tmp_path, capsys):
    first, second = fastq_records(R1)[:20], fastq_records(R2)[:20]
    second[3] = [second[3][0], "N" * 100, "+", "I" * 100]  # one mate that cannot map
    first[7], second[7] = [first[7][0], "N" * 100, "+", "I" * 100], [second[7][0], "N" * 100, "+", "I" * 100]
    r1, r2 = write_fastq(tmp_path / "r1.fq", first), write_fastq(tmp_path / "r2.fq", second)
    out = tmp_path / "out.sam"
    assert main(["-q", "align", str(indexes[0]), str(r1), str(r2), "-o", str(out), "--devices", "cpu", "--no-unal", "-I", "302,31"]) == 0
    found = records(out)
    assert len(found) == 38 and "simulated.8" not in {read.query_name for read in found}
    lonely = [read for read in found if read.query_name == "simulated.4"]
    assert [read.is_unmapped for read in lonely] == [False, True] and lonely[1].reference_start == lonely[0].reference_start
    assert lonely[0].flag & 0x8 and not lonely[0].is_proper_pair
    for first_record, second_record in zip(found[0::2], found[1::2]):
        check_pair_fields(first_record, second_record)


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["{r1}", "{r2}", "--interleaved"], "--interleaved takes one READS file"),
        (["{r1}", "{r2}", "--insert-size", "400,-3"], "--insert-size 400,-3"),
        (["{r1}", "{r2}", "--insert-size", "x"], "--insert-size x"),
        (["{r1}", "--insert-size", "400"], "--insert-size is for paired-end reads"),
        (["{r1}", "{r2}", "--unpaired-penalty", "-1"], "--unpaired-penalty"),
    ],
)
def test_usage_errors(indexes, tmp_path, capsys, arguments, message):
    out = tmp_path / "out.sam"
    argv = [argument.format(r1=R1, r2=R2) for argument in arguments]
    code, _, err = run(capsys, "align", indexes[0], *argv, "-o", out)
    assert code == 2 and message in err and "Traceback" not in err and not out.exists()


def test_input_errors_leave_no_output(indexes, tmp_path, capsys):
    second = fastq_records(R2)
    second[500][0] = "@somebody.else/2"
    bad = write_fastq(tmp_path / "bad.fq", second)
    out = tmp_path / "out.sam"
    code, _, err = run(capsys, "align", indexes[0], R1, bad, "-o", out, "--devices", "cpu", "--chunk-bases", "5000")
    assert code == 1 and "bad.fq:2001: record 501: the mates' names differ" in err and "Traceback" not in err
    assert not out.exists() and sorted(os.listdir(tmp_path)) == ["bad.fq"]
    short = write_fastq(tmp_path / "short.fq", fastq_records(R2)[:999])
    code, _, err = run(capsys, "align", indexes[0], R1, short, "-o", out, "--devices", "cpu")
    assert code == 1 and "short.fq ends after 999 records" in err and not out.exists()
