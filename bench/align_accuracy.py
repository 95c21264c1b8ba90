"""Alignment accuracy: bowmap beside bowtie2 --local, bwa mem and minimap2 -ax sr on simulated reads.

One run, all under bench/work/align_accuracy/:

1. Reference: E. coli K-12 MG1655 (4.6 Mbp) from Debian's ragout-examples, found or fetched by
   bench/index_build.py, or ``--reference FASTA``; re-wrapped at 70 columns (mason needs even lines).
2. Reads: ``mason_simulator`` single-end reads of 100, 150 and 250 bp, ``--reads`` of each, both
   strands, ~1% substitutions (0.5% at the 5' end rising to 1.5% at the 3' end), 0.1% insertions
   and 0.1% deletions per base (data/README.md's flags). Written as reads_{L}.fq.gz and
   truth_{L}.tsv (read, strand, 1-based leftmost reference position of the true alignment, contig)
   beside reference.fa.gz and params.json in reads/; reused while params.json matches.
   ``--reads-dir DIR`` takes such a folder made elsewhere (no mason needed; DIR/reference.fa.gz is
   the reference unless ``--reference`` is given).
3. Each tool builds its index once (timed apart, kept for later runs), then aligns each read set;
   the wall time is the whole command, start-up and index loading included:
   ``bowmap align`` (``--devices`` as given, else bowmap's default), ``bowtie2 --local -p T``,
   ``bwa mem -t T``, ``minimap2 -ax sr -t T`` (T = ``--threads``). A missing peer gets a row.
4. Scoring, primary SAM lines only (secondary and supplementary lines are skipped), every read of
   the truth counted once (a read absent from the SAM counts as unmapped):
   * mapped: the primary line is not flagged unmapped;
   * correct: mapped, on the true contig and strand, and its unclipped start, ``reference_start``
     (0-based) minus the length of the leading soft and hard clips, is within 5 bp of the true
     1-based leftmost position minus one. Local aligners clip read ends, so the clipped start
     would shift by the clip; the unclipped start is compared for every tool alike;
   * wrong at MAPQ >= 20: mapped, MAPQ >= 20 and not correct (count, and per mille of all reads).

5. MAPQ thresholds (issue 28): for MAPQ >= 1, 10, 20, 30, 40 and 60, the share of all reads whose
   primary line is mapped at or above the threshold, and the wrong reads among them, per tool;
   "own place": primaries with an XA entry or a secondary line at their own place (same contig
   and strand, start within 5 bp).

The issue's goal: per read length, bowmap places at least as many reads correctly as bowtie2 and
has no more wrong mappings at MAPQ >= 20 than bwa mem. Reads that bowtie2 and bwa mem both place
correctly but bowmap does not are listed in bowmap_misses_{L}.tsv, with a few printed.

Usage: python bench/align_accuracy.py [--reads N] [--threads T] [--devices SPEC]
                                      [--reference FASTA] [--reads-dir DIR] [--work DIR]
                                      [--lengths 100,150,250] [--tools bowmap,bwa]
Other genomes (issue 28: E. coli, yeast, chr20 at 150 bp), each in a work folder of its own so
its indexes and reads are kept: bench/paired_accuracy.py writes yeast's and chr20's FASTA, e.g.
  python bench/align_accuracy.py --lengths 150 --tools bowmap,bwa --reads 20000 \
      --reference bench/work/paired_accuracy/chr20/reference.fa --work bench/work/align_accuracy/chr20
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pysam

HERE = Path(__file__).resolve().parent
WORK = HERE / "work" / "align_accuracy"
READ_LENGTHS = (100, 150, 250)
TOLERANCE = 5  # bp between the unclipped start and the true start
MAPQ_CONFIDENT = 20
MAPQ_THRESHOLDS = (1, 10, 20, 30, 40, 60)
MASON = "/usr/lib/seqan/bin/mason_simulator"
MASON_ERRORS = [
    "--illumina-prob-mismatch", "0.008",
    "--illumina-prob-mismatch-begin", "0.005",
    "--illumina-prob-mismatch-end", "0.015",
    "--illumina-prob-insert", "0.001",
    "--illumina-prob-deletion", "0.001",
]  # fmt: skip
EXAMPLES_SHOWN = 3


def load_index_build():
    """bench/index_build.py as a module: its reference fetcher and machine description."""
    spec = importlib.util.spec_from_file_location("index_build", HERE / "index_build.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


index_build = load_index_build()
BenchError = index_build.BenchError


@dataclass
class Tool:
    label: str
    build: list[str]  # placeholders {ref} {prefix}
    align: list[str]  # placeholders {prefix} {reads} {out}; no {out}: the SAM is on stdout
    folder: Path = field(init=False)
    build_seconds: float | None = None
    missing: bool = False

    def __post_init__(self):
        self.folder = WORK / "index" / self.label.split()[0]  # main() moves it under --work


@dataclass
class Score:
    reads: int
    mapped: int = 0
    correct: int = 0
    wrong_confident: int = 0
    wall_seconds: float = 0.0
    status: dict = field(default_factory=dict)  # read name -> (correct?, MAPQ, "pos strand MAPQ CIGAR")
    own_place: int = 0  # primaries with an XA entry or a secondary line at their own place


def run_logged(command: list[str], log_path: Path, stdout_path: Path | None = None) -> float:
    """Run ``command`` (stderr, and stdout unless ``stdout_path``, into ``log_path``); wall seconds."""
    with open(log_path, "wb") as log, open(stdout_path or os.devnull, "wb") as stdout:
        started = time.perf_counter()
        finished = subprocess.run(command, stdout=stdout if stdout_path else log, stderr=log)
        seconds = time.perf_counter() - started
    if finished.returncode != 0:
        tail = log_path.read_text(errors="replace").strip().splitlines()[-5:]
        raise BenchError(f"`{' '.join(command)}` exited {finished.returncode}:\n  " + "\n  ".join(tail))
    return seconds


def rewrap_reference(source: Path, target: Path) -> str:
    """Write ``source`` (FASTA, gzipped or not) to ``target`` at 70 bases a line; its SHA-256."""
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_suffix(".partial")
    with pysam.FastxFile(str(source)) as records, open(temporary, "w") as out:
        for record in records:
            out.write(f">{record.name}\n")
            sequence = record.sequence
            out.writelines(sequence[start : start + 70] + "\n" for start in range(0, len(sequence), 70))
    temporary.replace(target)
    Path(f"{target}.fai").unlink(missing_ok=True)  # mason's, possibly of an earlier reference
    return index_build.sha256_of(target)


def simulate_reads(reference: Path, reads_dir: Path, read_count: int, seed: int, lengths: tuple[int, ...] = READ_LENGTHS) -> None:
    """mason reads and truth TSVs for each of ``lengths`` into ``reads_dir``, unless params.json matches."""
    reference_sha = index_build.sha256_of(reference)
    params = {"reference_sha256": reference_sha, "reads": read_count, "seed": seed, "mason": MASON_ERRORS, "lengths": list(lengths)}
    params_path = reads_dir / "params.json"
    if params_path.exists() and json.loads(params_path.read_text()) == params:
        return
    if not Path(MASON).exists():
        raise BenchError(f"{MASON} not found: install Debian's seqan-apps, or pass --reads-dir")
    reads_dir.mkdir(parents=True, exist_ok=True)
    params_path.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(dir=reads_dir) as scratch:
        for length in lengths:
            fastq, truth_sam = Path(scratch) / "reads.fq", Path(scratch) / "truth.sam"
            command = [
                MASON, "-ir", str(reference), "-n", str(read_count), "--seed", str(seed + length),
                "--illumina-read-length", str(length), *MASON_ERRORS,
                # Fragments no shorter than the read, so no read runs past its fragment.
                "--fragment-mean-size", str(max(300, 2 * length)),
                "-o", str(fastq), "-oa", str(truth_sam),
            ]  # fmt: skip
            print(f"simulating {read_count} reads of {length} bp with mason_simulator", file=sys.stderr)
            run_logged(command, Path(scratch) / "mason.log")
            with open(fastq, "rb") as source, gzip.GzipFile(reads_dir / f"reads_{length}.fq.gz", "wb", mtime=0) as target:
                shutil.copyfileobj(source, target)
            with pysam.AlignmentFile(str(truth_sam), "r") as truth, open(reads_dir / f"truth_{length}.tsv", "w") as out:
                out.write("read\tstrand\tposition_1based\tcontig\n")
                for line in truth:
                    strand = "-" if line.is_reverse else "+"
                    out.write(f"{line.query_name}\t{strand}\t{line.reference_start + 1}\t{line.reference_name}\n")
    with open(reference, "rb") as source, gzip.GzipFile(reads_dir / "reference.fa.gz", "wb", mtime=0) as target:
        shutil.copyfileobj(source, target)
    params_path.write_text(json.dumps(params, indent=1) + "\n")


def read_truth(path: Path) -> dict[str, tuple[bool, int, str | None]]:
    """Read name -> (reverse strand?, 0-based true leftmost position, contig or None if not given)."""
    truth = {}
    with open(path) as handle:
        for line_number, line in enumerate(handle, 1):
            fields = line.rstrip("\n").split("\t")
            if line_number == 1 and not fields[2].isdigit():
                continue  # header
            if len(fields) < 3 or fields[1] not in "+-" or not fields[2].isdigit():
                raise BenchError(f"{path}:{line_number}: expected read, strand (+/-), 1-based position[, contig]")
            truth[fields[0]] = (fields[1] == "-", int(fields[2]) - 1, fields[3] if len(fields) > 3 else None)
    return truth


def score_sam(sam: Path, truth: dict) -> Score:
    score = Score(reads=len(truth))
    primaries, own = {}, set()  # read -> (contig, strand, 0-based start) of its primary
    with pysam.AlignmentFile(str(sam), "r", check_sq=False) as alignments:
        for line in alignments:
            place = (line.reference_name, line.is_reverse, line.reference_start)
            if line.is_secondary and not line.is_supplementary:
                primary = primaries.get(line.query_name)
                if primary and primary[:2] == place[:2] and abs(primary[2] - place[2]) <= TOLERANCE:
                    own.add(line.query_name)
            if line.is_secondary or line.is_supplementary or line.query_name not in truth:
                continue
            if not line.is_unmapped:
                primaries[line.query_name] = place
                entries = line.get_tag("XA").split(";")[:-1] if line.has_tag("XA") else []
                if any(contig == place[0] and (position[0] == "-") == place[1] and abs(int(position[1:]) - 1 - place[2]) <= TOLERANCE
                       for contig, position, *_ in (entry.split(",") for entry in entries)):
                    own.add(line.query_name)
            if line.is_unmapped:
                score.status[line.query_name] = (False, -1, "unmapped")
                continue
            score.mapped += 1
            reverse, true_start, contig = truth[line.query_name]
            leading_clip = 0
            for operation, length in line.cigartuples:
                if operation not in (pysam.CSOFT_CLIP, pysam.CHARD_CLIP):
                    break
                leading_clip += length
            unclipped_start = line.reference_start - leading_clip
            correct = (
                line.is_reverse == reverse
                and contig in (None, line.reference_name)
                and abs(unclipped_start - true_start) <= TOLERANCE
            )
            score.correct += correct
            score.wrong_confident += not correct and line.mapping_quality >= MAPQ_CONFIDENT
            placement = f"{line.reference_start + 1} {'-' if line.is_reverse else '+'} MAPQ {line.mapping_quality} {line.cigarstring}"
            score.status[line.query_name] = (correct, line.mapping_quality, placement)
    score.own_place = len(own)
    return score


def mapq_cell(score: Score, threshold: int) -> str:
    """"share% (wrong)": reads mapped at MAPQ >= ``threshold``, % of all reads, and the wrong ones."""
    at = [correct for correct, mapq, _ in score.status.values() if mapq >= threshold]
    return f"{100 * len(at) / score.reads:.3f} ({len(at) - sum(at)})"


def tool_versions(bowmap: list[str]) -> str:
    def first_line(command):
        try:
            finished = subprocess.run(command, capture_output=True, text=True)
        except FileNotFoundError:
            return "not installed"
        return (finished.stdout or finished.stderr).strip().splitlines()[0].split()[-1]

    return (
        f"bowmap {first_line([*bowmap, '--version'])}, "
        f"bowtie2 {index_build.tool_version(['bowtie2', '--version'], 'version ')}, "
        f"bwa {index_build.tool_version(['bwa'], 'Version: ')}, minimap2 {first_line(['minimap2', '--version'])}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reads", type=int, default=20000, metavar="N", help="reads simulated per length (default 20000)")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), metavar="T", help="threads for the CPU peers (default: all cores)")
    parser.add_argument("--devices", metavar="SPEC", help="bowmap align --devices (default: bowmap's default)")
    parser.add_argument("--reference", type=Path, metavar="FASTA", help=f"reference (default: {index_build.REFERENCE_DESCRIPTION})")
    parser.add_argument("--reads-dir", type=Path, metavar="DIR", help="pre-made reads_{L}.fq.gz and truth_{L}.tsv (no mason)")
    parser.add_argument("--seed", type=int, default=7, help="mason's seed is this plus the read length (default 7)")
    parser.add_argument("--work", type=Path, metavar="DIR", help=f"work folder: indexes, reads, SAM (default {WORK}); one a reference")
    parser.add_argument("--lengths", default=",".join(map(str, READ_LENGTHS)), metavar="L[,L]", help="read lengths (default 100,150,250)")
    parser.add_argument("--tools", metavar="NAME[,NAME]", help="bowmap, bowtie2, bwa, minimap2 (default: all)")
    args = parser.parse_args()
    if args.reads < 1 or args.threads < 1:
        parser.error("--reads and --threads must be at least 1")
    try:
        lengths = tuple(int(length) for length in args.lengths.split(","))
    except ValueError:
        lengths = ()
    if not lengths or min(lengths) < 20:
        parser.error(f"--lengths {args.lengths}: expected comma-separated read lengths of at least 20")
    wanted = None if args.tools is None else set(args.tools.split(","))
    if wanted is not None and not wanted <= {"bowmap", "bowtie2", "bwa", "minimap2"}:
        parser.error(f"--tools {args.tools}: expected some of bowmap, bowtie2, bwa, minimap2")
    work = args.work.resolve() if args.work else WORK

    bowmap = [sys.executable, "-m", "bowmap"]
    threads = str(args.threads)
    tools = [
        Tool("bowmap", [*bowmap, "index", "{ref}", "{prefix}", "--no-progress"],
             [*bowmap, "align", "{prefix}", "{reads}", "-o", "{out}", "--no-progress",
              *(["--devices", args.devices] if args.devices else [])]),
        Tool("bowtie2 --local", ["bowtie2-build", "--threads", threads, "{ref}", "{prefix}"],
             ["bowtie2", "--local", "-p", threads, "-x", "{prefix}", "-U", "{reads}", "-S", "{out}"]),
        Tool("bwa mem", ["bwa", "index", "-p", "{prefix}", "{ref}"], ["bwa", "mem", "-t", threads, "{prefix}", "{reads}"]),
        Tool("minimap2 -ax sr", ["minimap2", "-x", "sr", "-d", "{prefix}", "{ref}"],
             ["minimap2", "-ax", "sr", "-t", threads, "{prefix}", "{reads}", "-o", "{out}"]),
    ]  # fmt: skip
    tools = [tool for tool in tools if wanted is None or tool.label.split()[0] in wanted]
    for tool in tools:
        tool.folder = work / "index" / tool.label.split()[0]
    try:
        work.mkdir(parents=True, exist_ok=True)
        if args.reference is not None:
            if not args.reference.is_file():
                raise BenchError(f"{args.reference}: no such file")
            source, description = args.reference.resolve(), f"--reference {args.reference}"
        elif args.reads_dir is not None and (args.reads_dir / "reference.fa.gz").is_file():
            source, description = args.reads_dir / "reference.fa.gz", f"{args.reads_dir}/reference.fa.gz"
        else:
            source, description = index_build.packaged_reference(), index_build.REFERENCE_DESCRIPTION
        reference = work / "reference.fa"
        reference_sha = rewrap_reference(source, reference)

        reads_dir = args.reads_dir or work / "reads"
        if args.reads_dir is None:
            simulate_reads(reference, reads_dir, args.reads, args.seed, lengths)
        params_path = reads_dir / "params.json"
        if params_path.exists() and json.loads(params_path.read_text())["reference_sha256"] != reference_sha:
            raise BenchError(f"{params_path}: the reads were simulated from another reference than {source}")
        truths = {length: read_truth(reads_dir / f"truth_{length}.tsv") for length in lengths}

        # Indexes: built once per reference and kept; build.json holds the time it took.
        for tool in tools:
            if shutil.which(tool.align[0]) is None or shutil.which(tool.build[0]) is None:
                tool.missing = True
                continue
            stamp = tool.folder / "build.json"
            if stamp.exists() and json.loads(stamp.read_text())["reference_sha256"] == reference_sha:
                tool.build_seconds = json.loads(stamp.read_text())["seconds"]
                continue
            shutil.rmtree(tool.folder, ignore_errors=True)
            tool.folder.mkdir(parents=True)
            print(f"indexing with {tool.label}", file=sys.stderr)
            command = [part.format(ref=reference, prefix=tool.folder / "index") for part in tool.build]
            tool.build_seconds = run_logged(command, tool.folder / "build.log")
            stamp.write_text(json.dumps({"reference_sha256": reference_sha, "seconds": tool.build_seconds}) + "\n")

        scores: dict[tuple[int, str], Score] = {}
        bowmap_devices = "?"
        for length in lengths:
            reads = reads_dir / f"reads_{length}.fq.gz"
            for tool in (tool for tool in tools if not tool.missing):
                out = work / "sam" / f"{tool.folder.name}_{length}.sam"
                out.parent.mkdir(exist_ok=True)
                log = out.with_suffix(".log")
                command = [part.format(prefix=tool.folder / "index", reads=reads, out=out) for part in tool.align]
                print(f"aligning {length} bp reads with {tool.label}", file=sys.stderr)
                wall_seconds = run_logged(command, log, None if "{out}" in tool.align else out)
                scores[length, tool.label] = score = score_sam(out, truths[length])
                score.wall_seconds = wall_seconds
                if tool.label == "bowmap":
                    for line in log.read_text(errors="replace").splitlines():
                        if "] devices: " in line:
                            bowmap_devices = line.split("] devices: ", 1)[1].split(";")[0]
        versions = tool_versions(bowmap)
    except BenchError as error:
        print(f"align_accuracy: error: {error}", file=sys.stderr)
        return 1

    counts = ", ".join(f"{len(truths[length])} x {length} bp" for length in lengths)
    print(index_build.describe_reference(reference, description))
    print(f"reads: {counts} (mason_simulator, ~1% substitutions, 0.1% insertions, 0.1% deletions) from {reads_dir}")
    print(f"{index_build.describe_machine()}; peers' threads {args.threads}; bowmap devices: {bowmap_devices}")
    print(f"{versions}")
    built = ", ".join(f"{tool.label.split()[0]} {tool.build_seconds:.1f}" for tool in tools if not tool.missing)
    print(f"index build s (once, kept for later runs): {built}")
    print(f"correct: same strand, unclipped start within {TOLERANCE} bp of the truth; primary lines only")
    print(f"{'length':>6}  {'tool':<16} {'mapped %':>8} {'correct %':>9} {'wrong MAPQ>=20':>16} {'wall s':>7} {'reads/s':>9}")
    for length in lengths:
        for tool in tools:
            if tool.missing:
                print(f"{length:>6}  {tool.label:<16} not installed")
                continue
            score = scores[length, tool.label]
            wrong = f"{score.wrong_confident} ({1000 * score.wrong_confident / score.reads:.1f}\u2030)"
            print(
                f"{length:>6}  {tool.label:<16} {100 * score.mapped / score.reads:>8.2f} "
                f"{100 * score.correct / score.reads:>9.2f} {wrong:>16} {score.wall_seconds:>7.2f} "
                f"{score.reads / score.wall_seconds:>9.0f}"
            )

    print(f"reads at or above each MAPQ, % of all reads (wrong reads among them){'':>4}")
    print(f"{'length':>6}  {'tool':<16} " + " ".join(f"{f'>={threshold}':>15}" for threshold in MAPQ_THRESHOLDS) + "  own place")
    for length in lengths:
        for tool in (tool for tool in tools if not tool.missing):
            cells = [mapq_cell(scores[length, tool.label], threshold) for threshold in MAPQ_THRESHOLDS]
            own = scores[length, tool.label].own_place
            print(f"{length:>6}  {tool.label:<16} " + " ".join(f"{cell:>15}" for cell in cells) + f"  {own:>9}")

    # The goal, and the reads bowmap loses that both main peers place correctly.
    for length in lengths:
        bowmap_score = scores.get((length, "bowmap"))
        peers = [scores.get((length, label)) for label in ("bowtie2 --local", "bwa mem")]
        if None in peers or bowmap_score is None:
            print(f"{length} bp: goal not checked (bowmap, bowtie2 or bwa mem not run)")
            continue
        bowtie2_score, bwa_score = peers
        met = bowmap_score.correct >= bowtie2_score.correct and bowmap_score.wrong_confident <= bwa_score.wrong_confident
        absent = (False, -1, "absent")
        misses = [
            name
            for name in truths[length]
            if bowtie2_score.status.get(name, absent)[0]
            and bwa_score.status.get(name, absent)[0]
            and not bowmap_score.status.get(name, absent)[0]
        ]
        # Reads bwa mem places with MAPQ >= 20 lie in unique sequence: losing one is a real miss,
        # unlike a repeat copy chosen among equals (MAPQ 0), so those come first.
        misses.sort(key=lambda name: bwa_score.status[name][1] < MAPQ_CONFIDENT)
        unique = sum(bwa_score.status[name][1] >= MAPQ_CONFIDENT for name in misses)
        misses_path = work / f"bowmap_misses_{length}.tsv"
        with open(misses_path, "w") as out:
            out.write("read\ttrue_strand\ttrue_position_1based\tbowmap\tbwa_mem\n")
            for name in misses:
                reverse, start, _ = truths[length][name]
                out.write(
                    f"{name}\t{'-' if reverse else '+'}\t{start + 1}\t"
                    f"{bowmap_score.status.get(name, absent)[2]}\t{bwa_score.status[name][2]}\n"
                )
        print(
            f"{length} bp: goal (correct >= bowtie2, wrong MAPQ>=20 <= bwa mem) {'met' if met else 'NOT met'}; "
            f"bowtie2 and bwa mem both place {len(misses)} reads correctly that bowmap does not, "
            f"{unique} of them with bwa mem MAPQ >= {MAPQ_CONFIDENT} ({misses_path.name})"
        )
        for name in misses[:EXAMPLES_SHOWN]:
            reverse, start, _ = truths[length][name]
            print(
                f"    {name}: truth {start + 1} {'-' if reverse else '+'}; "
                f"bowmap {bowmap_score.status.get(name, absent)[2]}; bwa mem {bwa_score.status[name][2]}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
