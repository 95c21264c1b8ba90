"""Several GPUs against one: the same `bowmap align` run, single-end or paired-end, on one device
with its share of the host's cores, on every device with all the cores, and on one device with
all the cores. One table, with each run's layout from bowmap's own log.

The steady rate is (K × N − N) / (t_KN − t_N) between a run on the N reads (mates, for pairs) and
one on K copies of them, both to a discarded standard output, so start-up and index loading drop
out; the whole rate is N / t_N; pairs/s is half the reads/s of a paired run. One more run of each
layout, first (it also warms the page cache and the kernel cache), writes its SAM, compared byte
for byte (the @PG line aside) with the first layout's. A GPU run of bowmap is bound by its worker
processes' host work, so the cores each layout gets (os.sched_setaffinity, as taskset does) are
part of it: "1 device, 1/D of the cores" is what one GPU of a D-GPU machine has to itself
(``--share S`` gives it 1/S instead). The layout columns come from bowmap's "devices: ...; LAYOUT"
log line: device owner processes, host worker processes (or the main process's threads) and their
queue pairs; every run's own line is kept, and a layout whose short and long runs differ says so.

Inputs: plain paths (``--index``, ``--reads``, and ``--mates`` for pairs; gzipped FASTQ is
unpacked first, the K copies are the file repeated), or bench/human_scale.py's cached data
(``--human-scale-work DIR``: its genome, reads, pairs, their ``--repeat``-fold copies and index,
made by its own functions where missing, under the same keys, so its stages' files are reused):
``--genome big`` (the human-like genome of ``--gbp``) or ``--genome chr20`` (its one-block chr20,
``--vt-deb`` or ``--chr20`` the first time). ``--prepare`` makes them and times nothing;
``--stop-after S`` starts no new preparation step after S seconds (exit 3: call again).

Commands, GPU machine with two GPUs (nvidia-h200-x2: 32 cores, 128 GiB of disk). Each call starts
with ``source .device/setup.sh &&`` as for the other benches and fits a 10-minute call; the files
live only while the machine stays warm (30 minutes at most), so the chr20 and the 3.1 Gbp calls
may need a machine each. DEB = .gpu/vt-examples_0.57721+ds-3_all.deb; the work folder is
human_scale's default:

    # chr20: its reads, pairs (2 M and 1 M, 5 copies each) and one-block index (~3 min), then one call a mode
    timeout 590 python3 bench/multi_gpu.py --human-scale-work bench/work/human_scale --genome chr20 --vt-deb DEB --prepare
    timeout 590 python3 bench/multi_gpu.py --human-scale-work bench/work/human_scale --genome chr20 --modes single
    timeout 590 python3 bench/multi_gpu.py --human-scale-work bench/work/human_scale --genome chr20 --modes paired
    # the 3.1 Gbp human-like genome: genome, reads and pairs (~3-4 min), index (~7 min), then one call a mode
    timeout 590 python3 bench/human_scale.py --stage genome
    timeout 590 python3 bench/human_scale.py --stage index
    timeout 590 python3 bench/multi_gpu.py --human-scale-work bench/work/human_scale --modes single
    timeout 590 python3 bench/multi_gpu.py --human-scale-work bench/work/human_scale --modes paired

(A mode's call: three layouts, each a SAM run and a timed run on the 2 M reads (mates) and one on
their 5 copies; from the H100 rows of bench/RESULTS.md, about 11 s, 11 s and 25 s a layout at
3.1 Gbp, less on chr20.)

Here (one CPU device, a smoke run; --share 2 gives the first row one of the two cores):
  python bench/multi_gpu.py --index I --reads R1.fq.gz --mates R2.fq.gz --modes single,paired --devices cpu --share 2 --repeat 2
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # bench/ is no package: its scripts import each other by name
from harness import sam_lines  # noqa: E402

MODES = ("single", "paired")
STEADY_GOAL = 1.8  # issue 32: two devices, all cores, >= 1.8x one device with its share, steady, paired
STARTED = time.perf_counter()


def note(message: str) -> None:
    print(f"[multi_gpu {time.perf_counter() - STARTED:7.1f} s] {message}", file=sys.stderr, flush=True)


class BenchFailure(Exception):
    """A failed step: one line, exit 1."""


class Stopped(BenchFailure):
    """--stop-after passed before a preparation step: exit 3, a later call goes on."""


# ---------------------------------------------------------------- layouts


@dataclass
class Layout:
    """How bowmap laid a run out, from its "devices: NAMES; LAYOUT [T s]" log line."""

    devices: list[str]
    owners: int  # device owner processes (0: the devices are driven where the queue pairs are)
    processes: int  # host worker processes (0: the queue pairs are threads of the main process)
    queue_pairs: int  # a host worker process's (all of them, in the main process, when processes is 0)
    block_by_block: bool
    text: str  # LAYOUT as logged

    def cells(self) -> list[str]:
        return [str(self.owners) if self.owners else "-", str(self.processes) if self.processes else "main",
                f"{self.queue_pairs} each" if self.processes else str(self.queue_pairs)]  # fmt: skip


DEVICES_LINE = re.compile(r"\] devices: (?P<devices>[^;\n]*); (?P<layout>[^\n]*?) \[[0-9.]+ s\]")
OWNED = re.compile(r"one owner a device, (\d+) host worker processes of (\d+) queue pair\(s\)")
PROCESSES = re.compile(r"(\d+) worker processes, (\d+) queue pair\(s\) each")
THREADS = re.compile(r"(\d+) worker queue pair\(s\)")
READS_LINE = re.compile(r"\] (\d+) reads, [0-9.]+% mapped")


def parse_layout(log: str) -> Layout | None:
    """The layout of the run whose standard error is ``log``; None if no known devices line."""
    found = DEVICES_LINE.search(log)
    if found is None:
        return None
    devices = [name.strip() for name in found["devices"].split(", ")]
    text = found["layout"]
    block_by_block = "mapping block by block" in log
    if match := OWNED.fullmatch(text):
        return Layout(devices, len(devices), int(match[1]), int(match[2]), block_by_block, text)
    if match := PROCESSES.fullmatch(text):
        return Layout(devices, 0, int(match[1]), int(match[2]), block_by_block, text)
    if match := THREADS.fullmatch(text):
        return Layout(devices, 0, 0, int(match[1]), block_by_block, text)
    return None


def logged_reads(log: str) -> int | None:
    """The reads (mates) bowmap's summary line says it aligned."""
    found = READS_LINE.findall(log)
    return int(found[-1]) if found else None


def plan_layouts(device_indexes: list[int], cores: list[int], share: int) -> list[tuple[str, str, list[int]]]:
    """(label, --devices, cores) of each row: the first device with 1/``share`` of ``cores``,
    every device with all of them (more than one device), the first with all (a share was cut)."""
    count = max(1, len(cores) // share)
    first, every = str(device_indexes[0]), ",".join(map(str, device_indexes))
    if count < len(cores):
        rows = [(f"1 device, 1/{share} of the cores ({count} of {len(cores)})", first, cores[:count])]
    else:
        rows = [(f"1 device, all {len(cores)} cores", first, cores)]
    if len(device_indexes) > 1:
        rows.append((f"{len(device_indexes)} devices, all {len(cores)} cores", every, cores))
    if count < len(cores):
        rows.append((f"1 device, all {len(cores)} cores", first, cores))
    return rows


# ---------------------------------------------------------------- inputs


@dataclass
class Inputs:
    """One mode's read files: the whole run's and the K-fold copies' (one file a mate)."""

    mode: str
    whole: list[Path]
    copies: list[Path]
    reads: int  # mates, for pairs
    times: int  # K


def count_reads(path: Path) -> int:
    with open(path, "rb") as file:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: file.read(1 << 24), b"")) // 4


def unpacked(path: Path, folder: Path) -> Path:
    """``path``, or where gzipped, its plain copy in ``folder`` (gzip input takes another path
    through bowmap than the plain copies would)."""
    with open(path, "rb") as handle:
        if handle.read(2) != b"\x1f\x8b":
            return path
    plain = folder / path.name.removesuffix(".gz")
    with gzip.open(path, "rb") as source, open(plain, "wb") as out:
        shutil.copyfileobj(source, out, 1 << 24)
    return plain


def repeated(path: Path, times: int, folder: Path) -> Path:
    copies = folder / f"{path.stem}_x{times}{path.suffix}"
    with open(copies, "wb") as out:
        for _ in range(times):
            with open(path, "rb") as source:
                shutil.copyfileobj(source, out, 1 << 24)
    return copies


def plain_inputs(args, folder: Path) -> dict[str, Inputs]:
    """--reads (single-end; the first mates too) and --mates as Inputs of each mode asked for."""
    reads = unpacked(args.reads, folder)
    found = {}
    if "single" in args.modes:
        found["single"] = Inputs("single", [reads], [repeated(reads, args.repeat, folder)], count_reads(reads), args.repeat)
    if "paired" in args.modes:
        mates = [reads, unpacked(args.mates, folder)]
        counts = [count_reads(mate) for mate in mates]
        if counts[0] != counts[1]:
            raise BenchFailure(f"--reads has {counts[0]:,} reads, --mates {counts[1]:,}")
        copies = [repeated(mate, args.repeat, folder) for mate in mates]
        found["paired"] = Inputs("paired", mates, copies, 2 * counts[0], args.repeat)
    return found


def human_scale_inputs(args) -> tuple[Path, dict[str, Inputs]]:
    """bench/human_scale.py's index, reads and pairs of --genome, made by its functions where its
    --work (--human-scale-work) does not hold them yet (its genome and index rows appended there)."""
    sys.path.insert(0, str(HERE))  # bench/ is no package: its scripts import each other by name
    import human_scale

    budget = human_scale.Budget(args.stop_after)  # its clock started at its import, here
    # human_scale's own defaults for what this script does not ask: its files are found under the same keys.
    options = SimpleNamespace(
        gbp=args.gbp, contig_mbp=args.contig_mbp, genome_seed=human_scale.human_genome.DEFAULT_SEED, seed=7,
        reads=args.simulated_reads, pairs=max(args.simulated_reads // 2, 1), copies=args.repeat,
        threads=len(os.sched_getaffinity(0)), bowmap=[sys.executable, "-m", "bowmap"], vt_deb=args.vt_deb, chr20=args.chr20,
        machine=human_scale.end_to_end.describe_machine(),
    )  # fmt: skip
    work = args.human_scale_work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    name, row_id = ("default", "index:big") if args.genome == "big" else ("one_block", "index:chr20:one")
    try:
        if args.genome == "big":
            reference = human_scale.prepare_big(options, work, budget)
        else:
            budget.check("chr20: reference")
            reference = human_scale.end_to_end.prepare_reference("chr20", options, work)
        read_sets = human_scale.prepare_read_sets(reference, options, budget)
        index = human_scale.build_index(reference, name, [], options, budget, row_id=row_id)
    except human_scale.Stopped as stopped:
        raise Stopped(str(stopped)) from None
    except human_scale.BenchError as error:
        raise BenchFailure(str(error)) from None
    found = {mode: Inputs(mode, read_sets[mode].whole, read_sets[mode].copies, read_sets[mode].reads, args.repeat) for mode in args.modes}
    return index.prefix, found


# ---------------------------------------------------------------- runs


def align(index: str, inputs: list[Path], output: str, devices: str, cores: list[int], extra: list[str], reads: int) -> tuple[float, Layout]:
    """One `bowmap align` run on ``cores`` (its default worker count follows them: one a core but
    one, within the devices' memory); ``output`` "-" is standard output, discarded. Seconds and
    the run's layout; a failed run, one without a devices line or one aligning other than
    ``reads`` reads fails the bench."""
    command = [sys.executable, "-m", "bowmap", "align", index, *map(str, inputs), "-o", output, "--devices", devices,
               "--no-progress", *extra]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          preexec_fn=lambda: os.sched_setaffinity(0, cores), check=False)  # fmt: skip
    seconds = time.perf_counter() - started
    tail = done.stderr.strip().splitlines()[-1:] or ["(no output)"]
    if done.returncode:
        raise BenchFailure(f"{' '.join(command)} failed (exit {done.returncode}): {tail[0]}")
    layout = parse_layout(done.stderr)
    if layout is None:
        raise BenchFailure(f"{' '.join(command)}: no known 'devices: ...; LAYOUT' line in its log")
    if logged_reads(done.stderr) != reads:
        raise BenchFailure(f"{' '.join(command)}: aligned {logged_reads(done.stderr)} reads, not {reads}")
    return seconds, layout


def first_difference(first: Path, other: Path) -> int | None:
    """1-based number (the @PG line not counted) of the first line where the SAM files differ;
    None where they are the same."""
    ended = object()
    lines = zip(*(iter_with_end(sam_lines(path), ended) for path in (first, other)))
    for number, (left, right) in enumerate(lines, 1):
        if left != right:
            return number
        if left is ended:
            return None
    return None


def iter_with_end(lines, ended):
    yield from lines
    while True:
        yield ended


@dataclass
class Row:
    mode: str
    label: str
    layout: Layout  # the long run's: the steady rate's
    reads: int
    whole_s: float
    long_s: float
    times: int
    same_sam: bool
    layouts_note: str  # the short and long runs' layouts, where they differ

    @property
    def whole(self) -> float:
        return self.reads / self.whole_s

    @property
    def steady(self) -> float | None:
        return (self.times - 1) * self.reads / (self.long_s - self.whole_s) if self.long_s > self.whole_s else None


def measure(index: str, inputs: Inputs, layouts, args, folder: Path) -> list[Row]:
    """Every layout's runs on one mode's inputs: the SAM run, then --runs short and long ones."""
    rows, first_sam = [], None
    for number, (label, spec, cores) in enumerate(layouts):
        extra = list(args.align_args)
        if args.workers_per_core:
            extra += ["-p", str(max(1, int(args.workers_per_core * (len(cores) - 1))))]
        sam = folder / f"{inputs.mode}.{number}.sam"
        note(f"{inputs.mode}, {label}: SAM run")
        align(index, inputs.whole, str(sam), spec, cores, extra, inputs.reads)
        if first_sam is None:
            first_sam, line = sam, None
        else:
            line = first_difference(first_sam, sam)
            sam.unlink()
            if line is not None:
                note(f"{inputs.mode}, {label}: the SAM differs from the first layout's at line {line} (@PG aside)")
        short = min((align(index, inputs.whole, "-", spec, cores, extra, inputs.reads) for _ in range(args.runs)), key=lambda run: run[0])
        long = min((align(index, inputs.copies, "-", spec, cores, extra, inputs.times * inputs.reads) for _ in range(args.runs)),
                   key=lambda run: run[0])  # fmt: skip
        differs = "" if short[1].text == long[1].text else f"whole run: {short[1].text}; copies run: {long[1].text}"
        rows.append(Row(inputs.mode, label, long[1], inputs.reads, short[0], long[0], inputs.times, line is None, differs))
        note(f"{inputs.mode}, {label}: {short[0]:.2f} s and {long[0]:.2f} s; {long[1].text}")
    first_sam.unlink()
    return rows


# ---------------------------------------------------------------- the table


def rate(value: float | None, divisor: int = 1) -> str:
    return "-" if value is None else f"{value / divisor:,.0f}"


def table(rows: list[Row]) -> str:
    header = ("mode", "layout", "owners", "host workers", "queue pairs", "whole s", "whole reads/s", "whole pairs/s", "steady reads/s",
              "steady pairs/s", "steady vs first", "SAM as first")  # fmt: skip
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        base = next(other for other in rows if other.mode == row.mode).steady
        paired = row.mode == "paired"
        ratio = f"{row.steady / base:.2f}x" if row.steady and base else "-"
        out.append(f"| {row.mode} | {row.label} | {' | '.join(row.layout.cells())} | {row.whole_s:.2f} | {rate(row.whole)} | "
                   f"{rate(row.whole, 2) if paired else '-'} | {rate(row.steady)} | {rate(row.steady, 2) if paired and row.steady else '-'} | "
                   f"{ratio} | {'yes' if row.same_sam else 'NO'} |")  # fmt: skip
    notes = [f"  {row.mode}, {row.label}: {row.layouts_note}" for row in rows if row.layouts_note]
    if notes:
        out += ["layouts that differ between a row's whole and copies runs:", *notes]
    blocks = {row.layout.block_by_block for row in rows}
    out.append("index blocks: " + ("mapped block by block" if blocks == {True} else "all resident" if blocks == {False} else "mixed"))
    for row in rows:
        base = next(other for other in rows if other.mode == row.mode).steady
        if row.mode == "paired" and len(row.layout.devices) > 1 and row.steady and base:
            verdict = "pass" if row.steady >= STEADY_GOAL * base else "FAIL"
            out.append(f"goal: {row.label} >= {STEADY_GOAL:g}x the first row, steady pairs/s: {row.steady / base:.2f}x, {verdict}")
    return "\n".join(out)


# ---------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", help="bowmap index prefix (plain paths)")
    parser.add_argument("--reads", type=Path, help="FASTQ, gzipped or not: the single-end reads, and the first mates for pairs")
    parser.add_argument("--mates", type=Path, help="FASTQ of the second mates (paired-end)")
    parser.add_argument("--human-scale-work", type=Path, metavar="DIR", help="bench/human_scale.py's --work: its index, reads and pairs")
    parser.add_argument("--genome", choices=("big", "chr20"), default="big", help="with --human-scale-work: which genome (default big)")
    parser.add_argument("--gbp", type=float, default=3.1, help="the human-like genome's Gbp (human_scale --gbp, default 3.1)")
    parser.add_argument("--contig-mbp", default="50,250", metavar="MIN,MAX", help="its chromosome lengths (human_scale's, default 50,250)")
    parser.add_argument("--simulated-reads", type=int, default=2_000_000, metavar="N",
                        help="human_scale --reads: N reads, N/2 pairs (default 2000000)")  # fmt: skip
    parser.add_argument("--vt-deb", type=Path, metavar="DEB", help="--genome chr20, the first time: Debian's vt-examples_*_all.deb")
    parser.add_argument("--chr20", type=Path, metavar="FASTA", help="--genome chr20, the first time: a FASTA instead of --vt-deb")
    parser.add_argument("--prepare", action="store_true", help="with --human-scale-work: make the inputs, time nothing")
    parser.add_argument("--stop-after", type=float, metavar="S", help="start no new preparation step after S seconds; exit 3 (call again)")
    parser.add_argument("--modes", help="single, paired or both, comma-separated (default: paired with --mates, single with "
                        "--reads alone, both with --human-scale-work)")  # fmt: skip
    parser.add_argument("--devices", default="gpu", help="bowmap --devices: the devices of the all-devices layout (default gpu)")
    parser.add_argument("--share", type=int, metavar="S", help="the first row gets 1/S of the cores (default: 1/D, D the devices)")
    parser.add_argument("--repeat", type=int, metavar="K",
                        help="the long run maps K copies of the reads (default 10; 5 with --human-scale-work: its copies)")  # fmt: skip
    parser.add_argument("--runs", type=int, default=1, help="timed runs of each layout, the best kept (default 1)")
    parser.add_argument("--align-args", default="", metavar="ARGS", help='more `bowmap align` arguments, e.g. "--chunk-bases 2097152"')
    parser.add_argument("--workers-per-core", type=float, metavar="W",
                        help="-p W x (the layout's cores - 1) in every run (default: bowmap's own choice, which may differ "
                             "between the short and the long input)")  # fmt: skip
    args = parser.parse_args()
    if (args.human_scale_work is None) == (args.index is None or args.reads is None):
        parser.error("give --index and --reads (and --mates for pairs), or --human-scale-work")
    if args.prepare and args.human_scale_work is None:
        parser.error("--prepare makes human_scale's inputs: it needs --human-scale-work")
    default_modes = "single,paired" if args.human_scale_work else "paired" if args.mates else "single"
    args.modes = [word.strip() for word in (args.modes or default_modes).split(",") if word.strip()]
    if not args.modes or any(mode not in MODES for mode in args.modes):
        parser.error("--modes: single, paired or single,paired")
    if "paired" in args.modes and args.human_scale_work is None and args.mates is None:
        parser.error("--modes paired needs --mates")
    args.repeat = args.repeat or (5 if args.human_scale_work else 10)
    try:
        args.contig_mbp = tuple(float(word) for word in args.contig_mbp.split(","))
        assert len(args.contig_mbp) == 2 and 0 < args.contig_mbp[0] <= args.contig_mbp[1]
    except (ValueError, AssertionError):
        parser.error("--contig-mbp MIN,MAX with 0 < MIN <= MAX")
    if args.repeat < 2 or args.runs < 1 or (args.share is not None and args.share < 1) or args.simulated_reads < 2:
        parser.error("need --repeat >= 2, --runs >= 1, --share >= 1, --simulated-reads >= 2")
    args.align_args = args.align_args.split()

    from bowmap.runtime.devices import list_devices, parse_device_spec
    from bowmap.runtime.errors import BowmapError

    code, rows = 0, []
    try:
        if args.human_scale_work:
            index, found = human_scale_inputs(args)
            if args.prepare:
                note(f"prepared: {index}; " + ", ".join(f"{mode}: {' '.join(map(str, inputs.whole))}" for mode, inputs in found.items()))
                return 0
            scratch = args.human_scale_work.resolve() / "multi_gpu"  # SAMs beside the inputs: on their disk
            scratch.mkdir(exist_ok=True)
        else:
            index, found, scratch = args.index, None, None
        try:
            devices = parse_device_spec(args.devices, list_devices())
        except BowmapError as error:
            raise BenchFailure(str(error)) from None
        cores = sorted(os.sched_getaffinity(0))
        layouts = plan_layouts([info.index for info in devices], cores, args.share or len(devices))
        with tempfile.TemporaryDirectory(prefix="bowmap_multi_gpu_", dir=scratch) as folder:
            found = found or plain_inputs(args, Path(folder))
            workers = f"{args.workers_per_core} workers a core but one" if args.workers_per_core else "bowmap's default workers"
            print(f"# {len(devices)} device(s): {', '.join(info.name for info in devices)}; {len(cores)} cores; index {index}; "
                  + "; ".join(f"{inputs.mode}: {inputs.reads:,} reads and {inputs.times} x as many" for inputs in found.values())
                  + f"; best of {args.runs} run(s); {workers}", flush=True)  # fmt: skip
            for mode in args.modes:
                rows += measure(str(index), found[mode], layouts, args, Path(folder))
    except (BenchFailure, OSError) as error:
        print(f"multi_gpu: {error}", file=sys.stderr)
        code = 3 if isinstance(error, Stopped) else 1
    if rows:
        print("\n" + table(rows))
    return code or (0 if all(row.same_sam for row in rows) else 1)


if __name__ == "__main__":
    sys.exit(main())
