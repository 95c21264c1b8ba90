"""SAM text of every kind of record against a per-read Python formatter, byte for byte: pairs
(FLAG bits, unmapped mates placed at their mate, RNEXT/PNEXT/TLEN, MC, MQ), secondary records
(SEQ and QUAL '*', MAPQ 0), supplementary records with SA and hard clips, XA, read groups,
FASTA input, empty reads and names, long names, numbers past 10**8, many chunkings."""

from __future__ import annotations

import numpy as np
import pytest

from bowmap.align.extend.mapq import NO_SCORE
from bowmap.align.output.reference import ReferenceText
from bowmap.align.output.sam import ChunkAlignments, format_chunk

from .test_sam import (
    CIGAR_CODES,
    LETTERS,
    aligned_strand,
    expected_nm_md,
    make_chunk,
    random_cigar,
    reverse_complement,
)


def record(**fields) -> dict:
    return fields


class FarEnd:
    """A contig of ``length`` bases known only at its end (``codes``), indexed as a whole one."""

    def __init__(self, length: int, codes: np.ndarray):
        self.offset, self.codes = length - len(codes), codes

    def __len__(self) -> int:
        return self.offset + len(self.codes)

    def __getitem__(self, key):
        if isinstance(key, slice):
            return self.codes[key.start - self.offset : key.stop - self.offset]
        return self.codes[key - self.offset]


class FarText:
    """The reference text of chr1, plasmid|x and a FarEnd chr3, as an index's ``spans`` reads it."""

    def __init__(self, contigs):
        self.near = np.concatenate((contigs[0], contigs[1], np.zeros(1 << 14, dtype=np.uint8)))
        self.far_start = 3700 + contigs[2].offset
        self.far = np.concatenate((contigs[2].codes, np.zeros(1 << 14, dtype=np.uint8)))

    def spans(self, starts, lengths):
        starts, lengths = np.asarray(starts, dtype=np.int64), np.asarray(lengths, dtype=np.int64)
        pieces = [self.far[start - self.far_start :][:length] if start >= self.far_start else self.near[start:][:length] for start, length in zip(starts, lengths)]
        return np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.uint8)


def random_case(seed: int, count: int, paired: bool, fasta: bool, far: bool):
    """A chunk with primary, supplementary (SA partners, some hard-clipped) and secondary rows
    and XA entries; reads follow their places with some substitutions."""
    rng = np.random.default_rng(seed)
    contigs = [rng.integers(0, 4, size=size, dtype=np.uint8) for size in (3000, 700, 12000)]
    contigs[0][100:130] = 4
    if far:  # chr3 of 150 Mbp, its alignments (and its bases) in its last 12000
        contigs[2] = FarEnd(150_000_000, contigs[2])
        reference = ReferenceText(["chr1", "plasmid|x", "chr3"], [0, 3000, 3700], [3000, 700, len(contigs[2])], index=FarText(contigs))
    else:
        reference = ReferenceText.from_sequences(["chr1", "plasmid|x", "chr3"], contigs)

    def place(span):
        contig = int(rng.integers(0, 3))
        if span > len(contigs[contig]):
            contig = 0
        low = contigs[contig].offset if isinstance(contigs[contig], FarEnd) else 0
        return contig, int(rng.integers(low, len(contigs[contig]) - span + 1))

    def span_of(cigar):
        return sum(size for op, size in cigar if op in "MD=X")

    names, reads, qualities, rows, entries = [], [], [], [], []
    for read in range(count):
        length = int(rng.choice([0, 1, 17, 100, 150, 151, 250], p=[0.03, 0.02, 0.1, 0.2, 0.4, 0.15, 0.1]))
        if not paired or read % 2 == 0:
            kind = rng.random()
            name = b"" if kind < 0.05 else (b"r" * int(rng.integers(40, 300)) if kind < 0.1 else f"read{read // 2 if paired else read}".encode())
        names.append(name)
        qualities.append(bytes(rng.integers(33, 75, size=length, dtype=np.uint8)))
        if length == 0 or rng.random() < 0.15:
            reads.append(rng.integers(0, 5, size=length, dtype=np.uint8))
            rows.append(record(read=read, mapped=False, reverse=False, contig=0, position=0, cigar=[], secondary=False, supplementary=False, hard=False, partner=0))
            continue
        cigar = random_cigar(rng, length)
        contig, position = place(span_of(cigar))
        reverse = bool(rng.random() < 0.5)
        strand = aligned_strand(rng, contigs[contig], position, cigar, 0.03)
        reads.append(reverse_complement(strand) if reverse else strand)
        rows.append(record(read=read, mapped=True, reverse=reverse, contig=contig, position=position, cigar=cigar, secondary=False, supplementary=False, hard=False, partner=0))
        clipped = [size for op, size in (cigar[0], cigar[-1]) if op == "S"]
        if clipped and rng.random() < 0.5:  # the clipped part elsewhere: a supplementary row, SA both ways
            kept = clipped[0]
            other = [("M", kept), ("S", length - kept)] if cigar[0][0] == "S" else [("S", length - kept), ("M", kept)]
            other_contig, other_position = place(kept)
            split_as_secondary = bool(rng.random() < 0.2)
            rows[-1]["partner"] = 1
            rows.append(record(read=read, mapped=True, reverse=bool(rng.random() < 0.5), contig=other_contig, position=other_position, cigar=other,
                             secondary=split_as_secondary, supplementary=not split_as_secondary, hard=bool(rng.random() < 0.5), partner=-1))  # fmt: skip
        for _ in range(int(rng.random() < 0.15) * int(rng.integers(1, 3))):
            other = random_cigar(rng, length)
            other_contig, other_position = place(span_of(other))
            rows.append(record(read=read, mapped=True, reverse=bool(rng.random() < 0.5), contig=other_contig, position=other_position, cigar=other,
                             secondary=True, supplementary=False, hard=False, partner=0))  # fmt: skip
        for _ in range(int(rng.random() < 0.3) * int(rng.integers(1, 4))):
            other = random_cigar(rng, length)
            other_contig, other_position = place(span_of(other))
            entries.append(record(read=read, reverse=bool(rng.random() < 0.5), contig=other_contig, position=other_position, cigar=other))
    chunk = make_chunk(names, reads, None if fasta else qualities)
    chunk.paired = paired

    def table(rows, full: bool):
        ops = [np.array([size << 4 | CIGAR_CODES[op] for op, size in row["cigar"]], dtype=np.uint32) for row in rows]
        m = len(rows)
        score = rng.integers(-5, 300, size=m).astype(np.int32)
        alignments = ChunkAlignments(
            mapped=np.array([row.get("mapped", True) for row in rows], dtype=bool),
            reverse=np.array([row["reverse"] for row in rows], dtype=bool),
            contig=np.array([row["contig"] for row in rows], dtype=np.int32),
            position=np.array([row["position"] for row in rows], dtype=np.int64),
            score=score,
            second_score=np.where(rng.random(m) < 0.5, score - rng.integers(0, 50, size=m), NO_SCORE).astype(np.int32),
            cigar_ops=np.concatenate(ops) if ops else np.zeros(0, np.uint32),
            cigar_offsets=np.concatenate(([0], np.cumsum([len(op) for op in ops]))).astype(np.int64),
            mapq=rng.integers(0, 61, size=m).astype(np.uint8),
            read_index=np.array([row["read"] for row in rows], dtype=np.int64),
        )
        if full:
            alignments.secondary = np.array([row["secondary"] for row in rows], dtype=bool)
            alignments.supplementary = np.array([row["supplementary"] for row in rows], dtype=bool)
            alignments.hard_clipped = np.array([row["hard"] for row in rows], dtype=bool)
            step = np.array([row["partner"] for row in rows], dtype=np.int64)
            alignments.partner = np.where(step != 0, np.arange(m) + step, -1)
            alignments.proper = rng.random(m) < 0.7
        return alignments

    alignments = table(rows, True)
    if entries:
        alignments.alternatives = table(entries, False)
    return chunk, alignments, reference, contigs, rows, entries


def expected_lines(chunk, alignments, reference, contigs, rows, entries, read_group, write_unaligned) -> bytes:
    """The SAM text, one read's record at a time, as the SAM specification and bwa write it."""
    names = reference.contig_names

    def text(flat, offsets, read):
        return bytes(flat[offsets[read] : offsets[read + 1]])

    split = alignments.partner >= 0
    line = []
    for row in rows:
        row = dict(row)
        read = row["read"]
        mapped = row["mapped"]
        row["mapq"] = 0 if not mapped or (row["secondary"] and row["partner"] == 0) else None
        line.append(row)
    for k, row in enumerate(line):
        if row["mapq"] is None:
            row["mapq"] = int(alignments.mapq[k])
        row["split"] = bool(split[k])
        codes = chunk.codes[chunk.offsets[row["read"]] : chunk.offsets[row["read"] + 1]]
        row["strand"] = reverse_complement(codes) if row["mapped"] and row["reverse"] else codes
        if row["mapped"]:
            row["nm"], row["md"] = expected_nm_md(row["strand"], contigs[row["contig"]], row["position"], row["cigar"])
        row["span"] = sum(size for op, size in row["cigar"] if op in "MD=X")
        row["place"] = (row["contig"], row["position"] + 1) if row["mapped"] else (-1, 0)
    first_row = {}
    for k, row in enumerate(line):
        first_row.setdefault(row["read"], k)
    if chunk.paired:  # an unmapped read placed at its mapped mate (the mate's primary row)
        placed = [row["place"] for row in line]
        for k, row in enumerate(line):
            mate = line[first_row[row["read"] ^ 1]]
            if not row["mapped"] and mate["mapped"]:
                placed[k] = mate["place"]
        for k, row in enumerate(line):
            row["placed"] = placed[k]
    pair_mapped = {row["read"] // 2 for row in line if row["mapped"]}
    out = []
    for k, row in enumerate(line):
        read, mapped = row["read"], row["mapped"]
        if not write_unaligned and not (read // 2 in pair_mapped if chunk.paired else mapped):
            continue
        name = text(chunk.names, chunk.name_offsets, read).decode() or "*"
        hidden = row["secondary"] and row["partner"] == 0
        hard = row["hard"] and mapped and not hidden
        lead = row["cigar"][0][1] if hard and row["cigar"][0][0] == "S" else 0
        trail = row["cigar"][-1][1] if hard and row["cigar"][-1][0] == "S" else 0
        strand = row["strand"][lead : len(row["strand"]) - trail]
        sequence = "".join(LETTERS[int(code)] for code in strand) or "*"
        if chunk.qualities is None:
            quality = "*"
        else:
            quality = text(chunk.qualities, chunk.offsets, read).decode()
            quality = quality[::-1] if mapped and row["reverse"] else quality
            quality = quality[lead : len(quality) - trail] or "*"
        if hidden:
            sequence = quality = "*"
        cigar = "".join(f"{size}{op}" for op, size in row["cigar"]) or "*"
        shown_cigar = cigar.replace("S", "H") if hard else cigar
        flag = (16 if row["reverse"] else 0) if mapped else 4
        flag |= 256 if row["secondary"] and mapped else 0
        flag |= 2048 if row["supplementary"] and mapped else 0
        contig, position = row["place"]
        mapq = row["mapq"]
        rnext, pnext, tlen, tags = "*", 0, 0, []
        if chunk.paired:
            mate = line[first_row[read ^ 1]]
            contig, position = row["placed"]
            mate_contig, mate_position = mate["placed"]
            flag |= 1 | (0x40 if read % 2 == 0 else 0x80)
            flag |= 2 if alignments.proper[k] and mapped and mate["mapped"] else 0
            flag |= (0x20 if mate["reverse"] else 0) if mate["mapped"] else 8
            rnext = "*" if mate_contig < 0 else "=" if mate_contig == contig else names[mate_contig]
            pnext = mate_position
            if mapped and mate["mapped"] and contig == mate_contig:
                start, mate_start = position - 1, mate_position - 1
                left, right = min(start, mate_start), max(start + row["span"], mate_start + mate["span"])
                leftmost = start < mate_start or (start == mate_start and read % 2 == 0)
                tlen = right - left if leftmost else left - right
            if mate["mapped"]:
                tags += [f"MC:Z:{''.join(f'{size}{op}' for op, size in mate['cigar'])}", f"MQ:i:{mate['mapq']}"]
        fields = [name, str(flag), names[contig] if contig >= 0 else "*", str(position), str(mapq), shown_cigar, rnext, str(pnext), str(tlen), sequence, quality]
        if mapped:
            second = int(alignments.second_score[k])
            fields += [f"NM:i:{row['nm']}", f"MD:Z:{row['md']}", f"AS:i:{int(alignments.score[k])}"]
            if not hidden:
                fields.append(f"XS:i:{0 if second == NO_SCORE else max(second, 0)}")
        fields += tags
        if read_group is not None:
            fields.append(f"RG:Z:{read_group}")
        if row["split"]:
            other = line[int(alignments.partner[k])]
            other_contig, other_position = other["placed"] if chunk.paired else other["place"]
            other_cigar = "".join(f"{size}{op}" for op, size in other["cigar"])
            fields.append(f"SA:Z:{names[other_contig]},{other_position},{'-' if other['reverse'] else '+'},{other_cigar},{other['mapq']},{other['nm']};")
        listed = [entry for entry in entries if entry["read"] == read]
        if listed and mapped and not row["secondary"] and not row["supplementary"]:
            xa = ""
            for entry in listed:
                codes = chunk.codes[chunk.offsets[read] : chunk.offsets[read + 1]]
                entry_strand = reverse_complement(codes) if entry["reverse"] else codes
                nm, _ = expected_nm_md(entry_strand, contigs[entry["contig"]], entry["position"], entry["cigar"])
                entry_cigar = "".join(f"{size}{op}" for op, size in entry["cigar"])
                xa += f"{names[entry['contig']]},{'-' if entry['reverse'] else '+'}{entry['position'] + 1},{entry_cigar},{nm};"
            fields.append(f"XA:Z:{xa}")
        out.append("\t".join(fields) + "\n")
    return "".join(out).encode()


@pytest.mark.parametrize("seed", range(12))
def test_every_kind_of_record_equals_the_per_read_formatter(seed, monkeypatch):
    rng = np.random.default_rng(1000 + seed)
    paired, fasta, far = bool(seed % 2 == 0), bool(seed % 3 == 1), bool(seed % 4 == 3)
    count = int(rng.choice([2, 64, 255, 600])) // (2 if paired else 1) * (2 if paired else 1)
    chunk, alignments, reference, contigs, rows, entries = random_case(seed, count, paired, fasta, far)
    read_group = ["lane1", None][seed % 2]
    for write_unaligned in (True, False):
        expected = expected_lines(chunk, alignments, reference, contigs, rows, entries, read_group, write_unaligned)
        assert format_chunk(chunk, alignments, reference, read_group, write_unaligned) == expected
    monkeypatch.setattr("bowmap.align.output.sam._BATCH_BYTES", 3000)  # a read or a pair or two a batch
    assert format_chunk(chunk, alignments, reference, read_group, True) == expected_lines(chunk, alignments, reference, contigs, rows, entries, read_group, True)
