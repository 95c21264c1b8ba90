"""Where a ``bowmap align`` run's processes spend their lives: one table from the usage files
that ``BOWMAP_USAGE`` makes every process write (bowmap.runtime.usage), for one or more owner
layouts side by side; with ``--timeline``, the owners' kernels too (BOWMAP_TIMELINE).

The GPU machine's runs are not CPU-bound (session 14: 29% of its 16 cores idle, the host workers
active about 55% of their lives), so the question is what the workers wait for. For each run:

* ``host workers``: their summed life (from their start to their last result), split into their
  CPU time (all threads), their threads' waits for the device owner's answers (a batch sent, its
  reply back: the owner's queueing, its Python, the device), their waits for the next chunk, and
  the rest (life less CPU less the waits: being descheduled, the result pump, start-up);
* ``owner``: its CPU, its batches' thread-seconds, and the device waits inside them (blocking
  read-backs, waits for a queue to drain), the difference being the owner's own work on them;
* ``first process``: its CPU and its writing;
* the owner's and the first process's busiest threads still alive at their end (Python's names,
  else the system's: a driver's threads too), by CPU.

A worker's owner waits far above the owner's batch time point at the way there and back (the
socket, the owner's GIL); batches far above their device waits at the owner's own work; a wait
for the next chunk at the first process.

Command (GPU machine, bench/paired_end.py's chr20 data; 2 owners is the developers'
``BOWMAP_OWNERS_PER_DEVICE``):
  python bench/host_waits.py --index /tmp/work/chr20/indexes/bowmap/index \\
      --reads /tmp/work/chr20/pairs_150/r1.fq --mates /tmp/work/chr20/pairs_150/r2.fq --owners 1,2
Here (PoCL):
  python bench/host_waits.py --devices cpu -p 2
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = ROOT / "data"
sys.path.insert(0, str(HERE))

from harness import tree_environment, union_seconds  # noqa: E402


def usage_totals(folder: str) -> dict[str, dict]:
    """The usage files of one run, summed by kind of process (``worker``, ``owner``, ``parent``):
    count, cpu, age and waits (name -> thread-seconds)."""
    kinds: dict[str, dict] = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.usage.json"))):
        name = os.path.basename(path).split(".usage")[0]
        kind = "worker" if name.startswith("worker") else "owner" if name.startswith("owner") else name
        with open(path) as file:
            record = json.load(file)
        total = kinds.setdefault(kind, {"count": 0, "cpu": 0.0, "age": 0.0, "waits": {}})
        total["count"] += 1
        total["cpu"] += record["user_s"] + record["system_s"]
        total["age"] += record["age_s"]
        for name, user, system in record.get("threads", []):  # the live threads' CPU at the process's end
            total.setdefault("threads", {})[name] = total.get("threads", {}).get(name, 0.0) + user + system
        for wait, (count, seconds) in record.get("waits", {}).items():
            total["waits"][wait] = total["waits"].get(wait, 0.0) + seconds
            total.setdefault("counts", {})[wait] = total.get("counts", {}).get(wait, 0) + count
    return kinds


def rows_of(label: str, whole: float, kinds: dict[str, dict]) -> list[list[str]]:
    """Table rows of one run (see the module docstring)."""
    def share(part: float, life: float) -> str:
        return f"{part:.2f} s ({100 * part / life:.0f}%)" if life > 0 else f"{part:.2f} s"

    rows = []
    workers = kinds.get("worker")
    if workers:
        life, waits = workers["age"], workers["waits"]
        answers, chunks = waits.get("owner answers", 0.0), waits.get("next chunk", 0.0)
        rest = life - workers["cpu"] - answers - chunks
        rows.append([label, f"{whole:.2f}", f"host workers x{workers['count']}", f"{life:.2f}", share(workers["cpu"], life),
                     share(answers, life), share(chunks, life), share(rest, life)])
    owners = kinds.get("owner")
    if owners:
        batches, device = owners["waits"].get("batches", 0.0), owners["waits"].get("device waits in batches", 0.0)
        rows.append([label, "", f"owner x{owners['count']}", f"{owners['age']:.2f}", share(owners["cpu"], owners["age"]),
                     f"batches {batches:.2f} s", f"device waits {device:.2f} s", f"own work {batches - device:.2f} s"])
        loop = {name[len("loop: "):]: seconds for name, seconds in owners["waits"].items() if name.startswith("loop: ")}
        if loop:  # the serving loop's thread: where its life went (DeviceOwner._loop)
            rows += cell_rows(label, "owner's loop", [f"{name} {seconds:.2f} s" for name, seconds in sorted(loop.items())])
        commands = {name[len("command: "):]: seconds for name, seconds in owners["waits"].items() if name.startswith("command: ")}
        counts = {name[len("command: "):]: count for name, count in owners.get("counts", {}).items() if name.startswith("command: ")}
        if commands:  # the enqueueing of a batch's commands, by kind (DeviceOwner._execute): seconds, count, mean
            rows += cell_rows(label, "owner's commands", [
                f"{name} {seconds:.2f} s / {counts.get(name, 0)} = {1e6 * seconds / max(counts.get(name, 0), 1):.0f} us"
                for name, seconds in sorted(commands.items(), key=lambda item: -item[1])])
    parent = kinds.get("parent")
    if parent:
        rows.append([label, "", "first process", f"{parent['age']:.2f}", share(parent["cpu"], parent["age"]),
                     f"writing {parent['waits'].get('writing', 0.0):.2f} s", "", ""])
    for kind, title in (("owner", "owner's threads"), ("parent", "its threads")):
        threads = kinds.get(kind, {}).get("threads")
        if threads:  # the busiest live threads at the end (a driver's too: named by the system)
            rows += cell_rows(label, title, [f"{name} {seconds:.2f} s" for name, seconds in sorted(threads.items(), key=lambda item: -item[1])[:3]])
    return rows


def cell_rows(label: str, title: str, cells: list[str]) -> list[list[str]]:
    """``cells`` in the table's last three columns, three a row, the first row titled."""
    cells = cells + [""] * (-len(cells) % 3)
    return [[label, "", title if row == 0 else "", "", "", *cells[row : row + 3]] for row in range(0, len(cells), 3)]


def timeline_rows(label: str, folder: str) -> list[list[str]]:
    """With --timeline: the owners' kernels (BOWMAP_TIMELINE), over the middle 80% of the span
    from the first kernel's start to the last one's end (the steady state): the GPU's busy share
    (the union of the kernel intervals), the kernels' summed time over that union (how many ran
    at once), then per kernel its count, mean time running and mean wait on the device between
    its submission and its start."""
    rows: list = []
    for path in sorted(glob.glob(os.path.join(folder, "owner-*.kernels.json"))):
        with open(path) as file:
            kernels = json.load(file)
        if not kernels:
            continue
        first, last = min(row[4] for row in kernels), max(row[5] for row in kernels)
        low, high = first + (last - first) // 10, last - (last - first) // 10
        clipped = [(max(row[4], low), min(row[5], high)) for row in kernels if row[5] > low and row[4] < high]
        busy = union_seconds(clipped)
        summed = sum(end - start for start, end in clipped) * 1e-9
        span = (high - low) * 1e-9
        rows.append([label, os.path.basename(path).split(".kernels")[0], f"{span:.2f} s", f"busy {busy:.2f} s ({100 * busy / span:.0f}%)",
                     f"x{summed / busy:.1f} at once" if busy else "", ""])
        by_name: dict[str, list] = {}
        for name, _, queued, submitted, started, ended in kernels:
            by_name.setdefault(name, []).append((ended - started, started - submitted, submitted - queued))
        for name, times in sorted(by_name.items(), key=lambda item: -sum(run for run, _, _ in item[1])):
            count = len(times)
            rows.append([label, f"  {name}", f"{count}", f"run {1e-6 * sum(t[0] for t in times) / count:.2f} ms",
                         f"waits on device {1e-6 * sum(t[1] for t in times) / count:.2f} ms",
                         f"queued to submitted {1e-6 * sum(t[2] for t in times) / count:.2f} ms"])
    return rows


def phase_rows(label: str, folder: str, begun: float, ended: float) -> list[list[str]]:
    """With --phases: the whole command laid out from the marks every process made
    (bowmap.runtime.usage.mark, on the clock all processes share): from the command's start to
    the run proper (interpreter, imports, parsing), to the first chunk handed out (index, devices,
    owners, workers), its SAM written, the paired model's sample, the steady middle (first chunk
    written to last handed out), the tail (last handed out to last written), the wind-down (workers
    exit, owners close, the output closed) and the exit; then how long the host workers sat idle
    before their first chunk and after their last (mean a worker)."""
    with open(os.path.join(folder, "parent.usage.json")) as file:
        marks = json.load(file).get("marks", [])
    at: dict[str, list[float]] = {}
    for name, _, when in marks:
        at.setdefault(name, []).append(when)
    if not at.get("handed out") or not at.get("written"):
        return []
    first_out, last_out = min(at["handed out"]), max(at["handed out"])
    first_written, last_written = min(at["written"]), max(at["written"])
    steps = [("start: interpreter, imports, parsing", begun, at["run"][0]),
             ("set-up: index, devices, owners, workers", at["run"][0], first_out),
             ("first chunk mapped and written", first_out, first_written)]
    if "insert model" in at:
        steps.append(("paired: the insert-size sample", first_out, at["insert model"][0]))
    steps += [(f"steady: {len(at['written'])} chunks written, to the last handed out", first_written, last_out),
              ("tail: last handed out to last written", last_out, last_written),
              ("wind-down: workers, owners, output closed", last_written, at.get("closed", [last_written])[0]),
              ("exit", at.get("closed", [last_written])[0], ended)]
    rows = [[label, name, f"{to - since:.3f} s", f"{since - begun:.3f} -> {to - begun:.3f}"] for name, since, to in steps]
    before, after = [], []
    for path in sorted(glob.glob(os.path.join(folder, "worker*.usage.json"))):
        with open(path) as file:
            worker = [(name, when) for name, _, when in json.load(file).get("marks", [])]
        received = [when for name, when in worker if name == "received"]
        finished = [when for name, when in worker if name == "finished"]
        if received and finished:
            before.append(min(received) - first_out)
            after.append(last_written - max(finished))
    if before:
        rows.append([label, f"workers idle: after the first hand-out, before their first chunk (mean of {len(before)})",
                     f"{sum(before) / len(before):.3f} s", ""])
        rows.append([label, "workers idle: after their last chunk, before the last written (mean)", f"{sum(after) / len(after):.3f} s", ""])
    # The other marks (the owners' and workers' start-up), each over the processes that made it.
    events: dict[str, list[float]] = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.usage.json"))):
        with open(path) as file:
            for name, number, when in json.load(file).get("marks", []):
                if number is None:
                    events.setdefault(name, []).append(when - begun)
    for name, times in sorted(events.items(), key=lambda item: min(item[1])):
        times.sort()
        rows.append([label, f"mark: {name} (x{len(times)})", "", f"{times[0]:.3f}, median {times[len(times) // 2]:.3f}, last {times[-1]:.3f}"])
    rows.append([label, "whole command", f"{ended - begun:.3f} s", ""])
    return rows


def round_trip_rows(label: str, folder: str) -> list[list[str]]:
    """With --round-trips: every request of a host worker to its owner, piece by piece, from the
    marks both sides make (bowmap.runtime.remote._Channel.call, DeviceOwner's loop): from the
    worker's send to the owner's read of it, to its commands queued, to the device's last
    completion seen, to the reply sent, to the worker's receipt; mean, median and 90th
    percentile of each piece over every request."""
    sides: dict[tuple, dict[str, list[float]]] = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.usage.json"))):
        with open(path) as file:
            for name, number, when in json.load(file).get("marks", []):
                step, _, token = name.partition(" ")
                if token and step in ("sent", "read", "queued", "done", "replied", "received"):
                    sides.setdefault((token, number), {}).setdefault(step, []).append(when)
    pieces: dict[str, list[float]] = {name: [] for name in
                                      ("to the owner", "owner: queueing its commands", "device (until seen done)", "owner: after the device",
                                       "owner: no device wait", "back to the worker", "whole round trip")}
    for steps in sides.values():
        if not all(step in steps for step in ("sent", "read", "replied", "received")):
            continue
        sent, read, replied, received = steps["sent"][0], steps["read"][0], steps["replied"][-1], steps["received"][0]
        pieces["to the owner"].append(read - sent)
        if "queued" in steps and "done" in steps:
            pieces["owner: queueing its commands"].append(steps["queued"][0] - read)
            pieces["device (until seen done)"].append(steps["done"][-1] - steps["queued"][0])
            pieces["owner: after the device"].append(replied - steps["done"][-1])
        else:
            pieces["owner: no device wait"].append(replied - read)
        pieces["back to the worker"].append(received - replied)
        pieces["whole round trip"].append(received - sent)
    rows = []
    for name, values in pieces.items():
        if values:
            values.sort()
            rows.append([label, name, f"{len(values)}", f"{1e3 * sum(values) / len(values):.2f}", f"{1e3 * values[len(values) // 2]:.2f}",
                         f"{1e3 * values[int(0.9 * (len(values) - 1))]:.2f}"])
    return rows


def run(args, owners: int, work: str) -> tuple[float, dict, list, list, list]:
    folder = tempfile.mkdtemp(prefix=f"usage{owners}-", dir=work)
    command = [sys.executable, "-m", "bowmap", "align", args.index, args.reads, *([args.mates] if args.mates else []),
               "-o", os.path.join(work, "out.sam"), "--no-progress", *(["--devices", args.devices] if args.devices else []),
               *(["-p", str(args.processes)] if args.processes else []), *shlex.split(args.align_args)]
    environment = tree_environment(BOWMAP_USAGE=folder, BOWMAP_OWNERS_PER_DEVICE=str(owners),
                                       BOWMAP_TIMELINE="1" if args.timeline else "0")
    begun = time.monotonic()
    done = subprocess.run(command, env=environment, capture_output=True, text=True, check=False)
    ended = time.monotonic()
    if done.returncode:
        raise SystemExit(f"host_waits: bowmap align failed:\n{done.stderr.strip()}")
    label = f"{owners} owner(s) a device"
    return (ended - begun, usage_totals(folder), timeline_rows(label, folder) if args.timeline else [],
            phase_rows(label, folder, begun, ended) if args.phases else [], round_trip_rows(label, folder) if args.round_trips else [])


def render(rows: list[list[str]], header: list[str] | None = None) -> str:
    header = header or ["run", "whole s", "process", "life s", "CPU", "owner answers / batches", "next chunk / device", "rest / own work"]
    table = [header, *rows]
    widths = [max(len(row[column]) for row in table) for column in range(len(header))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in table)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", help="index prefix (default: data/'s lambda phage, built under --work)")
    parser.add_argument("--reads", help=f"reads (default {DATA / 'lambda_pairs_R1.fq.gz'})")
    parser.add_argument("--mates", help="second mates (default: data/'s with the default reads)")
    parser.add_argument("--owners", default="1", help="owner processes a device, comma-separated, a run each (default 1)")
    parser.add_argument("--devices")
    parser.add_argument("-p", "--processes", type=int, help="bowmap align -p (the owner layout needs 2 or more)")
    parser.add_argument("--align-args", default="", help="more bowmap align arguments, one string")
    parser.add_argument("--work", type=Path, default=HERE / "work" / "host_waits")
    parser.add_argument("--timeline", action="store_true",
                        help="also time every kernel on the owners' (profiling) queues: the GPU's busy share at steady state")
    parser.add_argument("--phases", action="store_true",
                        help="also lay the whole command out in phases (start, set-up, first chunk, steady, tail, wind-down, exit)")
    parser.add_argument("--round-trips", action="store_true",
                        help="also split the host workers' requests to their owner into pieces (to it, in it, the device, back)")
    args = parser.parse_args(argv)
    try:
        owner_counts = [int(word) for word in args.owners.split(",")]
        assert owner_counts and min(owner_counts) >= 1
    except (ValueError, AssertionError):
        parser.error("--owners: positive integers, comma-separated")
    args.work.mkdir(parents=True, exist_ok=True)
    if args.reads is None:
        args.reads, args.mates = str(DATA / "lambda_pairs_R1.fq.gz"), args.mates or str(DATA / "lambda_pairs_R2.fq.gz")
    if args.index is None:
        args.index = str(args.work / "lambda")
        if not Path(args.index + ".bmi").exists():
            subprocess.run([sys.executable, "-m", "bowmap", "-q", "index", str(DATA / "lambda_virus.fa"), args.index], check=True,
                           env=tree_environment())
    rows, kernel_rows, phases, trips = [], [], [], []
    with tempfile.TemporaryDirectory(dir=args.work) as work:
        for owners in owner_counts:
            whole, kinds, timeline, laid_out, pieces = run(args, owners, work)
            rows += rows_of(f"{owners} owner(s) a device", whole, kinds)
            kernel_rows += timeline
            phases += laid_out
            trips += pieces
    print(render(rows))
    if phases:
        print()
        print(render(phases, ["run", "phase", "seconds", "from -> to (s after the command's start)"]))
    if trips:
        print()
        print(render(trips, ["run", "a request's piece", "requests", "mean ms", "median ms", "90% ms"]))
    if kernel_rows:
        print()
        print(render(kernel_rows, ["run", "owner / kernel", "span / count", "GPU busy / run", "at once / waits", "submission"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
