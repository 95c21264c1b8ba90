"""Approximate string matching kernels (``bowmap.modules.asm.kernels``) reproducing Table 1 of Man, Nakano and Ito.

The paper's set-up: a text Y of n = 2^22 random 0/1 symbols, random 0/1 patterns X of m = 32 ...
1024 symbols, Y cut into D pieces; time per method and the speedup over the sequential DP. (The
paper: m = 1024 in 419.6 ms on a GTX 580, 66x its CPU.) Goals here, on one H100/H200: the
anti-diagonal kernel at >= 300 GCUPS for m = 1024, the bit-vector kernel under 5 ms for m = 1024.

Commands:
  PoCL (CPU):   python bench/asm.py --devices cpu --log2-n 15 --lengths 32,64,128
  NVIDIA GPU:   python bench/asm.py --devices gpu          (the paper's sizes; ~1 minute)

Per m, one run:
1. Check: both kernels against the NumPy reference DP (``bowmap.modules.asm.reference``) on the first
   --check-symbols symbols of Y (distance, end and the distance at every end), and the two kernels
   against each other on the whole of Y (distance and end). A mismatch stops the script.
2. Time: device time of the DP kernel's event (profiling queue; the reduction over pieces adds a
   few microseconds and is left out), the best of --repeat runs after a warm-up, for each D.
   GCUPS = n * m / time (the cells of the sequential DP; the pieces' overlap is extra work the
   kernel does, not counted).
3. Sequential DP: the NumPy reference (one CPU thread, vectorised along each DP row: the same
   O(nm) cells as a C loop, at about the speed of one) timed on a slice of --sequential-symbols
   symbols of Y and scaled to n, because the whole of it would take minutes at m = 1024. The
   table says so in its header. Speedup = that scaled time / the kernel's time.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

PAPER_M1024_MS = 419.6  # GTX 580, Table 1


class BenchError(Exception):
    pass


def piece_counts(text: str, default: int, n: int) -> list[int]:
    """--pieces: 'auto' = the owner's default and 1/4, 4 times it; or a list such as 256,1024."""
    if text == "auto":
        counts = {max(1, default // 4), default, default * 4}
    else:
        counts = {int(word) for word in text.split(",")}
    return sorted(min(n, count) for count in counts)


def kernel_ms(matcher, encoded, method: str, pieces: int, repeat: int) -> float:
    matcher.ends(encoded, method, pieces)  # warm-up: builds the program, sizes the buffers
    best = float("inf")
    for _ in range(repeat):
        matcher.ends(encoded, method, pieces)
        events = matcher.last_kernel_events  # one launch, or slices of a long job
        events[-1].wait()
        best = min(best, (events[-1].profile.end - events[0].profile.start) * 1e-6)
    return best


def sequential_ms(reference, pattern: np.ndarray, text: np.ndarray, slice_symbols: int) -> tuple[float, int]:
    """Time of the NumPy row DP on the first slice_symbols symbols, scaled to the whole text."""
    part = text[: min(len(text), slice_symbols)]
    started = time.perf_counter()
    reference.last_row(pattern, part)
    seconds = time.perf_counter() - started
    return seconds * 1e3 * len(text) / len(part), len(part)


def check(matcher, reference, encoded_slice, encoded_full, m: int) -> None:
    for method in ("dp", "bitvector"):
        distance, end, table = matcher.ends(encoded_slice, method, None, all_distances=True)
        row = reference.last_row(encoded_slice.patterns[0], encoded_slice.text)
        want = reference.best_end(row)
        if (int(distance[0]), int(end[0])) != want or not np.array_equal(table[0], row[1:]):
            raise BenchError(f"m={m}: {method} kernel differs from the reference on the checked slice")
    results = {method: matcher.ends(encoded_full, method)[:2] for method in ("dp", "bitvector")}
    (d1, e1), (d2, e2) = results["dp"], results["bitvector"]
    if (int(d1[0]), int(e1[0])) != (int(d2[0]), int(e2[0])):
        raise BenchError(f"m={m}: dp ({d1[0]}, {e1[0]}) and bitvector ({d2[0]}, {e2[0]}) kernels differ on the whole text")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", metavar="SPEC", help="as bowmap's --devices (default: every GPU, else the CPU); the first is used")
    parser.add_argument("--log2-n", type=int, default=22, metavar="K", help="text length 2^K (default 22, the paper's 4M)")
    parser.add_argument("--lengths", default="32,64,128,256,512,1024", metavar="LIST", help="pattern lengths m (default 32,...,1024)")
    parser.add_argument("--pieces", default="auto", metavar="LIST", help="piece counts D, or auto: the default D, D/4 and 4D (default auto)")
    parser.add_argument("--repeat", type=int, default=3, metavar="N", help="timed runs after a warm-up; the best counts (default 3)")
    parser.add_argument("--check-symbols", type=int, default=1 << 14, metavar="N", help="text symbols checked against the reference (default 16384)")
    parser.add_argument("--sequential-symbols", type=int, default=1 << 15, metavar="N", help="text symbols the sequential DP is timed on (default 32768)")
    parser.add_argument("--seed", type=int, default=2026, help="random seed (default 2026)")
    args = parser.parse_args()

    import pyopencl as cl

    from bowmap.modules.asm import reference
    from bowmap.modules.asm.kernels import ApproximateMatcher, Encoded, encode
    from bowmap.runtime.devices import open_devices

    lengths = [int(word) for word in args.lengths.split(",")]
    n = 1 << args.log2_n
    rng = np.random.default_rng(args.seed)
    text = rng.integers(0, 2, size=n, dtype=np.uint8).tobytes()
    device = open_devices(args.devices)[0]
    queue = cl.CommandQueue(device.context, device.device, properties=cl.command_queue_properties.PROFILING_ENABLE)
    matcher = ApproximateMatcher(device, queue)
    print(
        f"device: {device.info.name} ({device.info.compute_units} compute units); text: n = {n} random 0/1 symbols; "
        f"sequential: NumPy row DP, 1 CPU thread, timed on the first {min(n, args.sequential_symbols)} symbols "
        f"and scaled to n; kernel times: device time, best of {args.repeat}"
    )
    rows = []
    for m in lengths:
        pattern = rng.integers(0, 2, size=m, dtype=np.uint8).tobytes()
        encoded = encode([pattern], text)
        check_length = min(n, max(args.check_symbols, m))
        encoded_slice = Encoded(encoded.text[:check_length], encoded.patterns, encoded.symbols)
        check(matcher, reference, encoded_slice, encoded, m)
        sequential, sliced = sequential_ms(reference, encoded.patterns[0], encoded.text, args.sequential_symbols)
        rows.append((m, "sequential DP", "-", sequential, n * m / sequential * 1e-6, 1.0))
        for method in ("dp", "bitvector"):
            for pieces in piece_counts(args.pieces, matcher.default_pieces(method, n, m), n):
                elapsed = kernel_ms(matcher, encoded, method, pieces, args.repeat)
                rows.append((m, method, pieces, elapsed, n * m / elapsed * 1e-6, sequential / elapsed))
        sys.stdout.flush()

    print(f"{'m':>6} {'method':<14} {'D':>7} {'time ms':>11} {'GCUPS':>9} {'speedup':>9}")
    for m, method, pieces, elapsed, gcups, speedup in rows:
        print(f"{m:>6} {method:<14} {pieces!s:>7} {elapsed:>11.3f} {gcups:>9.2f} {speedup:>9.1f}")
    if 1024 in lengths and n == 1 << 22:
        best_dp = min(row[3] for row in rows if row[0] == 1024 and row[1] == "dp")
        best_bits = min(row[3] for row in rows if row[0] == 1024 and row[1] == "bitvector")
        print(
            f"m = 1024, n = 4M: dp {best_dp:.2f} ms = {n * 1024 / best_dp * 1e-6:.0f} GCUPS (goal >= 300; paper "
            f"{PAPER_M1024_MS} ms on a GTX 580), bitvector {best_bits:.2f} ms (goal <= 5 ms)"
        )
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as error:
        print(f"bench/asm.py: {error}", file=sys.stderr)
        sys.exit(1)
