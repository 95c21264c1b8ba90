"""Where a run's device time goes: every kernel and copy of ``bowmap align``, timed by OpenCL's
profiling events, summed by name, for one or more indexes side by side.

Each case runs ``bowmap align`` in this process with one worker process (``-p 1``: the queue pairs
are threads here, so every queue is seen), its queues made with profiling on, and
``pyopencl.Kernel.__call__`` and ``pyopencl.enqueue_copy`` wrapped to keep each command's event.
The table gives, for each kernel (and the copies, by direction), the device time per 100,000
reads (ms) of each case: what grows from one genome to another; then all kernels' sum and their
busy time (the union of the kernels' intervals: time in which at least one kernel ran). Device times of the queue
pairs overlap one another, so their sum can exceed the run's wall time; profiling and the single
process make the run slower than a normal one, so its reads/s is not a speed figure.

Command (GPU machine; each case LABEL=INDEX_PREFIX=READS, the first ``--count`` reads taken):
  python bench/kernel_times.py --devices gpu --count 200000 \\
      --case chr20=bench/work/human_scale/chr20/index/one_block/index=bench/work/human_scale/chr20/reads/reads_150.fq \\
      --case big=bench/work/human_scale/big/index/default/index=bench/work/human_scale/big/reads/reads_150.fq
Here (PoCL), on data/:
  python bench/kernel_times.py --devices cpu --case lambda=bench/work/kernel_times/lambda=data/lambda_reads_100bp.fq.gz
(a prefix under bench/work/kernel_times/ whose files are missing is built from data/lambda_virus.fa first).
"""

from __future__ import annotations

import argparse
import collections
import gzip
import itertools
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import pyopencl as cl  # noqa: E402

from bowmap.cli import main as bowmap  # noqa: E402
from bowmap.runtime import devices  # noqa: E402
from harness import union_seconds  # noqa: E402

PER_READS = 100_000


class Recorder:
    """Keeps every kernel's and copy's event while installed (see :meth:`install`)."""

    def __init__(self):
        self.events: list[tuple[str, object]] = []

    def install(self) -> None:
        kernel_call, enqueue_copy = cl.Kernel.__call__, cl.enqueue_copy
        events = self.events

        def call(kernel, *args, **kwargs):
            event = kernel_call(kernel, *args, **kwargs)
            events.append((kernel.function_name, event))
            return event

        def copy(command_queue, dest, src, **kwargs):
            event = enqueue_copy(command_queue, dest, src, **kwargs)
            to_device = isinstance(dest, cl.MemoryObjectHolder) and not isinstance(src, cl.MemoryObjectHolder)
            to_host = isinstance(src, cl.MemoryObjectHolder) and not isinstance(dest, cl.MemoryObjectHolder)
            events.append(("copy to device" if to_device else "copy to host" if to_host else "copy on device", event))
            return event

        def profiled_queue(context):
            return cl.CommandQueue(context.context, context.device, properties=cl.command_queue_properties.PROFILING_ENABLE)

        cl.Kernel.__call__, cl.enqueue_copy, devices.DeviceContext.queue = call, copy, profiled_queue

    def totals(self) -> dict[str, tuple[int, float, float]]:
        """Per name: (commands, device seconds, the longest command's seconds)."""
        sums: dict[str, list] = collections.defaultdict(lambda: [0, 0, 0])
        for name, event in self.events:
            if event is None:
                continue
            seconds = (event.profile.end - event.profile.start) * 1e-9
            sums[name][0] += 1
            sums[name][1] += seconds
            sums[name][2] = max(sums[name][2], seconds)
        return {name: tuple(values) for name, values in sums.items()}

    def busy(self) -> float:
        """Seconds in which at least one kernel ran: the union of the kernels' intervals (the
        queues' kernels overlap, so this is at most their sum)."""
        return union_seconds((event.profile.start, event.profile.end) for name, event in self.events
                             if event is not None and not name.startswith("copy"))


def first_reads(reads: Path, count: int, folder: Path) -> Path:
    """A FASTQ file of the first ``count`` records of ``reads``."""
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{reads.name.removesuffix('.gz').removesuffix('.fq').removesuffix('.fastq')}_first{count}.fq"
    if not out.exists():
        opener = gzip.open if reads.suffix == ".gz" else open
        partial = out.with_suffix(".partial")
        with opener(reads, "rt") as source, open(partial, "w") as target:
            target.writelines(itertools.islice(source, 4 * count))
        partial.replace(out)  # a run cut short leaves no file that looks whole
    return out


def run_case(prefix: str, reads: Path, device_spec: str, extra: list[str]) -> tuple[dict, float, int, float]:
    """One profiled run: (totals by name, wall seconds, reads, kernels' busy seconds)."""
    if not Path(prefix + ".bmi").exists():
        if Path(prefix).resolve().parent != (HERE / "work" / "kernel_times").resolve():
            raise SystemExit(f"kernel_times: no index at {prefix} (only bench/work/kernel_times/ prefixes are built, from data/)")
        Path(prefix).parent.mkdir(parents=True, exist_ok=True)
        if bowmap(["-q", "index", str(ROOT / "data" / "lambda_virus.fa"), prefix]) != 0:
            raise SystemExit(f"kernel_times: cannot build {prefix}")
    warm = first_reads(reads, 1000, Path(prefix).parent / "kernel_times")
    command = ["-q", "align", prefix, None, "-o", "/dev/null", "--no-progress", "--devices", device_spec, "-p", "1", *extra]
    bowmap([part if part is not None else str(warm) for part in command])  # kernels built, index paged in
    recorder = Recorder()
    saved = cl.Kernel.__call__, cl.enqueue_copy, devices.DeviceContext.queue
    recorder.install()
    try:
        started = time.perf_counter()
        code = bowmap([part if part is not None else str(reads) for part in command])
        wall = time.perf_counter() - started
    finally:
        cl.Kernel.__call__, cl.enqueue_copy, devices.DeviceContext.queue = saved
    if code != 0:
        raise SystemExit(f"kernel_times: bowmap align failed on {prefix}")
    with open(reads) as handle:
        count = sum(1 for _ in handle) // 4
    return recorder.totals(), wall, count, recorder.busy()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", action="append", required=True, metavar="LABEL=PREFIX=READS")
    parser.add_argument("--count", type=int, default=100_000, help="reads taken from the start of each READS")
    parser.add_argument("--devices", default="gpu")
    parser.add_argument("--align-args", default="", help="more bowmap align arguments, one string")
    args = parser.parse_args(argv)
    results, busy_ms = [], []
    for case in args.case:
        label, prefix, reads = case.split("=", 2)
        taken = first_reads(Path(reads), args.count, Path(prefix).parent / "kernel_times")
        totals, wall, count, busy = run_case(prefix, taken, args.devices, args.align_args.split())
        results.append((label, totals, wall, count))
        busy_ms.append(1e3 * busy * PER_READS / count)
        print(f"[kernel_times] {label}: {count:,} reads, {wall:.2f} s in one process", file=sys.stderr)
    names = sorted({name for _, totals, _, _ in results for name in totals},
                   key=lambda name: -max(totals.get(name, (0, 0, 0))[1] / count for _, totals, _, count in results))
    width = max(len(name) for name in names + ["kernels busy (union)"])
    print(f"device ms per {PER_READS:,} reads (commands per {PER_READS:,} reads; the longest command, ms)")
    print(f"{'':{width}}" + "".join(f"  {label:>30}" for label, *_ in results))
    for name in names:
        cells = []
        for _, totals, _, count in results:
            commands, seconds, longest = totals.get(name, (0, 0.0, 0.0))
            cells.append(f"{1e3 * seconds * PER_READS / count:12.1f} ({commands * PER_READS / count:7.0f}; {1e3 * longest:6.2f})")
        print(f"{name:{width}}" + "".join(f"  {cell:>30}" for cell in cells))
    kernel_sum = [sum(seconds for name, (_, seconds, _) in totals.items() if not name.startswith("copy")) * 1e3 * PER_READS / count
                  for _, totals, _, count in results]
    print(f"{'all kernels':{width}}" + "".join(f"  {value:12.1f}{'':18}" for value in kernel_sum))
    print(f"{'kernels busy (union)':{width}}" + "".join(f"  {value:12.1f}{'':18}" for value in busy_ms))
    print(f"{'wall (one process)':{width}}" + "".join(f"  {1e3 * wall * PER_READS / count:12.1f}{'':18}" for _, _, wall, count in results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
