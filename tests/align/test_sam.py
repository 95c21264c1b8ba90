"""SAM/BAM output: the vectorised formatter against a per-read pure-Python formatter, NM/MD
against the reference, pysam (bundled samtools) reading and processing the output, the header,
MAPQ, and the writer's temporary-name-then-rename behaviour."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pysam
import pytest

from bowmap.align.extend.mapq import NO_SCORE, mapping_quality
from bowmap.align.output.reference import ReferenceText, sam_header
from bowmap.align.output.sam import ChunkAlignments, format_chunk
from bowmap.index.format import pack_2bit
from bowmap.index.load import FMIndex
from bowmap.runtime.errors import BowmapError, UsageError
from bowmap.runtime.output import SamWriter

LETTERS = "ACGTN"
CIGAR_CODES = {"M": 0, "I": 1, "D": 2, "S": 4, "=": 7, "X": 8}


# ------------------------------------------------------------------------- stand-in builders


@dataclass
class StandInChunk:
    """The reader's ReadChunk as the output stage uses it."""

    count: int
    names: np.ndarray
    name_offsets: np.ndarray
    codes: np.ndarray
    offsets: np.ndarray
    qualities: np.ndarray | None
    reverse_codes: np.ndarray
    paired: bool = False

    @property
    def both_codes(self) -> np.ndarray:
        return np.concatenate((self.codes, self.reverse_codes))


def reverse_complement(codes: np.ndarray) -> np.ndarray:
    return np.where(codes < 4, 3 - codes, 4).astype(np.uint8)[::-1]


def make_chunk(names: list[bytes], reads: list[np.ndarray], qualities: list[bytes] | None) -> StandInChunk:
    def ragged(parts):
        offsets = np.concatenate(([0], np.cumsum([len(part) for part in parts]))).astype(np.int64)
        flat = np.concatenate([np.frombuffer(bytes(part), np.uint8) if isinstance(part, bytes) else part for part in parts]) if parts else np.zeros(0)
        return flat.astype(np.uint8), offsets

    name_flat, name_offsets = ragged(names)
    codes, offsets = ragged(reads)
    reverse_codes, _ = ragged([reverse_complement(read) for read in reads])
    quality_flat = None if qualities is None else ragged(qualities)[0]
    return StandInChunk(len(reads), name_flat, name_offsets, codes, offsets, quality_flat, reverse_codes)


@dataclass
class Case:
    chunk: StandInChunk
    alignments: ChunkAlignments
    reference: ReferenceText
    contigs: list[np.ndarray]
    cigars: list[list[tuple[str, int]]]


def random_cigar(rng, read_length: int) -> list[tuple[str, int]]:
    """A CIGAR consuming ``read_length`` read bases: optional clips, M runs, indels (also at the
    ends of the aligned part), = and X now and then."""
    ops: list[tuple[str, int]] = []
    left = read_length
    if rng.random() < 0.3 and left > 2:
        clip = int(rng.integers(1, max(2, left // 4)))
        ops.append(("S", clip))
        left -= clip
    right_clip = 0
    if rng.random() < 0.3 and left > 2:
        right_clip = int(rng.integers(1, max(2, left // 4)))
        left -= right_clip
    if rng.random() < 0.15 and left > 2:  # insertion at the start of the aligned part
        size = int(rng.integers(1, min(4, left)))
        ops.append(("I", size))
        left -= size
    if rng.random() < 0.05:
        ops.append(("D", int(rng.integers(1, 4))))
    while left > 0:
        run = int(rng.integers(1, left + 1)) if rng.random() < 0.5 else left
        ops.append((str(rng.choice(["M", "M", "M", "=", "X"])), run))
        left -= run
        if left > 1 and rng.random() < 0.5:
            if rng.random() < 0.5:
                size = int(rng.integers(1, min(6, left)))
                ops.append(("I", size))
                left -= size
            else:
                ops.append(("D", int(rng.integers(1, 12))))
    if rng.random() < 0.05:
        ops.append(("D", int(rng.integers(1, 4))))
    if right_clip:
        ops.append(("S", right_clip))
    merged: list[tuple[str, int]] = []
    for op, length in ops:  # adjacent equal operations would be one in any aligner's output
        if merged and merged[-1][0] == op:
            merged[-1] = (op, merged[-1][1] + length)
        else:
            merged.append((op, length))
    if not any(op in "M=X" for op, _ in merged):  # a clip/indel-only alignment is not one
        return [("M", read_length)]
    return merged


def aligned_strand(rng, text: np.ndarray, position: int, cigar, changed: float) -> np.ndarray:
    """A read's aligned strand along ``cigar`` from ``text[position]``: the reference's bases
    with a share ``changed`` of them redrawn (Ns included), random bases for I and S."""
    aligned, at = [], position
    for op, size in cigar:
        if op in "M=X":
            bases = text[at : at + size].copy()
            change = rng.random(size) < changed
            bases[change] = rng.integers(0, 5, size=int(change.sum()))
            aligned.append(bases)
            at += size
        elif op == "D":
            at += size
        else:
            aligned.append(rng.integers(0, 4, size=size, dtype=np.uint8))
    return np.concatenate(aligned).astype(np.uint8)


def make_case(seed: int, count: int, fasta: bool = False, long_reads: bool = False, ambiguous: bool = True) -> Case:
    rng = np.random.default_rng(seed)
    contigs = [rng.integers(0, 4, size=int(size), dtype=np.uint8) for size in (3000, 700, 12000 if long_reads else 1500)]
    if ambiguous:
        contigs[0][100:130] = 4
        contigs[2][rng.integers(0, len(contigs[2]), size=20)] = 4
    reference = ReferenceText.from_sequences(["chr1", "plasmid|x", "chr3"], contigs)
    names, reads, qualities, cigars = [], [], [], []
    mapped = rng.random(count) < 0.8
    reverse = rng.random(count) < 0.5
    contig = rng.integers(0, len(contigs), size=count).astype(np.int32)
    position = np.zeros(count, dtype=np.int64)
    ops_all = []
    for read in range(count):
        length = int(rng.choice([0, 1, 2, 17, 100, 150, 151, 5000 if long_reads else 250], p=[0.03, 0.03, 0.04, 0.1, 0.2, 0.3, 0.2, 0.1]))
        names.append(f"read{read}/{seed}".encode() if rng.random() < 0.95 else b"")
        qualities.append(bytes(rng.integers(33, 75, size=length, dtype=np.uint8)))
        if length == 0:
            mapped[read] = False
        if not mapped[read]:
            reads.append(rng.integers(0, 5, size=length, dtype=np.uint8))
            cigars.append([])
            continue
        cigar = random_cigar(rng, length)
        span = sum(size for op, size in cigar if op in "MD=X")
        text = contigs[contig[read]]
        if span > len(text):
            contig[read] = 2
            text = contigs[2]
            if span > len(text):
                mapped[read] = False
                reads.append(rng.integers(0, 5, size=length, dtype=np.uint8))
                cigars.append([])
                continue
        position[read] = int(rng.integers(0, len(text) - span + 1))
        # The aligned strand follows the reference with some substitutions and Ns.
        strand = aligned_strand(rng, text, int(position[read]), cigar, 0.05)
        reads.append(reverse_complement(strand) if reverse[read] else strand)
        cigars.append(cigar)
        ops_all.append(np.array([size << 4 | CIGAR_CODES[op] for op, size in cigar], dtype=np.uint32))
    op_counts = [len(cigar) for cigar in cigars]
    score = rng.integers(-20, 300, size=count).astype(np.int32)
    second = np.where(rng.random(count) < 0.5, score - rng.integers(0, 50, size=count), NO_SCORE).astype(np.int32)
    alignments = ChunkAlignments(
        mapped=mapped,
        reverse=reverse,
        contig=np.where(mapped, contig, -7).astype(np.int32),  # junk where unmapped
        position=np.where(mapped, position, 123456789),
        score=score,
        second_score=second,
        cigar_ops=np.concatenate(ops_all) if ops_all else np.zeros(0, np.uint32),
        cigar_offsets=np.concatenate(([0], np.cumsum(op_counts))).astype(np.int64),
        mapq=rng.integers(0, 61, size=count).astype(np.uint8),
    )
    chunk = make_chunk(names, reads, None if fasta else qualities)
    return Case(chunk, alignments, reference, contigs, cigars)


# ----------------------------------------------------------------- per-read reference formatter


def expected_nm_md(strand: np.ndarray, text: np.ndarray, position: int, cigar) -> tuple[int, str]:
    """NM and MD as samtools calmd computes them, one base at a time."""
    edit_distance, matches, md = 0, 0, ""
    query, reference_at = 0, position
    for op, size in cigar:
        if op in "M=X":
            for k in range(size):
                read_base, reference_base = int(strand[query + k]), int(text[reference_at + k])
                if read_base == reference_base and read_base < 4:
                    matches += 1
                else:
                    md += f"{matches}{LETTERS[reference_base]}"
                    matches = 0
                    edit_distance += 1
            query += size
            reference_at += size
        elif op == "D":
            md += f"{matches}^" + "".join(LETTERS[int(base)] for base in text[reference_at : reference_at + size])
            matches = 0
            edit_distance += size
            reference_at += size
        else:
            query += size
            edit_distance += size if op == "I" else 0
    return edit_distance, md + str(matches)


def expected_sam(case: Case, read_group_id: str | None, write_unaligned: bool) -> bytes:
    chunk, alignments = case.chunk, case.alignments
    lines = []
    for read in range(chunk.count):
        mapped = bool(alignments.mapped[read])
        if not mapped and not write_unaligned:
            continue
        name = bytes(chunk.names[chunk.name_offsets[read] : chunk.name_offsets[read + 1]]).decode() or "*"
        codes = chunk.codes[chunk.offsets[read] : chunk.offsets[read + 1]]
        quality = None if chunk.qualities is None else bytes(chunk.qualities[chunk.offsets[read] : chunk.offsets[read + 1]]).decode()
        reverse = mapped and bool(alignments.reverse[read])
        strand = reverse_complement(codes) if reverse else codes
        if reverse and quality is not None:
            quality = quality[::-1]
        sequence = "".join(LETTERS[int(code)] for code in strand) or "*"
        quality = "*" if not quality else quality
        if mapped:
            contig, position = int(alignments.contig[read]), int(alignments.position[read])
            cigar = case.cigars[read]
            edit_distance, md = expected_nm_md(strand, case.contigs[contig], position, cigar)
            fields = [name, str(16 if reverse else 0), case.reference.contig_names[contig], str(position + 1), str(int(alignments.mapq[read])),
                      "".join(f"{size}{op}" for op, size in cigar), "*", "0", "0", sequence, quality,
                      f"NM:i:{edit_distance}", f"MD:Z:{md}", f"AS:i:{int(alignments.score[read])}"]  # fmt: skip
            second = int(alignments.second_score[read])
            fields.append(f"XS:i:{0 if second == NO_SCORE else max(second, 0)}")  # every mapped read, as bwa
        else:
            fields = [name, "4", "*", "0", "0", "*", "*", "0", "0", sequence, quality]
        if read_group_id is not None:
            fields.append(f"RG:Z:{read_group_id}")
        lines.append("\t".join(fields) + "\n")
    return "".join(lines).encode()


# ------------------------------------------------------------------------------------- tests


@pytest.mark.parametrize(
    "seed, count, fasta, long_reads, write_unaligned, read_group",
    [
        (1, 1, False, False, True, None),
        (2, 2, True, False, True, "lane1"),
        (3, 255, False, False, True, "rg.7"),
        (4, 256, True, False, False, None),
        (5, 257, False, True, True, None),
        (6, 1000, False, False, False, "x"),
    ],
)
def test_vectorised_output_equals_per_read_formatter(seed, count, fasta, long_reads, write_unaligned, read_group):
    case = make_case(seed, count, fasta=fasta, long_reads=long_reads)
    got = format_chunk(case.chunk, case.alignments, case.reference, read_group, write_unaligned)
    assert got == expected_sam(case, read_group, write_unaligned)


def test_small_batches_and_packed_reference_give_the_same_text(monkeypatch):
    case = make_case(11, 300, long_reads=True)
    whole = format_chunk(case.chunk, case.alignments, case.reference, None, True)
    # The same contigs through an index's 2-bit packed form with ambiguous runs.
    flat = np.concatenate(case.contigs)
    ambiguous = np.concatenate(([0], (flat == 4).astype(np.int8), [0]))
    starts = np.flatnonzero(np.diff(ambiguous) == 1)
    ends = np.flatnonzero(np.diff(ambiguous) == -1)
    index = SimpleNamespace(
        packed=pack_2bit(np.where(flat == 4, 2, flat).astype(np.uint8)), ambiguous_starts=starts, ambiguous_lengths=ends - starts
    )
    index.codes_at = lambda positions: FMIndex.codes_at(index, positions)
    index.spans = lambda starts, lengths: FMIndex.spans(index, starts, lengths)
    packed_reference = ReferenceText(
        case.reference.contig_names, case.reference.contig_starts, case.reference.contig_lengths, index=index
    )
    monkeypatch.setattr("bowmap.align.output.sam._BATCH_BYTES", 20_000)  # many batches, one read wider than a batch
    assert format_chunk(case.chunk, case.alignments, packed_reference, None, True) == whole


def test_decimal_text_of_awkward_integers():
    from bowmap.align.output.sam_text import decimal_text as _decimal

    edges = [0, 1, 9, 10, 9999, 10000, 10001, 99999999, 100000000, 123456789012, 2**62, -1, -9999, -10000, -(2**62)]
    for values in (np.array(edges), np.arange(10000), np.array([5, 70000]), np.array([-3, 0, 42])):
        text = _decimal(values)
        assert [row[row != 0].tobytes().decode() for row in text] == [str(int(value)) for value in values]


def test_secondary_lines_and_computed_mapq():
    case = make_case(21, 40, ambiguous=False)
    alignments = case.alignments
    primary = np.flatnonzero(alignments.mapped)[:5]
    # Repeat some mapped rows as secondary lines right after their primary.
    rows = np.sort(np.concatenate((np.arange(case.chunk.count), primary)))
    secondary = np.zeros(len(rows), dtype=bool)
    secondary[1:] = rows[1:] == rows[:-1]
    op_counts = np.diff(alignments.cigar_offsets)[rows]
    ops = np.concatenate([alignments.cigar_ops[alignments.cigar_offsets[row] : alignments.cigar_offsets[row + 1]] for row in rows])
    repeated = ChunkAlignments(
        mapped=alignments.mapped[rows], reverse=alignments.reverse[rows], contig=alignments.contig[rows],
        position=alignments.position[rows], score=alignments.score[rows], second_score=alignments.second_score[rows],
        cigar_ops=ops, cigar_offsets=np.concatenate(([0], np.cumsum(op_counts))), secondary=secondary, read_index=rows,
    )  # fmt: skip

    class Scoring:
        match, mismatch = 2, 6

    text = format_chunk(case.chunk, repeated, case.reference, None, True, scoring=Scoring()).decode()
    lines = [line.split("\t") for line in text.splitlines()]
    assert len(lines) == len(rows)
    lengths = np.diff(case.chunk.offsets)[rows]
    mapq = mapping_quality(repeated.score, repeated.second_score, lengths, Scoring())
    for line, row, is_secondary, quality in zip(lines, rows, secondary, mapq):
        assert line[0] == (bytes(case.chunk.names[case.chunk.name_offsets[row] : case.chunk.name_offsets[row + 1]]).decode() or "*")
        assert bool(int(line[1]) & 256) == is_secondary
        expected_mapq = 0 if is_secondary or not alignments.mapped[row] else int(quality)
        assert int(line[4]) == expected_mapq


def test_mapq_formula():
    """bwa 0.7.17's mem_approx_mapq_se (default -Q 50), written plainly, on random score tuples;
    the tandem score (bwa's csub) counts as a second best."""

    class Scoring:
        match, mismatch = 1, 4

    def scalar(best, second, length, others, tandem=NO_SCORE):
        sub = max(second if second != NO_SCORE else -math.inf, tandem if tandem != NO_SCORE else -math.inf, 19)
        if best <= 0 or sub >= best:
            return 0
        identity = 1 - (length - best) / (5 * length)
        scale = (1.0 if length < 50 else math.log(50) / math.log(length)) * identity * identity
        quality = int(6.02 * (best - sub) * scale * scale + 0.499)
        if others > 0:
            quality -= int(4.343 * math.log(others + 1) + 0.499)
        return min(max(quality, 0), 60)

    rng = np.random.default_rng(5)
    lengths = rng.integers(1, 300, size=2000)
    best = (rng.random(2000) * lengths * 1.1).astype(np.int32) - 5
    second = np.where(rng.random(2000) < 0.6, best - rng.integers(0, 30, size=2000), NO_SCORE).astype(np.int32)
    second[:50] = best[:50]  # ties
    others = np.where(rng.random(2000) < 0.3, rng.integers(1, 40, size=2000), 0)
    got = mapping_quality(best, second, lengths, Scoring(), others)
    assert got.dtype == np.uint8 and got.max() <= 60
    assert list(got) == [scalar(int(b), int(s), int(n), int(o)) for b, s, n, o in zip(best, second, lengths, others)]
    assert (got[:50] == 0).all()
    tandem = np.where(rng.random(2000) < 0.5, best - rng.integers(-5, 40, size=2000), NO_SCORE)
    got = mapping_quality(best, second, lengths, Scoring(), others, tandem)
    assert list(got) == [scalar(*(int(v) for v in values)) for values in zip(best, second, lengths, others, tandem)]
    assert mapping_quality([150], [NO_SCORE], [150], Scoring(), None, [NO_SCORE])[0] == 60
    assert mapping_quality([150], [NO_SCORE], [150], Scoring(), None, [148])[0] < mapping_quality([150], [140], [150], Scoring())[0]
    assert mapping_quality([150], [NO_SCORE], [150], Scoring())[0] == 60  # perfect and unique
    assert mapping_quality([150], [140], [150], Scoring())[0] == 37  # bwa's value for these scores
    assert mapping_quality([150], [140], [150], Scoring(), [1])[0] == 34  # one more near the best
    assert mapping_quality([150], [145], [150], Scoring())[0] < mapping_quality([150], [100], [150], Scoring())[0]


def test_nm_and_md_agree_with_the_reference_through_pysam(tmp_path):
    case = make_case(31, 400)
    header = sam_header(case.reference.contig_names, case.reference.contig_lengths, "bowmap align idx r.fq", None)
    path = str(tmp_path / "out.sam")
    with SamWriter(path, header) as writer:
        writer.write(format_chunk(case.chunk, case.alignments, case.reference, None, True))
    checked = 0
    with pysam.AlignmentFile(path, "r") as sam:
        for segment in sam:
            if segment.is_unmapped:
                continue
            contig = case.contigs[segment.reference_id]
            true_reference = "".join(LETTERS[int(base)] for base in contig[segment.reference_start : segment.reference_end])
            # pysam rebuilds the reference from SEQ, CIGAR and MD; the read's own Ns stay N.
            rebuilt = segment.get_reference_sequence().upper()
            assert len(rebuilt) == len(true_reference)
            assert all(r == t or r == "N" for r, t in zip(rebuilt, true_reference))
            pairs = [(q, r) for q, r in segment.get_aligned_pairs(matches_only=True)]
            sequence = segment.query_sequence
            mismatches = sum(1 for q, r in pairs if sequence[q] != LETTERS[int(contig[r])] or sequence[q] == "N")
            gaps = sum(size for op, size in segment.cigartuples if op in (1, 2))
            assert segment.get_tag("NM") == mismatches + gaps
            assert segment.query_length == segment.infer_query_length()  # CIGAR length agrees with SEQ
            checked += 1
    assert checked > 250


def read_back(path: str) -> list[tuple]:
    with pysam.AlignmentFile(path, "r" if path.endswith(".sam") else "rb", check_sq=False) as alignment_file:
        return [
            (s.query_name, s.flag, s.reference_name, s.reference_start, s.mapping_quality, s.cigarstring, s.query_sequence,
             None if s.query_qualities is None else pysam.qualities_to_qualitystring(s.query_qualities), sorted(s.get_tags()))
            for s in alignment_file
        ]  # fmt: skip


def test_pysam_reads_the_output_and_samtools_processes_it(tmp_path):
    case = make_case(41, 500)
    header = sam_header(case.reference.contig_names, case.reference.contig_lengths, "bowmap align\tidx reads.fq -o out.sam", ("grp1", ["SM:sample 1", "PL:ILLUMINA"]))
    text = format_chunk(case.chunk, case.alignments, case.reference, "grp1", True)
    sam_path, bam_path = str(tmp_path / "out.sam"), str(tmp_path / "out.bam")
    for path in (sam_path, bam_path):
        writer = SamWriter(path, header)
        writer.write(text[: len(text) // 3 // 2])  # chunks arrive in pieces; lines may split across writes
        writer.write(text[len(text) // 3 // 2 :])
        writer.close(success=True)
    records = read_back(sam_path)
    assert records == read_back(bam_path)
    assert len(records) == case.chunk.count
    for record, line in zip(records, text.decode().splitlines()):
        fields = line.split("\t")
        assert record[0] == fields[0] and record[1] == int(fields[1]) and record[4] == int(fields[4])
        assert (record[5] or "*") == fields[5] and (record[6] or "*") == fields[9] and (record[7] or "*") == fields[10]
    with pysam.AlignmentFile(bam_path, "rb") as bam:
        assert bam.header["HD"] == {"VN": "1.6", "SO": "unsorted"}
        assert [entry["SN"] for entry in bam.header["SQ"]] == case.reference.contig_names
        assert bam.header["RG"] == [{"ID": "grp1", "SM": "sample 1", "PL": "ILLUMINA"}]
        assert bam.header["PG"][0]["CL"] == "bowmap align idx reads.fq -o out.sam"
    assert pysam.quickcheck(bam_path) == ""
    sorted_path = str(tmp_path / "sorted.bam")
    pysam.sort("-o", sorted_path, sam_path)
    pysam.index(sorted_path)
    assert os.path.exists(sorted_path + ".bai")
    flagstat = pysam.flagstat(sorted_path)
    mapped = int(case.alignments.mapped.sum())
    assert f"{case.chunk.count} + 0 in total" in flagstat
    assert f"{mapped} + 0 mapped" in flagstat
    with pysam.AlignmentFile(sorted_path, "rb") as bam:
        assert bam.count(contig="chr1") == int((case.alignments.mapped & (case.alignments.contig == 0)).sum())
    assert pysam.view("-c", sam_path).strip() == str(case.chunk.count)


def test_header():
    header = sam_header(["chr1", "chrM"], [1000, 16569], "bowmap align x\ny", ("id1", ["SM:s", "LB:lib:2"]))
    assert header.splitlines() == [
        "@HD\tVN:1.6\tSO:unsorted",
        "@SQ\tSN:chr1\tLN:1000",
        "@SQ\tSN:chrM\tLN:16569",
        "@RG\tID:id1\tSM:s\tLB:lib:2",
        f"@PG\tID:bowmap\tPN:bowmap\tVN:{__import__('bowmap').__version__}\tCL:bowmap align x y",
    ]
    assert "@RG" not in sam_header(["a"], [1], "c", None)
    for bad in (["SM"], ["S:x"], ["SM:"], ["SM:a\tb"], ["SM:a", "SM:b"], ["ID:x"], ["1M:x"]):
        with pytest.raises(UsageError, match="--rg"):
            sam_header(["a"], [1], "c", ("id", bad))
    with pytest.raises(UsageError, match="--rg-id"):
        sam_header(["a"], [1], "c", ("a b\t", []))
    with pytest.raises(BowmapError, match="reference name"):
        sam_header(["*odd"], [1], "c", None)


def test_unmapped_only_empty_reads_and_no_unal():
    chunk = make_chunk([b"r1", b"", b"r3"], [np.array([0, 1, 4], np.uint8), np.zeros(0, np.uint8), np.array([3], np.uint8)], [b"II#", b"", b"5"])
    reference = ReferenceText.from_sequences(["c"], [np.zeros(10, np.uint8)])
    alignments = ChunkAlignments.all_unmapped(3)
    with pytest.raises(ValueError, match="scoring"):
        format_chunk(chunk, alignments, reference, None, True)
    alignments.mapq = np.zeros(3, np.uint8)
    assert format_chunk(chunk, alignments, reference, None, True) == b"".join(
        [b"r1\t4\t*\t0\t0\t*\t*\t0\t0\tACN\tII#\n", b"*\t4\t*\t0\t0\t*\t*\t0\t0\t*\t*\n", b"r3\t4\t*\t0\t0\t*\t*\t0\t0\tT\t5\n"]
    )
    assert format_chunk(chunk, alignments, reference, "g", True).splitlines()[1] == b"*\t4\t*\t0\t0\t*\t*\t0\t0\t*\t*\tRG:Z:g"
    assert format_chunk(chunk, alignments, reference, None, False) == b""


def test_inconsistent_cigar_is_refused():
    chunk = make_chunk([b"r"], [np.zeros(10, np.uint8)], None)
    reference = ReferenceText.from_sequences(["c"], [np.zeros(20, np.uint8)])

    def alignment(ops, position=0):
        return ChunkAlignments(np.array([True]), np.array([False]), np.array([0], np.int32), np.array([position]), np.array([5], np.int32),
                               np.array([NO_SCORE], np.int32), np.array(ops, np.uint32), np.array([0, len(ops)]), mapq=np.array([3], np.uint8))  # fmt: skip

    assert format_chunk(chunk, alignment([10 << 4]), reference, None, True).split(b"\t")[5] == b"10M"
    for ops, position in (([9 << 4], 0), ([10 << 4], 11), ([2 << 4 | 4, 6 << 4, 2 << 4 | 4, 0 << 4], 0), ([10 << 4 | 3], 0), ([3 << 4 | 4, 7 << 4 | 1], 0)):
        with pytest.raises(ValueError):
            format_chunk(chunk, alignment(ops, position), reference, None, True)


def test_writer_renames_on_success_and_cleans_up_on_failure(tmp_path):
    for name in ("out.sam", "out.bam"):
        path = tmp_path / name
        writer = SamWriter(str(path), sam_header(["c"], [10], "bowmap align", None))
        writer.write(b"r\t4\t*\t0\t0\t*\t*\t0\t0\tA\tI\n")
        assert not path.exists()
        hidden = [entry for entry in os.listdir(tmp_path) if entry.startswith(f".{name}.")]
        assert len(hidden) == 1
        writer.close(success=True)
        writer.close(success=False)  # a second close changes nothing
        assert path.exists() and not [entry for entry in os.listdir(tmp_path) if entry.startswith(".")]
        assert read_back(str(path))[0][:2] == ("r", 4)

    failed = tmp_path / "failed.sam"
    failed.write_bytes(b"an older complete output\n")
    with pytest.raises(RuntimeError):
        with SamWriter(str(failed), "@HD\tVN:1.6\n") as writer:
            writer.write(b"partial")
            raise RuntimeError("the pipeline failed")
    assert failed.read_bytes() == b"an older complete output\n"
    assert sorted(os.listdir(tmp_path)) == ["failed.sam", "out.bam", "out.sam"]

    bad_bam = tmp_path / "bad.bam"
    writer = SamWriter(str(bad_bam), "@HD\tVN:1.6\n")
    writer.write(b"not\ta\tsam\tline\n")
    with pytest.raises(BowmapError, match="bad.bam: BAM encoding failed"):
        writer.close(success=True)
    assert not bad_bam.exists() and sorted(os.listdir(tmp_path)) == ["failed.sam", "out.bam", "out.sam"]

    with pytest.raises(BowmapError, match="missing/out.sam: cannot write .No such file or directory."):
        SamWriter(str(tmp_path / "missing" / "out.sam"), "")


def test_stdout(capfdbinary):
    writer = SamWriter("-", "@HD\tVN:1.6\n")
    writer.write(b"line\n")
    writer.close(success=True)
    assert capfdbinary.readouterr().out == b"@HD\tVN:1.6\nline\n"


@pytest.mark.parametrize("output_format", ["sam", "bam"])
def test_the_header_waits_for_the_first_records(capfdbinary, tmp_path, output_format):
    """Standard output shows what is written at once: a run that fails before its first records
    (a reads file that does not parse, an index whose checksums do not match) writes nothing
    there, not a header that `| samtools sort` would make a valid, empty BAM of."""
    header = sam_header(["c"], [10], "bowmap align", None)
    writer = SamWriter("-", header, output_format)
    assert capfdbinary.readouterr().out == b""
    writer.close(success=False)
    assert capfdbinary.readouterr().out == b""
    writer = SamWriter("-", header, output_format)  # no records (an empty input): the header alone
    writer.close(success=True)
    written = capfdbinary.readouterr().out
    if output_format == "sam":
        assert written == header.encode()
    else:
        (tmp_path / "out.bam").write_bytes(written)
        with pysam.AlignmentFile(str(tmp_path / "out.bam"), "rb") as bam:
            assert bam.header.to_dict()["SQ"] == [{"SN": "c", "LN": 10}] and list(bam) == []


@pytest.mark.parametrize("suffix", [".sam", ".bam"])
def test_a_named_pipe_is_written_straight_and_stays_a_pipe(tmp_path, suffix):
    """An output that exists and is no regular file (a pipe, /dev/null) is written in place: a
    temporary renamed onto it would replace it (as root, /dev/null too)."""
    import stat
    import threading

    pipe = tmp_path / f"out{suffix}"
    os.mkfifo(pipe)
    received = []
    reader = threading.Thread(target=lambda: received.append(pipe.read_bytes()), daemon=True)
    reader.start()
    header = sam_header(["c"], [10], "bowmap align", None)
    with SamWriter(str(pipe), header) as writer:
        writer.write(b"r\t4\t*\t0\t0\t*\t*\t0\t0\tACGT\tIIII\n")
    reader.join(10)
    assert stat.S_ISFIFO(os.stat(pipe).st_mode)
    assert sorted(os.listdir(tmp_path)) == [pipe.name]  # no temporary left beside it
    if suffix == ".sam":
        assert received == [header.encode() + b"r\t4\t*\t0\t0\t*\t*\t0\t0\tACGT\tIIII\n"]
    else:
        assert received[0][:2] == b"\x1f\x8b"  # BGZF
