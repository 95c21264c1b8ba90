"""Whole ``bowmap align`` commands of two or more checkouts in turns, in one call: the only fair
comparison of a change on the GPU machines, whose runs of one tree move by a fifth from machine
to machine and by 0.2 s from run to run (bench/RESULTS.md, sessions 20-22).

Each round runs every input with every tree, the trees' order reversed every other round, SAM to
a file that is then hashed (md5 of its lines but @PG) and removed. The table gives each input and
tree its whole seconds, round by round, their median, the first chunk's time on the run's own
clock (its log), the CPU seconds of the whole process tree (reader, owner, host workers: their
user and system time, from the children's rusage), and the md5s: a change that must not alter
the output shows one md5 a row pair. The CPU column moves less than the wall time from run to
run, so it shows a change to the host work a read that whole seconds hide. A tree is a checkout
(``git archive`` of a main before a change, or this one) run with ``PYTHONPATH`` set to it and
the caller's path.

On the GPU machine, with bench/paired_end.py's chr20 data (prev: `git archive` of the main before):
  python bench/in_turns.py --trees prev=.device/prev,new=. --index /tmp/work/chr20/indexes/bowmap/index \\
      --input "1M pairs=/tmp/work/chr20/pairs_150/r1.fq /tmp/work/chr20/pairs_150/r2.fq" \\
      --input "1M single=/tmp/work/chr20/pairs_150/r1.fq" --rounds 3 --devices gpu
Here (PoCL), the lambda phage of data/ against itself:
  python bench/in_turns.py --trees a=.,b=. --rounds 2 --devices cpu
"""

from __future__ import annotations

import argparse
import hashlib
import re
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = ROOT / "data"
sys.path.insert(0, str(HERE))
from harness import sam_lines, tree_environment  # noqa: E402  (bench/ is no package)

FIRST_CHUNK = re.compile(r"first chunk written after ([0-9.]+) s")


def sam_md5(path: Path) -> str:
    """The md5 of a SAM file's lines but @PG (harness.sam_lines), first 10 digits."""
    digest = hashlib.md5()
    for line in sam_lines(path):
        digest.update(line)
    return digest.hexdigest()[:10]


def children_cpu() -> float:
    """User and system seconds of this process's waited-for descendants so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(tree: Path, index: str, files: list[str], out: Path, args) -> tuple[float, str, str, float]:
    """One whole command of ``tree``: (seconds, md5 of its SAM, first chunk's time or '-', CPU
    seconds of its process tree)."""
    command = [sys.executable, "-m", "bowmap", "align", index, *files, "-o", str(out), "--no-progress",
               *(["--devices", args.devices] if args.devices else []), *shlex.split(args.align_args)]
    started, cpu = time.perf_counter(), children_cpu()
    done = subprocess.run(command, cwd=tree, env=tree_environment(tree), capture_output=True, text=True, check=False)
    seconds, cpu = time.perf_counter() - started, children_cpu() - cpu
    if done.returncode:
        raise SystemExit(f"in_turns: {tree}: bowmap align failed (exit {done.returncode}):\n{done.stderr.strip()}")
    first = FIRST_CHUNK.search(done.stderr)
    md5 = sam_md5(out)
    out.unlink()
    return seconds, md5, first.group(1) if first else "-", cpu


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trees", default="this=.", help="name=checkout, comma-separated (default: this=.)")
    parser.add_argument("--input", action="append", metavar="LABEL=FILES",
                        help="an input: a label, '=', its reads file(s) separated by spaces (repeatable; default: data/'s lambda pairs)")
    parser.add_argument("--index", help="index prefix (default: data/'s lambda phage, built under --work)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--devices")
    parser.add_argument("--align-args", default="", help="more bowmap align arguments, one string")
    parser.add_argument("--work", type=Path, default=HERE / "work" / "in_turns")
    parser.add_argument("--warm-up", action="store_true", help="one untimed run of each tree on the first input first")
    args = parser.parse_args(argv)
    try:
        trees = {name: Path(path).resolve() for name, _, path in (item.partition("=") for item in args.trees.split(","))}
        inputs = [(label, files.split()) for label, _, files in (item.partition("=") for item in args.input or [])]
        assert trees and all(trees) and all(files for _, files in inputs) and args.rounds >= 1
    except (ValueError, AssertionError):
        parser.error("--trees name=path,...; --input LABEL=FILES; --rounds 1 or more")
    args.work.mkdir(parents=True, exist_ok=True)
    if not inputs:
        inputs = [("lambda pairs", [str(DATA / "lambda_pairs_R1.fq.gz"), str(DATA / "lambda_pairs_R2.fq.gz")])]
    index = args.index
    if index is None:
        index = str(args.work / "lambda")
        if not Path(index + ".bmi").exists():
            subprocess.run([sys.executable, "-m", "bowmap", "-q", "index", str(DATA / "lambda_virus.fa"), index], check=True,
                           env=tree_environment(ROOT))
    results: dict[tuple[str, str], list[tuple[float, str, str, float]]] = {}
    with tempfile.TemporaryDirectory(dir=args.work) as work:
        out = Path(work) / "out.sam"
        if args.warm_up:
            for tree in trees.values():
                run_once(tree, index, inputs[0][1], out, args)
        for round_number in range(args.rounds):
            order = list(trees.items()) if round_number % 2 == 0 else list(reversed(trees.items()))
            for label, files in inputs:
                for name, tree in order:
                    results.setdefault((label, name), []).append(run_once(tree, index, files, out, args))
    print(f"{'input':14} {'tree':8} {'median s':>8} {'CPU s':>7}  whole s by round (first chunk written, run's clock; CPU s)  md5")
    for (label, name), runs in results.items():
        rounds = "  ".join(f"{seconds:.2f} ({first}; {cpu:.1f})" for seconds, _, first, cpu in runs)
        md5s = ",".join(sorted({md5 for _, md5, _, _ in runs}))
        median_seconds = statistics.median(run[0] for run in runs)
        median_cpu = statistics.median(run[3] for run in runs)
        print(f"{label:14} {name:8} {median_seconds:8.2f} {median_cpu:7.1f}  {rounds}  {md5s}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
