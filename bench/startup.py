"""Start-up of ``bowmap align``, piece by piece: what a run spends before its first SAM record.

Every piece is timed in fresh processes (a run's start is a fresh process's), ``--repeat`` times,
and the table gives the median (min-max):

* ``python``: ``python -c pass``, the interpreter alone;
* ``imports``: what the align command imports before it works (bowmap's CLI and its parser,
  the align modules, NumPy and PyOpenCL), beyond ``python``;
* ``devices``: listing the OpenCL platforms and devices and resolving ``--devices`` (for
  ``cpu``: the probe build that checks the device compiles);
* ``index map`` / ``index checksums``: mapping the index files; their SHA-256 (a helper thread in
  a run, overlapped with the device's set-up);
* ``context`` / ``programs`` / ``index upload``: one device context, the programs a worker
  builds before its first chunk (the drivers' own binary caches warm after the first run: PoCL's
  kcache, NVIDIA's compute cache; pyopencl's for other platforms), the index blocks and packed
  text copied to the device;
* then the whole command, ``python -m bowmap align INDEX READS -o - --no-progress`` plus
  ``--devices``, ``-p`` and ``--align-args``, its standard output read here through a pipe:
  ``first SAM record`` (the first line after the header arrives here), ``whole command``, and
  from its log (seconds from the start of the run proper, after the interpreter, the imports and
  the parsing of the command line): ``devices line`` (the parent ready to hand out chunks),
  ``workers ready`` (first-last worker process, and the last one's pieces) or ``device set-up``
  (one process), ``first chunk written``, ``last chunk written``, ``workers exited`` (the wait for
  the worker processes to end after their last result), ``run's own end``; ``outside the run`` is
  the whole command less the run proper: the interpreter, the imports, parsing, and the exit.

Default input (runs anywhere): the lambda phage of data/ (index built under --work) and its
2,000 reads of 100 bp; ``--count N`` takes the first N reads of ``--reads`` (written under --work).
On the GPU machine, with bench/end_to_end.py's chr20 data:
  python bench/startup.py --index bench/work/end_to_end/chr20/index/bowmap/index \\
      --reads bench/work/end_to_end/chr20/reads/reads_150.fq --count 10000 --devices gpu
  python bench/startup.py --index bench/work/end_to_end/chr20/index/bowmap/index \\
      --reads bench/work/end_to_end/chr20/reads/reads_150.fq --devices gpu --repeat 2
and for pairs (the issue's goal: 10,000 pairs), ``--mates`` with the second mates' FASTQ:
  python bench/startup.py --index ... --reads pairs_150/r1.fq --mates pairs_150/r2.fq --count 10000
Here (PoCL):
  python bench/startup.py --devices cpu -p 2 --align-args "--chunk-bases 20000"
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from harness import tree_environment  # noqa: E402  (bench/ is no package)
DEFAULT_WORK = HERE / "work" / "startup"

# Run in a fresh interpreter: prints {"piece": seconds} as JSON. argv: index, devices.
PROBE = r"""
import json, sys, time
pieces = {}
last = time.perf_counter()
def lap(name):
    global last
    now = time.perf_counter()
    pieces[name] = now - last
    last = now
import bowmap.cli
bowmap.cli._build_parser()
import numpy, pyopencl
import bowmap.align.run, bowmap.align.workers, bowmap.align.runners, bowmap.align.extend.records, bowmap.align.output.sam
lap("imports")
from bowmap.runtime.devices import list_devices, parse_device_spec, context_for
infos = parse_device_spec(sys.argv[2] or None, list_devices())
lap("devices")
from bowmap.index.load import load_index, verify_index
index = load_index(sys.argv[1], verify=False)
lap("index map")
verify_index(index)
lap("index checksums")
device = context_for(infos[0].index)
lap("context")
from bowmap.align.options import AlignOptions
from bowmap.align.output.reference import ReferenceText
from bowmap.align.extend.smith_waterman import Scoring
from bowmap.align.workers import device_workers
device_workers(index, ReferenceText.from_index(index), device, 1, AlignOptions(index=sys.argv[1], reads="-"), Scoring())
lap("programs + upload")
pieces["programs"] = device.build_seconds
pieces["index upload"] = pieces.pop("programs + upload") - device.build_seconds
print(json.dumps(pieces))
"""

LOG_PATTERNS = {
    "devices line": re.compile(r"\] devices: .*\[([0-9.]+) s\]"),
    "first chunk written": re.compile(r"first chunk written after ([0-9.]+) s"),
    "last chunk written": re.compile(r"first chunk written after [0-9.]+ s, the last after ([0-9.]+) s"),
    "workers exited": re.compile(r"worker processes exited ([0-9.]+) s after"),
    "run's own end": re.compile(r"\] [0-9]+ reads, [0-9.]+% mapped, ([0-9.]+) s,"),
    "workers ready": re.compile(r"worker processes ready after ([0-9.]+)-([0-9.]+) s \(the last: (.*)\)"),
    "device set-up": re.compile(r"device set-up: (.*)"),
}


def note(message: str) -> None:
    print(f"[startup] {message}", file=sys.stderr, flush=True)


def default_input(work: Path) -> tuple[Path, Path]:
    """The lambda phage index (built once under ``work``) and its reads, decompressed."""
    work.mkdir(parents=True, exist_ok=True)
    prefix, reads = work / "lambda", work / "lambda_reads_100bp.fq"
    if not Path(f"{prefix}.bmi").exists():
        note(f"building {prefix}")
        subprocess.run([sys.executable, "-m", "bowmap", "index", str(ROOT / "data" / "lambda_virus.fa"), str(prefix), "--no-progress", "-q"],
                       check=True, env=tree_environment())
    if not reads.exists():
        with gzip.open(ROOT / "data" / "lambda_reads_100bp.fq.gz", "rb") as source:
            reads.write_bytes(source.read())
    return prefix, reads


def first_reads(reads: Path, count: int, work: Path) -> Path:
    """The first ``count`` records of a 4-line FASTQ file, written once under ``work``; a file
    with fewer is taken again and again, the copies' reads renamed NAME_1, NAME_2, ..."""
    target = work / f"{reads.stem}_first{count}.fq"
    if not target.exists():
        work.mkdir(parents=True, exist_ok=True)
        lines = []
        with open(reads, "rb") as source:
            for line in source:
                lines.append(line)
                if len(lines) == 4 * count:
                    break
        records = len(lines) // 4
        copy = 0
        while 0 < records and len(lines) < 4 * count:
            copy += 1
            for number in range(min(records, count - len(lines) // 4)):
                header, *rest = lines[4 * number : 4 * number + 4]
                name, _, comment = header.rstrip(b"\n").partition(b" ")
                lines += [name + f"_{copy}".encode() + (b" " + comment if comment else b"") + b"\n", *rest]
        temporary = target.with_name(target.name + ".partial")
        temporary.write_bytes(b"".join(lines))
        temporary.replace(target)
    return target


def timed_python(arguments: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, *arguments], check=True, env=tree_environment(), stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def probe(index: Path, devices: str | None) -> dict:
    result = subprocess.run([sys.executable, "-c", PROBE, str(index), devices or ""], check=True, env=tree_environment(),
                            stdout=subprocess.PIPE, text=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def whole_command(index: Path, reads: list[Path], args) -> dict:
    """One ``bowmap align`` run: its first record's and its end's times seen here, and its log's."""
    command = [sys.executable, "-m", "bowmap", "align", str(index), *map(str, reads), "-o", "-", "--no-progress"]
    command += ["--devices", args.devices] if args.devices else []
    command += ["-p", str(args.processes)] if args.processes else []
    command += shlex.split(args.align_args)
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=tree_environment())
    first, records = None, 0
    for line in process.stdout:  # the header's lines start with '@', records never do
        if not line.startswith(b"@"):
            records += 1
            if first is None:
                first = time.perf_counter() - started
    log = process.stderr.read().decode(errors="replace")
    if process.wait() != 0:
        raise SystemExit(f"bowmap align failed (exit {process.returncode}):\n{log}")
    result = {"first SAM record": first, "whole command": time.perf_counter() - started, "records": records, "log": log}
    for name, pattern in LOG_PATTERNS.items():
        match = pattern.search(log)
        if match:
            result[name] = match.groups() if len(match.groups()) > 1 else match.group(1)
    if "run's own end" in result:  # before run_align: the interpreter, imports, parsing; after: the exit
        result["outside the run"] = result["whole command"] - float(result["run's own end"])
    return result


def spread(values: list[float]) -> str:
    values = [value for value in values if value is not None]
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", type=Path, metavar="PREFIX", help="bowmap index (default: the lambda phage, built under --work)")
    parser.add_argument("--reads", type=Path, metavar="FASTQ", help="uncompressed 4-line FASTQ (default: the lambda reads)")
    parser.add_argument("--mates", type=Path, metavar="FASTQ", help="second mates of --reads (paired-end runs)")
    parser.add_argument("--count", type=int, metavar="N", help="map only the first N reads or pairs (written under --work)")
    parser.add_argument("--devices", metavar="SPEC", help="--devices of the runs (default: bowmap's)")
    parser.add_argument("-p", "--processes", type=int, metavar="N", help="-p of the whole command (default: bowmap's)")
    parser.add_argument("--align-args", default="", metavar="ARGS", help='more `bowmap align` arguments, e.g. "--chunk-bases 20000"')
    parser.add_argument("--repeat", type=int, default=3, metavar="K", help="runs of each piece (default 3)")
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK, metavar="DIR", help="work folder (default bench/work/startup)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the measurements as JSON")
    parser.add_argument("--show-log", action="store_true", help="print the last whole command's log")
    args = parser.parse_args()
    if (args.index is None) != (args.reads is None):
        parser.error("give both --index and --reads, or neither")
    index, reads = (args.index, args.reads) if args.index else default_input(args.work)
    inputs = [reads] + ([args.mates] if args.mates else [])
    if args.count:
        inputs = [first_reads(path, args.count, args.work) for path in inputs]

    rows: dict[str, list] = {}
    for _ in range(args.repeat):
        rows.setdefault("python", []).append(timed_python(["-c", "pass"]))
        for name, seconds in probe(index, args.devices).items():
            rows.setdefault(name, []).append(seconds)
    runs = []
    for number in range(args.repeat):
        note(f"whole command, run {number + 1} of {args.repeat}")
        runs.append(whole_command(index, inputs, args))

    print(f"\nbowmap align start-up: {index} on {' '.join(map(str, inputs))} ({runs[0]['records']} records), devices {args.devices or 'default'}, "
          f"-p {args.processes or 'default'} {args.align_args}".rstrip())
    print(f"python {sys.version.split()[0]}; bytecode {'not written (PYTHONDONTWRITEBYTECODE)' if sys.dont_write_bytecode else 'cached'}")
    print(f"\n{'piece (fresh process each)':30s} seconds: median (min-max) of {args.repeat}")
    for name, values in rows.items():
        print(f"{name:30s} {spread(values)}")
    print(f"\n{'whole command':30s}")
    for name in ("devices line", "first chunk written", "first SAM record", "last chunk written", "workers exited", "run's own end",
                 "outside the run", "whole command"):
        print(f"{name:30s} {spread([None if run.get(name) is None else float(run[name]) for run in runs])}")
    for run in runs:
        if "workers ready" in run:
            first, last, pieces = run["workers ready"]
            print(f"{'workers ready':30s} {first}-{last} s; the last: {pieces}")
        if "device set-up" in run:
            print(f"{'device set-up':30s} {run['device set-up']}")
    if args.show_log:
        print("\n" + runs[-1]["log"].rstrip())
    if args.json:
        args.json.write_text(json.dumps({"pieces": rows, "runs": [{k: v for k, v in run.items() if k != "log"} for run in runs]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
