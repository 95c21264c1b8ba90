"""The seed stage over an index cut into several blocks: hits made on the device
(``FMSearch.seed_hits``) beside the host path it replaced (``SeedFilter._hits``), and beside a
one-block index of the same genome.

One run makes (or reuses) bench/fm_search.py's synthetic genome and indexes of it in 1 and more
blocks (small ``--device-mem``) under bench/work/seed_blocks/, simulates 150-base reads with 1%
substitutions, checks that both paths give the same windows, and times ``SeedFilter.windows``
(seeds, search, choice, locate, windows; what the seed thread of ``bowmap align`` does a chunk)
per chunk after a warm-up. Ends with one table: blocks, path, ms a chunk, reads/s, and the
device path's speed-up over the host path.

Command (GPU machine; PoCL works too, but only GPU figures count as speed):
  python bench/seed_blocks.py --mbp 20 --blocks 1,2,4 --reads 30000 --repeats 5
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # bench/ is no package: its scripts import each other by name
import fm_search  # noqa: E402  make_genome, write_fasta

WORK = HERE / "work" / "seed_blocks"
READ_LENGTH = 150
ERROR_RATE = 0.01


def indexes(mbp: float, block_counts: list[int]) -> tuple[np.ndarray, dict[int, object]]:
    """The genome's codes and its index for each wanted block count (built if missing)."""
    from bowmap.cli import main
    from bowmap.index.load import load_index

    WORK.mkdir(parents=True, exist_ok=True)
    length = int(mbp * 1e6)
    genome = fm_search.make_genome(length, fm_search.GENOME_SEED)
    fasta = WORK / f"genome_v{fm_search.GENOME_VERSION}_{mbp:g}mbp.fa"
    if not fasta.exists():
        fm_search.write_fasta(fasta, genome)
    found = {}
    for blocks in block_counts:
        prefix = WORK / f"{fasta.stem}_{blocks}blocks"
        # A block holds about 0.75 bytes of --device-mem a base (its occurrence lines fill a
        # quarter of the memory); 2% more for the overlaps.
        memory = 1 << 36 if blocks == 1 else int(length / blocks / 0.75 * 1.02)
        if not prefix.with_suffix(".bmi").exists():
            started = time.perf_counter()
            arguments = ["-q", "index", str(fasta), str(prefix), "--device-mem", str(memory), "--max-read-length", str(READ_LENGTH)]
            if main(arguments) != 0:
                raise SystemExit(f"bowmap index failed: {arguments}")
            print(f"index of {blocks} block(s) asked: {time.perf_counter() - started:.1f} s", file=sys.stderr)
        found[blocks] = load_index(str(prefix))
    return genome, found


def simulate(rng, genome: np.ndarray, count: int):
    """Reads from random places of the text (the contigs laid end to end; a read across two is
    harmless here), half reverse-complemented, with substitutions: codes, reverse codes, offsets."""
    starts = rng.integers(0, len(genome) - READ_LENGTH, count)
    reads = genome[starts[:, None] + np.arange(READ_LENGTH)]
    flip = rng.random(count) < 0.5
    reads[flip] = 3 - reads[flip][:, ::-1]
    errors = rng.random(reads.shape) < ERROR_RATE
    reads[errors] = (reads[errors] + rng.integers(1, 4, int(errors.sum()))) % 4
    reads = reads.astype(np.uint8)
    return reads.reshape(-1), (3 - reads[:, ::-1]).reshape(-1), np.arange(count + 1, dtype=np.int64) * READ_LENGTH


def time_windows(seed_filter, chunks, repeats: int):
    """Seconds a chunk (median over the chunks after a warm-up chunk) and the windows of each."""
    seed_filter.windows(*chunks[0])  # warm-up: programs built, buffers grown
    seconds, results = [], []
    for repeat in range(repeats):
        codes, reverse_codes, offsets = chunks[repeat % len(chunks)]
        started = time.perf_counter()
        results.append(seed_filter.windows(codes, reverse_codes, offsets))
        seconds.append(time.perf_counter() - started)
    return float(np.median(seconds)), results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mbp", type=float, default=20, help="genome size in Mbp (default 20)")
    parser.add_argument("--blocks", default="1,2,4", help="block counts to index and time (default 1,2,4)")
    parser.add_argument("--reads", type=int, default=30_000, help="reads a chunk (default 30,000: ~4.5 Mbases, as align's chunks)")
    parser.add_argument("--repeats", type=int, default=5, help="chunks timed after the warm-up (default 5)")
    parser.add_argument("--devices", default=None, help="bowmap --devices spec (default: the GPUs, else the CPU)")
    args = parser.parse_args()

    from bowmap.align.seed.fm_search import DeviceBlock, FMSearch
    from bowmap.align.seed.seeds import SeedOptions
    from bowmap.align.seed.filter import SeedFilter, Windows
    from bowmap.runtime.devices import open_devices

    device = open_devices(args.devices)[0]
    genome, by_blocks = indexes(args.mbp, [int(part) for part in args.blocks.split(",")])
    rng = np.random.default_rng(7)
    chunks = [simulate(rng, genome, args.reads) for _ in range(min(args.repeats, 3))]
    options = SeedOptions()
    rows = []
    for asked, index in by_blocks.items():
        blocks = [DeviceBlock(device, block) for block in index.blocks]
        timed = {}
        for path, on_device in (("device hits", True), ("host hits", False)):
            seed_filter = SeedFilter(index, blocks, FMSearch(device), options, hits_on_device=on_device)
            if on_device and seed_filter._hit_buffers is None:
                raise SystemExit(f"{len(blocks)} blocks: the device path was not taken")
            timed[path] = time_windows(seed_filter, chunks, args.repeats)
        for mine, theirs in zip(timed["device hits"][1], timed["host hits"][1]):
            for name in Windows.FIELDS:
                if not np.array_equal(getattr(mine, name), getattr(theirs, name)):
                    raise SystemExit(f"{len(blocks)} blocks: the windows' {name} differ between the paths")
        for path, (seconds, _) in timed.items():
            rows.append((len(blocks), path, seconds, timed["host hits"][0] / seconds))
        print(f"{len(blocks)} block(s) (asked {asked}): same windows on both paths", file=sys.stderr)
    print(f"\n{device.info.name}; {args.mbp:g} Mbp genome, chunks of {args.reads} reads of {READ_LENGTH} bases, median of {args.repeats}")
    print(f"{'blocks':>6}  {'path':<12}{'ms/chunk':>10}{'reads/s':>12}{'vs host':>9}")
    for blocks, path, seconds, speedup in rows:
        print(f"{blocks:>6}  {path:<12}{1e3 * seconds:>10.1f}{args.reads / seconds:>12,.0f}{speedup:>8.2f}x")


if __name__ == "__main__":
    main()
