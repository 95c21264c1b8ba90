"""A human-like synthetic genome for the benchmarks (issue 20, item 5): >= 3 Gbp, made
deterministically with NumPy and written to FASTA one chromosome at a time.

No human assembly can be had offline, so this stands in for GRCh38 where the aligner's and the
index's costs depend on repeats. How it is made (GENOME_VERSION 1; every draw comes from
``numpy.random.default_rng([seed, ...])``, so the same seed, parameters and NumPy version give the
same bytes; default seed 20260120):

* Chromosomes: lengths drawn U(--contig-mbp MIN, MAX) (default 50-250 Mbp) until they cover
  --gbp; the last draw is kept or dropped, whichever lets one common factor nearer to 1 scale
  them to exactly --gbp (within a few percent at 3 Gbp; more when there are only a few).
  Named chr1, chr2, ...; 60-column lines, upper case.
* Each chromosome is a layout of elements in random order, with background between them
  (the background pieces are a uniformly random split of what the elements leave), so no
  element overwrites another and the stated fractions are exact up to rounding:
  - N gaps (~2%; GRCh38 has ~5%, mostly heterochromatin): 10 kbp at both ends (telomeres), a
    centromere gap of U(0.5, 3)% of the chromosome, and assembly gaps (one per 20 Mbp on average, Poisson) of log-uniform 1-100 kbp.
  - Satellites (3%): the centromere gap is flanked by two alpha-satellite-like arrays of
    U(0.5, 1)% of the chromosome each; the rest goes to arrays of log-uniform 5-100 kbp elsewhere.
    Each array repeats a higher-order unit of k = 2-16 monomers of 171 bp (each monomer the
    genome's master monomer with 20% substitutions), every copy with 2% substitutions; one array
    in five is a (GGAAT)n-like array of a 5-bp unit with 5% substitutions instead.
  - Alu-like (10%): one master of 282 bp (GC 52%); 40 subfamilies, each the master with
    U(2, 6)% substitutions; each copy is its subfamily (chosen with weight 1/rank) plus a poly-A
    tail of 10-40 bases, with U(5, 20)% substitutions of its own.
  - L1-like (17%): 4 families of 6,000 bp (GC 42%); a copy is the family's 3' end: full length
    with probability 0.1, else 100 + an exponential length of mean 900 bp (at most 6,000), with
    U(3, 20)% substitutions.
  - Segmental duplications (5%): log-uniform 1-100 kbp (at most 1% of the chromosome), copied
    with U(1, 5)% substitutions from a random place in the same chromosome or (half of them,
    from chr2 on) from a 10 Mbp window of the chromosome before (kept for that; no other
    chromosome is held).
  - Microsatellites (3%): arrays of 20-300 bp of a random unit of 1-6 bp, U(0, 5)%
    substitutions.
  - Background: i.i.d. bases with GC 41%.
  Half of the Alu, L1 and segmental-duplication copies are reverse-complemented. Substitutions
  only (no indels). Filled kind by kind in batches of at most 2 M bases, segmental duplications
  last (their sources hold the repeats); where a duplication's source overlaps a gap the copy
  gets random bases, so N appears in the gaps only.
* Memory: one chromosome's codes, the 10 Mbp donor window and one batch's temporaries (~1.5x
  the largest chromosome's bases in bytes). Time: 20 s to 1 minute a Gbp on one core, writing
  included (22 s here, a 2-core VM).
* ``--workers N``: each chromosome but its segmental duplications (which copy from the
  chromosome before) is made in one of N forked processes, N chromosomes at a time; this process
  adds the duplications and writes them in order, going on with each chromosome's own
  Generator (returned with its state), so the bytes are the same whatever N. Memory: up to
  N + 1 chromosomes' codes waiting beside the N being made (~2.5x the largest chromosome each).
  The duplications and the writing, left in one process, are about a fifth of the work.

A JSON file beside the FASTA (``OUT.fa.json``) records the parameters, seed, NumPy version,
chromosome lengths, the bases of each kind and their fractions.

Usage: python bench/human_genome.py OUT.fa [--gbp 3.1] [--seed 20260120] [--contig-mbp 50,250] [--workers N]
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import math
import multiprocessing
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

GENOME_VERSION = 1  # in cached file names: change it whenever the generator changes
DEFAULT_SEED = 20260120
WORK = Path(__file__).resolve().parent / "work"
KINDS = ("background", "gap", "satellite", "alu", "l1", "segdup", "microsatellite")
GAP, SATELLITE, ALU, L1, SEGDUP, MICRO = range(1, 7)
BATCH_BASES = 2 << 20
LINE = 60
COMPLEMENT = np.array([3, 2, 1, 0, 4], dtype=np.uint8)  # N stays N


@dataclass
class Parameters:
    total_bases: int
    seed: int = DEFAULT_SEED
    contig_min: int = 50_000_000
    contig_max: int = 250_000_000
    satellite_fraction: float = 0.03
    alu_fraction: float = 0.10
    l1_fraction: float = 0.17
    segdup_fraction: float = 0.05
    micro_fraction: float = 0.03
    telomere_bases: int = 10_000
    gaps_per_base: float = 1 / 20e6


def random_bases(rng, count: int, gc: float = 0.41) -> np.ndarray:
    """i.i.d. codes 0..3 (A, C, G, T) with the given GC share."""
    draws = rng.random(count, dtype=np.float32)
    at, c = (1 - gc) / 2, gc / 2
    return (draws >= at).astype(np.uint8) + (draws >= at + c) + (draws >= at + gc)


def substitute(rng, bases: np.ndarray, rates) -> None:
    """In place: each base 0..3 becomes another with probability ``rates`` (scalar or per base)."""
    hit = (rng.random(len(bases), dtype=np.float32) < rates) & (bases < 4)
    bases[hit] = (bases[hit] + rng.integers(1, 4, size=int(hit.sum()), dtype=np.uint8)) % 4


def ramps(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pieces of these lengths end to end: each base's piece and its offset in the piece."""
    owners = np.repeat(np.arange(len(lengths), dtype=np.int32), lengths)
    firsts = (np.cumsum(lengths) - lengths).astype(np.int64)
    return owners, np.arange(len(owners), dtype=np.int64) - firsts[owners]


def log_uniform(rng, low: float, high: float, size: int) -> np.ndarray:
    return np.exp(rng.uniform(math.log(low), math.log(high), size=size)).astype(np.int64)


def contig_lengths(parameters: Parameters) -> list[int]:
    rng = np.random.default_rng([parameters.seed, 0])
    lengths: list[float] = []
    while sum(lengths) < parameters.total_bases:
        lengths.append(float(rng.uniform(parameters.contig_min, parameters.contig_max)))
    # Keep or drop the last draw, whichever needs the scaling factor nearer to 1.
    if len(lengths) > 1 and abs(math.log(parameters.total_bases / sum(lengths[:-1]))) < abs(math.log(parameters.total_bases / sum(lengths))):
        lengths.pop()
    scaled = np.floor(np.array(lengths) * parameters.total_bases / sum(lengths)).astype(np.int64)
    scaled[-1] += parameters.total_bases - int(scaled.sum())
    return scaled.tolist()


class Library:
    """The repeat consensus sequences shared by every chromosome."""

    def __init__(self, seed: int):
        rng = np.random.default_rng([seed, 1])
        master = random_bases(rng, 282, gc=0.52)
        self.alu = np.stack([master.copy() for _ in range(40)])
        for subfamily, rate in zip(self.alu, rng.uniform(0.02, 0.06, size=40)):
            substitute(rng, subfamily, rate)
        self.l1 = np.stack([random_bases(rng, 6000, gc=0.42) for _ in range(4)])
        self.alpha = random_bases(rng, 171, gc=0.38)


def layout(rng, length: int, parameters: Parameters) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(kinds, starts, lengths) of one chromosome's elements, in position order; a centromere is
    three consecutive elements (satellite, gap, satellite)."""
    telomere = min(parameters.telomere_bases, length // 100)
    centromere_gap = int(length * rng.uniform(0.005, 0.03))
    flanks = (length * rng.uniform(0.005, 0.01, size=2)).astype(np.int64)
    gap_count = rng.poisson(length * parameters.gaps_per_base)
    gaps = np.minimum(log_uniform(rng, 1_000, 100_000, gap_count), max(length // 1000, 1))
    satellite_left = max(int(parameters.satellite_fraction * length) - int(flanks.sum()), 0)
    satellites = _fill(rng, satellite_left, lambda size: np.minimum(log_uniform(rng, 5_000, 100_000, size), max(length // 200, 1)))
    alus = _fill(rng, int(parameters.alu_fraction * length), lambda size: 282 + rng.integers(10, 41, size=size))
    l1s = _fill(
        rng, int(parameters.l1_fraction * length),
        lambda size: np.where(rng.random(size) < 0.1, 6000, np.minimum(100 + rng.exponential(900, size).astype(np.int64), 6000)),
    )
    segdups = _fill(rng, int(parameters.segdup_fraction * length), lambda size: np.minimum(log_uniform(rng, 1_000, 100_000, size), max(length // 100, 1)))
    micros = _fill(rng, int(parameters.micro_fraction * length), lambda size: rng.integers(20, 301, size=size))
    # The centromere travels as one element of the shuffled list, split again after placing.
    pieces = [(GAP, gaps), (SATELLITE, satellites), (ALU, alus), (L1, l1s), (SEGDUP, segdups), (MICRO, micros)]
    kinds = np.concatenate([np.full(len(sizes), kind, dtype=np.int8) for kind, sizes in pieces] + [np.array([-1], dtype=np.int8)])
    sizes = np.concatenate([sizes for _, sizes in pieces] + [np.array([flanks.sum() + centromere_gap])]).astype(np.int64)
    order = rng.permutation(len(kinds))
    kinds, sizes = kinds[order], sizes[order]
    background = length - 2 * telomere - int(sizes.sum())
    if background < 0:
        raise ValueError(f"chromosome of {length} bases: the repeat fractions leave no background")
    cuts = np.sort(rng.integers(0, background + 1, size=len(sizes)))
    spaces = np.diff(cuts, prepend=0)  # background before each element; the rest after the last
    starts = telomere + np.cumsum(spaces) + np.cumsum(sizes) - sizes
    centromere = int(np.flatnonzero(kinds == -1)[0])
    c = int(starts[centromere])
    kinds = np.concatenate([kinds[:centromere], [SATELLITE, GAP, SATELLITE], kinds[centromere + 1 :], [GAP, GAP]])
    starts = np.concatenate([starts[:centromere], [c, c + flanks[0], c + flanks[0] + centromere_gap], starts[centromere + 1 :], [0, length - telomere]])
    sizes = np.concatenate([sizes[:centromere], [flanks[0], centromere_gap, flanks[1]], sizes[centromere + 1 :], [telomere, telomere]])
    keep = sizes > 0
    order = np.argsort(starts[keep], kind="stable")
    return kinds[keep][order].astype(np.int8), starts[keep][order], sizes[keep][order]


def _fill(rng, total: int, draw) -> np.ndarray:
    """Element lengths from ``draw(size)`` until they add up to ``total`` (the last one cut)."""
    if total <= 0:
        return np.zeros(0, dtype=np.int64)
    parts = []
    covered = 0
    while covered < total:
        sizes = np.asarray(draw(max(16, int(1.2 * (total - covered) / max(float(np.mean(draw(64))), 1)))), dtype=np.int64)
        parts.append(sizes)
        covered += int(sizes.sum())
    sizes = np.concatenate(parts)
    ends = np.cumsum(sizes)
    count = int(np.searchsorted(ends, total)) + 1
    sizes = sizes[:count].copy()
    sizes[-1] -= int(ends[count - 1]) - total
    return sizes[sizes > 0]


def _batches(lengths: np.ndarray):
    """Index ranges of consecutive elements holding at most BATCH_BASES bases (or one element)."""
    ends = np.cumsum(lengths)
    first = 0
    while first < len(lengths):
        before = int(ends[first - 1]) if first else 0
        last = max(int(np.searchsorted(ends, before + BATCH_BASES, side="right")), first + 1)
        yield first, last
        first = last


def _copies(rng, codes, starts, lengths, source_of, rates, reverse) -> None:
    """Write each element i at codes[starts[i]:+lengths[i]]: ``source_of(owners, offsets)`` gives
    the bases (read from 5' to 3' of the copy's own strand), reverse-complemented where
    ``reverse[i]``, with substitutions at ``rates[i]``."""
    for first, last in _batches(lengths):
        owners, offsets = ramps(lengths[first:last])
        owners += first
        flip = reverse[owners]
        bases = source_of(owners, np.where(flip, lengths[owners] - 1 - offsets, offsets))
        bases[flip] = COMPLEMENT[bases[flip]]
        substitute(rng, bases, rates[owners].astype(np.float32))
        codes[starts[owners] + offsets] = bases


def make_contig(rng, library: Library, length: int, parameters: Parameters, donor: np.ndarray | None):
    """One chromosome's codes (0..3, 4 = N), the bases of each kind (by KINDS index) and its
    layout (kinds, starts, lengths)."""
    codes, bases_of, elements = contig_before_duplications(rng, library, length, parameters)
    add_duplications(rng, codes, elements, donor)
    return codes, bases_of, elements


def contig_before_duplications(rng, library: Library, length: int, parameters: Parameters):
    """make_contig's first part, everything but the segmental duplications: it needs nothing
    of the chromosome before, so chromosomes can run it side by side (``generate(workers=N)``)."""
    kinds, starts, lengths = layout(rng, length, parameters)
    codes = np.empty(length, dtype=np.uint8)
    for first in range(0, length, BATCH_BASES):  # background in steps: temporaries of one step
        codes[first : first + BATCH_BASES] = random_bases(rng, min(BATCH_BASES, length - first))
    bases_of = np.zeros(len(KINDS), dtype=np.int64)
    for kind in range(1, len(KINDS)):
        bases_of[kind] = int(lengths[kinds == kind].sum())
    bases_of[0] = length - int(bases_of[1:].sum())

    def select(kind):
        chosen = kinds == kind
        return starts[chosen], lengths[chosen]

    gap_starts, gap_lengths = select(GAP)
    owners, offsets = ramps(gap_lengths)
    codes[gap_starts[owners] + offsets] = 4
    del owners, offsets

    # Satellites: a higher-order unit of k alpha monomers each 20% from the master, or a 5-bp unit.
    sat_starts, sat_lengths = select(SATELLITE)
    count = len(sat_starts)
    monomers = rng.integers(2, 17, size=count)
    pentamer = rng.random(count) < 0.2
    units = np.tile(library.alpha, (count, 16))
    substitute(rng, units.reshape(-1), 0.2)
    units[pentamer, :5] = np.array([2, 2, 0, 0, 3], dtype=np.uint8)  # GGAAT
    period = np.where(pentamer, 5, 171 * monomers)
    _copies(
        rng, codes, sat_starts, sat_lengths, lambda o, x: units[o, x % period[o]],
        np.where(pentamer, 0.05, 0.02), np.zeros(count, dtype=bool),
    )

    alu_starts, alu_lengths = select(ALU)
    count = len(alu_starts)
    weights = 1 / np.arange(1, len(library.alu) + 1)
    family = rng.choice(len(library.alu), size=count, p=weights / weights.sum())
    alu = library.alu
    _copies(
        rng, codes, alu_starts, alu_lengths,
        lambda o, x: np.where(x < alu.shape[1], alu[family[o], np.minimum(x, alu.shape[1] - 1)], 0).astype(np.uint8),
        rng.uniform(0.05, 0.20, size=count), rng.random(count) < 0.5,
    )

    l1_starts, l1_lengths = select(L1)
    count = len(l1_starts)
    family = rng.integers(0, len(library.l1), size=count)
    l1 = library.l1
    _copies(
        rng, codes, l1_starts, l1_lengths, lambda o, x: l1[family[o], l1.shape[1] - l1_lengths[o] + x],
        rng.uniform(0.03, 0.20, size=count), rng.random(count) < 0.5,
    )

    micro_starts, micro_lengths = select(MICRO)
    count = len(micro_starts)
    unit_lengths = rng.integers(1, 7, size=count)
    micro_units = random_bases(rng, 6 * count, gc=0.5).reshape(count, 6)
    _copies(
        rng, codes, micro_starts, micro_lengths, lambda o, x: micro_units[o, x % unit_lengths[o]],
        rng.uniform(0, 0.05, size=count), np.zeros(count, dtype=bool),
    )
    return codes, bases_of, (kinds, starts, lengths)


def add_duplications(rng, codes: np.ndarray, elements, donor: np.ndarray | None) -> None:
    """make_contig's second part: the segmental duplications, in place, last so that their
    sources hold the repeats: from this chromosome (where a source may hold an earlier batch's
    duplication: duplications of duplications), or from the donor window of the chromosome
    before. ``rng`` goes on from the first part's draws."""
    kinds, starts, lengths = elements
    length = len(codes)
    chosen = kinds == SEGDUP
    dup_starts, dup_lengths = starts[chosen], lengths[chosen]
    count = len(dup_starts)
    donor_length = 0 if donor is None else len(donor)
    foreign = (rng.random(count) < 0.5) if donor_length else np.zeros(count, dtype=bool)
    local_starts = rng.integers(0, np.maximum(length - dup_lengths, 1))
    donor_starts = rng.integers(0, np.maximum(donor_length - dup_lengths, 1))

    def dup_source(o, x):
        out = codes[np.minimum(local_starts[o] + x, length - 1)]
        away = foreign[o]
        if away.any():
            out[away] = donor[np.minimum(donor_starts[o[away]] + x[away], donor_length - 1)]
        gap = out == 4  # a source over a gap copies random bases there: N stays the gaps' only
        out[gap] = random_bases(rng, int(gap.sum()))
        return out

    _copies(rng, codes, dup_starts, dup_lengths, dup_source, rng.uniform(0.01, 0.05, size=count), rng.random(count) < 0.5)


def _first_part(task):
    """contig_before_duplications of chromosome ``number``, with the generator it leaves (a worker
    process's task: the Generator travels back with its state, so the second part draws on)."""
    library, parameters, number, length = task
    rng = np.random.default_rng([parameters.seed, 2, number])
    return (*contig_before_duplications(rng, library, length, parameters), rng)


def _first_parts(library: Library, parameters: Parameters, lengths: list[int], workers: int):
    """Each chromosome's first part, in order; with ``workers`` > 1 from that many forked
    processes, at most ``workers`` + 1 chromosomes ahead of the one being written (memory)."""
    tasks = [(library, parameters, number, length) for number, length in enumerate(lengths, 1)]
    if workers <= 1 or len(tasks) <= 1:
        yield from map(_first_part, tasks)
        return
    context = multiprocessing.get_context("fork")  # the children find this module as loaded
    with concurrent.futures.ProcessPoolExecutor(min(workers, len(tasks)), mp_context=context) as pool:
        pending = collections.deque()
        for task in tasks:
            pending.append(pool.submit(_first_part, task))
            if len(pending) > workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def generate(path: Path, parameters: Parameters, workers: int = 1) -> dict:
    """Write the genome's FASTA to ``path`` (under a temporary name first) and its description
    to ``path.json``; return that description. ``workers`` > 1 makes the chromosomes' first parts
    (all but the segmental duplications, which take a window of the chromosome before) in that
    many processes: the same bytes, several times sooner."""
    started = time.perf_counter()
    library = Library(parameters.seed)
    lengths = contig_lengths(parameters)
    letters = np.frombuffer(b"ACGTN", dtype=np.uint8)
    totals = np.zeros(len(KINDS), dtype=np.int64)
    donor = None
    temporary = path.with_name(path.name + ".partial")
    with open(temporary, "wb") as handle:
        parts = _first_parts(library, parameters, lengths, workers)
        for number, (length, (codes, bases_of, elements, rng)) in enumerate(zip(lengths, parts), 1):
            add_duplications(rng, codes, elements, donor)
            totals += bases_of
            window = min(10_000_000, length)
            first = int(rng.integers(0, length - window + 1))
            donor = codes[first : first + window].copy()
            handle.write(f">chr{number} human-like synthetic v{GENOME_VERSION} seed {parameters.seed}\n".encode())
            step = LINE * (1 << 16)
            for begin in range(0, length, step):
                piece = letters[codes[begin : begin + step]]
                full = len(piece) // LINE
                lines = np.full((full, LINE + 1), ord("\n"), dtype=np.uint8)
                lines[:, :LINE] = piece[: full * LINE].reshape(full, LINE)
                handle.write(lines.tobytes())
                if len(piece) > full * LINE:
                    handle.write(piece[full * LINE :].tobytes() + b"\n")
            del codes
    description = {
        "generator": f"bench/human_genome.py v{GENOME_VERSION}",
        "numpy": np.__version__,
        "parameters": asdict(parameters),
        "contigs": {f"chr{number}": length for number, length in enumerate(lengths, 1)},
        "bases": dict(zip(KINDS, totals.tolist())),
        "fractions": {kind: round(float(count) / parameters.total_bases, 5) for kind, count in zip(KINDS, totals)},
        "seconds": round(time.perf_counter() - started, 1),
    }
    Path(str(path) + ".json").write_text(json.dumps(description, indent=1) + "\n")
    temporary.rename(path)
    return description


def cached_fasta(gbp: float, seed: int = DEFAULT_SEED) -> Path:
    """The default-parameter genome of ``gbp`` Gbp under bench/work/, generated if missing."""
    path = WORK / f"human_like_{gbp:g}gbp_v{GENOME_VERSION}_seed{seed}.fa"
    if not path.exists():
        WORK.mkdir(parents=True, exist_ok=True)
        print(f"human_genome: writing {path}", file=sys.stderr)
        generate(path, Parameters(total_bases=int(round(gbp * 1e9)), seed=seed))
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output", type=Path, metavar="OUT.fa")
    parser.add_argument("--gbp", type=float, default=3.1, help="genome size in Gbp (default 3.1)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"default {DEFAULT_SEED}")
    parser.add_argument("--contig-mbp", default="50,250", metavar="MIN,MAX", help="chromosome lengths (default 50,250)")
    parser.add_argument("--workers", type=int, default=1, metavar="N", help="processes for the chromosomes' first parts (default 1)")
    args = parser.parse_args()
    try:
        low, high = (float(word) for word in args.contig_mbp.split(","))
    except ValueError:
        parser.error(f"--contig-mbp {args.contig_mbp!r}: expected MIN,MAX in Mbp")
    if not (0 < low <= high) or args.gbp <= 0:
        parser.error("sizes must be positive and MIN <= MAX")
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    parameters = Parameters(total_bases=int(round(args.gbp * 1e9)), seed=args.seed, contig_min=int(low * 1e6), contig_max=int(high * 1e6))
    description = generate(args.output, parameters, args.workers)
    print(f"{args.output}: {len(description['contigs'])} chromosomes, {parameters.total_bases:,} bases, seed {args.seed} [{description['seconds']} s]")
    for kind, fraction in description["fractions"].items():
        print(f"  {kind:<15} {fraction * 100:6.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
