"""SAM text formatting (``bowmap.align.output.sam.format_chunk``) alone, before and after a change.

Builds synthetic chunks like the ones the paired run hands to ``format_chunk`` (by default
14,000 pairs of 2x150 on a 64 Mbp contig and chrM, as a 1 M-pair chr20 run's chunks): mason-like
names, 1% substitutions and a few Ns, CIGARs mostly 150M with soft clips (5%) and 1-3 base
indels (4%), 3% of mates unmapped, proper pairs, XA on 10% of the mapped primaries (1-3 entries),
a supplementary row with SA for 1% of the reads, MAPQ given. The reference is held one code a
byte (``ReferenceText.from_sequences``), not the index's packed text.

Formats each chunk with the working tree's ``format_chunk`` and with the one of ``--before``
(a git revision, default the commit this change started from; loaded from ``git show`` into a
temporary module), checks the two outputs are byte-identical, and prints rows/s of each (best of
``--repeats``). ``--check N`` also compares the two on N smaller random chunks of every kind
(single/paired, FASTA, read groups, secondary and hard-clipped rows, long and empty names and
reads) before timing.

    python bench/sam_format.py [--pairs 14000] [--repeats 5] [--check 40]

Here (the 2-core development machine, shared, NumPy 2; best CPU ms of 11 interleaved calls,
--check 40 byte-identical; 11-12 MB of SAM a chunk):

| chunk (28,000 reads) | before (f240ef9) rows/s | after rows/s | ms a chunk before / after | speed-up |
|---|---|---|---|---|
| paired 2x150, XA/SA | 492,216 | 725,892 | 57.4 / 38.9 | 1.47x |
| paired, FASTA, RG | 549,624 | 779,476 | 51.4 / 36.3 | 1.42x |
| single 150 | 604,941 | 852,108 | 46.7 / 33.1 | 1.41x |

Each formatter called alone, 12 times in a row (not interleaved), the paired chunk takes 75 ms
before and 40 ms after (1.86x): the old one's 20 MB matrices are fresh memory each time then.
Interleaved calls give the lower, safer figure above; the machine's load moves both by ~10%.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bowmap.align.extend.mapq import NO_SCORE
from bowmap.align.output.reference import ReferenceText
from bowmap.align.output.sam import ChunkAlignments, format_chunk

BEFORE = "f240ef9"  # main when this change started
CODES = {"M": 0, "I": 1, "D": 2, "S": 4, "=": 7, "X": 8}


def old_format_chunk(revision: str):
    """``format_chunk`` of ``revision``, with its own sam_text, as a temporary module."""
    folder = Path(tempfile.mkdtemp(prefix="sam_format_"))
    modules = {}
    for name in ("sam_text", "sam"):
        source = subprocess.run(["git", "show", f"{revision}:bowmap/align/output/{name}.py"], cwd=ROOT, check=True, capture_output=True, text=True).stdout
        source = source.replace("from bowmap.align.output.sam_text import", "from _old_sam_text import")
        path = folder / f"_old_{name}.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(f"_old_{name}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        modules[name] = module
    return modules["sam"].format_chunk


class Chunk(SimpleNamespace):
    @property
    def count(self) -> int:
        return len(self.offsets) - 1


def ragged(parts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.concatenate(([0], np.cumsum([len(part) for part in parts]))).astype(np.int64)
    flat = np.concatenate(parts).astype(np.uint8) if parts else np.zeros(0, np.uint8)
    return flat, offsets


def complement(codes: np.ndarray) -> np.ndarray:
    return np.where(codes < 4, 3 - codes, 4).astype(np.uint8)[::-1]


def random_cigar(rng, length: int, indel: float, clip: float, messy: bool) -> list[tuple[str, int]]:
    draw = rng.random()
    if messy and rng.random() < 0.3:  # anything: clips both ends, several indels, = and X
        ops, left = [], length
        if left > 3 and rng.random() < 0.4:
            size = int(rng.integers(1, left // 3 + 1))
            ops.append(("S", size))
            left -= size
        end_clip = int(rng.integers(1, left // 3 + 1)) if left > 3 and rng.random() < 0.4 else 0
        left -= end_clip
        while left > 0:
            run = int(rng.integers(1, left + 1))
            ops.append((str(rng.choice(["M", "M", "=", "X"])), run))
            left -= run
            if left > 2 and rng.random() < 0.5:
                if rng.random() < 0.5:
                    size = int(rng.integers(1, min(4, left)))
                    ops.append(("I", size))
                    left -= size
                else:
                    ops.append(("D", int(rng.integers(1, 30))))
        if end_clip:
            ops.append(("S", end_clip))
        merged = []
        for op, size in ops:
            if merged and merged[-1][0] == op:
                merged[-1] = (op, merged[-1][1] + size)
            else:
                merged.append((op, size))
        return merged
    if length < 12 or draw >= clip + indel:
        return [("M", length)]
    if draw < clip:
        size = int(rng.integers(5, min(40, length // 2)))
        return [("S", size), ("M", length - size)] if rng.random() < 0.5 else [("M", length - size), ("S", size)]
    size = int(rng.integers(1, 4))
    cut = int(rng.integers(length // 4, 3 * length // 4))
    if rng.random() < 0.5:
        return [("M", cut), ("I", size), ("M", length - cut - size)]
    return [("M", cut), ("D", size), ("M", length - cut)]


def make_chunk(seed: int, reads: int, *, paired: bool = True, fasta: bool = False, lengths=(150,), contigs=None, messy: bool = False,
               unmapped: float = 0.03, xa: float = 0.10, supplementary: float = 0.01, secondary: float = 0.0, hard_clip: float = 0.0,
               long_names: bool = False):  # fmt: skip
    """A chunk, its ChunkAlignments and its ReferenceText (see the module docstring)."""
    rng = np.random.default_rng(seed)
    if contigs is None:
        contigs = [("chr20", 64_444_167), ("chrM", 16_569)]
    sequences = [rng.integers(0, 4, size=size, dtype=np.uint8) for _, size in contigs]
    for sequence in sequences:
        sequence[rng.integers(0, len(sequence), size=max(1, len(sequence) // 5000))] = 4
    count = reads + reads % 2 if paired else reads

    # Copies (repeats for XA and secondary rows, the other part of a split read) go to the last
    # tenth of the longest contig, one after another, so that none overwrites a read's place.
    longest = int(np.argmax([len(s) for s in sequences]))
    copies = [len(sequences[longest]) * 9 // 10]

    def place(length_needed, copy=False):
        if copy:
            if copies[0] + length_needed > len(sequences[longest]):
                copies[0] = len(sequences[longest]) * 9 // 10  # small test genomes: start again
            copies[0] += length_needed
            return longest, max(copies[0] - length_needed, 0)
        contig = 0 if rng.random() < 0.97 or len(contigs) == 1 else int(rng.integers(1, len(contigs)))
        if len(sequences[contig]) < length_needed:
            contig = longest
        end = len(sequences[contig]) * 9 // 10 if contig == longest else len(sequences[contig])
        return contig, int(rng.integers(0, max(end - length_needed, 0) + 1))

    def mutated(bases):
        bases = bases.copy()
        change = rng.random(len(bases)) < 0.01
        bases[change] = rng.integers(0, 5, size=int(change.sum()))
        return bases

    def repeat(contig, position, span):
        """A place holding a near copy of ``span`` bases at ``position`` (a repeat, as XA lists)."""
        other_contig, other_position = place(span, copy=True)
        sequences[other_contig][other_position : other_position + span] = mutated(sequences[contig][position : position + span])
        return other_contig, other_position

    def aligned_strand(contig, position, cigar):
        parts, at = [], position
        for op, size in cigar:
            if op in "M=X":
                parts.append(mutated(sequences[contig][at : at + size]))
                at += size
            elif op == "D":
                at += size
            else:
                parts.append(rng.integers(0, 4, size=size, dtype=np.uint8))
        return np.concatenate(parts) if parts else np.zeros(0, np.uint8)

    names, codes, qualities = [], [], []
    rows = []  # (read, mapped, reverse, contig, position, cigar, secondary, supplementary, hard, partner_offset)
    for read in range(count):
        length = int(rng.choice(lengths))
        pair = read // 2 if paired else read
        if read % 2 == 0 or not paired:
            base = f"simulated.{seed}.{pair + 1}" if not long_names else f"sim_{'x' * int(rng.integers(0, 300))}_{pair}"
            name = b"" if long_names and rng.random() < 0.05 else base.encode()
        names.append(np.frombuffer(name, np.uint8))
        qualities.append(rng.integers(33, 75, size=length, dtype=np.uint8))
        if length == 0 or rng.random() < unmapped:
            codes.append(rng.integers(0, 5, size=length, dtype=np.uint8))
            rows.append((read, False, False, 0, 0, [], False, False, False, 0))
            continue
        cigar = random_cigar(rng, length, 0.04, 0.05, messy)
        span = sum(size for op, size in cigar if op in "MD=X")
        contig, position = place(span)
        reverse = bool(rng.random() < 0.5)
        mate = rows[-1] if paired and read % 2 and rows and rows[-1][0] == read - 1 else None
        if mate is not None and mate[1] and span <= len(sequences[mate[3]]) and rng.random() < 0.98:  # the mate of a pair, 50-500 bp on, other strand
            reverse = not mate[2]
            end = len(sequences[mate[3]]) - span
            contig, position = mate[3], int(min(max(mate[4] + int(rng.integers(-500, 500)), 0), end))
        strand = aligned_strand(contig, position, cigar)
        codes.append(complement(strand) if reverse else strand)
        split = cigar[0][0] == "S" or cigar[-1][0] == "S"
        rows.append((read, True, reverse, contig, position, cigar, False, False, False, 0))
        if split and rng.random() < supplementary * 20:
            clip_first = cigar[0][0] == "S"
            kept = cigar[0][1] if clip_first else cigar[-1][1]
            other = [("M", kept), ("S", length - kept)] if clip_first else [("S", length - kept), ("M", kept)]
            other_contig, other_position = place(kept, copy=True)
            part = strand[:kept] if clip_first else strand[-kept:]  # the clipped part lies there (a repeat made)
            sequences[other_contig][other_position : other_position + kept] = mutated(part)
            rows[-1] = rows[-1][:-1] + (1,)
            rows.append((read, True, reverse, other_contig, other_position, other, False, True, bool(rng.random() < hard_clip * 10 + (hard_clip > 0) * 0.5), -1))
        for _ in range(int(rng.random() < secondary) * int(rng.integers(1, 3))):
            other_contig, other_position = repeat(contig, position, span)
            rows.append((read, True, reverse, other_contig, other_position, cigar, True, False, False, 0))
    name_flat, name_offsets = ragged(names)
    code_flat, offsets = ragged(codes)
    reverse_flat, _ = ragged([complement(c) for c in codes])
    chunk = Chunk(
        names=name_flat, name_offsets=name_offsets, codes=code_flat, offsets=offsets, reverse_codes=reverse_flat,
        qualities=None if fasta else ragged(qualities)[0], paired=paired, both_codes=np.concatenate((code_flat, reverse_flat)),
    )  # fmt: skip

    def alignments_of(rows, extra: bool):
        m = len(rows)
        cigars = [row[5] for row in rows]
        ops = [np.array([size << 4 | CODES[op] for op, size in cigar], np.uint32) for cigar in cigars]
        score = rng.integers(0, 151, size=m).astype(np.int32)
        table = ChunkAlignments(
            mapped=np.array([row[1] for row in rows], bool),
            reverse=np.array([row[2] for row in rows], bool),
            contig=np.array([row[3] for row in rows], np.int32),
            position=np.array([row[4] for row in rows], np.int64),
            score=score,
            second_score=np.where(rng.random(m) < 0.4, score - rng.integers(0, 40, size=m), NO_SCORE).astype(np.int32),
            cigar_ops=np.concatenate(ops) if ops else np.zeros(0, np.uint32),
            cigar_offsets=np.concatenate(([0], np.cumsum([len(cigar) for cigar in cigars]))).astype(np.int64),
            mapq=rng.integers(0, 61, size=m).astype(np.uint8),
            read_index=np.array([row[0] for row in rows], np.int64),
        )
        if extra:
            table.secondary = np.array([row[6] for row in rows], bool)
            table.supplementary = np.array([row[7] for row in rows], bool)
            table.hard_clipped = np.array([row[8] for row in rows], bool)
            step = np.array([row[9] for row in rows], np.int64)
            table.partner = np.where(step != 0, np.arange(m) + step, -1)
            table.proper = rng.random(m) < 0.9 if paired else None
        return table

    alignments = alignments_of(rows, True)
    listed = []
    for row in rows:
        if row[1] and not (row[6] or row[7]) and rng.random() < xa:
            span = sum(size for op, size in row[5] if op in "MD=X")
            for _ in range(int(rng.integers(1, 4))):  # near copies of the primary's place
                contig, position = repeat(row[3], row[4], span)
                listed.append((row[0], True, row[2], contig, position, row[5], False, False, False, 0))
    if listed:
        alignments.alternatives = alignments_of(listed, False)
    reference = ReferenceText.from_sequences([name for name, _ in contigs], sequences)  # with the repeats made
    return chunk, alignments, reference


def only_empty_sequences_differ(old: bytes, new: bytes) -> bool:
    """Whether the lines differ only where f240ef9 wrote an empty SEQ (an empty read in a batch
    with a hard-clipped row: its _hard_clip cleared the '*'), where the new text has '*'."""
    old_lines, new_lines = old.split(b"\n"), new.split(b"\n")
    if len(old_lines) != len(new_lines):
        return False
    for old_line, new_line in zip(old_lines, new_lines):
        if old_line != new_line:
            old_fields, new_fields = old_line.split(b"\t"), new_line.split(b"\t")
            if old_fields[:9] + old_fields[10:] != new_fields[:9] + new_fields[10:] or (old_fields[9], new_fields[9]) != (b"", b"*"):
                return False
    return True


def best_seconds(functions, repeats: int) -> list[tuple[float, bytes]]:
    """Best CPU time and output of each function, called in turn ``repeats`` times (interleaved,
    so that a busy spell of the machine does not fall on one of them only)."""
    best, texts = [float("inf")] * len(functions), [b""] * len(functions)
    for _ in range(repeats):
        for k, function in enumerate(functions):
            started = time.process_time()  # CPU time, page faults included: what a worker spends
            texts[k] = function()
            best[k] = min(best[k], time.process_time() - started)
    return list(zip(best, texts))


def kinds(seed: int):
    """Small random chunks of every kind the formatter takes, for --check."""
    rng = np.random.default_rng(seed)
    paired = bool(rng.random() < 0.6)
    options = dict(  # noqa: C408
        paired=paired, fasta=bool(rng.random() < 0.25), messy=bool(rng.random() < 0.6), long_names=bool(rng.random() < 0.25),
        lengths=[(150,), (0, 1, 2, 17, 100, 151, 250), (5000, 150, 3)][int(rng.integers(0, 3))],
        contigs=[None, [("c1", 9000), ("plasmid|x", 700), ("chrUn_very_long_name_1", 120_000)]][int(rng.integers(0, 2))],
        unmapped=float(rng.choice([0.0, 0.03, 0.3, 1.0])), xa=float(rng.choice([0.0, 0.1, 0.8])),
        supplementary=float(rng.choice([0.0, 0.01, 0.05])), secondary=float(rng.choice([0.0, 0.0, 0.2])), hard_clip=float(rng.choice([0.0, 0.05])),
    )  # fmt: skip
    reads = int(rng.choice([1, 2, 3, 64, 255, 1000]))
    read_group = [None, "lane1", "rg.7"][int(rng.integers(0, 3))]
    return make_chunk(seed, reads, **options), read_group, bool(rng.random() < 0.7), options


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=14_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--before", default=BEFORE, help="git revision of the formatter to compare with")
    parser.add_argument("--check", type=int, default=0, help="random small chunks compared byte for byte first")
    args = parser.parse_args()
    before = old_format_chunk(args.before)
    old_failed = 0
    for seed in range(args.check):
        (chunk, alignments, reference), read_group, write_unaligned, options = kinds(1000 + seed)
        new = format_chunk(chunk, alignments, reference, read_group, write_unaligned)
        try:
            old = before(chunk, alignments, reference, read_group, write_unaligned)
        except IndexError:  # f240ef9's _hard_clip read past the CIGARs when a batch ended with an unmapped row
            old_failed += 1
            continue
        if old != new and not only_empty_sequences_differ(old, new):
            print(f"check {seed}: outputs differ ({options}, rg {read_group}, unaligned {write_unaligned})", file=sys.stderr)
            return 1
    if args.check:
        print(f"{args.check - old_failed} random chunks: byte-identical ({old_failed} more that the old formatter fails on)")
    cases = [
        ("paired 2x150, XA/SA", make_chunk(1, 2 * args.pairs), None),
        ("paired, FASTA, RG", make_chunk(2, 2 * args.pairs, fasta=True), "lane1"),
        ("single 150", make_chunk(3, 2 * args.pairs, paired=False), None),
    ]
    print(f"| chunk ({2 * args.pairs:,} reads) | before ({args.before}) rows/s | after rows/s | ms a chunk before / after | speed-up | MB of SAM |")
    print("|---|---|---|---|---|---|")
    for label, (chunk, alignments, reference), read_group in cases:
        (old_seconds, old), (new_seconds, new) = best_seconds(
            [lambda: before(chunk, alignments, reference, read_group, True), lambda: format_chunk(chunk, alignments, reference, read_group, True)],  # noqa: B023
            args.repeats,
        )
        if old != new:
            print(f"{label}: outputs differ", file=sys.stderr)
            return 1
        rows = len(alignments.mapped)
        print(f"| {label} | {rows / old_seconds:,.0f} | {rows / new_seconds:,.0f} | {old_seconds * 1e3:.1f} / {new_seconds * 1e3:.1f} | {old_seconds / new_seconds:.2f}x | {len(new) / 1e6:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
