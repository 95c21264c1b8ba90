"""Several GPUs against one: the same `bowmap align` run on one device with its share of the host's
cores, on every device with all the cores, and on one device with all the cores. One table.

The steady rate is (K × N − N) / (t_KN − t_N) between a run on the N reads of --reads and one on K
copies of them (--repeat), both to a discarded standard output, so start-up and index loading
drop out; the whole rate is N / t_N. One more run of each layout writes its SAM, compared byte for byte (the
@PG line aside) with the first layout's. A GPU run of bowmap is bound by its worker processes'
host work, so the cores each layout gets are part of it: "1 device, 1/D of the cores" is what one
GPU of a D-GPU machine has to itself.

Command (GPU machine with two GPUs, the chr20 data of bench/end_to_end.py):
  python bench/multi_gpu.py --index bench/work/end_to_end/chr20/index/bowmap/index \\
      --reads bench/work/end_to_end/chr20/reads/reads_150.fq --repeat 10 --runs 2
Here (one CPU device, a smoke run):
  python bench/multi_gpu.py --index I --reads R --devices cpu --repeat 2
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def count_reads(path: Path) -> int:
    with open(path, "rb") as file:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: file.read(1 << 24), b"")) // 4


def repeated(path: Path, times: int, folder: Path) -> Path:
    copies = folder / f"{path.stem}_x{times}{path.suffix}"
    with open(copies, "wb") as out:
        for _ in range(times):
            with open(path, "rb") as source:
                shutil.copyfileobj(source, out, 1 << 24)
    return copies


def align_seconds(index: str, reads: Path, output: str, devices: str, cores: list[int], extra: list[str]) -> float:
    """One `bowmap align` run on ``cores`` (its default worker count follows them: one a core
    but one, within the devices' memory); ``output`` "-" is standard output, discarded."""
    command = [sys.executable, "-m", "bowmap", "align", index, str(reads), "-o", output, "--devices", devices,
               "--no-progress", *extra]
    started = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          preexec_fn=lambda: os.sched_setaffinity(0, cores), check=False)
    seconds = time.perf_counter() - started
    if done.returncode:
        sys.exit(f"multi_gpu: {' '.join(command)} failed:\n{done.stderr}")
    return seconds


def sam_body(path: Path) -> bytes:
    with open(path, "rb") as file:
        return b"".join(line for line in file if not line.startswith(b"@PG"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", required=True)
    parser.add_argument("--reads", required=True, type=Path, help="uncompressed FASTQ")
    parser.add_argument("--devices", default="gpu", help="bowmap --devices: the devices of the all-devices layout (default gpu)")
    parser.add_argument("--repeat", type=int, default=10, metavar="K", help="the long run maps K copies of the reads (default 10)")
    parser.add_argument("--runs", type=int, default=1, help="timed runs of each layout, the best kept (default 1)")
    parser.add_argument("--align-args", default="", metavar="ARGS", help='more `bowmap align` arguments, e.g. "--chunk-bases 2097152"')
    parser.add_argument("--workers-per-core", type=float, metavar="W",
                        help="-p W x (the layout's cores - 1) in every run (default: bowmap's own choice, which may differ "
                             "between the short and the long input)")
    args = parser.parse_args()
    if args.repeat < 2:
        parser.error("--repeat must be at least 2")

    from bowmap.runtime.devices import list_devices, parse_device_spec

    devices = parse_device_spec(args.devices, list_devices())
    cores = sorted(os.sched_getaffinity(0))
    share = max(1, len(cores) // len(devices))
    first = str(devices[0].index)
    every = ",".join(str(info.index) for info in devices)
    layouts = [(f"1 device, {share} cores", first, cores[:share])]
    if len(devices) > 1:
        layouts.append((f"{len(devices)} devices, {len(cores)} cores", every, cores))
    if share < len(cores):
        layouts.append((f"1 device, {len(cores)} cores", first, cores))
    extra = args.align_args.split()
    reads = count_reads(args.reads)
    workers = f"{args.workers_per_core} workers a core but one" if args.workers_per_core else "bowmap's default workers"
    print(f"# {len(devices)} device(s): {', '.join(info.name for info in devices)}; {len(cores)} cores; "
          f"{reads:,} reads and {args.repeat} x as many; best of {args.runs} run(s); {workers}", flush=True)

    rows = []
    with tempfile.TemporaryDirectory(prefix="bowmap_multi_gpu_") as folder:
        long_reads = repeated(args.reads, args.repeat, Path(folder))
        reference_sam = None
        for label, spec, layout_cores in layouts:
            if args.workers_per_core:
                extra = [*args.align_args.split(), "-p", str(max(1, int(args.workers_per_core * (len(layout_cores) - 1))))]
            sam = Path(folder) / "layout.sam"
            align_seconds(args.index, args.reads, str(sam), spec, layout_cores, extra)  # also warms the caches
            body = sam_body(sam)
            reference_sam = body if reference_sam is None else reference_sam
            short = min(align_seconds(args.index, args.reads, "-", spec, layout_cores, extra) for _ in range(args.runs))
            long = min(align_seconds(args.index, long_reads, "-", spec, layout_cores, extra) for _ in range(args.runs))
            steady = (args.repeat - 1) * reads / (long - short) if long > short else float("nan")
            rows.append((label, reads / short, steady, body == reference_sam))
            print(f"  {label}: {short:.2f} s and {long:.2f} s", flush=True)

    base = rows[0][2]
    print("\n| layout | whole reads/s | steady reads/s | steady vs first | SAM as first |")
    print("|---|---|---|---|---|")
    for label, whole, steady, same in rows:
        print(f"| {label} | {whole:,.0f} | {steady:,.0f} | {steady / base:.2f}x | {'yes' if same else 'NO'} |")
    return 0 if all(row[3] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
