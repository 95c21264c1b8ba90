"""k-difference primer kernels (``bowmap.modules.primers.kernels``) on homologous sequences, beside the sequential
references.

Commands:
  PoCL (CPU):        python bench/primers.py --devices cpu --alpha-length 1200 --beta-length 6000 -k 16 --sequential-starts 4
  GPU, paper sizes:  python bench/primers.py --devices gpu
                     (|alpha| = 43,606, |beta| = 241,494, k = 100: Feuser & Moreano's Table 1/3
                     case; --case large (or both) for |alpha| = 107,280, |beta| = 2,220,391, k = 256, run
                     on its first --large-starts starts only, as the whole is ~8x10^13 comparisons)

Sequences (fixed seed, vectorised NumPy; symbols ACGT):
* alpha: i.i.d. bases, GC 45%.
* beta: pieces laid end to end until it has the wanted length, drawn in turn:
  - 55% homologous: a random segment of alpha (300-4000 bases, uniform), mutated at a rate
    drawn per piece from U(3%, 25%): of the mutation events 70% substitutions, 15% one-base
    insertions, 15% deletions; half of these also get an unrelated stretch of 20-200 bases
    inserted at a random point (the "insertion of unrelated stretches");
  - 30% unrelated: i.i.d. bases, 200-3000 long;
  - 15% duplication: a copy of an earlier stretch of beta (100-3000 bases), 1% substitutions.
  So beta holds alpha's bases several times over at varied divergence, next to unrelated DNA.

What is measured, on one device (warm-up run first, then the best of --repeat runs):
* kernel: the sum of the device times of every kernel launch of one full solve (profiling
  queue); call: wall time of ``PrimerSearch.find`` (uploads, batching, reads included).
  A warm-up on the first 64 starts builds the programs first; --repeat full runs, the best kept.
* the large case times the Landau-Vishkin coarse kernel only (the fine one keeps 18 MB of
  columns a start in global memory, the conventional one needs thousands of rows a start) and
  checks it against the sequential Landau-Vishkin reference only.
* comparisons: symbol comparisons of alpha against beta, counted exactly as the sequential
  Landau-Vishkin reference counts them (the test suite checks they are equal).
* sequential: the NumPy references (``bowmap.modules.primers.reference``; vectorised across diagonals
  or across a DP row, not a C program) on the first --sequential-starts starts only (the whole
  would take hours); their lengths and per-start comparisons are checked against the kernels'
  on that slice, and their time per start is extrapolated to all the starts the kernels solved.
  Speedup = extrapolated sequential time / kernel time, against the faster sequential method.
* the other kernels named by --variants (default: the Landau-Vishkin fine-grained one and the
  conventional coarse one) are checked against the Landau-Vishkin coarse one on every start
  (lengths; the fine one's comparisons too; the conventional method counts DP cells, so its
  count differs).
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

SEED = 20260105
CASES = {"table1": (43_606, 241_494, 100), "large": (107_280, 2_220_391, 256)}


class BenchError(Exception):
    pass


def random_bases(rng, count: int) -> np.ndarray:
    """i.i.d. codes 0..3 (A, C, G, T) with GC 45%."""
    return rng.choice(4, size=count, p=[0.275, 0.225, 0.225, 0.275]).astype(np.uint8)


def mutate(rng, segment: np.ndarray, rate: float) -> np.ndarray:
    """Substitutions, one-base insertions and deletions at ``rate`` events a base (70/15/15%)."""
    draw = rng.random(len(segment))
    substituted = draw < 0.70 * rate
    inserted = (draw >= 0.70 * rate) & (draw < 0.85 * rate)
    deleted = (draw >= 0.85 * rate) & (draw < rate)
    out = segment.copy()
    out[substituted] = (out[substituted] + rng.integers(1, 4, size=int(substituted.sum()), dtype=np.uint8)) % 4
    copies = np.where(deleted, 0, np.where(inserted, 2, 1))
    result = np.repeat(out, copies)
    # The second copy of an inserted base becomes a random base.
    second = np.cumsum(copies)[inserted] - 1
    result[second] = random_bases(rng, len(second))
    return result


def make_sequences(alpha_length: int, beta_length: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    alpha = random_bases(rng, alpha_length)
    pieces, size = [], 0
    while size < beta_length:
        kind = rng.random()
        if kind < 0.55:
            length = int(rng.integers(300, 4001))
            start = int(rng.integers(0, max(1, alpha_length - length + 1)))
            piece = mutate(rng, alpha[start : start + length], float(rng.uniform(0.03, 0.25)))
            if rng.random() < 0.5:
                cut = int(rng.integers(0, len(piece) + 1))
                piece = np.concatenate([piece[:cut], random_bases(rng, int(rng.integers(20, 201))), piece[cut:]])
        elif kind < 0.85 or size < 100:
            piece = random_bases(rng, int(rng.integers(200, 3001)))
        else:
            length = int(rng.integers(100, min(3000, size) + 1))
            start = int(rng.integers(0, size - length + 1))
            piece = np.concatenate(pieces)[start : start + length].copy()
            hit = rng.random(len(piece)) < 0.01
            piece[hit] = (piece[hit] + 1) % 4
        pieces.append(piece)
        size += len(piece)
    beta = np.concatenate(pieces)[:beta_length]
    letters = np.frombuffer(b"ACGT", dtype=np.uint8)
    return letters[alpha], letters[beta]


def kernel_seconds(events) -> float:
    return sum((event.profile.end - event.profile.start) * 1e-9 for event in events)


def time_kernel(search, alpha, beta, options, repeat: int):
    """A warm-up on a few starts (builds the programs), then ``repeat`` full runs that must agree:
    (lengths, start comparisons, best kernel s, best call s)."""
    from dataclasses import replace

    warm_starts = min(len(alpha), 64 if options.starts is None else min(64, options.starts))
    search.find(alpha, beta, replace(options, starts=warm_starts))
    warm_lengths, warm_counts = search.find(alpha, beta, replace(options, starts=warm_starts))[0], search.start_comparisons.copy()
    lengths = counts = None
    best_kernel = best_call = math.inf
    for _ in range(repeat):
        started = time.perf_counter()
        again, _ = search.find(alpha, beta, options)
        best_call = min(best_call, time.perf_counter() - started)
        best_kernel = min(best_kernel, kernel_seconds(search.kernel_events))
        if lengths is None:
            lengths, counts = again, search.start_comparisons.copy()
        if not (np.array_equal(again, lengths) and np.array_equal(search.start_comparisons, counts)
                and np.array_equal(again[:warm_starts], warm_lengths[:warm_starts])
                and np.array_equal(counts[:warm_starts], warm_counts[:warm_starts])):
            raise BenchError("two runs of the same kernel returned different results")
    return lengths, counts, best_kernel, best_call


def run_case(device, name: str, alpha, beta, k: int, starts: int | None, args) -> list[tuple]:
    import pyopencl as cl

    from bowmap.modules.primers import reference
    from bowmap.modules.primers.kernels import PrimerOptions, PrimerSearch

    queue = cl.CommandQueue(device.context, device.device, properties=cl.command_queue_properties.PROFILING_ENABLE)
    search = PrimerSearch(device, queue)
    m = len(alpha)
    rows = []
    lengths, counts, kernel, call = time_kernel(search, alpha, beta, PrimerOptions(k=k, starts=starts), args.repeat)
    layout = dict(search.last_layout)
    solved = int(np.count_nonzero(counts))  # starts the method processed (the stop start included)
    comparisons = int(counts.sum())
    rows.append(("landau-vishkin coarse", solved, comparisons, kernel, call))
    variants = set(args.variants.split(",")) if name != "large" else set()
    if "fine" in variants:
        fine_lengths, fine_counts, fine_kernel, fine_call = time_kernel(
            search, alpha, beta, PrimerOptions(k=k, parallelism="fine", starts=starts), args.repeat
        )
        if not (np.array_equal(fine_lengths, lengths) and np.array_equal(fine_counts, counts)):
            raise BenchError(f"{name}: the fine and coarse kernels differ")
        rows.append(("landau-vishkin fine", solved, comparisons, fine_kernel, fine_call))
    for variant, parallelism in (("conventional", "coarse"), ("conventional-fine", "fine")):
        if variant not in variants:
            continue
        conventional_lengths, conventional_counts, conventional_kernel, conventional_call = time_kernel(
            search, alpha, beta, PrimerOptions(k=k, method="conventional", parallelism=parallelism, starts=starts), args.repeat
        )
        if not np.array_equal(conventional_lengths, lengths):
            raise BenchError(f"{name}: the conventional {parallelism} and Landau-Vishkin kernels differ")
        rows.append((f"conventional {parallelism}", solved, int(conventional_counts.sum()), conventional_kernel, conventional_call))

    sequential = []
    slice_starts = min(args.sequential_starts, solved)
    # The conventional NumPy reference needs minutes a start on the large case: Landau-Vishkin only.
    for method in ("landau-vishkin",) if name == "large" else ("landau-vishkin", "conventional"):
        reference.solve_starts(alpha[:16], beta[:16], 2, method)  # NumPy's first-call costs, untimed
        started = time.perf_counter()
        seq_lengths, seq_counts = reference.solve_starts(alpha, beta, k, method, slice_starts)
        seconds = time.perf_counter() - started
        if not np.array_equal(seq_lengths[:slice_starts], lengths[:slice_starts]):
            raise BenchError(f"{name}: the {method} reference and the kernel differ on the first {slice_starts} starts")
        if method == "landau-vishkin" and not np.array_equal(seq_counts[:slice_starts], counts[:slice_starts]):
            raise BenchError(f"{name}: comparison counts of the reference and the kernel differ")
        sequential.append((method, seconds, int(seq_counts.sum())))
        per_start = seconds / max(1, slice_starts)
        rows.append((f"{method} sequential*", slice_starts, int(seq_counts.sum()), seconds, per_start * solved))
    print(
        f"check: the kernels equal both sequential references on the first {slice_starts} starts "
        "(lengths; Landau-Vishkin comparisons per start)",
        file=sys.stderr,
    )
    best_sequential = min(per_start_seconds * solved for _, per_start_seconds, _ in
                          ((method, seconds / max(1, slice_starts), count) for method, seconds, count in sequential))
    with_solution = int(np.count_nonzero(lengths))
    info = device.info
    print(
        f"\ncase {name}: |alpha| = {m:,}, |beta| = {len(beta):,}, k = {k}; starts solved {solved:,}"
        f"{'' if starts is None else f' (first {starts:,} only)'}, with a solution {with_solution:,}, "
        f"median length {int(np.median(lengths[lengths > 0])) if with_solution else 0}; "
        f"device: {info.name} ({info.compute_units} compute units); layout {layout}; best of {args.repeat}"
    )
    print(f"{'solution':<28} {'starts':>8} {'comparisons':>18} {'time (s)':>10} {'10^9 cmp/s':>11} {'speedup':>9}")
    for label, count, compared, seconds, call_or_total in rows:
        if label.endswith("sequential*"):
            print(f"{label:<28} {count:>8,} {compared:>18,} {seconds:>10.3f} {compared / seconds / 1e9:>11.4f} "
                  f"{'(all: ' + format(call_or_total, '.0f') + ' s)':>9}")
        else:
            print(f"{label:<28} {count:>8,} {compared:>18,} {seconds:>10.3f} {compared / seconds / 1e9:>11.2f} "
                  f"{best_sequential / seconds:>8.1f}x")
            print(f"{'  (call, wall time)':<28} {'':>8} {'':>18} {call_or_total:>10.3f} {compared / call_or_total / 1e9:>11.2f}")
    print("* sequential rows: NumPy references timed on the first starts only; (all: ...) extrapolates their "
          "time per start to every start the kernels solved, which the speedup column divides by the kernel time")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", metavar="SPEC", help="as bowmap's --devices (default: every GPU, else the CPU); the first is used")
    parser.add_argument("--case", choices=("table1", "large", "both"), default="table1", help="paper sizes (default table1)")
    parser.add_argument("--alpha-length", type=int, metavar="N", help="override |alpha| (small runs on a CPU)")
    parser.add_argument("--beta-length", type=int, metavar="N", help="override |beta|")
    parser.add_argument("-k", type=int, metavar="K", help="override k")
    parser.add_argument("--large-starts", type=int, default=4096, metavar="N", help="starts solved in the large case (default 4096)")
    parser.add_argument("--sequential-starts", type=int, default=1, metavar="N", help="starts the sequential references run (default 1)")
    parser.add_argument("--variants", default="fine,conventional",
                        help="kernels to time beside the Landau-Vishkin coarse one, comma-separated: fine (Landau-Vishkin), "
                        "conventional (coarse), conventional-fine (a barrier a DP anti-diagonal: minutes on the paper's "
                        "sizes) (default: fine,conventional); table1 case only")
    parser.add_argument("--repeat", type=int, default=1, metavar="N", help="timed full runs after a warm-up on 64 starts; the best counts (default 1)")
    args = parser.parse_args()
    if args.repeat < 1 or args.sequential_starts < 1:
        parser.error("--repeat and --sequential-starts must be at least 1")

    from bowmap.runtime.devices import open_devices
    from bowmap.runtime.errors import BowmapError

    try:
        device = open_devices(args.devices)[0]
        names = ("table1", "large") if args.case == "both" else (args.case,)
        for name in names:
            m, n, k = CASES[name]
            m, n, k = args.alpha_length or m, args.beta_length or n, args.k or k
            started = time.perf_counter()
            alpha, beta = make_sequences(m, n, SEED)
            print(f"sequences: {name} made in {time.perf_counter() - started:.1f} s", file=sys.stderr)
            run_case(device, name, alpha, beta, k, args.large_starts if name == "large" else None, args)
    except (BenchError, BowmapError) as error:
        print(f"primers bench: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
