"""Issue 28: an alignment is never its own rival. Hand-made windows, scored by the real
Smith-Waterman kernels on PoCL, give a read two copies of one place (a clipped and an unclipped
copy, a read seeded twice by two clipped windows, a rescue window over a seed window): one
alignment there, XS from elsewhere, no XA entry at the primary's place; a read in a
microsatellite keeps its tandem-capped MAPQ.

Genome coordinates: 0-based text positions (one contig, so positions on it too)."""

from __future__ import annotations

import numpy as np

from bowmap.align.extend.mapq import NO_SCORE

READ = 150
PLACE = 7_000  # the read's own place
ELSEWHERE = 15_000  # a copy of it with EXTRA more differences
EXTRA = (30, 45, 60, 75, 90, 105)  # differences of that copy (read bases, away from the ends)
READ_ERROR = 140  # the read's one sequencing error


def made_genome(seed=3, length=30_000):
    rng = np.random.default_rng(seed)
    genome = rng.integers(0, 4, length).astype(np.uint8)
    copy = genome[PLACE : PLACE + READ].copy()
    copy[list(EXTRA)] = (copy[list(EXTRA)] + 2) % 4
    genome[ELSEWHERE : ELSEWHERE + READ] = copy
    return genome


def worker_for(tmp_path, device, genome, **options):
    from conftest import build_test_index, codes_to_text

    from bowmap.align.options import AlignOptions
    from bowmap.align.output.reference import ReferenceText
    from bowmap.align.extend.smith_waterman import Scoring
    from bowmap.align.workers import device_workers

    index = build_test_index(tmp_path, [("chr", codes_to_text(genome))], max_read_length=READ)
    options = AlignOptions(index=str(tmp_path / "ref"), reads="-", **options)
    scoring = Scoring()
    worker = device_workers(index, ReferenceText.from_index(index), device, 1, options, scoring)[0]
    return index, worker, options, scoring


def chunk_of(reads, paired=False, model=None):
    from bowmap.align.reads import ReadChunk

    codes = np.concatenate(reads).astype(np.uint8)
    offsets = np.concatenate(([0], np.cumsum([len(read) for read in reads])))
    names = np.frombuffer(b"".join(f"r{i // (2 if paired else 1)}".encode() for i in range(len(reads))), np.uint8)
    name_lengths = [len(f"r{i // (2 if paired else 1)}") for i in range(len(reads))]
    return ReadChunk(0, 0, names, np.concatenate(([0], np.cumsum(name_lengths))), codes, offsets, None, paired=paired, insert_model=model)


def windows_of(rows):
    """Windows from (read, reverse, start, end) rows."""
    from bowmap.align.seed.filter import Windows

    read, reverse, start, end = (np.array(column) for column in zip(*rows))
    return Windows(read.astype(np.int64), reverse.astype(bool), start.astype(np.int64), end.astype(np.int64), np.ones(len(rows), dtype=np.int64))


def the_read(genome):
    read = genome[PLACE : PLACE + READ].copy()
    read[READ_ERROR] = (read[READ_ERROR] + 1) % 4
    return read


def elsewhere_score(scoring) -> int:
    """The copy elsewhere, end to end: the read's error and EXTRA more mismatches."""
    mismatches = 1 + len(EXTRA)
    return (READ - mismatches) * scoring.match - mismatches * scoring.mismatch


def single(tmp_path, device, genome, read, rows):
    from bowmap.align.extend.stage import extend_chunk

    index, worker, options, scoring = worker_for(tmp_path, device, genome)
    alignments = extend_chunk(worker.device_text, index, worker.smith_waterman, chunk_of([read]), windows_of(rows), scoring, options)
    return alignments, scoring


def primary_of(alignments, read=0):
    row = np.flatnonzero(alignments.primary_rows() & (alignments.read_index == read))[0] if alignments.read_index is not None else read
    return row


def xa_places(alignments, read=0):
    others = alignments.alternatives
    if others is None:
        return []
    return [(int(p), bool(r)) for p, r, i in zip(others.position, others.reverse, others.read_index) if i == read]


def assert_one_place(alignments, scoring, expected_start=PLACE, read=0):
    row = primary_of(alignments, read)
    assert alignments.mapped[row]
    assert abs(int(alignments.position[row]) - expected_start) <= 30
    assert int(alignments.second_score[row]) == elsewhere_score(scoring)  # XS: the copy elsewhere
    # No XA entry (and no other row) at the primary's place.
    assert all(abs(position - PLACE) > 2 * READ for position, _ in xa_places(alignments, read))
    assert int(alignments.mapq[row]) > 0


def test_a_clipped_and_an_unclipped_copy_at_one_start_are_one_alignment(tmp_path, device):
    """Windows at one start: one holds the whole read (150M), one ends 25 bases early (its
    alignment 125M25S, ending 25 bases before the other: beyond today's 16-base rule)."""
    genome = made_genome()
    rows = [(0, False, PLACE - 10, PLACE + READ + 10), (0, False, PLACE - 10, PLACE + READ - 25), (0, False, ELSEWHERE - 10, ELSEWHERE + READ + 10)]
    alignments, scoring = single(tmp_path, device, genome, the_read(genome), rows)
    assert_one_place(alignments, scoring)
    row = primary_of(alignments)
    assert int(alignments.score[row]) == (READ - 1) * scoring.match - scoring.mismatch  # the unclipped copy won


def test_a_read_seeded_twice_at_its_place_is_one_alignment(tmp_path, device):
    """Two seed windows at the read's place, neither holding all of it: one cut 25 bases before
    its end, one 25 bases after its start (alignments 125M25S and 25S125M)."""
    genome = made_genome()
    rows = [(0, False, PLACE - 10, PLACE + READ - 25), (0, False, PLACE + 25, PLACE + READ + 10), (0, False, ELSEWHERE - 10, ELSEWHERE + READ + 10)]
    alignments, scoring = single(tmp_path, device, genome, the_read(genome), rows)
    assert_one_place(alignments, scoring, expected_start=PLACE + 12)


def test_a_pair_whose_rescue_window_covers_the_mates_own_window(tmp_path, device):
    """Pairs of a forward mate and a reverse mate 400 bases apart; the reverse mate has its seed
    window and a rescue window (the model's span around its mate, RESCUE_MARGIN more) holding
    the same alignment, and a copy elsewhere. Both windows score alike, so which one the pair
    takes is the pairs' tie-breakers' choice: eight pairs make sure one takes the rescue window
    (before the fix, such a mate's XS was its own AS and its pair's second best its copy). Each
    mate: one alignment at its place, XS from the copy elsewhere, no XA entry at its place, and
    the pair's MAPQ (no second pair made of the copy)."""
    from bowmap.align.extend.extender import Extender
    from bowmap.align.extend.pairs import RESCUE_MARGIN, choose_pairs, parse_insert_size
    from bowmap.align.extend.records import chunk_alignments

    rng = np.random.default_rng(8)
    genome = rng.integers(0, 4, 60_000).astype(np.uint8)
    pairs, fragment, reads, rows, starts = 8, 400, [], [], []
    model = parse_insert_size("400,40")
    for pair in range(pairs):
        start = 2_000 + 3_000 * pair
        starts.append(start)
        mate_start = start + fragment - READ
        copy_at = 30_000 + 3_000 * pair  # the reverse mate's copy elsewhere, EXTRA differences
        copy = genome[mate_start : mate_start + READ].copy()
        copy[list(EXTRA)] = (copy[list(EXTRA)] + 2) % 4
        genome[copy_at : copy_at + READ] = copy
        first = genome[start : start + READ].copy()
        second = (3 - genome[mate_start : mate_start + READ])[::-1].copy()  # reverse complement
        second[READ - 1 - READ_ERROR] = (second[READ - 1 - READ_ERROR] + 1) % 4
        reads += [first, second]
        read = 2 * pair
        rows += [
            (read, False, start - 10, start + READ + 10),
            (read + 1, True, mate_start - 10, mate_start + READ + 10),  # its seed window
            (read + 1, True, start + model.low - READ - RESCUE_MARGIN, start + model.high + RESCUE_MARGIN),  # the rescue window
            (read + 1, True, copy_at - 10, copy_at + READ + 10),
        ]
    index, worker, options, scoring = worker_for(tmp_path, device, genome)
    chunk = chunk_of(reads, paired=True, model=model)
    extender = Extender(worker.device_text, index, worker.smith_waterman, chunk, scoring, options)
    scored = extender.scored(windows_of(rows))
    scored, choice = choose_pairs(scored, extender, model)
    alignments = chunk_alignments(extender, scored, choice.window, choice.score, choice.second, scored.suboptimal, choice.mapq, choice.proper)
    taken = choice.window[1::2]
    rescue_window = scored.windows.end[taken] - scored.windows.start[taken] > READ + 20
    assert rescue_window.any()  # some pair took the rescue window's copy
    for pair in range(pairs):
        first, second = primary_of(alignments, 2 * pair), primary_of(alignments, 2 * pair + 1)
        assert alignments.proper[first] and alignments.proper[second]
        assert int(alignments.position[first]) == starts[pair] and int(alignments.position[second]) == starts[pair] + fragment - READ
        assert int(alignments.second_score[second]) == elsewhere_score(scoring)  # not AS: the copy elsewhere
        assert int(alignments.second_score[first]) == NO_SCORE
        assert xa_places(alignments, 2 * pair + 1) == [] or all(abs(p - starts[pair]) > fragment for p, _ in xa_places(alignments, 2 * pair + 1))
        assert int(alignments.mapq[first]) == 60 and int(alignments.mapq[second]) == 60


def test_a_read_in_a_microsatellite_keeps_its_tandem_capped_mapq(tmp_path, device):
    """A read whose last 110 bases lie in a (CA)n array, unique bases before: its alignment
    holds about as well one unit along the array (the tandem score), which caps its MAPQ. A
    clipped copy at its start (the window cut 30 bases early) changes nothing: the MAPQ is the
    one the read gets from its unclipped window alone, the tandem-capped one, neither 0 (the
    copy as a rival) nor more."""
    genome = made_genome()
    array = np.tile(np.array([1, 0], dtype=np.uint8), 150)  # CACA...
    genome[PLACE + 40 : PLACE + 40 + len(array)] = array
    read = genome[PLACE : PLACE + READ].copy()
    whole = [(0, False, PLACE - 10, PLACE + READ + 10)]
    clipped = [(0, False, PLACE - 10, PLACE + READ - 30)]
    (tmp_path / "alone").mkdir(), (tmp_path / "both").mkdir()
    alone, scoring = single(tmp_path / "alone", device, genome, read, whole)
    both, _ = single(tmp_path / "both", device, genome, read, whole + clipped)
    row = primary_of(alone)
    assert alone.mapped[row] and int(alone.position[row]) == PLACE
    assert 0 < int(alone.mapq[row]) < 60  # the tandem cap bites
    assert int(both.mapq[primary_of(both)]) == int(alone.mapq[row])
    assert int(both.second_score[primary_of(both)]) == NO_SCORE and xa_places(both) == []


def paired_run(tmp_path, device, genome, reads, rows, model):
    from bowmap.align.extend.extender import Extender
    from bowmap.align.extend.pairs import choose_pairs
    from bowmap.align.extend.records import chunk_alignments

    index, worker, options, scoring = worker_for(tmp_path, device, genome)
    extender = Extender(worker.device_text, index, worker.smith_waterman, chunk_of(reads, paired=True, model=model), scoring, options)
    scored, choice = choose_pairs(extender.scored(windows_of(rows)), extender, model)
    return chunk_alignments(extender, scored, choice.window, choice.score, choice.second, scored.suboptimal, choice.mapq, choice.proper)


def test_a_pair_in_a_two_copy_duplication_is_lifted_by_its_pair(tmp_path, device):
    """Item 3: both mates lie in segments copied once elsewhere (one difference each, so each
    mate's copy scores a mismatch below it), the copies far apart: the pair is unique though
    neither mate is. Its mates get the pair's lift (bwa mem: MAPQ 58 here), not their own
    MAPQ (about 18) as when every mate with a near rival counted as a family's."""
    from bowmap.align.extend.pairs import parse_insert_size

    rng = np.random.default_rng(12)
    genome = rng.integers(0, 4, 60_000).astype(np.uint8)
    start, fragment = 2_000, 400
    mate_start = start + fragment - READ
    for source, target in ((start, 30_000), (mate_start, 45_000)):
        copy = genome[source : source + READ].copy()
        copy[70] = (copy[70] + 1) % 4
        genome[target : target + READ] = copy
    first = genome[start : start + READ].copy()
    second = (3 - genome[mate_start : mate_start + READ])[::-1].copy()
    rows = [(0, False, start - 10, start + READ + 10), (0, False, 30_000 - 10, 30_000 + READ + 10),
            (1, True, mate_start - 10, mate_start + READ + 10), (1, True, 45_000 - 10, 45_000 + READ + 10)]
    alignments = paired_run(tmp_path, device, genome, [first, second], rows, parse_insert_size("400,40"))
    for read, place in ((0, start), (1, mate_start)):
        row = primary_of(alignments, read)
        assert alignments.proper[row] and int(alignments.position[row]) == place
        assert int(alignments.second_score[row]) == int(alignments.score[row]) - 5  # the copy: one mismatch less
        assert int(alignments.mapq[row]) >= 40
