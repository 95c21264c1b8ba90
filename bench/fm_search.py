"""FM-index seed search and locate kernels (``bowmap.align.seed.fm_search``) beside their random-access ceiling.

One run makes (or reuses) a synthetic genome and its one-block bowmap index under bench/work/,
cuts read seeds from it, checks the kernels against the NumPy reference on a sample, times them
and prints a table.

Commands:
  PoCL (CPU):   python bench/fm_search.py --genome-mbp 8 --seeds 200000
  NVIDIA H100:  python bench/fm_search.py --devices gpu --bandwidth-gbs 3350   (H100 SXM, HBM3;
                an H100 PCIe has 2000; an H200 4800)
Building the index needs bowmap's own dependencies pydivsufsort and tqdm; search needs only
numpy and pyopencl. With only PYTHONPATH pointing at the checkout, the script maps
bowmap.index_builder and bowmap.opencl from their top-level folders, as pyproject.toml does.

Synthetic genome (fixed seed; the same bases for the same parameters and NumPy version). Layers,
each written over the ones before, all vectorised NumPy:
1. Base layer: i.i.d. bases with GC 41% (A and T 29.5% each, C and G 20.5%).
2. Interspersed repeats, ~30% of the genome. 30 short families (consensus 100-500 bp, like SINEs
   and DNA transposons) whose copies are full length, making ~15% of the genome; 6 long families
   (consensus 2-6 kbp, like LINEs) whose copies are 3' fragments of 100 bp plus an exponential
   length of mean 900 bp, another ~15%. Family k of each kind gets copies in proportion to 1/k,
   so the largest short family has thousands to tens of thousands of copies (like Alu). Each
   family has a divergence d in [5%, 15%]; each copy gets substitutions at d x U(0.8, 1.2).
3. Segmental duplications, ~5%: segments of 1-50 kbp (log-uniform) copied from a random place,
   1-5% substitutions.
4. Tandem repeats, ~2%: arrays of 20-300 bp of a random unit of 1-6 bp, 2% substitutions.
5. Low-complexity runs, ~1%: 50-500 bp drawn from two bases (A/T, C/G, A/G, C/T, A/C or G/T).
In layers 2-3 half the copies are reverse-complemented. Pieces of one layer do not overlap
(a piece is cut short where the next one starts). The genome is split into contigs chr1..chr4
(35, 30, 20, 15%), no N bases, written as FASTA with 80-column lines.

Seeds, as bowtie2 and BowMapCL cut them: reads of --read-length (150) bases from uniform random
positions inside contigs, half of them reverse-complemented, with --error-rate (1%)
substitutions. Each read gives seeds at the interval floor(1 + 1.15 sqrt(read length)) = 15 from
the read and from its reverse complement, each seed 20-22 bases long (uniform). The index holds
the forward strand only, so about half the seeds occur (fewer where a seed holds an error) and
the others mostly stop after ~log4(genome size) steps, as in the aligner.

Measurements (warm-up once, then the best of --repeat runs of each call):
* kernel: the kernel event's device time (profiling queue); call: wall time of
  ``FMSearch.search`` / ``FMSearch.locate``, which also make buffers and copy data both ways.
* search steps: backward-search steps the kernel ran, min(length, depth + 1) a seed (a seed
  stops at its first failing step).
* search ceiling: each step reads one 64-byte occurrence line for lo and one for hi, so at
  --bandwidth-gbs B (10^9 bytes/s) at most B / 128 steps/s. This bound takes every read from
  DRAM: it ignores that lo and hi share a line once an interval is under 192 rows, that the
  first steps of all seeds read the same few lines, and the L2 cache (50 MB on an H100/H200,
  where a 100 Mbp genome's 33 MB table fits whole). So the kernel may pass it: read the ratio
  as the distance from a kernel whose every read misses, not as a hard limit. The header gives
  the table's size; --genome-mbp 1000 (a 333 MB table, ~4 minutes to build) no longer fits.
* locate: the first rows (at most 8) of every occurring seed's interval. A row whose suffix
  starts at block offset p takes p mod sa_sample LF steps; each step reads an occurrence line
  and a 16-byte mark group (a 32-byte memory sector), so the ceiling is B / 96 LF steps/s.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

WORK = Path(__file__).resolve().parent / "work"
GENOME_VERSION = 1  # in the file names: change it whenever make_genome changes
GENOME_SEED = 20260101
CONTIG_SHARES = (0.35, 0.30, 0.20, 0.15)
SA_SAMPLE = 32
INDEX_DEVICE_MEMORY = 64 << 30  # big enough that 100 Mbp (or 2 Gbp) is one block
SEED_LENGTHS = (20, 22)  # inclusive
LOCATE_ROWS_PER_SEED = 8
SEARCH_STEP_BYTES = 2 * 64
LOCATE_STEP_BYTES = 64 + 32


class BenchError(Exception):
    pass


# ---------------------------------------------------------------- synthetic genome

def random_bases(rng, count: int) -> np.ndarray:
    """i.i.d. codes 0..3 with GC 41%."""
    draws = rng.integers(0, 200, size=count, dtype=np.uint8)
    return ((draws >= 59).astype(np.uint8) + (draws >= 100) + (draws >= 141)).astype(np.uint8)


def substitute(rng, bases: np.ndarray, rates) -> None:
    """In place: each base becomes another base with probability ``rates`` (scalar or per base)."""
    hit = rng.random(bases.shape) < rates
    bases[hit] = (bases[hit] + rng.integers(1, 4, size=int(hit.sum()), dtype=np.uint8)) % 4


def ramps(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pieces of these lengths laid end to end: each base's piece and offset in the piece."""
    owners = np.repeat(np.arange(len(lengths)), lengths)
    return owners, np.arange(len(owners)) - (np.cumsum(lengths) - lengths)[owners]


def place(rng, genome_length: int, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Random starts for pieces, each cut short where the next starts: (starts, lengths)."""
    starts = np.sort(rng.integers(0, genome_length - int(lengths.max()), size=len(lengths)))
    return starts, np.minimum(lengths, np.diff(starts, append=genome_length))


def paste_copies(rng, genome, source, source_starts, lengths, rates) -> None:
    """Copy source[source_starts[i]:+lengths[i]] to random places in genome, half of them
    reverse-complemented, with substitutions at rates[i]."""
    starts, lengths = place(rng, len(genome), lengths)
    reverse = rng.random(len(lengths)) < 0.5
    owners, offsets = ramps(lengths)
    flip = reverse[owners]
    bases = source[source_starts[owners] + np.where(flip, lengths[owners] - 1 - offsets, offsets)]
    bases[flip] = 3 - bases[flip]
    substitute(rng, bases, rates[owners])
    genome[starts[owners] + offsets] = bases


def interspersed_repeats(rng, genome) -> None:
    n = len(genome)
    short_lengths = rng.integers(100, 501, size=30)
    long_lengths = rng.integers(2000, 6001, size=6)
    consensus_lengths = np.concatenate([short_lengths, long_lengths])
    library = random_bases(rng, int(consensus_lengths.sum()))
    library_starts = np.cumsum(consensus_lengths) - consensus_lengths
    divergence = rng.uniform(0.05, 0.15, size=len(consensus_lengths))

    def families(first, count, copies):
        weights = 1 / np.arange(1, count + 1)
        return first + rng.choice(count, size=copies, p=weights / weights.sum())

    short = families(0, len(short_lengths), max(1, int(0.15 * n / short_lengths.mean())))
    long = families(len(short_lengths), len(long_lengths), max(1, int(0.15 * n / 1000)))
    fragments = np.minimum(consensus_lengths[long], 100 + rng.exponential(900, size=len(long)).astype(np.int64))
    family = np.concatenate([short, long])
    lengths = np.concatenate([consensus_lengths[short], fragments])
    source_starts = library_starts[family] + consensus_lengths[family] - lengths  # 3' ends
    rates = divergence[family] * rng.uniform(0.8, 1.2, size=len(family))
    paste_copies(rng, genome, library, source_starts, lengths, rates)


def segmental_duplications(rng, genome) -> None:
    n = len(genome)
    mean_length = (50_000 - 1_000) / math.log(50)
    count = max(1, int(0.05 * n / mean_length))
    lengths = np.exp(rng.uniform(math.log(1_000), math.log(50_000), size=count)).astype(np.int64)
    lengths = np.minimum(lengths, n // 4)
    source_starts = rng.integers(0, n - lengths)
    paste_copies(rng, genome, genome.copy(), source_starts, lengths, rng.uniform(0.01, 0.05, size=count))


def tandem_repeats(rng, genome) -> None:
    count = max(1, int(0.02 * len(genome) / 160))
    units = random_bases(rng, 6 * count).reshape(count, 6)
    unit_lengths = rng.integers(1, 7, size=count)
    starts, lengths = place(rng, len(genome), rng.integers(20, 301, size=count))
    owners, offsets = ramps(lengths)
    bases = units[owners, offsets % unit_lengths[owners]]
    substitute(rng, bases, 0.02)
    genome[starts[owners] + offsets] = bases


def low_complexity(rng, genome) -> None:
    count = max(1, int(0.01 * len(genome) / 275))
    pairs = np.array([[0, 3], [1, 2], [0, 2], [1, 3], [0, 1], [2, 3]], dtype=np.uint8)
    kinds = rng.integers(0, len(pairs), size=count)
    starts, lengths = place(rng, len(genome), rng.integers(50, 501, size=count))
    owners, offsets = ramps(lengths)
    genome[starts[owners] + offsets] = pairs[kinds[owners], rng.integers(0, 2, size=len(owners))]


def make_genome(length: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    genome = random_bases(rng, length)
    for layer in (interspersed_repeats, segmental_duplications, tandem_repeats, low_complexity):
        layer(rng, genome)
    return genome


def write_fasta(path: Path, genome: np.ndarray) -> None:
    """Contigs chr1.. by CONTIG_SHARES, 80-column lines; written under a temporary name first."""
    letters = np.frombuffer(b"ACGT", dtype=np.uint8)[genome]
    ends = np.round(np.cumsum(CONTIG_SHARES) * len(genome)).astype(np.int64)
    temporary = path.with_suffix(".partial")
    with open(temporary, "wb") as handle:
        for number, (start, end) in enumerate(zip(np.concatenate([[0], ends[:-1]]), ends), 1):
            handle.write(f">chr{number} synthetic v{GENOME_VERSION}\n".encode())
            contig = letters[start:end]
            full = len(contig) // 80
            lines = np.full((full, 81), ord("\n"), dtype=np.uint8)
            lines[:, :80] = contig[: 80 * full].reshape(full, 80)
            handle.write(lines.tobytes())
            if len(contig) > 80 * full:
                handle.write(contig[80 * full :].tobytes() + b"\n")
    temporary.rename(path)


def genome_and_index(mbp: float) -> tuple[Path, float]:
    """FASTA and index prefix for this size (made if missing); the index build's seconds."""
    from bowmap.index.format import MANIFEST_SUFFIX
    from bowmap.runtime.errors import BowmapError

    WORK.mkdir(parents=True, exist_ok=True)
    stem = f"synthetic_{mbp:g}mbp_v{GENOME_VERSION}_seed{GENOME_SEED}"
    fasta, prefix = WORK / f"{stem}.fa", WORK / f"{stem}_sa{SA_SAMPLE}"
    seconds_file = prefix.with_name(prefix.name + ".build_seconds")
    if not fasta.exists():
        started = time.perf_counter()
        write_fasta(fasta, make_genome(int(round(mbp * 1e6)), GENOME_SEED))
        print(f"genome: wrote {fasta} [{time.perf_counter() - started:.1f} s]", file=sys.stderr)
    manifest = Path(str(prefix) + MANIFEST_SUFFIX)
    if manifest.exists() and seconds_file.exists() and manifest.stat().st_mtime >= fasta.stat().st_mtime:
        return prefix, float(seconds_file.read_text())
    started = time.perf_counter()
    try:
        from bowmap.index_builder.build import IndexOptions, build_index

        build_index(
            IndexOptions(
                reference=str(fasta), prefix=str(prefix), device_memory=INDEX_DEVICE_MEMORY,
                max_allocation=INDEX_DEVICE_MEMORY // 4, sa_sample=SA_SAMPLE,
            )
        )
    except ImportError as error:
        raise BenchError(f"building the index needs bowmap's dependencies ({error}): pip install pydivsufsort tqdm") from None
    except BowmapError as error:
        raise BenchError(f"index build failed: {error}") from None
    seconds = time.perf_counter() - started
    seconds_file.write_text(f"{seconds:.3f}\n")
    return prefix, seconds


# ---------------------------------------------------------------- seeds

def make_seeds(rng, index, count: int, read_length: int, error_rate: float):
    """Seeds of simulated reads: (codes uint8, offsets uint32, lengths uint32)."""
    interval = int(1 + 1.15 * math.sqrt(read_length))
    strand_starts = np.arange(0, read_length - SEED_LENGTHS[1] + 1, interval)  # seed starts in one strand
    read_count = -(-count // (2 * len(strand_starts)))
    usable = index.contig_lengths - read_length + 1
    if usable.max() < 1:
        raise BenchError(f"no contig is as long as a read ({read_length} bases)")
    contigs = rng.choice(len(usable), size=read_count, p=usable.clip(0) / usable.clip(0).sum())
    starts = index.contig_starts[contigs] + rng.integers(0, usable[contigs])
    reads = index.text()[starts[:, None] + np.arange(read_length)]
    reverse = rng.random(read_count) < 0.5
    reads[reverse] = 3 - reads[reverse, ::-1]
    substitute(rng, reads, error_rate)
    both_strands = np.concatenate([reads, 3 - reads[:, ::-1]], axis=1)
    seed_reads = np.repeat(np.arange(read_count), 2 * len(strand_starts))[:count]
    seed_starts = np.tile(np.concatenate([strand_starts, read_length + strand_starts]), read_count)[:count]
    lengths = rng.integers(SEED_LENGTHS[0], SEED_LENGTHS[1] + 1, size=count)
    owners, offsets = ramps(lengths)
    codes = both_strands[seed_reads[owners], seed_starts[owners] + offsets]
    return codes, (np.cumsum(lengths) - lengths).astype(np.uint32), lengths.astype(np.uint32)


def interval_rows(lo: np.ndarray, hi: np.ndarray, cap: int) -> np.ndarray:
    """The first ``cap`` rows of each interval [lo, hi), concatenated."""
    sizes = np.minimum(hi.astype(np.int64) - lo, cap)
    owners, offsets = ramps(sizes)
    return (lo[owners].astype(np.int64) + offsets).astype(np.uint32)


# ---------------------------------------------------------------- timing

def best_of(call, searcher, repeat: int):
    """Warm-up call, then ``repeat`` timed calls that must return the same arrays.
    Returns (result, best kernel seconds, best call seconds)."""
    result = call()
    kernel_seconds = call_seconds = math.inf
    for _ in range(repeat):
        started = time.perf_counter()
        again = call()
        call_seconds = min(call_seconds, time.perf_counter() - started)
        event = searcher.last_kernel_event
        kernel_seconds = min(kernel_seconds, (event.profile.end - event.profile.start) * 1e-9)
        if not all(np.array_equal(a, b) for a, b in zip(result, again)):
            raise BenchError("two runs of the same kernel call returned different results")
    return result, kernel_seconds, call_seconds


def check(names: tuple[str, ...], got, expected) -> None:
    for name, kernel, reference in zip(names, got, expected):
        wrong = np.flatnonzero(kernel != reference)
        if len(wrong):
            first = wrong[0]
            raise BenchError(
                f"{name}: the kernel differs from the NumPy reference at {len(wrong)} of {len(kernel)} "
                f"checked entries (first: entry {first}, kernel {kernel[first]}, reference {reference[first]})"
            )


def benchmark(device, block, sa_sample, codes, offsets, lengths, args) -> tuple[list[tuple], dict]:
    """Check, then time search and locate on one device: (the table's rows, facts for the header)."""
    import pyopencl as cl

    from bowmap.align.seed.fm_search import DeviceBlock, FMSearch
    from bowmap.align.references import fm_search as reference

    queue = cl.CommandQueue(device.context, device.device, properties=cl.command_queue_properties.PROFILING_ENABLE)
    searcher = FMSearch(device, queue)
    device_block = DeviceBlock(device, block)

    (lo, hi, depth), search_kernel, search_call = best_of(
        lambda: searcher.search(device_block, codes, offsets, lengths), searcher, args.repeat
    )
    sample = slice(0, args.check)
    expected = reference.search(block, codes, offsets[sample], lengths[sample])
    check(("lo", "hi", "depth"), (lo[sample], hi[sample], depth[sample]), expected)

    rows = interval_rows(lo, hi, LOCATE_ROWS_PER_SEED)
    if len(rows) == 0:
        raise BenchError("no seed occurs: nothing to locate")
    (positions,), locate_kernel, locate_call = best_of(
        lambda: (searcher.locate(device_block, rows),), searcher, args.repeat
    )
    check(("positions",), (positions[: args.check],), (reference.locate(block, rows[: args.check]),))
    print(
        f"check: search of {min(args.check, len(lengths)):,} seeds and locate of {min(args.check, len(rows)):,} rows "
        "equal the NumPy reference",
        file=sys.stderr,
    )

    search_steps = int(np.minimum(lengths, depth.astype(np.int64) + 1).sum())
    lf_steps = int((positions % sa_sample).sum())

    def ceiling(step_bytes: int):  # steps/s in millions, or "n/a" without --bandwidth-gbs
        return "n/a" if args.bandwidth_gbs is None else args.bandwidth_gbs * 1e9 / step_bytes / 1e6

    return [
        ("search time (ms)", search_kernel * 1e3, search_call * 1e3, None),
        ("search seeds (M/s)", len(lengths) / search_kernel / 1e6, len(lengths) / search_call / 1e6, None),
        ("search bases (M/s)", int(lengths.sum()) / search_kernel / 1e6, int(lengths.sum()) / search_call / 1e6, None),
        ("search steps (M/s)", search_steps / search_kernel / 1e6, search_steps / search_call / 1e6,
         ceiling(SEARCH_STEP_BYTES)),
        ("locate time (ms)", locate_kernel * 1e3, locate_call * 1e3, None),
        ("locate rows (M/s)", len(rows) / locate_kernel / 1e6, len(rows) / locate_call / 1e6, None),
        ("locate LF steps (M/s)", lf_steps / locate_kernel / 1e6, lf_steps / locate_call / 1e6,
         ceiling(LOCATE_STEP_BYTES)),
    ], {
        "occurring": float(np.mean(depth == lengths)),
        "rows": len(rows),
        "steps_per_seed": search_steps / len(lengths),
        "lf_per_row": lf_steps / len(rows),
    }


def print_table(rows) -> None:
    print(f"{'measurement':<22} {'kernel':>11} {'call':>11} {'ceiling':>11} {'kernel/ceiling':>15}")
    for name, kernel, call, ceiling in rows:
        if isinstance(ceiling, float):
            bound, ratio = f"{ceiling:,.1f}", f"{kernel / ceiling:.3f}"
        else:
            bound = ratio = ceiling or ""
        print(f"{name:<22} {kernel:11,.1f} {call:11,.1f} {bound:>11} {ratio:>15}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--genome-mbp", type=float, default=100, metavar="MBP", help="synthetic genome size (default 100)")
    parser.add_argument("--index", metavar="PREFIX", help="search this one-block bowmap index instead (e.g. bench/end_to_end.py's)")
    parser.add_argument("--seeds", type=int, default=2_000_000, metavar="N", help="seeds to search (default 2000000)")
    parser.add_argument("--devices", metavar="SPEC", help="as bowmap's --devices (default: every GPU, else the CPU)")
    parser.add_argument("--repeat", type=int, default=3, metavar="N", help="timed runs after a warm-up; the best counts (default 3)")
    parser.add_argument("--check", type=int, default=20_000, metavar="N", help="seeds and rows compared with the NumPy reference (default 20000)")
    parser.add_argument("--bandwidth-gbs", type=float, metavar="B", help="device memory bandwidth in 10^9 bytes/s: H100 SXM 3350, H200 4800 (default: no ceiling)")
    parser.add_argument("--read-length", type=int, default=150, metavar="N", help="simulated read length (default 150)")
    parser.add_argument("--error-rate", type=float, default=0.01, metavar="P", help="substitutions per read base (default 0.01)")
    args = parser.parse_args()
    if args.genome_mbp < 0.01 or args.seeds < 1 or args.repeat < 1 or args.check < 0 or args.read_length < SEED_LENGTHS[1]:
        parser.error("need --genome-mbp >= 0.01, --seeds >= 1, --repeat >= 1, --check >= 0, --read-length >= 22")

    from bowmap.index.load import load_index
    from bowmap.runtime.devices import format_memory, open_devices
    from bowmap.runtime.errors import BowmapError

    try:
        if args.index:
            prefix, build_seconds = args.index, float("nan")
        else:
            prefix, build_seconds = genome_and_index(args.genome_mbp)
        index = load_index(str(prefix))
        if len(index.blocks) != 1:
            raise BenchError(f"{prefix}: {len(index.blocks)} index blocks, expected one")
        block = index.blocks[0]
        codes, offsets, lengths = make_seeds(
            np.random.default_rng(GENOME_SEED + 1), index, args.seeds, args.read_length, args.error_rate
        )
        for device in open_devices(args.devices):
            rows, facts = benchmark(device, block, index.sa_sample, codes, offsets, lengths, args)
            info = device.info
            print(
                f"device: {info.name} ({info.compute_units} compute units, {format_memory(info.global_memory)}); "
                f"genome: {index.total_length / 1e6:g} Mbp, {len(index.contig_names)} contigs ({prefix}); "
                f"index build: {'given' if args.index else f'{build_seconds:.1f} s'} (one block, sa_sample {index.sa_sample}, "
                f"occurrence table {block.occ.nbytes / 1e6:,.0f} MB); "
                f"seeds: {len(lengths):,} of {SEED_LENGTHS[0]}-{SEED_LENGTHS[1]} bases, {facts['occurring']:.1%} occur, "
                f"{facts['steps_per_seed']:.1f} steps a seed; located rows: {facts['rows']:,}, "
                f"{facts['lf_per_row']:.1f} LF steps a row; best of {args.repeat}"
            )
            print_table(rows)
    except (BenchError, BowmapError) as error:
        print(f"fm_search bench: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
