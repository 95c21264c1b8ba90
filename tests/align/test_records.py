"""Records beyond the primary (bowmap/align/extend/records.py): XA, secondary, supplementary and SA, on
hand-made reads whose right answer is known: a repeat, chimeras across contigs and strands, a
read spanning the end of one contig and the start of the next."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pysam
import pytest

from bowmap.align.extend import records
from bowmap.align.extend.extender import SAME_ALIGNMENT_BASES, Places
from bowmap.align.seed.filter import Windows
from bowmap.cli import main
from bowmap.runtime.arrays import run_ranks
from tests.conftest import codes_to_text, write_fasta

COMPLEMENT = str.maketrans("ACGT", "TGCA")


def reverse_complement(text: str) -> str:
    return text.translate(COMPLEMENT)[::-1]


# ------------------------------------------------------------------------ the pieces, alone


def test_forward_interval_and_overlap_follow_bwa():
    start, end = records.forward_interval(np.array([0, 10]), np.array([90, 60]), np.array([False, True]), np.array([150, 150]))
    assert start.tolist() == [0, 90] and end.tolist() == [90, 140]
    # Overlap: at least half of the shorter interval shared (bwa's mask_level 0.5).
    assert records.overlapping(np.array([0, 0, 0]), np.array([100, 100, 100]), np.array([50, 75, 76]), np.array([100, 125, 150])).tolist() == [True, True, False]


def test_ranks_count_within_runs():
    assert run_ranks(np.array([0, 0, 0, 2, 5, 5])).tolist() == [0, 1, 2, 0, 0, 1]
    assert run_ranks(np.zeros(0, dtype=np.int64)).tolist() == []


def plain_same(reverse, read_end, text_end, score, a, b, match=1):
    """extender.Places.same of two windows' estimated places, one pair at a time."""
    def interval(w):
        span = min(max(int(score[w]) // match, 1), max(int(read_end[w]), 1))
        return int(read_end[w]) - span, int(read_end[w]), int(text_end[w]) - span, int(text_end[w])

    (read_a, read_a_end, text_a, text_a_end), (read_b, read_b_end, text_b, text_b_end) = interval(a), interval(b)

    def shares_most(s1, e1, s2, e2):
        return min(e1, e2) - max(s1, s2) > 0.5 * min(e1 - s1, e2 - s2)

    shift = min(abs(text_a - text_b), abs(text_a_end - text_b_end), abs((text_a_end - read_a_end) - (text_b_end - read_b_end)))
    return (reverse[a] == reverse[b] and shift <= SAME_ALIGNMENT_BASES and shares_most(read_a, read_a_end, read_b, read_b_end)
            and shares_most(text_a, text_a_end, text_b, text_b_end))


def plain_candidates(read, reverse, start, end_in_window, score, chosen, reportable, read_end):
    """A loop over reads of what records.candidates computes, for the test."""
    out = []
    text_end = start + end_in_window

    def same(a, b):
        return plain_same(reverse, read_end, text_end, score, a, b)

    for r in sorted(set(read.tolist())):
        p = chosen[r]
        if p < 0:
            continue
        mine = [w for w in range(len(read)) if read[w] == r and w != p and reportable[w] and not same(w, p)]
        mine.sort(key=lambda w: (reverse[w], text_end[w]))
        clusters = []
        for w in mine:
            if clusters and same(clusters[-1][-1], w):
                clusters[-1].append(w)
            else:
                clusters.append([w])
        leaders = [min(c, key=lambda w: (-score[w], start[w], reverse[w])) for c in clusters]
        out += sorted(leaders, key=lambda w: (-score[w], start[w], reverse[w]))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_candidates_equal_a_plain_loop(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 60))
    read = np.sort(rng.integers(0, 7, size=n))
    reverse = rng.random(n) < 0.5
    start = rng.integers(0, 300, size=n)
    window_end = rng.integers(1, 60, size=n).astype(np.int32)
    score = rng.integers(-5, 40, size=n)
    chosen = np.full(7, -1)
    for r in range(7):
        mine = np.flatnonzero(read == r)
        if len(mine) and rng.random() < 0.8:
            chosen[r] = rng.choice(mine)
    reportable = rng.random(n) < 0.8
    read_end = rng.integers(20, 60, size=n)
    windows = Windows(read, reverse, start, start + 100, np.ones(n, dtype=np.int64))
    scored = SimpleNamespace(windows=windows, score=score, text_end=lambda: start + window_end,
                             places=lambda: Places.estimated(reverse, score, read_end, start + window_end, 1))
    got = records.candidates(scored, chosen, reportable)
    assert got.tolist() == plain_candidates(read, reverse, start, window_end, score, chosen, reportable, read_end)


@pytest.mark.parametrize("seed", range(4))
def test_new_windows_leaves_out_exactly_the_windows_a_read_has(seed):
    """extend.new_windows against a set of tuples, with reads and text positions far past what
    packed int64 keys held (a large chunk of a human-size genome), and duplicates in both."""
    from bowmap.align.extend.extender import new_windows

    rng = np.random.default_rng(seed)

    def made(n, reads):
        read = np.sort(rng.choice(reads, size=n))
        start = rng.integers(0, 3, size=n) + 3_000_000_000
        return Windows(read, rng.random(n) < 0.5, start, start + rng.integers(150, 153, size=n), rng.integers(1, 5, size=n))

    reads = rng.integers(0, 2_000_000, size=40)
    old, extra = made(int(rng.integers(0, 200)), reads), made(int(rng.integers(0, 200)), reads)
    rescued = np.zeros(2_000_000, dtype=bool)
    rescued[rng.choice(reads, size=30)] = True
    extra = Windows(*(getattr(extra, name)[rescued[extra.read]] for name in Windows.FIELDS))
    index = SimpleNamespace(total_length=3_100_000_000)
    got = new_windows(old, extra, rescued, index)
    have = {(r, v, a, b) for r, v, a, b in zip(old.read, old.reverse, old.start, old.end) if rescued[r]}
    expected = [i for i, key in enumerate(zip(extra.read, extra.reverse, extra.start, extra.end)) if key not in have]
    assert [tuple(getattr(got, name)) for name in Windows.FIELDS] == [tuple(getattr(extra, name)[expected]) for name in Windows.FIELDS]


# ------------------------------------------------------------------------ whole runs


@pytest.fixture(scope="module")
def genome(tmp_path_factory):
    """Two contigs of random bases; contig A holds a 400-base segment twice (exact copies)."""
    rng = np.random.default_rng(11)
    a = codes_to_text(rng.integers(0, 4, size=6000, dtype=np.uint8))
    b = codes_to_text(rng.integers(0, 4, size=5000, dtype=np.uint8))
    segment = a[1000:1400]
    a = a[:4000] + segment + a[4400:]  # a second copy at 4000
    folder = tmp_path_factory.mktemp("records")
    reference = write_fasta(folder / "ref.fa", [("chrA", a), ("chrB", b)])
    assert main(["-q", "index", reference, str(folder / "ref")]) == 0
    return SimpleNamespace(a=a, b=b, prefix=folder / "ref", folder=folder)


def reads_file(path, reads: dict[str, str]) -> str:
    with open(path, "w") as handle:
        for name, sequence in reads.items():
            quality = "".join(chr(33 + 2 + (i * 7) % 39) for i in range(len(sequence)))  # unlike when reversed
            handle.write(f"@{name}\n{sequence}\n+\n{quality}\n")
    return str(path)


def chimera(left: str, start: int, length: int, right: str, right_start: int, right_length: int, reverse_right: bool) -> tuple[str, int, int]:
    """left[start:][:length] then right[right_start:][:right_length] (reverse-complemented with
    ``reverse_right``), both starts moved on until neither part's alignment can run on into the
    other (three bases past the junction differ from each side's own continuation): the read
    and the two starts."""
    for shift in range(200):
        first, second = start + shift, right_start + shift
        head = left[first : first + length]
        tail = right[second : second + right_length]
        before_tail = right[second - 3 : second] if not reverse_right else reverse_complement(right[second + right_length : second + right_length + 3])
        tail = reverse_complement(tail) if reverse_right else tail
        after_head = left[first + length : first + length + 3]
        if all(x != y for x, y in zip(tail[:3], after_head)) and all(x != y for x, y in zip(head[-3:], before_tail)):
            return head + tail, first, second
    raise AssertionError("no clean junction")


@pytest.fixture(scope="module")
def made_reads(genome):
    a, b = genome.a, genome.b
    split, a_start, b_start = chimera(a, 2000, 90, b, 3000, 60, True)  # 90 bases of A, 60 of B reversed
    turned, b_start2, a_start2 = chimera(b, 500, 100, a, 5000, 50, False)
    genome.starts = {"chimera": (a_start, b_start), "reversed_chimera": (b_start2, a_start2)}
    return {
        "unique": a[200:350],
        "repeat": a[1100:1250],  # also at 4100
        "chimera": split,
        "across": a[-100:] + b[:50],  # the end of chrA, then the start of chrB
        "reversed_chimera": reverse_complement(turned),
    }


def align(genome, reads, tmp_path, *options) -> dict[str, list]:
    out = tmp_path / "out.sam"
    assert main(["-q", "align", str(genome.prefix), reads_file(tmp_path / "reads.fq", reads), "-o", str(out), "--devices", "cpu", *map(str, options)]) == 0
    by_name: dict[str, list] = {}
    with pysam.AlignmentFile(str(out)) as sam:
        for record in sam:
            by_name.setdefault(record.query_name, []).append(record)
    return by_name


def sa_entry(record) -> str:
    return f"{record.reference_name},{record.reference_start + 1},{'-' if record.is_reverse else '+'},{record.cigarstring},{record.mapping_quality},{record.get_tag('NM')};"


def test_split_reads_get_a_supplementary_record_and_sa_on_both(genome, made_reads, tmp_path):
    out = align(genome, made_reads, tmp_path)
    assert all(sum(not (r.is_secondary or r.is_supplementary) for r in rows) == 1 for rows in out.values())  # one primary a read
    (a_start, b_start), (b_start2, a_start2) = genome.starts["chimera"], genome.starts["reversed_chimera"]
    cases = {  # name: (primary contig, start, strand, CIGAR; supplementary contig, start, strand, CIGAR)
        "chimera": ("chrA", a_start, False, "90M60S", "chrB", b_start, True, "60M90S"),  # SEQ reversed on the reverse strand
        "across": ("chrA", len(genome.a) - 100, False, "100M50S", "chrB", 0, False, "100S50M"),
        "reversed_chimera": ("chrB", b_start2, True, "100M50S", "chrA", a_start2, True, "100S50M"),
    }
    for name, (contig, start, reverse, cigar, other_contig, other_start, other_reverse, other_cigar) in cases.items():
        primary, supplementary = out[name]
        assert (primary.reference_name, primary.reference_start, primary.is_reverse, primary.cigarstring) == (contig, start, reverse, cigar), name
        assert supplementary.is_supplementary and not supplementary.is_secondary
        assert (supplementary.reference_name, supplementary.reference_start, supplementary.is_reverse, supplementary.cigarstring) == (
            other_contig, other_start, other_reverse, other_cigar), name
        assert primary.get_tag("SA") == sa_entry(supplementary) and supplementary.get_tag("SA") == sa_entry(primary)
        assert supplementary.mapping_quality <= primary.mapping_quality
        flipped = primary.is_reverse != supplementary.is_reverse
        assert supplementary.query_sequence == (reverse_complement(primary.query_sequence) if flipped else primary.query_sequence)  # soft-clipped: all of it
    for name in ("unique", "repeat"):
        assert len(out[name]) == 1 and not out[name][0].has_tag("SA")


def test_a_repeat_lists_its_other_copy_in_xa(genome, made_reads, tmp_path):
    out = align(genome, made_reads, tmp_path)
    (repeat,) = out["repeat"]
    assert repeat.mapping_quality == 0 and repeat.get_tag("XS") == repeat.get_tag("AS") == 150
    places = {1100, 4100}
    assert repeat.reference_start in places
    other = (places - {repeat.reference_start}).pop()
    assert repeat.get_tag("XA") == f"chrA,+{other + 1},150M,0;"
    assert not out["unique"][0].has_tag("XA") and out["unique"][0].get_tag("XS") == 0
    assert not out["chimera"][0].has_tag("XA")  # the other part of a split read is no alternative
    assert out["chimera"][0].mapping_quality == 60  # nor a rival: the primary keeps its MAPQ


def test_xa_is_all_or_none_and_secondary_records_replace_it(genome, made_reads, tmp_path):
    assert not align(genome, made_reads, tmp_path, "--max-alternatives", "0")["repeat"][0].has_tag("XA")
    out = align(genome, made_reads, tmp_path, "--secondary", "3")
    primary, secondary = out["repeat"]
    assert not primary.has_tag("XA") and secondary.is_secondary and secondary.mapping_quality == 0
    assert secondary.query_sequence is None and not secondary.has_tag("XS")  # SEQ and QUAL '*', as bwa -a
    assert {primary.reference_start, secondary.reference_start} == {1100, 4100}
    assert secondary.cigarstring == "150M" and secondary.get_tag("NM") == 0 and secondary.get_tag("AS") == 150


def test_split_as_secondary_and_no_supplementary(genome, made_reads, tmp_path):
    marked = align(genome, made_reads, tmp_path, "-M")["chimera"]
    assert [r.flag for r in marked] == [0, 256 + 16] and marked[1].has_tag("SA") and marked[1].mapping_quality > 0
    assert marked[1].query_sequence is not None  # a split part keeps SEQ, as bwa -M
    plain = align(genome, made_reads, tmp_path, "--no-supplementary")
    assert all(len(rows) == 1 and not rows[0].has_tag("SA") for rows in plain.values())


def test_a_repeat_primary_keeps_its_rival_without_supplementary_records(genome, tmp_path):
    """80 bases of the twice-copied segment + 70 of chrB: the primary's equal copy is its rival
    (MAPQ 0, XS its score less the clip penalty) whether the clipped part is written as a supplementary record or not
    (with --no-supplementary the rival was once lost with the split candidates)."""
    split, _, _ = chimera(genome.a, 1100, 80, genome.b, 3000, 70, False)
    for options in ([], ["--no-supplementary"], ["--no-supplementary", "--secondary", "3"], ["--max-alternatives", "0"]):
        primary = align(genome, {"split": split}, tmp_path, *options)["split"][0]
        assert primary.mapping_quality == 0 and primary.get_tag("XS") == primary.get_tag("AS") - 5, options


def test_records_are_the_same_whatever_the_chunks_and_processes(genome, made_reads, tmp_path):
    many = {f"{name}.{copy}": sequence for copy in range(30) for name, sequence in made_reads.items()}
    reads = reads_file(tmp_path / "many.fq", many)
    texts = []
    for options in ([], ["--chunk-bases", "700"], ["--serial"], ["-p", "2", "--chunk-bases", "2000"]):
        out = tmp_path / "many.sam"
        assert main(["-q", "align", str(genome.prefix), reads, "-o", str(out), "--devices", "cpu", *options]) == 0
        texts.append("".join(line for line in out.read_text().splitlines(True) if not line.startswith("@PG")))
    assert all(text == texts[0] for text in texts[1:])
    assert texts[0].count("SA:Z:") == 6 * 30 and texts[0].count("XA:Z:") == 30
    pysam.sort("-o", str(tmp_path / "many.bam"), str(tmp_path / "many.sam"))
    pysam.index(str(tmp_path / "many.bam"))
    flagstat = pysam.flagstat(str(tmp_path / "many.bam"))
    assert "90 + 0 supplementary" in flagstat and "150 + 0 primary" in flagstat


def test_hard_clipped_supplementary_records_keep_only_their_aligned_part(genome, made_reads, tmp_path):
    soft = align(genome, made_reads, tmp_path)
    hard = align(genome, made_reads, tmp_path, "--hard-clip-supplementary")
    for name in ("chimera", "across", "reversed_chimera"):
        (soft_primary, soft_part), (hard_primary, hard_part) = soft[name], hard[name]
        assert hard_primary.to_string() == soft_primary.to_string()  # the primary stays soft-clipped
        assert hard_part.cigarstring == soft_part.cigarstring.replace("S", "H")
        assert hard_part.query_sequence == soft_part.query_alignment_sequence
        assert list(hard_part.query_qualities) == list(soft_part.query_alignment_qualities)
        assert hard_part.get_tag("SA") == soft_part.get_tag("SA") and "H" not in hard_primary.get_tag("SA")


def test_a_split_read_whose_longer_part_is_a_repeat_finds_its_other_part(tmp_path):
    """90 bases from a segment copied 24 times, 60 unique bases from elsewhere: the repeat's
    copies fill the read's windows (windows_per_read), so the 60-base part's place is found by
    seeding that part on its own (records.with_part_windows)."""
    rng = np.random.default_rng(4)
    segment = codes_to_text(rng.integers(0, 4, size=300, dtype=np.uint8))
    pieces = []
    for _ in range(24):
        pieces += [codes_to_text(rng.integers(0, 4, size=400, dtype=np.uint8)), segment]
    a = "".join(pieces)
    b = codes_to_text(rng.integers(0, 4, size=3000, dtype=np.uint8))
    reference = write_fasta(tmp_path / "ref.fa", [("chrA", a), ("chrB", b)])
    assert main(["-q", "index", reference, str(tmp_path / "ref")]) == 0
    genome = SimpleNamespace(prefix=tmp_path / "ref")
    split, _, b_start = chimera(a, a.index(segment) + 100, 90, b, 1500, 60, False)
    out = align(genome, {"split": split}, tmp_path)
    primary, supplementary = out["split"]
    assert primary.cigarstring == "90M60S" and primary.mapping_quality == 0
    assert supplementary.is_supplementary and supplementary.reference_name == "chrB"
    assert (supplementary.reference_start, supplementary.cigarstring) == (b_start, "90S60M")


def test_a_split_mate_gets_its_supplementary_with_the_pair_fields(genome, tmp_path):
    """Pairs: R1 a chimera (90 bases of chrA, 60 of chrB reversed), R2 from chrA 300 bases on,
    reverse strand: R1's primary pairs with R2, its supplementary carries SA and the pair's
    fields from R2's primary (as bwa mem writes it); samtools takes the file whole."""
    a = genome.a
    split, a_start, b_start = chimera(a, 2000, 90, genome.b, 3000, 60, True)
    second = reverse_complement(a[a_start + 250 : a_start + 400])
    for mate, sequence in ((1, split), (2, second)):
        reads_file(tmp_path / f"r{mate}.fq", {f"pair/{mate}": sequence})
    out = tmp_path / "out.sam"
    assert main(["-q", "align", str(genome.prefix), str(tmp_path / "r1.fq"), str(tmp_path / "r2.fq"), "-o", str(out), "--devices", "cpu",
                 "--insert-size", "400,50"]) == 0
    primary, supplementary, mate = pysam.AlignmentFile(str(out))
    assert (primary.is_read1, supplementary.is_read1, mate.is_read2) == (True, True, True)
    assert primary.cigarstring == "90M60S" and primary.reference_start == a_start and primary.is_proper_pair
    assert supplementary.is_supplementary and supplementary.reference_name == "chrB" and supplementary.reference_start == b_start
    assert primary.get_tag("SA") == sa_entry(supplementary) and supplementary.get_tag("SA") == sa_entry(primary)
    assert mate.reference_start == a_start + 250 and mate.is_reverse and not mate.is_supplementary
    for record in (primary, supplementary):  # the mate's place, strand, CIGAR and MAPQ
        assert (record.next_reference_name, record.next_reference_start, record.mate_is_reverse) == ("chrA", mate.reference_start, True)
        assert record.get_tag("MC") == mate.cigarstring and record.get_tag("MQ") == mate.mapping_quality
    assert (mate.next_reference_start, mate.template_length) == (a_start, -400) and primary.template_length == 400
    assert supplementary.template_length == 0  # on another contig than its mate
    pysam.quickcheck(str(out))
    assert pysam.flagstat(str(out)).splitlines()[0].startswith("3 + 0 in total")
    fixed, ordered = tmp_path / "fixed.bam", tmp_path / "sorted.bam"
    pysam.fixmate("-m", str(out), str(fixed))
    pysam.sort("-o", str(ordered), str(fixed))
    pysam.markdup(str(ordered), str(tmp_path / "marked.bam"))


def test_pairs_with_split_mates_give_the_same_sam_whatever_the_batches_chunks_and_threads(genome, tmp_path, monkeypatch):
    """Pairs whose R1 is split (supplementary rows between the mates' primaries), some with R2
    unmapped: the same bytes with tiny text batches, small chunks and several threads."""
    rng = np.random.default_rng(9)
    a, b = genome.a, genome.b
    first, second = {}, {}
    for k in range(24):
        start = int(rng.integers(200, 3500))
        split, a_start, _ = chimera(a, start, 90, b, int(rng.integers(100, 4500)), 60, bool(k % 2))
        first[f"p{k}/1"] = split
        second[f"p{k}/2"] = reverse_complement(a[a_start + 250 : a_start + 400]) if k % 3 else codes_to_text(rng.integers(0, 4, 150, dtype=np.uint8))
    r1, r2 = reads_file(tmp_path / "r1.fq", first), reads_file(tmp_path / "r2.fq", second)

    def run(name, *options):
        out = tmp_path / name
        assert main(["-q", "align", str(genome.prefix), r1, r2, "-o", str(out), "--devices", "cpu", "--insert-size", "400,50", *options]) == 0
        return b"".join(line for line in out.read_bytes().splitlines(keepends=True) if not line.startswith(b"@PG"))

    expected = run("plain.sam")
    body = [line for line in expected.split(b"\n") if line and not line.startswith(b"@")]
    assert sum(int(line.split(b"\t")[1]) & 0x800 > 0 for line in body) >= 20  # split mates, most of them
    assert run("chunks.sam", "--chunk-bases", "1000", "--queues-per-device", "2") == expected
    monkeypatch.setattr("bowmap.align.output.sam._BATCH_BYTES", 3000)  # a pair or two a batch
    assert run("batches.sam") == expected
    assert run("unal.sam", "--no-unal").count(b"\n") <= expected.count(b"\n")
