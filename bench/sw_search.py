"""Smith-Waterman database search (``bowmap.modules.sw_search``): GCUPS of the intertask and
intratask kernels beside pyopal on every core, and the intratask/intertask crossover.

The paper's set-up (BowMapCL; CUDASW++'s): simdb, every database sequence 3,000 residues, here
drawn with UniProtKB/Swiss-Prot's amino-acid frequencies (seeded; --sequences sets the size:
simdb is about 195,000 of them), against queries of the paper's 20 lengths 144 .. 5,478 (random
with the same frequencies), BLOSUM62, gaps 11 + L x 1 (BLAST's convention). Goals on one H200:
intertask >= 2 TCUPS for queries >= 300 residues, >= 10x pyopal on the machine's cores.

Commands:
  PoCL (CPU):  python bench/sw_search.py --devices cpu --sequences 48 --queries 144,375 \\
                   --crossover-lengths 200,1000 --crossover-residues 40000 --mixed 20:400,300:3
  NVIDIA GPU:  python bench/sw_search.py --devices gpu        (defaults; about 2 minutes)
  auto only:   python bench/sw_search.py --devices gpu --crossover-only

One run:
1. Check: intertask, intratask and pyopal scores of every query equal on the sequences they share
   (intratask and pyopal run on the first --intratask-sequences / --pyopal-sequences: they are far
   slower), the NumPy reference on the first --check-sequences. A mismatch stops the script.
2. Time: wall time of SearchKernels.scores (one query against the loaded database: profile
   upload, launches, read-back; the database is sent once, before), after a warm-up call;
   pyopal.align on --threads threads (default: every core), its database encoded once before.
   GCUPS = query length x database residues / time.
3. Crossover: databases of --crossover-residues residues whose sequences all have one length
   (--crossover-lengths), one query of --crossover-query residues, both kernels; the crossover
   is the shortest length at which intratask is at least as fast. Beside each length's faster
   kernel the script prints the one `auto` chooses for that database (auto_split with the
   device's fill, see docs/sw_search.md), and at the end at how many lengths the two agree.
   Then a mixed database (--mixed: many short sequences and a few long ones) timed three ways:
   all intertask, all intratask, and auto's split. --crossover-only runs this step alone.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

PAPER_QUERIES = "144,189,222,375,464,567,657,729,850,1000,1500,2005,2504,3005,3564,4061,4548,4743,5147,5478"
# UniProtKB/Swiss-Prot amino-acid composition (%), in the order A R N D C Q E G H I L K M F P S T W Y V.
FREQUENCIES = [8.25, 5.53, 4.06, 5.45, 1.37, 3.93, 6.75, 7.07, 2.27, 5.96, 9.66, 5.84, 2.42, 3.86, 4.70, 6.56, 5.34, 1.08, 2.92, 6.87]


class BenchError(Exception):
    pass


def draw(rng, count: int, length: int) -> np.ndarray:
    """uint8[count][length] residue codes (0..19 = ARNDCQEGHILKMFPSTWYV) drawn with FREQUENCIES,
    through a 4096-entry table (frequencies to 1/4096; rng.choice with p takes ~10x longer)."""
    bounds = np.cumsum(FREQUENCIES) / sum(FREQUENCIES)
    table = np.searchsorted(bounds, (np.arange(4096) + 0.5) / 4096).astype(np.uint8)
    return table[rng.integers(0, 4096, size=(count, length), dtype=np.uint16)]


def as_targets(block: np.ndarray):
    from bowmap.modules.sw_search.kernels import Targets

    count, length = block.shape
    lengths = np.full(count, length, dtype=np.int64)
    return Targets(block.reshape(-1), np.arange(count, dtype=np.int64) * length, lengths)


def timed(call, repeat: int = 1) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = call()
        best = min(best, time.perf_counter() - started)
    return best, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", metavar="SPEC", help="as bowmap's --devices (default: every GPU, else the CPU); the first is used")
    parser.add_argument("--sequences", type=int, default=195000, metavar="N",
                        help="database sequences of --length residues (default 195000: simdb's 585 M residues; intertask "
                        "needs about 2 x the device's resident work-items of them to fill it)")
    parser.add_argument("--length", type=int, default=3000, metavar="L", help="database sequence length (default 3000, simdb's)")
    parser.add_argument("--queries", default=PAPER_QUERIES, metavar="LIST", help="query lengths (default: the paper's 20, 144 .. 5478)")
    parser.add_argument("--methods", default="intertask,intratask", metavar="LIST", help="kernels timed (default intertask,intratask)")
    parser.add_argument("--tile", type=int, default=16, choices=(8, 16, 32), help="intertask query rows a work-item (default 16)")
    parser.add_argument("--threads", type=int, default=0, metavar="N", help="pyopal threads (default: every core)")
    parser.add_argument("--intratask-sequences", type=int, default=2000, metavar="N", help="intratask runs on the first N sequences (default 2000)")
    parser.add_argument("--pyopal-sequences", type=int, default=4000, metavar="N", help="pyopal runs on the first N sequences (default 4000)")
    parser.add_argument("--no-pyopal", action="store_true", help="leave pyopal out")
    parser.add_argument("--check-sequences", type=int, default=4, metavar="N", help="database sequences checked against the NumPy reference (default 4)")
    parser.add_argument("--crossover-lengths", default="500,1000,2000,4000,8000,16000,32000", metavar="LIST",
                        help="sequence lengths of the crossover databases (default 500 .. 32000; '' to skip)")
    parser.add_argument("--crossover-residues", type=int, default=100_000_000, metavar="N", help="residues of each crossover database (default 100 M)")
    parser.add_argument("--crossover-query", type=int, default=464, metavar="M", help="query length of the crossover runs (default 464)")
    parser.add_argument("--mixed", default="300:330000,3000:200,10000:40,30000:5", metavar="LIST",
                        help="the mixed database of step 3 as LENGTH:COUNT pairs (default: 99 M residues of 300, and a few long; '' to skip)")
    parser.add_argument("--crossover-only", action="store_true", help="step 3 alone (no simdb-like runs, no pyopal)")
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    if args.crossover_only:
        args.queries, args.methods, args.no_pyopal, args.sequences = "", "", True, args.check_sequences
    try:
        return run(args)
    except BenchError as error:
        print(f"bench/sw_search.py: {error}", file=sys.stderr)
        return 1


def run(args) -> int:
    from bowmap.modules.sw_search import reference
    from bowmap.modules.sw_search.kernels import SearchKernels
    from bowmap.modules.sw_search.scoring import Scoring
    from bowmap.modules.sw_search.search import auto_split, device_fill, intratask_speed
    from bowmap.runtime.devices import open_devices

    device = open_devices(args.devices)[0]
    scoring = Scoring("BLOSUM62", 11, 1)
    kernels = SearchKernels(device, scoring, tile=args.tile)
    rng = np.random.default_rng(args.seed)
    block = draw(rng, args.sequences, args.length)
    targets = as_targets(block)
    residues = int(targets.lengths.sum())
    query_lengths = [int(word) for word in args.queries.split(",") if word]
    queries = [draw(rng, 1, length)[0] for length in query_lengths]
    methods = [word for word in args.methods.split(",") if word]
    fill, speed = device_fill(kernels), intratask_speed(kernels, [args.crossover_query])
    threads = args.threads or os.cpu_count()
    print(f"device: {device.info.name} ({device.info.compute_units} compute units); database {args.sequences} x {args.length} "
          f"= {residues / 1e6:.1f} M residues; BLOSUM62, gaps 11 + L x 1; tile {args.tile}; packed PTX {kernels.packed_asm}; "
          f"work-group {kernels.group_size} (preferred multiple {kernels.preferred_multiple}); auto: {fill} sequences fill "
          f"the device, a database of one length goes to intertask from {int(np.ceil(fill * speed))} of them (a query of "
          f"{args.crossover_query})", flush=True)

    pyopal = None
    if not args.no_pyopal:
        try:
            import pyopal
        except ImportError:
            print("pyopal is not installed: its column is left out (pip install pyopal)")
    opal_database = pool = None
    if pyopal is not None:
        from multiprocessing.pool import ThreadPool

        letters = np.frombuffer(scoring.alphabet.encode(), dtype=np.uint8)
        started = time.perf_counter()
        opal_database = pyopal.Database([letters[row].tobytes().decode() for row in block[: args.pyopal_sequences]])
        pool = ThreadPool(threads)
        print(f"pyopal {pyopal.__version__}: database encoded in {time.perf_counter() - started:.1f} s; {threads} threads", flush=True)

    # Each method on its own share of the database (intratask and pyopal are far slower: a
    # prefix of it), the database sent once a method; scores compared on the shared prefix.
    shares = {"intertask": args.sequences, "intratask": min(args.sequences, args.intratask_sequences),
              "pyopal": min(args.sequences, args.pyopal_sequences)}
    rows = [{"m": length} for length in query_lengths]
    scores: list[dict] = [{} for _ in queries]
    for method in methods:
        share = as_targets(block[: shares[method]])
        seconds, _ = timed(lambda: kernels.load(share, np.full(len(share), method == "intratask")))
        kernels.scores(queries[0][:16])  # warm-up: builds, first launches
        print(f"{method}: {len(share)} sequences loaded in {seconds:.2f} s", flush=True)
        for row, query, found in zip(rows, queries, scores):
            before = kernels.reruns
            seconds, found[method] = timed(lambda: kernels.scores(query))
            row[method] = len(query) * int(share.lengths.sum()) / seconds / 1e9
            row["reruns"] = row.get("reruns", 0) + kernels.reruns - before
            print(f"  {method} m {len(query)}: {seconds:.3f} s, {row[method]:.1f} GCUPS", flush=True)
    if pyopal is not None:
        text = scoring.alphabet
        for row, query, found in zip(rows, queries, scores):
            query_text = "".join(text[code] for code in query.tolist())
            seconds, hits = timed(lambda: list(pyopal.align(query_text, opal_database, "BLOSUM62", gap_open=12, gap_extend=1,
                                                            algorithm="sw", pool=pool, ordered=True)))
            found["pyopal"] = np.array([hit.score for hit in hits], dtype=np.int64)
            row["pyopal"] = len(query) * shares["pyopal"] * args.length / seconds / 1e9
            print(f"  pyopal m {len(query)}: {seconds:.3f} s, {row['pyopal']:.1f} GCUPS", flush=True)
    for query, found in zip(queries, scores):
        expected = reference.scores(query, list(block[: args.check_sequences]), scoring)
        for name, values in found.items():
            if values[: args.check_sequences].tolist() != expected[: len(values)].tolist():
                raise BenchError(f"query of {len(query)}: {name} scores differ from the NumPy reference")
            for other, theirs in found.items():
                common = min(len(values), len(theirs))
                if not np.array_equal(values[:common], theirs[:common]):
                    raise BenchError(f"query of {len(query)}: {name} and {other} scores differ")
    if queries:
        print(f"checked: {', '.join(scores[0])} equal on their shared sequences; the NumPy reference on {args.check_sequences}", flush=True)

    crossover_rows = []
    lengths = [int(word) for word in args.crossover_lengths.split(",") if word]
    query = draw(rng, 1, args.crossover_query)[0]
    for length in lengths:
        count = max(1, args.crossover_residues // length)
        crossover_targets = as_targets(draw(rng, count, length))
        row = {"length": length, "sequences": count}
        results = []
        for method in ("intertask", "intratask"):
            kernels.load(crossover_targets, np.full(count, method == "intratask"))
            kernels.scores(query[:16])
            seconds, values = timed(lambda: kernels.scores(query), repeat=2)
            results.append(values)
            row[method] = len(query) * count * length / seconds / 1e9
        if not np.array_equal(*results):
            raise BenchError(f"crossover database of length {length}: intertask and intratask scores differ")
        row["best"] = "intratask" if row["intratask"] >= row["intertask"] else "intertask"
        chosen = auto_split(crossover_targets.lengths, fill, speed)
        row["auto"] = "intratask" if chosen.all() else "intertask" if not chosen.any() else f"split ({int(chosen.sum())} intratask)"
        crossover_rows.append(row)
        print(f"crossover length {length}: {count} sequences, intertask {row['intertask']:.1f}, intratask {row['intratask']:.1f} GCUPS; "
              f"faster {row['best']}, auto {row['auto']}", flush=True)

    if rows:
        print()
        print(f"GCUPS, {device.info.name}, sequences of {args.length}: " + ", ".join(
            f"{name} on {shares[name]}" for name in [*methods, *(["pyopal"] if pyopal else [])]) + (f"; pyopal on {threads} threads" if pyopal else ""))
        header = f"{'query':>6} " + " ".join(f"{method:>10}" for method in methods) + (f" {'pyopal':>8} {'inter/opal':>10}" if pyopal else "") + f" {'reruns':>7}"
        print(header)
        for row in rows:
            line = f"{row['m']:>6} " + " ".join(f"{row[method]:>10.1f}" for method in methods)
            if pyopal is not None:
                ratio = row["intertask"] / row["pyopal"] if "intertask" in row else float("nan")
                line += f" {row['pyopal']:>8.1f} {ratio:>10.1f}"
            print(line + f" {row.get('reruns', 0):>7}")
        if rows and "intertask" in methods:
            long_rows = [row for row in rows if row["m"] >= 300]
            if long_rows:
                print(f"intertask, queries >= 300: min {min(row['intertask'] for row in long_rows):.1f}, "
                      f"mean {np.mean([row['intertask'] for row in long_rows]):.1f} GCUPS")
    if crossover_rows:
        print(f"\ncrossover, query of {args.crossover_query}, {args.crossover_residues / 1e6:.1f} M residues a database")
        print(f"{'length':>7} {'sequences':>10} {'intertask':>10} {'intratask':>10} {'faster':>10} {'auto':>10}")
        for row in crossover_rows:
            print(f"{row['length']:>7} {row['sequences']:>10} {row['intertask']:>10.1f} {row['intratask']:>10.1f} "
                  f"{row['best']:>10} {row['auto']:>10}")
        faster = [row["length"] for row in crossover_rows if row["intratask"] >= row["intertask"]]
        measured = f"{faster[0]}" if faster else f"above {lengths[-1]} (intertask faster at every length)"
        agree = sum(row["best"] == row["auto"] for row in crossover_rows)
        print(f"measured crossover: {measured}; auto: intertask from {int(np.ceil(fill * speed))} sequences of a "
              f"length ({fill} fill the device); auto chose the faster kernel at {agree} of {len(crossover_rows)} lengths")
    if args.mixed:
        mixed(args, kernels, fill, speed, query, rng)
    if pool is not None:
        pool.close()
    return 0


def mixed(args, kernels, fill: int, speed: float, query: np.ndarray, rng) -> None:
    """Step 3's mixed database (--mixed) all intertask, all intratask and split as auto splits it."""
    from bowmap.modules.sw_search.kernels import Targets
    from bowmap.modules.sw_search.search import auto_split

    parts = [tuple(int(value) for value in word.split(":")) for word in args.mixed.split(",") if word]
    lengths = np.concatenate([np.full(count, length, dtype=np.int64) for length, count in parts])
    codes = np.concatenate([draw(rng, count, length).reshape(-1) for length, count in parts])
    offsets = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    # The lengths shuffled through the database, as in a real one.
    targets = Targets(codes, offsets, lengths).subset(rng.permutation(len(lengths)))
    chosen = auto_split(targets.lengths, fill, speed)
    cells = len(query) * int(targets.lengths.sum())
    timings, results = {}, []
    for name, split in (("intertask", np.zeros(len(targets), dtype=bool)), ("intratask", np.ones(len(targets), dtype=bool)), ("auto", chosen)):
        kernels.load(targets, split)
        kernels.scores(query[:16])
        seconds, values = timed(lambda: kernels.scores(query), repeat=2)
        results.append(values)
        timings[name] = cells / seconds / 1e9
    if not all(np.array_equal(results[0], values) for values in results[1:]):
        raise BenchError("mixed database: the three splits' scores differ")
    lengths = sorted({int(length) for length in targets.lengths[chosen]})
    print(f"\nmixed database ({args.mixed}; {len(targets)} sequences, {int(targets.lengths.sum()) / 1e6:.1f} M residues), query of {len(query)}: "
          + ", ".join(f"{name} {value:.1f}" for name, value in timings.items()) + " GCUPS; "
          f"auto sent {int(chosen.sum())} sequences (lengths {lengths or 'none'}) to intratask; fastest: {max(timings, key=timings.get)}")


if __name__ == "__main__":
    sys.exit(main())
