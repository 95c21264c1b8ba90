"""Human scale (issue 20): one table of index build, speed and accuracy at human scale, made in
stages that each fit a 10-minute call of the GPU machine.

What it measures (every figure from bowmap run as a user runs it, SAM written to a file):

* index build of bench/human_genome.py's human-like genome (``--gbp``, default 3.1):
  ``bowmap index REF PREFIX --no-progress --threads T``, wall time and the peak of the whole
  process tree's summed RSS (bench/harness.py's ``run_measured_memory``, sampled every 50 ms) and
  summed PSS, beside the build's own prediction and the number of blocks;
* ``bowmap align`` single-end (``--reads`` N reads of 150 bp) and paired-end (``--pairs`` pairs,
  default N / 2, so N mates) on
  - human chr20 (GRCh37, Debian's vt-examples as bench/end_to_end.py takes it: ``--vt-deb`` or
    ``--chr20``) indexed as one block and split (``bowmap index --device-mem 24M``:
    ``--split-device-mem``, four blocks of chr20 at index format 1; 40M makes three),
  - the human-like genome (its default index: two blocks at 3.1 Gbp, all resident), and
  - the human-like genome block by block: ``bowmap align --device-mem 16G``
    (``--capped-device-mem``), single-end, only where ``bowmap align --help`` lists
    ``--device-mem`` (else the row says so);
  each gives whole-command reads/s (N / t_N) and steady reads/s ((K N - N) / (t_KN - t_N), with
  the N reads copied K = ``--copies`` times and renamed by end_to_end's ``repeated_reads``:
  start-up and index loading cancel out, as in end_to_end's --repeat-bowmap), peak RSS and peak
  PSS of the process tree (harness's ``run_measured_memory``: VmRSS of /proc/PID/status and Pss of
  /proc/PID/smaps_rollup, each summed over the command and its descendants; RSS every 0.2 s,
  PSS as often as 1% of one core allows, as the PSS walks every mapped page: the table notes
  how many PSS samples and how long each took; a process whose smaps_rollup cannot be read counts
  at its RSS, and its cell is starred), and accuracy of the N-read run against the
  simulated truth: right % (primary record on the true strand, and contig, unclipped start
  within 5 bp: align_accuracy's ``score_sam``, paired_end's ``score``) and wrong at MAPQ >= 20;
  paired runs also proper %. Mates count as reads. Reads and pairs are simulated with NumPy by
  end_to_end's ``prepare_reads`` and paired_end's ``prepare_pairs`` (0.8% substitutions, 0.1%
  insertions and deletions of 1-3 bases; fragments 400 +/- 40). Before a case's timed runs, an
  untimed run on its first 1,000 reads (pairs) compiles the kernels and reads the index into the
  page cache. With ``--repeat R`` each timed run is made R times, the cases interleaved, the
  least time kept.
* Goals (issue 20): split chr20 >= 90% of one-block chr20 (steady); the human-like genome >= 90%
  of one-block chr20 (steady); index build <= 10 min and <= 16 GB (10^9 bytes); block by block
  with a 16 GB cap within 2x of all resident (steady >= half). Issue 29: PSS of each human-like
  genome run (single, paired, block by block) <= 24 GB.

Stages (``--stage``, comma-separated; ``all`` is genome,index,big,chr20): everything is cached
under ``--work`` (default bench/work/human_scale/) and reused while its parameters match, so a
stage cut off by ``timeout`` goes on where it stopped when called again; each stage needs the
ones before it and makes whatever of them is missing. Each stage appends its rows to
<work>/results.jsonl (one JSON object a line; the last row of an id wins) and prints the table
from every row there; ``--stage report`` only prints it. A row not made yet shows "-" and why.
``--stop-after S`` starts no new step (genome, reads, index build, a timed run, scoring) after S
seconds and exits 3 ("call again"), so a step is not cut off by the call's time limit.

* genome: the human-like genome (``--threads`` processes: human_genome's ``--workers``),
  then its reads and pairs (side by side) and their K-fold copies;
* index: its index, timed (the goal row);
* big: its align rows (single, paired, block by block);
* chr20: chr20's reference, reads, pairs, copies, both indexes and its four align rows.

Sizes at the defaults: the 3.2 GB FASTA and 2.5 GB index, and per genome 2 M reads and 1 M pairs
(0.66 GB each) with their 5-fold copies (3.3 GB each); a whole run's SAM (0.9 GB) is kept until
scored, a copies run's (4.5 GB) deleted at once: about 32 GB of disk at the most.

Commands, GPU machine (16 cores, one GPU, 128 GiB, 64 GiB of disk, no network). It keeps its files
only while warm and goes back 30 minutes after it started, so make the calls one after another
(about 25 minutes in all); a stage on a fresh machine first remakes what it needs. Each call
starts with ``source .device/setup.sh &&`` as for the other benches; DEB =
.gpu/vt-examples_0.57721+ds-3_all.deb; ``--threads`` defaults to the 16 usable cores:

    timeout 590 python3 bench/human_scale.py --stage genome                  # ~3-4 min
    timeout 590 python3 bench/human_scale.py --stage index                   # ~7 min (421.6 s on an H200)
    timeout 590 python3 bench/human_scale.py --stage big --stop-after 420    # ~4-5 min
    timeout 590 python3 bench/human_scale.py --stage chr20 --vt-deb DEB --repeat 2 --stop-after 420
                                                                             # ~6 min; exit 3: call it again
    python3 bench/human_scale.py; cp bench/work/human_scale/results.jsonl $OUT/

(Estimates from the README's H200 figures and this machine's NumPy speed: the genome about
20 s a Gbp in one process, reads about 20 s a million, reading a genome 20 s a Gbp; chr20 runs
of 2 M reads 7-10 s, 10 M 15-40 s. ``--repeat 2`` on chr20 only: its two rows make the 90%
goal, where runs of one commit vary by 5-10%.)

Here (PoCL, 2 cores; a tiny run that makes every row, about 10 minutes):

    python bench/human_scale.py --stage all --gbp 0.05 --contig-mbp 5,20 --reads 20000 \\
        --copies 3 --vt-deb vt-examples_0.57721+ds-3_all.deb --devices cpu
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import os
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # bench/ is no package: its scripts import each other by name
import end_to_end  # noqa: E402  prepare_reference, prepare_reads, repeated_reads
import harness  # noqa: E402  run_measured_memory, PSS_CPU_SHARE
import human_genome  # noqa: E402  Parameters, generate
import paired_end  # noqa: E402  prepare_pairs, score

align_accuracy = end_to_end.align_accuracy  # read_truth, score_sam
index_build = end_to_end.index_build  # predicted_peak, sha256_of
BenchError = end_to_end.BenchError

DEFAULT_WORK = HERE / "work" / "human_scale"
READ_LENGTH = 150
WARM_UP = 1_000  # reads (pairs) of the untimed run before a case's timed runs
FRAGMENT_MEAN, FRAGMENT_SD = 400.0, 40.0
STAGES = ("genome", "index", "big", "chr20")
SHARE_OF_ONE_BLOCK = 0.90  # split chr20 and the big genome, steady, against one-block chr20
INDEX_SECONDS, INDEX_BYTES = 600, 16e9  # "<= 10 min and <= 16 GB"
CAPPED_SLOWDOWN = 2.0  # block by block within 2x of all resident
PSS_BYTES = 24e9  # issue 29: "PSS of the 3.1 Gbp run <= 24 GB"
INDEX_SAMPLE_SECONDS = 0.05  # the index build's summed RSS, sampled as bench/index_build.py does
STARTED = time.perf_counter()


def note(message: str) -> None:
    print(f"[human_scale {time.perf_counter() - STARTED:7.1f} s] {message}", file=sys.stderr, flush=True)


class Stopped(Exception):
    """--stop-after passed before a step: the call ends, a later call goes on."""


class Budget:
    def __init__(self, seconds: float | None):
        self.seconds = seconds

    def check(self, step: str) -> None:
        if self.seconds is not None and time.perf_counter() - STARTED > self.seconds:
            raise Stopped(f"stopped before {step}: {self.seconds:g} s (--stop-after) passed; call again to go on")


# ---------------------------------------------------------------- rows


def append_row(work: Path, row: dict) -> None:
    """One JSON line in <work>/results.jsonl; the report keeps the last row of each id."""
    row = {**row, "time": time.strftime("%Y-%m-%d %H:%M:%S")}
    with open(work / "results.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(row) + "\n")


def read_rows(work: Path) -> dict[str, dict]:
    rows = {}
    path = work / "results.jsonl"
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                rows[row["id"]] = row
    return rows


# ---------------------------------------------------------------- genomes and reads


def prepare_big(args, work: Path, budget: Budget) -> end_to_end.Reference:
    """The human-like genome as <work>/big/reference.fa (generated once), its info from the
    generator's description (no second pass over 3 GB)."""
    folder = work / "big"
    fasta = folder / "reference.fa"
    parameters = human_genome.Parameters(
        total_bases=int(round(args.gbp * 1e9)), seed=args.genome_seed,
        contig_min=int(args.contig_mbp[0] * 1e6), contig_max=int(args.contig_mbp[1] * 1e6),
    )  # fmt: skip
    key = {"generator": human_genome.GENOME_VERSION, "parameters": vars(parameters)}
    params = end_to_end.read_json(folder / "params.json")
    if params and params.get("key") == key and fasta.exists():
        return end_to_end.Reference("big", folder, params["info"])
    budget.check("making the human-like genome")
    folder.mkdir(parents=True, exist_ok=True)
    note(f"big: making the human-like genome of {args.gbp:g} Gbp ({args.threads} processes)")
    started = time.perf_counter()
    description = human_genome.generate(fasta, parameters, workers=args.threads)
    seconds = time.perf_counter() - started
    info = {
        "contigs": [[name, length] for name, length in description["contigs"].items()],
        "bases": parameters.total_bases,
        "ambiguous": description["bases"]["gap"],
        "sha256": index_build.sha256_of(fasta),
        "source": f"bench/human_genome.py v{human_genome.GENOME_VERSION}, {args.gbp:g} Gbp, seed {args.genome_seed}",
    }
    end_to_end.write_json(folder / "params.json", {"key": key, "info": info})
    append_row(work, {"id": "genome", "gbp": args.gbp, "contigs": len(info["contigs"]), "ambiguous": info["ambiguous"],
                      "seconds": seconds, "workers": args.threads, "machine": args.machine})  # fmt: skip
    note(f"big: {len(info['contigs'])} chromosomes written [{seconds:.1f} s]")
    return end_to_end.Reference("big", folder, info)


@dataclass
class Reads:
    """One read set of a reference: files for the whole run, the copies run and the warm-up."""

    mode: str  # single or paired
    whole: list[Path]
    copies: list[Path]
    warm_up: list[Path]
    truth: Path
    reads: int  # mates, for pairs
    params: dict


def reads_arguments(args) -> tuple[SimpleNamespace, SimpleNamespace]:
    single = SimpleNamespace(reads=args.reads, subset=min(WARM_UP, args.reads - 1), seed=args.seed)
    paired = SimpleNamespace(pairs=args.pairs, subset=min(WARM_UP, args.pairs), read_length=READ_LENGTH,
                             fragment_mean=FRAGMENT_MEAN, fragment_sd=FRAGMENT_SD, seed=args.seed)  # fmt: skip
    return single, paired


def _simulate(task) -> None:
    """A forked process's task: one read set, written to its cache folder."""
    kind, reference, arguments = task
    if kind == "single":
        end_to_end.prepare_reads(reference, READ_LENGTH, arguments)
    else:
        paired_end.prepare_pairs(reference, arguments)


def copied(source: end_to_end.ReadSet, times: int, path: Path) -> Path:
    """``times`` renamed copies of ``source`` at ``path``, made again when the reads changed."""
    stamp = path.with_name(path.name + ".json")
    key = {"reads": source.params, "times": times}
    if end_to_end.read_json(stamp) != key or not path.exists():
        path.unlink(missing_ok=True)
        end_to_end.repeated_reads(source, times, path)
        end_to_end.write_json(stamp, key)
    return path


def prepare_read_sets(reference: end_to_end.Reference, args, budget: Budget) -> dict[str, Reads]:
    """Single-end reads and pairs of ``reference`` (simulated side by side when both are
    missing: each reads the whole genome first) and their ``--copies``-fold copies."""
    single, paired = reads_arguments(args)
    budget.check(f"{reference.name}: reads")
    tasks = [("single", reference, single), ("paired", reference, paired)]
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as pool:
        list(pool.map(_simulate, tasks))  # cached sets return at once
    read_set = end_to_end.prepare_reads(reference, READ_LENGTH, single)
    folder = paired_end.prepare_pairs(reference, paired)
    pair_params = end_to_end.read_json(folder / "params.json")
    name_bytes = 1 + len("pair") + len(str(args.pairs - 1))  # "@pair000123", before "/1": a copy's suffix goes there
    mates = [
        end_to_end.ReadSet(reference, READ_LENGTH, args.pairs, paired.subset, {**pair_params, "mate": mate},
                           folder / f"r{mate}.fq", folder / f"r{mate}_first.fq", folder / "truth.tsv",
                           name_bytes + len("/1\n") + READ_LENGTH + len("\n+\n") + READ_LENGTH + 1, name_bytes)
        for mate in (1, 2)
    ]  # fmt: skip
    budget.check(f"{reference.name}: copies of the reads")
    times = args.copies
    return {
        "single": Reads("single", [read_set.full], [copied(read_set, times, read_set.full.with_name(f"reads_{READ_LENGTH}_x{times}.fq"))],
                        [read_set.subset], read_set.truth, args.reads, read_set.params),
        "paired": Reads("paired", [mate.full for mate in mates], [copied(mate, times, folder / f"r{n}_x{times}.fq") for n, mate in enumerate(mates, 1)],
                        [mate.subset for mate in mates], folder / "truth.tsv", 2 * args.pairs, pair_params),
    }  # fmt: skip


# ---------------------------------------------------------------- indexes


@dataclass
class Index:
    prefix: Path
    key: dict
    blocks: int


def block_count(prefix: Path) -> int:
    return len(json.loads(Path(f"{prefix}.bmi").read_text())["blocks"])


def build_index(reference: end_to_end.Reference, name: str, extra: list[str], args, budget: Budget, row_id: str | None = None) -> Index:
    """``bowmap index`` of ``reference`` into <ref>/index/<name>/, built once (build.json); timed
    with the process tree's peak RSS and PSS; ``row_id`` makes it a row of the table."""
    folder = reference.folder / "index" / name
    prefix = folder / "index"
    command = [*args.bowmap, "index", str(reference.fasta), str(prefix), "--no-progress", "--threads", str(args.threads), *extra]
    # --threads changes the time, not the files (bowmap tests that): no rebuild for another count.
    key = {"reference_sha256": reference.info["sha256"], "arguments": extra, "format": end_to_end.bowmap_index_format()}
    stamp = end_to_end.read_json(folder / "build.json")
    if stamp and stamp.get("key") == key and Path(f"{prefix}.bmi").exists():
        return Index(prefix, key, stamp["blocks"])
    budget.check(f"{reference.name}: bowmap index ({name})")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    note(f"{reference.name}: bowmap index {shlex.join(command[-len(extra) - 2 :])} ({name})")
    try:
        memory = harness.run_measured_memory(command, folder / "build.log", sample_seconds=INDEX_SAMPLE_SECONDS)
    except BenchError as error:
        if row_id:
            append_row(reference.folder.parent, {"id": row_id, "note": f"failed: {error}"[:300]})
        raise
    blocks = block_count(prefix)
    size = sum(entry.stat().st_size for entry in os.scandir(folder) if entry.name.startswith("index."))
    seconds, tree_peak = memory.seconds, memory.tree_rss_kib * 1024
    stamp = {"key": key, "seconds": seconds, "tree_peak_bytes": tree_peak, "blocks": blocks, "bytes": size,
             "predicted_bytes": index_build.predicted_peak(folder / "build.log"), **pss_fields([memory_result(memory)])}  # fmt: skip
    end_to_end.write_json(folder / "build.json", stamp)
    note(f"{reference.name}: index {name}: {blocks} block(s) [{seconds:.1f} s, tree peak {tree_peak / 2**30:.2f} GiB, "
         f"PSS {fmt(memory.peak_pss_kib and memory.peak_pss_kib / 2**20, '.2f')} GiB]")
    if row_id:
        append_row(reference.folder.parent, {"id": row_id, **{k: v for k, v in stamp.items() if k != "key"}, "threads": args.threads,
                                             "bases": reference.info["bases"], "machine": args.machine})  # fmt: skip
    return Index(prefix, key, blocks)


# ---------------------------------------------------------------- align cases


@dataclass
class Case:
    id: str
    label: str
    index: Index
    reads: Reads
    extra: list[str] = field(default_factory=list)

    @property
    def slug(self) -> str:
        """The id as a file name: big:all:single -> big_all_single."""
        return self.id.replace(":", "_")

    def command(self, inputs: list[Path], out: Path, args) -> list[str]:
        return [*args.bowmap, "align", str(self.index.prefix), *map(str, inputs), "-o", str(out), "--no-progress",
                *args.device_args, *args.align_args, *self.extra]  # fmt: skip


def align_has_device_mem(bowmap: list[str]) -> bool:
    shown = subprocess.run([*bowmap, "align", "--help"], capture_output=True, text=True)
    return "--device-mem" in shown.stdout


def devices_line(log: Path) -> str | None:
    for line in log.read_text(errors="replace").splitlines():
        if "] devices: " in line:
            return line.split("] devices: ", 1)[1].split(";")[0].strip()
    return None


def run_layout(log: Path) -> str | None:
    """How the run was laid out, from its log: its worker processes or queue pairs (the devices
    line), and whether the blocks stayed resident or were mapped block by block."""
    text = log.read_text(errors="replace")
    layout = next((line.split(";", 1)[1].rsplit(" [", 1)[0].strip() for line in text.splitlines()
                   if "] devices: " in line and ";" in line), None)  # fmt: skip
    if layout is None:
        return None
    return f"{layout}, {'block by block' if 'mapping block by block' in text else 'every block resident'}"


def timed_run(case: Case, kind: str, repeat: int, folder: Path, args, budget: Budget, warmed: set) -> dict:
    """One timed run (``kind`` whole or copies), or its cached result. A case's first run made
    here follows an untimed one on its warm-up reads (kernels compiled, index in the page cache)."""
    out = folder / f"{case.slug}.{kind}.sam"
    inputs = case.reads.whole if kind == "whole" else case.reads.copies
    command = case.command(inputs, out, args)
    stamp_path = folder / f"{case.slug}.{kind}.{repeat}.json"
    # "memory": runs stamped before PSS was measured are made again.
    key = {"command": command, "reads": case.reads.params, "copies": args.copies, "index": case.index.key,
           "sources": args.sources, "machine": args.machine, "memory": "rss+pss"}  # fmt: skip
    stamp = end_to_end.read_json(stamp_path)
    # The whole run's SAM is scored later: a cached run without its SAM or a score is made again.
    scored = end_to_end.read_json(folder / f"{case.slug}.score.json")
    needs_sam = kind == "whole" and not (scored and scored.get("key") == key_of_score(case, args)) and not out.exists()
    if stamp and stamp.get("key") == key and not needs_sam:
        return stamp["result"]
    budget.check(f"{case.label} {case.reads.mode} ({kind}, run {repeat + 1})")
    if case.id not in warmed:
        warm_up = folder / f"{case.slug}.warm_up.sam"
        end_to_end.run_measured(case.command(case.reads.warm_up, warm_up, args), warm_up.with_suffix(".log"))
        warm_up.unlink()
        warmed.add(case.id)
    note(f"{case.label} {case.reads.mode}: {kind} run {repeat + 1}")
    memory = harness.run_measured_memory(command, out.with_suffix(".log"))
    result = {**memory_result(memory), "devices": devices_line(out.with_suffix(".log")), "layout": run_layout(out.with_suffix(".log"))}
    if kind == "copies":
        out.unlink(missing_ok=True)
    note(f"{case.label} {case.reads.mode}: {kind} {memory.seconds:.2f} s, peak RSS {memory.peak_rss_kib / 2**20:.2f} GiB, "
         f"PSS {fmt(memory.peak_pss_kib and memory.peak_pss_kib / 2**20, '.2f')} GiB ({memory.pss_samples} samples)")
    end_to_end.write_json(stamp_path, {"key": key, "result": result})
    return result


def memory_result(memory) -> dict:
    """A run's figures as its stamp keeps them (harness's Memory; KiB, seconds)."""
    return {"seconds": memory.seconds, "peak_rss_kib": memory.peak_rss_kib, "peak_pss_kib": memory.peak_pss_kib,
            "pss_rss_kib": memory.pss_rss_kib, "pss_samples": memory.pss_samples,
            "pss_sample_s": memory.pss_sample_seconds, "pss_fell_back": memory.pss_fell_back}  # fmt: skip


def pss_fields(results: list[dict]) -> dict:
    """The PSS fields of a row from its runs: the largest peak (with the summed RSS at its sample),
    every run's samples, the slowest mean sample; runs stamped before PSS was measured add nothing."""
    measured = [result for result in results if result.get("peak_pss_kib") is not None]
    if not measured:
        return {"peak_pss_kib": None}
    peak = max(measured, key=lambda result: result["peak_pss_kib"])
    return {"peak_pss_kib": peak["peak_pss_kib"], "pss_rss_kib": peak["pss_rss_kib"],
            "pss_samples": sum(result["pss_samples"] for result in measured),
            "pss_sample_s": max(result["pss_sample_s"] for result in measured),
            "pss_fell_back": max(result["pss_fell_back"] for result in measured)}  # fmt: skip


def key_of_score(case: Case, args) -> dict:
    return {"reads": case.reads.params, "index": case.index.key, "extra": case.extra, "align_args": args.align_args, "sources": args.sources}


def _score(task) -> dict:
    """A forked process's task: accuracy of one whole run's SAM against the truth."""
    mode, sam, truth_path = task
    truth = align_accuracy.read_truth(truth_path)
    if mode == "single":
        score = align_accuracy.score_sam(sam, truth)
        return {"right": score.correct, "wrong_q20": score.wrong_confident, "mapped": score.mapped, "records": score.reads, "proper": None}
    score = paired_end.score(sam, truth)
    return {"right": score["right"], "wrong_q20": score["wrong_q20"], "mapped": None, "records": score["records"], "proper": score["proper"]}


def run_cases(cases: list[Case], work: Path, args, budget: Budget) -> None:
    """Time every case (interleaved, --repeat times), score the whole runs side by side, append
    one row a case. A case whose run or scoring fails gets a row saying so; the others go on."""
    folder = work / "runs"
    folder.mkdir(parents=True, exist_ok=True)
    warmed, failed = set(), {}
    times: dict[str, dict[str, list[dict]]] = {case.id: {"whole": [], "copies": []} for case in cases}
    for repeat in range(args.repeat):
        for case in cases:
            for kind in ("whole", "copies"):
                if case.id in failed:
                    continue
                try:
                    times[case.id][kind].append(timed_run(case, kind, repeat, folder, args, budget, warmed))
                except BenchError as error:
                    note(f"{case.label} {case.reads.mode}: {error}")
                    failed[case.id] = f"failed: {error}"

    scores, todo = {}, []
    for case in (case for case in cases if case.id not in failed):
        stamp = end_to_end.read_json(folder / f"{case.slug}.score.json")
        if stamp and stamp.get("key") == key_of_score(case, args):
            scores[case.id] = stamp["score"]
        else:
            todo.append(case)
    if todo:
        budget.check("scoring " + ", ".join(f"{case.label} {case.reads.mode}" for case in todo))
        note("scoring " + ", ".join(f"{case.label} {case.reads.mode}" for case in todo))
        workers = max(1, min(len(todo), len(os.sched_getaffinity(0))))
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            futures = {case.id: pool.submit(_score, (case.reads.mode, folder / f"{case.slug}.whole.sam", case.reads.truth)) for case in todo}
            for case in todo:
                try:
                    scores[case.id] = futures[case.id].result()
                except Exception as error:  # noqa: BLE001  a broken SAM fails its row, not the others
                    failed[case.id] = f"scoring failed: {error!r}"
                    continue
                end_to_end.write_json(folder / f"{case.slug}.score.json", {"key": key_of_score(case, args), "score": scores[case.id]})
                (folder / f"{case.slug}.whole.sam").unlink(missing_ok=True)

    for case in cases:
        if case.id in failed:
            append_row(work, {"id": case.id, "note": failed[case.id][:300], "sources": args.sources[:12]})
            continue
        whole = min(result["seconds"] for result in times[case.id]["whole"])
        copies = min(result["seconds"] for result in times[case.id]["copies"])
        reads = case.reads.reads
        score = scores[case.id]
        append_row(work, {
            "id": case.id, "label": case.label, "mode": case.reads.mode, "blocks": case.index.blocks, "reads": reads,
            "copies": args.copies, "repeat": args.repeat, "whole_s": whole, "copies_s": copies,
            "whole_reads_s": reads / whole,
            "steady_reads_s": (args.copies - 1) * reads / (copies - whole) if copies > whole else None,
            "peak_rss_kib": max(result["peak_rss_kib"] for kind in times[case.id].values() for result in kind),
            **pss_fields([result for kind in times[case.id].values() for result in kind]),
            "right_pct": 100 * score["right"] / max(score["records"], 1), "wrong_q20": score["wrong_q20"],
            "proper_pct": None if score["proper"] is None else 100 * score["proper"] / max(score["records"], 1),
            "devices": times[case.id]["whole"][-1]["devices"], "layout": times[case.id]["whole"][-1].get("layout"),
            "arguments": case.extra + args.align_args,
            "sources": args.sources[:12], "machine": args.machine,
        })  # fmt: skip
    if failed:
        raise BenchError("; ".join(f"{case_id}: {why}" for case_id, why in failed.items()))


# ---------------------------------------------------------------- stages


def stage_genome(args, work: Path, budget: Budget):
    reference = prepare_big(args, work, budget)
    return reference, prepare_read_sets(reference, args, budget)


def stage_index(args, work: Path, budget: Budget):
    reference = prepare_big(args, work, budget)
    return build_index(reference, "default", [], args, budget, row_id="index:big")


def stage_big(args, work: Path, budget: Budget) -> None:
    reference, read_sets = stage_genome(args, work, budget)
    index = stage_index(args, work, budget)
    label = f"human-like {args.gbp:g} Gbp"
    cases = [Case(f"big:all:{mode}", label, index, read_sets[mode]) for mode in ("single", "paired")]
    if align_has_device_mem(args.bowmap):
        cases.append(Case("big:capped:single", f"{label}, --device-mem {args.capped_device_mem}", index, read_sets["single"],
                          ["--device-mem", args.capped_device_mem]))  # fmt: skip
    else:
        append_row(work, {"id": "big:capped:single", "note": "align has no --device-mem", "sources": args.sources[:12]})
    run_cases(cases, work, args, budget)


def stage_chr20(args, work: Path, budget: Budget) -> None:
    budget.check("chr20: reference")
    reference = end_to_end.prepare_reference("chr20", args, work)
    read_sets = prepare_read_sets(reference, args, budget)
    one = build_index(reference, "one_block", [], args, budget, row_id="index:chr20:one")
    split = build_index(reference, "split", ["--device-mem", args.split_device_mem], args, budget, row_id="index:chr20:split")
    cases = [Case(f"chr20:one:{mode}", "chr20", one, read_sets[mode]) for mode in ("single", "paired")]
    cases += [Case(f"chr20:split:{mode}", "chr20 split", split, read_sets[mode]) for mode in ("single", "paired")]
    run_cases(cases, work, args, budget)


# ---------------------------------------------------------------- the table


# (row id, what the row is, the stage that makes it)
TABLE = (
    ("index:big", "index build, human-like genome", "index"),
    ("chr20:one:single", "chr20", "chr20"),
    ("chr20:one:paired", "chr20", "chr20"),
    ("chr20:split:single", "chr20 split", "chr20"),
    ("chr20:split:paired", "chr20 split", "chr20"),
    ("big:all:single", "human-like genome", "big"),
    ("big:all:paired", "human-like genome", "big"),
    ("big:capped:single", "human-like, block by block", "big"),
)


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def pss_cell(row: dict) -> str:
    """Peak PSS in GiB, starred where some process was counted at its RSS (smaps_rollup unreadable)."""
    if row.get("peak_pss_kib") is None:
        return "-"
    return f"{row['peak_pss_kib'] / 2**20:.2f}{'*' if row.get('pss_fell_back') else ''}"


def table_rows(rows: dict[str, dict]) -> list[list[str]]:
    header = ["run", "mode", "blocks", "reads", "whole s", "whole reads/s", "steady reads/s", "peak RSS GiB",
              "peak PSS GiB", "right %", "wrong MAPQ>=20", "proper %"]  # fmt: skip
    lines = [header]
    for row_id, what, stage in TABLE:
        row = rows.get(row_id)
        mode = row_id.rsplit(":", 1)[1] if row_id.endswith(("single", "paired")) else ""
        if row is None or row.get("note"):
            why = row["note"] if row else f"not run yet: --stage {stage}"
            lines.append([what, mode, f"-  ({why})"])
            continue
        if row_id.startswith("index:"):
            gbp = row["bases"] / 1e9
            lines.append([
                f"{what} ({gbp:.3g} Gbp, {row['threads']} threads)", "", str(row["blocks"]), "", f"{row['seconds']:.1f}", "", "",
                f"{row['tree_peak_bytes'] / 2**30:.2f}", pss_cell(row), "", "", "",
            ])  # fmt: skip
            continue
        label = row.get("label", what)
        lines.append([
            label, mode, str(row["blocks"]), f"{row['reads']:,}", f"{row['whole_s']:.2f}", f"{row['whole_reads_s']:,.0f}",
            fmt(row["steady_reads_s"], ",.0f"), f"{row['peak_rss_kib'] / 2**20:.2f}", pss_cell(row), f"{row['right_pct']:.2f}",
            str(row["wrong_q20"]), fmt(row["proper_pct"], ".2f"),
        ])  # fmt: skip
    return lines


def render(lines: list[list[str]], left: int = 2) -> str:
    """Columns padded to their widest full row, the first ``left`` to the left; a short row (one
    not made: what, mode, why) gets the first cells padded and its note after them."""
    columns = len(lines[0])
    widths = [
        max(len(line[column]) for line in lines if len(line) == columns or column < len(line) - 1)
        for column in range(columns)
    ]
    out = []
    for line in lines:
        cells = [cell.ljust(widths[i]) if i < left else cell.rjust(widths[i]) for i, cell in enumerate(line[:columns])]
        if len(line) < columns:
            cells[-1] = line[-1]  # the note, unpadded
        out.append("  ".join(cells).rstrip())
    return "\n".join(out)


def goals(rows: dict[str, dict]) -> list[tuple[str, str, bool | None]]:
    """(goal, measured, met): met None where a row it needs is missing."""
    def steady(row_id):
        row = rows.get(row_id)
        return None if row is None or row.get("note") else row.get("steady_reads_s")

    found = []
    for mode in ("single", "paired"):
        one = steady(f"chr20:one:{mode}")
        for row_id, what in ((f"chr20:split:{mode}", "chr20 split"), (f"big:all:{mode}", "human-like genome")):
            other = steady(row_id)
            if other is not None:
                what = f"{what} ({plural(rows[row_id]['blocks'], 'block')})"
            goal = f"{what} >= {SHARE_OF_ONE_BLOCK:.0%} of one-block chr20, steady, {mode}"
            if one is None or other is None:
                found.append((goal, "-", None))
            else:
                found.append((goal, f"{other / one:.1%}", other >= SHARE_OF_ONE_BLOCK * one))
    index = rows.get("index:big")
    goal = f"index build <= {INDEX_SECONDS / 60:.0f} min and <= {INDEX_BYTES / 1e9:.0f} GB"
    if index is None or index.get("note"):
        found.append((goal, "-", None))
    else:
        measured = f"{index['seconds']:.0f} s, {index['tree_peak_bytes'] / 1e9:.2f} GB"
        found.append((goal, measured, index["seconds"] <= INDEX_SECONDS and index["tree_peak_bytes"] <= INDEX_BYTES))
    resident, capped = steady("big:all:single"), steady("big:capped:single")
    goal = f"block by block within {CAPPED_SLOWDOWN:g}x of all resident, steady, single"
    if resident is None or capped is None:
        found.append((goal, "-", None))
    else:
        found.append((goal, f"{resident / capped:.2f}x slower", capped * CAPPED_SLOWDOWN >= resident))
    for row_id, what in (("big:all:single", "single"), ("big:all:paired", "paired"), ("big:capped:single", "block by block, single")):
        row = rows.get(row_id)
        goal = f"PSS of the human-like genome <= {PSS_BYTES / 1e9:.0f} GB, {what}"
        if row is None or row.get("note") or row.get("peak_pss_kib") is None:
            found.append((goal, "-", None))
        else:
            pss = row["peak_pss_kib"] * 1024
            found.append((goal, f"{pss / 1e9:.2f} GB{' (RSS counted for some)' if row.get('pss_fell_back') else ''}", pss <= PSS_BYTES))
    return found


def pss_notes(rows: dict[str, dict]) -> list[str]:
    """How the PSS column was sampled (how often, how dear, how near the RSS peak), and the star."""
    sampled = [row for row in rows.values() if not row.get("note") and row.get("peak_pss_kib") is not None and row.get("pss_samples")]
    if not sampled:
        return []
    counts = [row["pss_samples"] for row in sampled]
    near = [row["pss_rss_kib"] / (row.get("peak_rss_kib") or row["tree_peak_bytes"] / 1024) for row in sampled]
    slowest = max(row["pss_sample_s"] for row in sampled)
    out = [(f"peak PSS: summed Pss (/proc/PID/smaps_rollup) of the process tree, sampled within {harness.PSS_CPU_SHARE:.0%} of one "
            f"core: {min(counts)}-{max(counts)} samples a row, up to {slowest * 1e3:.0f} ms a sample; the peak's sample at "
            f"{min(near):.0%}-{max(near):.0%} of the row's peak summed RSS")]  # fmt: skip
    if any(row.get("pss_fell_back") for row in sampled):
        out.append("* smaps_rollup unreadable for some processes: their RSS counted as their PSS (an overestimate)")
    return out


def report(work: Path) -> str:
    rows = read_rows(work)
    out = []
    genome = rows.get("genome")
    if genome:
        out.append(f"human-like genome: {genome['gbp']:g} Gbp, {genome['contigs']} chromosomes, {genome['ambiguous']:,} N "
                   f"(bench/human_genome.py; made in {genome['seconds']:.0f} s by {genome['workers']} processes)")  # fmt: skip
    for row_id, what in (("index:chr20:one", "one block"), ("index:chr20:split", "split")):
        if row_id in rows and not rows[row_id].get("note"):
            row = rows[row_id]
            out.append(f"chr20 index, {what}: {plural(row['blocks'], 'block')}, built in {row['seconds']:.1f} s, tree peak {row['tree_peak_bytes'] / 2**30:.2f} GiB")
    if "index:big" in rows and not rows["index:big"].get("note"):
        row = rows["index:big"]
        predicted = f"{row['predicted_bytes'] / 2**30:.2f} GiB" if row["predicted_bytes"] else "-"
        out.append(f"human-like index: peak {row['tree_peak_bytes'] / 1e9:.2f} GB ({row['tree_peak_bytes'] / 2**30:.2f} GiB) for the "
                   f"process tree, predicted {predicted}; {row['bytes'] / 2**30:.2f} GiB on disk")  # fmt: skip
    timed = [row for row in rows.values() if "whole_s" in row]
    machines = {json.dumps(row.get("machine"), sort_keys=True) for row in rows.values() if row.get("machine")}
    for machine in sorted(machines):
        machine = json.loads(machine)
        out.append(f"machine: {machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB; GPUs: {'; '.join(machine['gpus']) or 'none'}")
    devices = sorted({row["devices"] for row in timed if row.get("devices")})
    if devices:
        out.append("bowmap devices: " + " | ".join(devices))
    sources = sorted({row["sources"] for row in timed if row.get("sources")})
    if len(sources) > 1:
        out.append(f"NOTE: the rows come from {len(sources)} versions of bowmap's sources: {', '.join(sources)}")
    if timed:
        sample = timed[0]
        out.append(f"reads: 150 bp, whole = N reads (mates for pairs), steady = (K N - N) / (t_KN - t_N) with K = {sample['copies']}; "
                   f"best of {sample['repeat']} run(s); right: primary on the true strand, unclipped start within 5 bp")  # fmt: skip
    out.append("")
    out.append(render(table_rows(rows)))
    out.extend(pss_notes(rows))
    layouts = [f"  {row.get('label', row['id'])}, {row['mode']}: {row['layout']}" for row in timed if row.get("layout")]
    if layouts:
        out.append("layouts (from each run's log):")
        out.extend(layouts)
    out.append("")
    listed = [["goal (issues 20 and 29)", "measured", ""]]
    for goal, measured, met in goals(rows):
        listed.append([goal, measured, "-  (a row it needs is missing)" if met is None else ("pass" if met else "FAIL")])
    out.append(render(listed, left=3))
    return "\n".join(out)


# ---------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stage", default="report", metavar="LIST", help="genome, index, big, chr20, all or report, comma-separated (default report)")
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK, metavar="DIR", help="cache and results (default bench/work/human_scale)")
    parser.add_argument("--gbp", type=float, default=3.1, help="human-like genome size in Gbp (default 3.1)")
    parser.add_argument("--contig-mbp", default="50,250", metavar="MIN,MAX", help="its chromosome lengths (default 50,250)")
    parser.add_argument("--genome-seed", type=int, default=human_genome.DEFAULT_SEED, help=f"its seed (default {human_genome.DEFAULT_SEED})")
    parser.add_argument("--vt-deb", type=Path, metavar="DEB", help="chr20: Debian's vt-examples_*_all.deb")
    parser.add_argument("--chr20", type=Path, metavar="FASTA", help="chr20: a FASTA (gzipped or not) instead of --vt-deb")
    parser.add_argument("--reads", type=int, default=2_000_000, metavar="N", help="single-end reads of 150 bp a genome (default 2000000)")
    parser.add_argument("--pairs", type=int, metavar="N", help="pairs a genome (default --reads / 2: as many mates as reads)")
    parser.add_argument("--copies", type=int, default=5, metavar="K", help="the steady rate's second run maps K copies of the reads (default 5)")
    parser.add_argument("--seed", type=int, default=7, help="read simulation seed (default 7)")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)), metavar="T",
                        help="bowmap index --threads and the genome's processes (default: the usable cores)")  # fmt: skip
    parser.add_argument("--devices", metavar="SPEC", help="bowmap align --devices (default: bowmap's)")
    parser.add_argument("--align-args", default="", metavar="ARGS", help='more `bowmap align` arguments for every run, e.g. "-p 15"')
    parser.add_argument("--split-device-mem", default="24M", metavar="SIZE", help="bowmap index --device-mem of split chr20 (default 24M: 4 blocks)")
    parser.add_argument("--capped-device-mem", default="16G", metavar="SIZE", help="bowmap align --device-mem of the block-by-block row (default 16G)")
    parser.add_argument("--repeat", type=int, default=1, metavar="R", help="timed runs of each kind, least time kept (default 1)")
    parser.add_argument("--stop-after", type=float, metavar="S", help="start no new step after S seconds; exit 3 (call again)")
    args = parser.parse_args()
    stages = [word.strip() for word in args.stage.split(",") if word.strip()]
    if "all" in stages:
        stages = list(STAGES)
    unknown = [word for word in stages if word not in (*STAGES, "report")]
    if unknown:
        parser.error(f"--stage: unknown {', '.join(unknown)} (genome, index, big, chr20, all, report)")
    try:
        args.contig_mbp = tuple(float(word) for word in args.contig_mbp.split(","))
        assert len(args.contig_mbp) == 2 and 0 < args.contig_mbp[0] <= args.contig_mbp[1]
        args.align_args = shlex.split(args.align_args)
    except (ValueError, AssertionError):
        parser.error("--contig-mbp MIN,MAX (0 < MIN <= MAX) and --align-args as a shell would split it")
    args.pairs = args.pairs or max(args.reads // 2, 1)
    if args.reads < 2 or args.copies < 2 or args.repeat < 1 or args.threads < 1 or args.gbp <= 0:
        parser.error("need --reads >= 2, --copies >= 2, --repeat >= 1, --threads >= 1, --gbp > 0")

    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    args.bowmap = [sys.executable, "-m", "bowmap"]
    args.device_args = ["--devices", args.devices] if args.devices else []
    budget = Budget(args.stop_after)
    code = 0
    try:
        if any(stage != "report" for stage in stages):
            args.machine = end_to_end.describe_machine()
            args.sources = end_to_end.bowmap_sources_sha()
        for stage in stages:
            if stage == "genome":
                stage_genome(args, work, budget)
            elif stage == "index":
                stage_index(args, work, budget)
            elif stage == "big":
                stage_big(args, work, budget)
            elif stage == "chr20":
                stage_chr20(args, work, budget)
    except Stopped as stopped:
        print(f"human_scale: {stopped}", file=sys.stderr)
        code = 3
    except (BenchError, OSError, subprocess.CalledProcessError) as error:
        print(f"human_scale: error: {error}", file=sys.stderr)
        code = 1
    print(report(work))
    return code


if __name__ == "__main__":
    sys.exit(main())
