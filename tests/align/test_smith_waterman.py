"""The Smith-Waterman kernels against their NumPy reference, the reference against the plain
cell-by-cell DP, and the CIGAR invariants, on PoCL (or BOWMAP_TEST_DEVICES)."""

from __future__ import annotations

import numpy as np
import pytest

from bowmap.align.extend.packed_text import PackedText
from bowmap.align.references import smith_waterman as reference
from bowmap.align.extend.smith_waterman import (
    CIGAR_COLUMNS,
    OP_D,
    OP_I,
    OP_M,
    OP_S,
    Scoring,
    SmithWaterman,
    cigar_scores,
    cigar_string,
    twins,
)
from bowmap.index.format import pack_2bit

SCORINGS = [
    Scoring(),
    Scoring(end_to_end=True),
    Scoring(clip_penalty=0),  # plain local: clipping is free
    Scoring(match=2, mismatch=3, gap_open=0, gap_extend=2, ambiguous=0, clip_penalty=11),  # linear gaps, free N
    Scoring(match=5, mismatch=1, gap_open=11, gap_extend=0, ambiguous=2, end_to_end=True),  # free extension
]
SCORING_IDS = ["local", "end_to_end", "local_free_clips", "linear_gaps", "free_extension"]


def mutate(rng, bases: np.ndarray) -> np.ndarray:
    """Substitutions (~5%), short insertions and deletions (~2% each), a few N."""
    out = []
    for base in bases.tolist():
        draw = rng.random()
        if draw < 0.02:
            continue  # deletion
        if draw < 0.04:
            out.extend(rng.integers(0, 4, size=int(rng.integers(1, 4))).tolist())
        out.append(int(rng.integers(0, 4)) if rng.random() < 0.05 else base)
        if rng.random() < 0.005:
            out[-1] = 4
    return np.array(out, dtype=np.uint8)


def concatenate(pieces):
    lengths = np.array([len(piece) for piece in pieces], dtype=np.uint32)
    offsets = (np.cumsum(lengths, dtype=np.int64) - lengths).astype(np.uint32)
    codes = np.concatenate(pieces).astype(np.uint8) if pieces else np.zeros(0, np.uint8)
    return codes, offsets, lengths


def make_pairs(rng, count: int, longest_read: int, flank: int):
    """Windows, each with a mutated copy of part of it as a read (every third read random), and
    pairs naming them shuffled, some reads against several windows."""
    reads, windows = [], []
    for number in range(count):
        length = int(rng.integers(1, longest_read + 1))
        window = rng.integers(0, 4, size=length + int(rng.integers(0, 2 * flank + 1)), dtype=np.uint8)
        if number % 3 == 2:
            read = rng.integers(0, 5, size=length, dtype=np.uint8)
        else:
            start = int(rng.integers(0, len(window) - length + 1))
            read = mutate(rng, window[start : start + length])[: max(1, length)]
            if len(read) == 0:
                read = window[:1].copy()
            if number % 5 == 1:
                read = read[::-1].copy()  # another kind of poor alignment
        reads.append(read)
        windows.append(window)
    pair_reads = rng.permutation(count).astype(np.uint32)
    pair_windows = pair_reads.copy()
    pair_windows[::4] = rng.integers(0, count, size=len(pair_windows[::4]))  # some unrelated pairs
    return (*concatenate(reads), *concatenate(windows), pair_reads, pair_windows)


def check_invariants(scoring, arrays, traced):
    read_codes, read_offsets, read_lengths, window_codes, window_offsets, window_lengths, pair_reads, pair_windows = arrays
    score, read_start, read_end, window_start, window_end, ops, offsets, lengths = traced
    for pair in range(len(pair_reads)):
        read_number, window_number = int(pair_reads[pair]), int(pair_windows[pair])
        read = read_codes[read_offsets[read_number] : read_offsets[read_number] + read_lengths[read_number]]
        window = window_codes[window_offsets[window_number] : window_offsets[window_number] + window_lengths[window_number]]
        pair_ops = ops[offsets[pair] : offsets[pair] + lengths[pair]]
        cigar = [(int(op) >> 4, int(op) & 15) for op in pair_ops]
        described = f"pair {pair}: {cigar_string(pair_ops)}"
        assert all(length > 0 for length, _ in cigar), described
        assert all(a[1] != b[1] for a, b in zip(cigar, cigar[1:])), described  # runs are merged
        read_used = sum(length for length, op in cigar if op in (OP_M, OP_I, OP_S))
        window_used = sum(length for length, op in cigar if op in (OP_M, OP_D))
        assert read_used == len(read), described
        assert window_used == window_end[pair] - window_start[pair], described
        rescored, _, _ = reference.cigar_score(scoring, read, window, int(window_start[pair]), cigar)
        own = cigar_scores(scoring, score[pair : pair + 1], read_start[pair : pair + 1], read_end[pair : pair + 1], [len(read)])
        assert rescored == own[0], described
        clipped_front = cigar[0][0] if cigar and cigar[0][1] == OP_S and len(cigar) > 1 else 0
        assert clipped_front == read_start[pair], described
        if scoring.end_to_end:
            assert OP_S not in (op for _, op in cigar) and read_start[pair] == 0 and read_end[pair] == len(read)
        else:
            assert score[pair] >= 0
            if score[pair] == 0:
                assert (read_start[pair], read_end[pair], window_start[pair], window_end[pair]) == (0, 0, 0, 0)
            elif scoring.gap_open + scoring.gap_extend > scoring.clip_bonus:
                # a local alignment starts and ends with a match (unless a gap to a read end
                # costs less than the clip bonus it earns)
                inner = [op for _, op in cigar if op != OP_S]
                assert inner[0] == OP_M and inner[-1] == OP_M, described


def assert_same(got, expected, names):
    for name, kernel, wanted in zip(names, got, expected):
        np.testing.assert_array_equal(kernel, wanted, err_msg=name)


TRACE_NAMES = ("score", "read_start", "read_end", "window_start", "window_end", "cigar_ops", "cigar_offsets", "cigar_lengths")


# best() by one pair a work-item (sw_score), or by two in 16-bit lanes (sw_score_twins) with the
# lane operations the device would use (PTX on NVIDIA compute capability >= 9, else OpenCL
# short2), or with the portable short2 operations whatever the device; and the twins as teams,
# a work-item a tile (sw_score_teams), both ways.
KERNELS = {"scalar": {"packed_scores": False}, "twins": {"packed_scores": True, "teams": False},
           "twins_portable": {"packed_scores": True, "packed_asm": False, "teams": False},
           "teams": {"packed_scores": True, "teams": True},
           "teams_portable": {"packed_scores": True, "packed_asm": False, "teams": True}}


# The teams kernel is built for each count of rows in a read's last tile (PoCL: about 4 s a
# build), so its tests take reads of TEAM_LENGTHS: two counts, teams of 1 to 10 tiles.
TEAM_LENGTHS = [0, 1, 17, 33, 38, 134, 150]


@pytest.mark.parametrize("kernel", ["scalar", "twins", "twins_portable"])
@pytest.mark.parametrize("scoring", SCORINGS, ids=SCORING_IDS)
@pytest.mark.parametrize("count, longest_read, flank", [(1, 30, 5), (63, 40, 8), (129, 150, 64)])
def test_kernels_equal_reference(device, scoring, count, longest_read, flank, kernel):
    rng = np.random.default_rng(count * 1000 + longest_read + scoring.match)
    arrays = make_pairs(rng, count, longest_read, flank)
    aligner = SmithWaterman(device, scoring, **KERNELS[kernel])
    best = aligner.best(*arrays)
    assert_same(best, reference.best(scoring, *arrays), ("score", "read_end", "window_end"))
    traced = aligner.traceback(*arrays)
    assert_same(traced, reference.traceback(scoring, *arrays), TRACE_NAMES)
    assert_same(traced[:1] + traced[2:3] + traced[4:5], best, ("score", "read_end", "window_end"))
    check_invariants(scoring, arrays, traced)


WIDE = Scoring(match=200, mismatch=300, gap_open=500, gap_extend=100)  # 32-bit boundary scores


@pytest.mark.parametrize("kernel", ["scalar", "teams"])
@pytest.mark.parametrize("scoring", SCORINGS + [WIDE], ids=SCORING_IDS + ["wide"])
def test_windows_cut_at_the_best_end_trace_the_same_alignments(device, scoring, kernel):
    """Extender.trace sweeps a window only up to the column its best alignment ends at (the
    whole window where that end is 0): the traceback of the cut windows equals that of the whole
    ones, CIGARs included, in sw_traceback, sw_traceback_teams and the reference; cut a column
    shorter, some differ. Reads of TEAM_LENGTHS (empty ones too), mutated copies inside their
    windows, an N read (score 0 in local mode), an empty window, tandem against tandem."""
    rng = np.random.default_rng(29 + scoring.match + scoring.gap_open)
    count = 96
    reads = [rng.integers(0, 4, size=int(length), dtype=np.uint8) for length in rng.choice(TEAM_LENGTHS, count)]
    windows = [np.concatenate([rng.integers(0, 4, int(rng.integers(0, 70))), mutate(rng, read),
                               rng.integers(0, 4, int(rng.integers(0, 70)))]).astype(np.uint8) for read in reads]
    reads[1], windows[2] = np.array([4], np.uint8), np.zeros(0, np.uint8)
    for k in range(3, count, 7):
        reads[k] = np.resize(np.array([0, 1], np.uint8), len(reads[k]))
        windows[k] = np.resize(np.array([1, 0], np.uint8), len(windows[k]))
    read_codes, read_offsets, read_lengths = concatenate(reads)
    window_codes, window_offsets, window_lengths = concatenate(windows)
    pair_reads = np.arange(count, dtype=np.uint32)
    pair_windows = pair_reads.copy()
    pair_windows[::9] = rng.integers(0, count, len(pair_windows[::9]))  # some unrelated pairs
    arrays = (read_codes, read_offsets, read_lengths, window_codes, window_offsets, window_lengths, pair_reads, pair_windows)
    _, _, window_end = reference.best(scoring, *arrays)
    whole = window_lengths[pair_windows]

    def cut_at(ends):
        return (read_codes, read_offsets, read_lengths, window_codes, window_offsets[pair_windows], ends.astype(np.uint32),
                pair_reads, np.arange(count, dtype=np.uint32))

    cut = np.where(window_end > 0, window_end, whole)
    assert (cut < whole).sum() > count // 4 and ((window_end == 0) & (whole > 0)).any()
    expected = reference.traceback(scoring, *arrays)
    assert_same(reference.traceback(scoring, *cut_at(cut)), expected, TRACE_NAMES)
    assert_same(SmithWaterman(device, scoring, **KERNELS[kernel]).traceback(*cut_at(cut)), expected, TRACE_NAMES)
    shorter = reference.traceback(scoring, *cut_at(np.where(window_end > 0, window_end - 1, whole)))
    assert any(not np.array_equal(a, b) for a, b in zip(shorter, expected))


@pytest.mark.parametrize("scoring", SCORINGS, ids=SCORING_IDS)
def test_reference_equals_cell_by_cell_definition(scoring):
    rng = np.random.default_rng(11)
    arrays = make_pairs(rng, 60, 14, 4)
    read_codes, read_offsets, read_lengths, window_codes, window_offsets, window_lengths, pair_reads, pair_windows = arrays
    score, read_start, read_end, window_start, window_end, ops, offsets, lengths = reference.traceback(scoring, *arrays)
    for pair in range(len(pair_reads)):
        r, w = int(pair_reads[pair]), int(pair_windows[pair])
        naive = reference.align_naive(
            scoring,
            read_codes[read_offsets[r] : read_offsets[r] + read_lengths[r]],
            window_codes[window_offsets[w] : window_offsets[w] + window_lengths[w]],
        )
        cigar = [(int(op) >> 4, int(op) & 15) for op in ops[offsets[pair] : offsets[pair] + lengths[pair]]]
        ours = (int(score[pair]), int(read_start[pair]), int(read_end[pair]), int(window_start[pair]), int(window_end[pair]), cigar)
        assert ours == naive, f"pair {pair}"


def edge_case_pairs():
    rng = np.random.default_rng(5)
    window = rng.integers(0, 4, size=300, dtype=np.uint8)
    cases = [
        (window[10:11], window[:40]),  # read length 1 inside the window
        (np.array([2], np.uint8), np.array([1, 0, 3], np.uint8)),  # read length 1, no match
        (window[5:65], window[20:40]),  # window shorter than the read
        (window[:50], np.zeros(0, np.uint8)),  # empty window
        (np.full(37, 4, np.uint8), window[:80]),  # all-N read
        (window[:100], window[:100]),  # identical
        (np.zeros(0, np.uint8), window[:9]),  # empty read
        (np.full(20, 0, np.uint8), np.full(30, 1, np.uint8)),  # nothing matches
        (window[3:20], window[3:20]),  # 17: one base past a tile
        (window[3:18], window[:60]),  # 15 and 16: one short of / exactly a tile
        (window[3:19], window[:60]),
        (np.tile(np.array([0, 1], np.uint8), 12), np.tile(np.array([0, 1], np.uint8), 20)),  # many equal optima
    ]
    reads, windows = [c[0] for c in cases], [c[1] for c in cases]
    count = len(cases)
    return (*concatenate(reads), *concatenate(windows), np.arange(count, dtype=np.uint32), np.arange(count, dtype=np.uint32))


@pytest.mark.parametrize("kernel", ["scalar", "twins"])
@pytest.mark.parametrize("scoring", SCORINGS[:3], ids=SCORING_IDS[:3])
@pytest.mark.parametrize("read_tile", [16, 8])
def test_edge_cases(device, scoring, read_tile, kernel):
    arrays = edge_case_pairs()
    aligner = SmithWaterman(device, scoring, read_tile=read_tile, **KERNELS[kernel])
    traced = aligner.traceback(*arrays)
    assert_same(traced, reference.traceback(scoring, *arrays), TRACE_NAMES)
    assert_same(aligner.best(*arrays), reference.best(scoring, *arrays), ("score", "read_end", "window_end"))
    sent = (aligner.send_reads(arrays[0]), *arrays[1:])  # the reads sent once, for both calls
    assert_same(aligner.best(*sent), reference.best(scoring, *arrays), ("score", "read_end", "window_end"))
    assert_same(aligner.traceback(*sent), traced, TRACE_NAMES)
    check_invariants(scoring, arrays, traced)
    score, read_start, read_end, window_start, window_end, ops, offsets, lengths = traced

    def cigar(pair):
        return cigar_string(ops[offsets[pair] : offsets[pair] + lengths[pair]])

    assert (score[5] - 2 * scoring.clip_bonus, cigar(5)) == (100, "100M")  # identical
    if scoring.end_to_end:
        assert (score[3], window_end[3], cigar(3)) == (-(6 + 50), 0, "50I")  # empty window: all inserted
        assert (score[6], window_end[6], lengths[6]) == (0, 0, 0)  # empty read
        assert score[4] == -37 and cigar(4) == "37M"  # all N: each base -1, cheaper than gaps
    elif scoring.clip_penalty == 0:
        assert (score[0], read_end[0], cigar(0)) == (1, 1, "1M")
        for pair, read_length in ((1, 1), (3, 50), (4, 37), (7, 20)):  # no positive cell
            assert (score[pair], read_end[pair], window_end[pair], cigar(pair)) == (0, 0, 0, f"{read_length}S")
        assert lengths[6] == 0  # empty read: empty CIGAR
        assert (score[11], window_end[11], cigar(11)) == (24, 24, "24M")  # ties: the smallest window end
    else:  # clip penalty 5: reaching a read end is worth 5
        assert (score[0], read_end[0], cigar(0)) == (11, 1, "1M")  # 1 + both ends
        assert (score[1], window_end[1], cigar(1)) == (6, 1, "1M")  # one mismatch (-4) + both ends
        assert (score[4], read_end[4], cigar(4)) == (4, 1, "1M36S")  # all N: 5 - 1 at the first base
        assert (score[7], cigar(7)) == (1, "1M19S")  # nothing matches: 5 - 4 at the first base
        assert (score[3], window_end[3], lengths[3]) == (0, 0, 1)  # empty window: nothing aligns
        assert lengths[6] == 0  # empty read: empty CIGAR
        assert (score[11], window_end[11], cigar(11)) == (34, 24, "24M")
        assert (score[8], cigar(8)) == (27, "17M")


@pytest.mark.parametrize("teams", [False, True])
def test_long_reads_wide_scores_and_split_launches(device, teams):
    """Reads up to 1024 with windows up to read + 2 x 256 (16-bit boundary scores still suffice
    with the default scores); a small scratch cap forces several launches (the traceback's
    teams: several for each count of rows in the last tile)."""
    rng = np.random.default_rng(3)
    reads, windows = [], []
    for length, flank in ((1024, 256), (1000, 0), (513, 200)):
        window = rng.integers(0, 4, size=length + 2 * flank, dtype=np.uint8)
        reads.append(mutate(rng, window[flank : flank + length]))
        windows.append(window)
    unique_reads, unique_windows = np.array([0, 1, 2, 0], np.uint32), np.array([0, 1, 2, 2], np.uint32)
    sequences = (*concatenate(reads), *concatenate(windows))
    for scoring in (Scoring(), Scoring(end_to_end=True)):
        assert not scoring.needs_wide_scores(1024, 1536)
        aligner = SmithWaterman(device, scoring, teams=teams)
        group = aligner._kernel("sw_traceback", False)[1]
        # Room for about 1.5 work-groups of the longest pair: several launches (the teams: for
        # three of the longest pairs' direction words, a step's tiles side by side).
        aligner.scratch_bytes = 3 * (1536 + 63) * 64 * 8 if teams else group * (64 * 1536 * 8 + 1537 * 8) * 3 // 2
        repeats = np.arange(3 * group) % 4
        arrays = (*sequences, unique_reads[repeats], unique_windows[repeats])
        traced = aligner.traceback(*arrays)
        assert len(aligner.last_kernel_events) >= (6 if teams else 2)
        check_invariants(scoring, arrays, traced)
        expected = reference.traceback(scoring, *sequences, unique_reads, unique_windows)
        score, read_start, read_end, window_start, window_end, ops, offsets, lengths = traced
        assert int(lengths.max()) > CIGAR_COLUMNS  # CIGARs past the columns read with the scores too
        for pair, unique in enumerate(repeats):
            assert (score[pair], read_start[pair], read_end[pair], window_start[pair], window_end[pair]) == tuple(
                int(array[unique]) for array in expected[:5]
            )
            np.testing.assert_array_equal(
                ops[offsets[pair] : offsets[pair] + lengths[pair]],
                expected[5][expected[6][unique] : expected[6][unique] + expected[7][unique]],
            )
        assert_same(aligner.best(*arrays), (score, read_end, window_end), ("score", "read_end", "window_end"))


def test_wide_scores_with_large_match(device):
    scoring = Scoring(match=200, mismatch=300, gap_open=500, gap_extend=100)
    assert scoring.needs_wide_scores(200, 300)
    rng = np.random.default_rng(9)
    arrays = make_pairs(rng, 17, 200, 50)
    aligner = SmithWaterman(device, scoring)
    assert_same(aligner.traceback(*arrays), reference.traceback(scoring, *arrays), TRACE_NAMES)
    # The traceback's teams with 32-bit scores too: reads of one count of rows in the last tile.
    assert scoring.needs_wide_scores(150, 250)
    reads, windows = [], []
    for length in rng.choice([150, 166], 23):
        window = rng.integers(0, 4, size=int(length) + 100, dtype=np.uint8)
        read = window[50 : 50 + int(length)].copy()
        changed = rng.random(len(read)) < 0.05
        read[changed] = (read[changed] + 1) % 4
        reads.append(read)
        windows.append(window)
    arrays = (*concatenate(reads), *concatenate(windows), np.arange(23, dtype=np.uint32), rng.permutation(23).astype(np.uint32))
    teams = SmithWaterman(device, scoring, teams=True)
    assert_same(teams.traceback(*arrays), reference.traceback(scoring, *arrays), TRACE_NAMES)
    assert (True, False, False, 6) in teams._kernels  # the wide teams program ran


def test_rejects_bad_input(device):
    aligner = SmithWaterman(device, Scoring())
    codes = np.zeros(10, np.uint8)
    with pytest.raises(ValueError):
        aligner.best(codes, [0], [11], codes, [0], [5], [0], [0])  # read past the codes
    with pytest.raises(ValueError):
        aligner.best(codes, [0], [5], codes, [0], [5], [1], [0])  # no read 1
    with pytest.raises(ValueError):
        aligner.best(codes, [0], [5], codes, [0], [5], [0, 0], [0])
    for bad in ({"match": 0}, {"mismatch": -1}, {"gap_open": 0, "gap_extend": 0}, {"ambiguous": 1.5}):
        with pytest.raises(ValueError):
            Scoring(**bad)
    empty = aligner.traceback(codes, [0], [5], codes, [0], [5], [], [])
    assert all(len(array) == 0 for array in empty)


# The teams on a masked packed text: local mode only (PoCL takes about 30 s to build that program;
# end-to-end mode's teams read windows the same way, and both modes' teams are tested on bytes).
PACKED_TEXT_CASES = [(scoring, runs, kernel) for scoring in SCORINGS[:2] for runs in (0, 9) for kernel in ("scalar", "twins")]
PACKED_TEXT_CASES.append((SCORINGS[0], 9, "teams"))


@pytest.mark.parametrize("scoring, ambiguous_runs, kernel", PACKED_TEXT_CASES,
                         ids=[f"{'end_to_end' if c[0].end_to_end else 'local'}-{c[1]}-{c[2]}" for c in PACKED_TEXT_CASES])
def test_windows_read_from_a_packed_text_on_the_device(device, scoring, ambiguous_runs, kernel):
    """Windows given as text positions in a PackedText equal the same windows given as bytes
    (ambiguous bases, marked only by the mask, reading 4), at any offset in a packed byte."""
    rng = np.random.default_rng(ambiguous_runs + 10 * scoring.end_to_end)
    length = 5_003
    text = rng.integers(0, 4, length).astype(np.uint8)
    starts = np.sort(rng.choice(np.arange(0, length - 20, 25), ambiguous_runs, replace=False)).astype(np.int64)
    runs = rng.integers(1, 20, ambiguous_runs).astype(np.int64)
    codes = text.copy()
    for start, run in zip(starts, runs):
        codes[start : start + run] = 4
    packed = PackedText(device, pack_2bit(text), length, starts, runs)  # stand-ins under the N runs
    count = 97
    window_lengths = rng.integers(0, 230, count).astype(np.int64)
    window_lengths[:3] = [0, 1, 229]
    window_starts = rng.integers(0, length - window_lengths + 1)
    window_starts[-1] = length - window_lengths[-1]  # the text's very end
    # The teams: one count of rows in the last tile (one build a window kind), teams of 3 to 10 tiles.
    read_lengths = rng.integers(1, 160, count) if kernel != "teams" else rng.choice([38, 134, 150], count)
    reads = [mutate(rng, codes[s : s + min(n, m)]) if n else rng.integers(0, 4, m).astype(np.uint8)
             for s, n, m in zip(window_starts, window_lengths, read_lengths)]
    read_lengths = np.array([len(r) for r in reads], dtype=np.int64)
    read_codes = np.concatenate(reads)
    read_offsets = np.cumsum(read_lengths) - read_lengths
    gathered = np.concatenate([codes[s : s + n] for s, n in zip(window_starts, window_lengths)])
    gathered_offsets = np.cumsum(window_lengths) - window_lengths
    pairs = (np.arange(count), np.arange(count))
    aligner = SmithWaterman(device, scoring, **KERNELS[kernel])
    as_bytes = (read_codes, read_offsets, read_lengths, gathered, gathered_offsets, window_lengths, *pairs)
    from_text = (read_codes, read_offsets, read_lengths, packed, window_starts, window_lengths, *pairs)
    assert_same(aligner.best(*from_text), aligner.best(*as_bytes), ("score", "read_end", "window_end"))
    assert_same(aligner.best(*from_text), reference.best(scoring, *as_bytes), ("score", "read_end", "window_end"))
    assert_same(aligner.traceback(*from_text), reference.traceback(scoring, *as_bytes), TRACE_NAMES)
    with pytest.raises(ValueError, match="past the end"):
        aligner.best(read_codes, read_offsets, read_lengths, packed, window_starts + 1_000, window_lengths, *pairs)


def test_twins_pair_equal_read_lengths():
    m = np.array([150, 150, 150, 100, 100, 7, 3, 3, 3, 3], dtype=np.int64)
    first, second = twins(m)
    assert first.tolist() == [0, 2, 3, 5, 6, 8]
    assert second.tolist() == [1, 2, 4, 5, 7, 9]
    assert all(len(array) == 0 for array in twins(np.zeros(0, np.int64)))
    rng = np.random.default_rng(5)
    for _ in range(20):
        m = np.sort(rng.integers(0, 4, int(rng.integers(1, 40))))[::-1]
        first, second = twins(m)
        assert np.array_equal(m[first], m[second])
        covered = np.sort(np.unique(np.r_[first, second]))
        assert np.array_equal(covered, np.arange(len(m)))  # every position once (or twinned with itself)
        assert len(first) == sum(-(-int(c) // 2) for c in np.unique(m, return_counts=True)[1])


@pytest.mark.parametrize("kernel", ["twins", "twins_portable", "teams", "teams_portable"])
@pytest.mark.parametrize("scoring", SCORINGS, ids=SCORING_IDS)
def test_twins_with_windows_of_other_lengths(device, scoring, kernel):
    """Reads of a few lengths (so most twins are two pairs) against windows of any length,
    empty ones and ones with N included, an odd count of pairs, and tandem repeats against
    tandem repeats (equal optima at many columns, in several tiles): the same as the reference,
    scores and (the teams) tracebacks."""
    rng = np.random.default_rng(17 + scoring.match)
    count = 301
    lengths = rng.choice(TEAM_LENGTHS if "teams" in kernel else [0, 1, 15, 16, 17, 100, 150], count)
    reads = [rng.integers(0, 4, size=int(length), dtype=np.uint8) for length in lengths]
    windows = []
    for read in reads:
        flank = int(rng.integers(0, 70))
        window = np.concatenate([rng.integers(0, 4, flank), mutate(rng, read), rng.integers(0, 4, int(rng.integers(0, 70)))])
        if rng.random() < 0.1:
            window = window[: int(rng.integers(0, len(window) + 1))]
        windows.append(window.astype(np.uint8))
    for read in reads[::7]:
        read[rng.random(len(read)) < 0.05] = 4
    for k in range(3, count, 5):  # pairs are drawn at random: about 12 tandem against tandem
        reads[k] = np.resize(np.array([0, 1], np.uint8), len(reads[k]))
        windows[k] = np.resize(np.array([1, 0], np.uint8), len(windows[k]))
    arrays = (*concatenate(reads), *concatenate(windows), rng.permutation(count).astype(np.uint32),
              rng.permutation(count).astype(np.uint32))
    aligner = SmithWaterman(device, scoring, **KERNELS[kernel])
    assert scoring.fits_packed_lanes(150, 400)
    assert_same(aligner.best(*arrays), reference.best(scoring, *arrays), ("score", "read_end", "window_end"))
    if kernel == "teams":  # and the traceback's teams (sw_traceback_teams), a pair a team
        traced = aligner.traceback(*arrays)
        assert_same(traced, reference.traceback(scoring, *arrays), TRACE_NAMES)
        check_invariants(scoring, arrays, traced)


def test_twins_fall_back_when_scores_do_not_fit_16_bit_lanes(device):
    scoring = Scoring(match=200, mismatch=300, gap_open=500, gap_extend=100)
    assert not scoring.fits_packed_lanes(200, 300)
    assert not Scoring(mismatch=200).fits_packed_lanes(150, 300)  # -200 + 7 is no signed byte
    arrays = make_pairs(np.random.default_rng(9), 17, 200, 50)
    aligner = SmithWaterman(device, scoring, packed_scores=True)
    assert_same(aligner.best(*arrays), reference.best(scoring, *arrays), ("score", "read_end", "window_end"))


def test_teams_calls_leave_numpy_ma_unimported(device):
    """On NumPy 2.3+ a plain ``np.unique`` imports numpy.ma (62 ms a process on the H200, in the
    first chunk of each of 15 host workers): the teams' calls group reads without it."""
    import subprocess
    import sys

    probe = (
        "import sys, numpy as np\n"
        "from bowmap.runtime.devices import open_devices\n"
        "from bowmap.align.extend.smith_waterman import Scoring, SmithWaterman\n"
        "aligner = SmithWaterman(open_devices(sys.argv[1])[0], Scoring(), teams=True)\n"
        "codes = np.array([0, 1, 2, 3], np.uint8)\n"
        "arrays = (codes, [0, 1], [1, 1], codes, [0, 2], [2, 2], [0, 1], [0, 1])\n"
        "aligner.best(*arrays); aligner.traceback(*arrays)\n"
        "print('numpy.ma' in sys.modules)\n"
    )
    spec = str(device.info.index)
    done = subprocess.run([sys.executable, "-c", probe, spec], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
