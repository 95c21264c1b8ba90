"""Tandem scores (bowmap/align/extend/tandem.py) against a plain loop, and MAPQ of reads in
microsatellites and homopolymers on a hand-made genome."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pysam
import pytest

from bowmap.align.extend import tandem
from bowmap.align.extend.mapq import NO_SCORE, mapping_quality
from bowmap.align.output.reference import ReferenceText
from bowmap.cli import main
from tests.conftest import codes_to_text, write_fasta


def plain_tandem(read, text, contig_start, contig_end, text_end, read_end, match=1, mismatch=4):
    """tandem_scores for one read, base by base (read: its codes on the aligned strand)."""
    if read_end < tandem.SAMPLE:
        return NO_SCORE
    sample = [int(code) % 4 for code in read[read_end - tandem.SAMPLE : read_end]]  # an N compares as A
    if not any(sum(sample[j] == sample[j - p] for j in range(p, tandem.SAMPLE)) >= tandem.SAMPLE - p - tandem.SAMPLE_MISMATCHES
               for p in range(1, tandem.MAX_PERIOD + 1)):
        return NO_SCORE
    diagonal = text_end - read_end
    best = 0
    for shift in [*range(-tandem.MAX_PERIOD, 0), *range(1, tandem.MAX_PERIOD + 1)]:
        run = 0
        for j, base in enumerate(read):
            place = diagonal + shift + j
            same = contig_start <= place < contig_end and base < 4 and text[place] == base
            run = max(run + (match if same else -mismatch), 0)
            best = max(best, run)
    return best


def periodic_read(rng, length, unit_length, error_rate):
    unit = rng.integers(0, 4, size=unit_length, dtype=np.uint8)
    read = np.resize(np.roll(unit, int(rng.integers(0, unit_length))), length)
    errors = rng.random(length) < error_rate
    read[errors] = rng.integers(0, 5, size=int(errors.sum()), dtype=np.uint8)  # 4: an N
    return read


def random_case(seed: int, count: tuple[int, int] = (1, 60), with_n: bool = True):
    """Two contigs with microsatellites of various units (and Ns) in random bases, and reads of
    awkward lengths (from the text, periodic, random; Ns among them) with random alignment ends,
    some at a contig's edges: (reference, text, codes, starts, lengths, reads, rows of
    (contig start, contig end, text end, read end))."""
    rng = np.random.default_rng(seed)
    contigs = []
    for length in (int(rng.integers(300, 900)), int(rng.integers(40, 200))):
        contig = rng.integers(0, 4, size=length, dtype=np.uint8)
        for _ in range(3):
            start = int(rng.integers(0, max(1, length - 60)))
            piece = periodic_read(rng, int(rng.integers(20, 120)), int(rng.integers(1, 8)), 0.02)
            contig[start : start + len(piece)] = piece[: length - start]
        if with_n:
            contig[rng.integers(0, length, size=3)] = 4
        else:  # the microsatellites' errors too
            contig[contig == 4] = 2
        contigs.append(contig)
    reference = ReferenceText.from_sequences(["a", "b"], contigs)
    text = np.concatenate(contigs)
    bounds = [(0, len(contigs[0])), (len(contigs[0]), len(text))]
    reads, rows = [], []
    for _ in range(int(rng.integers(*count))):
        length = int(rng.choice([1, 20, 37, 38, 39, 64, 101, 150, 251]))
        kind = rng.random()
        if kind < 0.4:  # from the text (a microsatellite or not), with errors
            contig = int(rng.integers(0, 2))
            lo, hi = bounds[contig]
            start = int(rng.integers(lo, max(lo + 1, hi - length)))
            read = text[start : start + length].copy()
            read = np.concatenate((read, rng.integers(0, 4, size=length - len(read), dtype=np.uint8)))
            read[rng.random(length) < 0.02] = rng.integers(0, 4)
        elif kind < 0.8:
            read = periodic_read(rng, length, int(rng.integers(1, 8)), float(rng.choice([0, 0.01, 0.05])))
            contig = int(rng.integers(0, 2))
        else:
            read = rng.integers(0, 5, size=length, dtype=np.uint8)
            contig = int(rng.integers(0, 2))
        lo, hi = bounds[contig]
        read_end = int(rng.integers(0, length + 1))
        text_end = int(rng.integers(lo, hi + 1)) if rng.random() < 0.8 else int(rng.choice([lo, hi]))
        reads.append(read)
        rows.append((lo, hi, text_end, read_end))
    codes = np.concatenate(reads)
    starts = np.cumsum([0] + [len(r) for r in reads[:-1]])
    return reference, text, codes, starts, np.array([len(r) for r in reads]), reads, rows


@pytest.mark.parametrize("seed", range(5))
def test_tandem_scores_equal_a_plain_loop(seed):
    reference, text, codes, starts, lengths, reads, rows = random_case(seed)
    lo, hi, text_end, read_end = (np.array(column) for column in zip(*rows))
    got = tandem.tandem_scores(codes, starts, lengths, text_end, read_end, lo, hi, reference, SimpleNamespace(match=1, mismatch=4))
    expected = [plain_tandem(r, text, *row) for r, row in zip(reads, rows)]
    assert got.tolist() == expected
    assert tandem.tandem_scores(codes[:0], [], [], [], [], [], [], reference, SimpleNamespace(match=1, mismatch=4)).tolist() == []


@pytest.mark.parametrize("seed, count, match, mismatch, masked", [
    (0, (1, 2), 1, 4, True), (1, (255, 256), 1, 4, True), (2, (257, 258), 2, 3, False), (3, (1000, 1001), 1, 4, True),
    (4, (33, 34), 3, 1, False),
])  # fmt: skip
def test_the_kernel_equals_its_reference(device, seed, count, match, mismatch, masked):
    """opencl/align/tandem.cl (TandemKernel) against tandem_scores, exactly: Ns in the text as
    its ambiguity mask marks them (or none, an unmasked text), reads offset in a pool as a
    chunk's are."""
    import pyopencl as cl

    from bowmap.align.extend.packed_text import PackedText
    from bowmap.index.format import pack_2bit
    from bowmap.runtime.devices import DeviceArray, make_buffer

    reference, text, codes, starts, lengths, _, rows = random_case(seed, count, with_n=masked)
    flagged = np.concatenate(([0], (text == 4).astype(np.int8), [0]))
    runs = np.flatnonzero(np.diff(flagged) == 1), np.flatnonzero(np.diff(flagged) == -1)
    packed = PackedText(device, pack_2bit(np.where(text == 4, 1, text).astype(np.uint8)), len(text), runs[0], runs[1] - runs[0])
    assert packed.masked == masked
    pool = np.concatenate((np.full(7, 3, np.uint8), codes))  # the reads start past a few other codes
    on_device = DeviceArray(make_buffer(device.context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR, hostbuf=pool), pool)
    kernel = tandem.TandemKernel(device, device.queue(), packed)
    scoring = SimpleNamespace(match=match, mismatch=mismatch)
    lo, hi, text_end, read_end = (np.array(column) for column in zip(*rows))
    got = kernel.scores(on_device, starts + 7, lengths, text_end, read_end, lo, hi, scoring)
    expected = tandem.tandem_scores(codes, starts, lengths, text_end, read_end, lo, hi, reference, scoring)
    assert got.dtype == np.int64 and got.tolist() == expected.tolist()
    assert (expected != NO_SCORE).any() and (expected == NO_SCORE).any() or len(expected) < 3
    assert kernel.scores(on_device, [], [], [], [], [], [], scoring).tolist() == []


def test_best_local_is_the_best_run():
    steps = np.array([[1, 1, -4, 1, 1, 1], [-4, -4, -4, -4, -4, -4], [1, -4, 1, 1, -4, 1]])
    assert tandem.best_local(steps).tolist() == [3, 0, 2]


# ------------------------------------------------------------------------ whole runs


@pytest.fixture(scope="module")
def genome(tmp_path_factory):
    """Random bases with a 200-base (CA)n, a 60-base poly-T and a 60-base (AAG)n."""
    rng = np.random.default_rng(3)
    parts = [rng.integers(0, 4, size=3000, dtype=np.uint8)]
    for unit, length in (([1, 0], 200), ([3], 60), ([0, 0, 2], 60)):
        parts += [np.resize(np.array(unit, dtype=np.uint8), length), rng.integers(0, 4, size=2000, dtype=np.uint8)]
    text = codes_to_text(np.concatenate(parts))
    folder = tmp_path_factory.mktemp("tandem")
    reference = write_fasta(folder / "ref.fa", [("chr1", text)])
    assert main(["-q", "index", reference, str(folder / "ref")]) == 0
    return SimpleNamespace(text=text, prefix=folder / "ref")


def with_errors(read: str, places: list[int]) -> str:
    bases = list(read)
    for place in places:
        bases[place] = "ACGT"[("ACGT".index(bases[place]) + 1) % 4]
    return "".join(bases)


def test_reads_in_microsatellites_are_not_confident(genome, tmp_path):
    """A homopolymer or microsatellite read longer than the genome's run aligns to the run with
    its unique-looking score (60 bases, no other window), but as well a unit to either side:
    MAPQ 0 (without the tandem score, 60). Reads with unique flanks keep 60."""
    text = genome.text
    polyt, aag = text.index("T" * 60), text.index("AAG" * 20)
    reads = {
        "polyT": with_errors("T" * 150, [40, 97]),
        "polyA": with_errors("A" * 150, [12, 130]),
        "AAG": with_errors("AAG" * 50, [70, 101]),
        "inside_CA": text[text.index("CA" * 100) + 20 :][:150],  # wholly inside (CA)100: windows tie already
        "polyT_flanked": text[polyt - 45 : polyt + 105],  # 45 unique bases, 60 T, 45 unique: placed
        "unique": text[500:650],
    }
    path = tmp_path / "reads.fq"
    path.write_text("".join(f"@{name}\n{seq}\n+\n{'I' * len(seq)}\n" for name, seq in reads.items()))
    out = tmp_path / "out.sam"
    assert main(["-q", "align", str(genome.prefix), str(path), "-o", str(out), "--devices", "cpu"]) == 0
    records = {r.query_name: r for r in pysam.AlignmentFile(str(out)) if not r.is_supplementary}
    for name, start in (("polyT", polyt), ("polyA", polyt), ("AAG", aag)):
        record = records[name]
        assert record.reference_start == start and record.get_tag("AS") >= 50 and record.mapping_quality == 0, name
    assert records["inside_CA"].mapping_quality == 0
    assert records["polyT_flanked"].mapping_quality == 60 and records["polyT_flanked"].reference_start == polyt - 45
    assert records["unique"].mapping_quality == 60


def test_a_unique_mate_does_not_lift_its_microsatellite_mate(genome, tmp_path):
    """bwa's tandem cap: the pair lifts a mate's MAPQ, but never past what its tandem score allows."""
    text = genome.text
    polyt = text.index("T" * 60)
    first = text[polyt - 250 : polyt - 100]  # unique, forward, 250 bases before the poly-T run
    second = with_errors("A" * 150, [30, 88])  # the run's reverse strand: concordant (FR)
    for mate, sequence in ((1, first), (2, second)):
        (tmp_path / f"r{mate}.fq").write_text(f"@pair/{mate}\n{sequence}\n+\n{'I' * 150}\n")
    out = tmp_path / "out.sam"
    assert main(["-q", "align", str(genome.prefix), str(tmp_path / "r1.fq"), str(tmp_path / "r2.fq"), "-o", str(out),
                 "--devices", "cpu", "--insert-size", "300,50"]) == 0
    one, two = (r for r in pysam.AlignmentFile(str(out)) if not r.is_supplementary)
    assert one.mapping_quality == 60 and one.reference_start == polyt - 250
    assert two.is_reverse and two.is_proper_pair and two.reference_start >= polyt - 2 and two.mapping_quality == 0


# ------------------------------------------------------------------------ periodic share


def plain_share(read):
    """periodic_share for one read, base by base: windows of SAMPLE ending every SAMPLE bases and
    at the read's end, each tested as plain_tandem tests its sample; the share of bases in one."""
    length = len(read)
    if length < tandem.SAMPLE:
        return 0.0
    ends = sorted(set(list(range(tandem.SAMPLE, length + 1, tandem.SAMPLE)) + [length]))
    covered = [False] * length
    for end in ends:
        sample = [int(code) % 4 for code in read[end - tandem.SAMPLE : end]]
        if any(sum(sample[j] == sample[j - p] for j in range(p, tandem.SAMPLE)) >= tandem.SAMPLE - p - tandem.SAMPLE_MISMATCHES
               for p in range(1, tandem.MAX_PERIOD + 1)):
            covered[end - tandem.SAMPLE : end] = [True] * tandem.SAMPLE
    return sum(covered) / length


@pytest.mark.parametrize("seed", range(4))
def test_periodic_share_equals_a_plain_loop(seed):
    rng = np.random.default_rng(seed)
    reads = []
    for _ in range(80):
        length = int(rng.choice([0, 1, 31, 32, 33, 63, 64, 65, 100, 150, 151, 250]))
        parts, total = [], 0
        while total < length:  # microsatellite and random pieces side by side
            size = int(rng.integers(5, 90))
            piece = periodic_read(rng, size, int(rng.integers(1, 8)), float(rng.choice([0, 0.02, 0.05]))) if rng.random() < 0.6 else \
                rng.integers(0, 4, size=size, dtype=np.uint8)
            parts.append(piece)
            total += size
        reads.append(np.concatenate(parts)[:length] if parts else np.zeros(0, dtype=np.uint8))
    codes = np.concatenate(reads)
    starts = np.cumsum([0] + [len(read) for read in reads[:-1]])
    got = tandem.periodic_share(codes, starts, [len(read) for read in reads])
    np.testing.assert_allclose(got, [plain_share(read) for read in reads])
    assert tandem.periodic_share(codes[:0], [], []).tolist() == []
    assert tandem.periodic_share(np.zeros(150, dtype=np.uint8), [0], [150]).tolist() == [1.0]


def test_mapq_scaled_by_the_repetitive_share_as_bwa():
    """bwa's last step: q = int(q (1 - frac_rep) + 0.499), after the clip to 0..60."""
    scoring = SimpleNamespace(match=1, mismatch=4)
    best, second, lengths = [150, 150, 150, 140, 150], [NO_SCORE, 140, 140, 130, NO_SCORE], [150] * 5
    plain = mapping_quality(best, second, lengths, scoring).astype(int)
    share = np.array([0.0, 0.5, 1.0, 0.3, 0.999])
    got = mapping_quality(best, second, lengths, scoring, None, None, share)
    assert got.tolist() == [int(q * (1 - s) + 0.499) for q, s in zip(plain, share)]
    assert got[0] == 60 and got[2] == 0 and got[4] == 0


def test_reads_in_one_of_many_microsatellite_arrays_are_not_confident(tmp_path):
    """250 poly-C arrays of 300 bases, 2.5% substitutions of their own each. A read from inside
    one has only seeds occurring hundreds of times or more (not located) and rarer ones that the
    substitutions make, shared by other arrays, so its windows (at most 16) often miss its own
    array and its second best is a few mismatches down: 3 of 40 such reads were wrong at MAPQ
    20-40 (bench: a human-like genome's microsatellites, 55 wrong of 100,000 reads). With the
    periodic share none is (bwa's frac_rep gives them 0). A read with a unique flank keeps 60."""
    rng = np.random.default_rng(8)
    parts, arrays, total = [rng.integers(0, 4, size=2000, dtype=np.uint8)], [], 2000
    for _ in range(250):
        array = np.full(300, 1, dtype=np.uint8)
        hit = rng.random(300) < 0.025
        array[hit] = rng.integers(0, 4, size=int(hit.sum()), dtype=np.uint8)
        arrays.append(total)
        parts += [array, rng.integers(0, 4, size=1500, dtype=np.uint8)]
        total += 1800
    text = codes_to_text(np.concatenate(parts))
    reference = write_fasta(tmp_path / "ref.fa", [("chr1", text)])
    assert main(["-q", "index", reference, str(tmp_path / "ref")]) == 0
    reads, starts = {}, {}
    for number, start in enumerate(arrays[:40]):
        offset = start + int(rng.integers(0, 150))
        reads[f"inside{number}"] = with_errors(text[offset : offset + 150], [int(place) for place in rng.choice(150, size=1, replace=False)])
        starts[f"inside{number}"] = offset
    flanked = arrays[40] + 300 - 60
    reads["flanked"] = text[flanked : flanked + 150]  # 60 C-rich bases, then 90 unique ones
    # 40 unique bases, then 110 C-rich ones: the alignment ends in the array, so its share
    # (110 of 150 periodic, to the 4th power) lowers its MAPQ, but the flank's seeds keep most.
    mirrored = arrays[41] - 40
    reads["mirrored"] = text[mirrored : mirrored + 150]
    path = tmp_path / "reads.fq"
    path.write_text("".join(f"@{name}\n{seq}\n+\n{'I' * len(seq)}\n" for name, seq in reads.items()))
    out = tmp_path / "out.sam"
    assert main(["-q", "align", str(tmp_path / "ref"), str(path), "-o", str(out), "--devices", "cpu"]) == 0
    records = {r.query_name: r for r in pysam.AlignmentFile(str(out)) if not r.is_supplementary and not r.is_secondary}
    wrong = [name for name, start in starts.items() if abs(records[name].reference_start - start) > 5]
    assert len(wrong) >= 10  # the case: many are placed in another array
    assert [(name, records[name].mapping_quality) for name in wrong if records[name].mapping_quality >= 20] == []
    assert records["flanked"].mapping_quality == 60 and records["flanked"].reference_start == flanked
    assert 50 <= records["mirrored"].mapping_quality < 60 and records["mirrored"].reference_start == mirrored
