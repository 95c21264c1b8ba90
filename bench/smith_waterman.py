"""Smith-Waterman kernels (``bowmap.align.extend.smith_waterman``) in GCUPS beside the device's integer ceiling.

For each read length (100, 150, 250) the script makes --pairs (read, window) pairs: a random
window of read length + 2 x 64 bases and a read copied from its middle with 2% substitutions
and 0.2% N (vectorised NumPy, fixed seed). It checks the first --check pairs of every kernel run
against the NumPy reference exactly, times the reference on them (sequential CPU), then times:
* score: ``SmithWaterman.best`` on all pairs, local and end-to-end, by the one-pair-a-work-item
  kernel (``score``) and by the two-pairs-in-16-bit-lanes kernel (``score2x16``: with Hopper's PTX
  lane instructions on NVIDIA compute capability >= 9, and ``score2x16cl`` with OpenCL short2
  operations; elsewhere only the short2 one, named ``score2x16``), and by ``teams``, the 16-bit
  lanes with a work-item a tile of 16 read rows (``sw_score_teams``, the lanes as score2x16's);
* traceback: ``SmithWaterman.traceback`` (sweep with direction bits + walk back) on --trace-pairs,
  a work-item a pair (``traceback``) and a work-item a tile (``trace_teams``, ``sw_traceback_teams``).

GCUPS = read length x window length x pairs / seconds / 1e9; "kernel" is the device time of the
launches (profiling events), "call" the wall time of the Python call with its transfers.

Ceiling: the score kernel's inner loop costs about OPS_PER_CELL integer operations a cell (local:
2 gap-extension subtractions, 2 gap maxima, 1 add, 3 maxima for H with the 0 floor, 1
subtraction of the gap-open cost from H (used by both gap recurrences), 1 column maximum and 1
profile unpack = 11; end-to-end drops the floor and the column maximum: 9), so
ceiling GCUPS = peak integer Gops / OPS_PER_CELL. The 2x16 kernel does the same operations on two
cells at once (the profile unpack is one byte permutation; the floor rides on a max): 10 a cell
pair local, 9 end-to-end, so its ceiling assumes a packed 16-bit operation issues at the INT32 rate
(an assumption: NVIDIA does not publish the rate of Hopper's packed integer instructions). Peak integer Gops comes from --peak-gops, or
from the device: NVIDIA: SMs x 64 INT32 lanes (compute capability 7.x-9.x) x clock; CPU: cores
x native int vector width x 2 vector ALU ports x clock. Other devices need --peak-gops.
The traceback's ratio uses the same ceiling (it does more work a cell: read it as a fraction).

Commands:
  PoCL (CPU):  python bench/smith_waterman.py --devices cpu --pairs 2000 --trace-pairs 500
  GPU:         python bench/smith_waterman.py --devices gpu     (262144 score pairs, 32768 traced)
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

FLANK = 64
READ_LENGTHS = (100, 150, 250)
SEED = 20260301
OPS_PER_CELL = {False: 11, True: 9}  # by end_to_end
OPS_PER_CELL_2X16 = {False: 5, True: 4.5}
NVIDIA_INT32_LANES = {7: 64, 8: 64, 9: 64}


class BenchError(Exception):
    pass


def make_pairs(rng, count: int, read_length: int):
    window_length = read_length + 2 * FLANK
    windows = rng.integers(0, 4, size=(count, window_length), dtype=np.uint8)
    reads = windows[:, FLANK : FLANK + read_length].copy()
    hit = rng.random(reads.shape) < 0.02
    reads[hit] = (reads[hit] + rng.integers(1, 4, size=int(hit.sum()), dtype=np.uint8)) % 4
    reads[rng.random(reads.shape) < 0.002] = 4
    read_offsets = (np.arange(count) * read_length).astype(np.uint32)
    window_offsets = (np.arange(count) * window_length).astype(np.uint32)
    index = np.arange(count, dtype=np.uint32)
    return (reads.ravel(), read_offsets, np.full(count, read_length, np.uint32),
            windows.ravel(), window_offsets, np.full(count, window_length, np.uint32), index, index)


def subset(arrays, count: int):
    return arrays[:6] + (arrays[6][:count], arrays[7][:count])


def peak_gops(device, given: float | None) -> tuple[float | None, str]:
    if given is not None:
        return given, "--peak-gops"
    from bowmap.runtime.devices import nvidia_compute_capability

    handle = device.device
    clock_ghz = handle.max_clock_frequency / 1000
    units = handle.max_compute_units
    if "NVIDIA" in handle.platform.name.upper():
        capability = nvidia_compute_capability(handle)
        if capability is None:
            return None, "unknown NVIDIA device: give --peak-gops"
        major = capability[0]
        lanes = NVIDIA_INT32_LANES.get(major)
        if lanes is None:
            return None, f"compute capability {major}.x not in the table: give --peak-gops"
        return units * lanes * clock_ghz, f"{units} SMs x {lanes} INT32 lanes x {clock_ghz:.2f} GHz"
    if device.info.kind == "CPU":
        width = handle.native_vector_width_int
        return units * width * 2 * clock_ghz, f"{units} cores x {width} lanes x 2 ports x {clock_ghz:.2f} GHz"
    return None, "no model for this device: give --peak-gops"


def timed(call, aligner, repeat: int):
    """Warm-up, then the best of ``repeat``: (result, kernel seconds, call seconds)."""
    result = call()
    kernel_seconds = call_seconds = math.inf
    for _ in range(repeat):
        started = time.perf_counter()
        again = call()
        call_seconds = min(call_seconds, time.perf_counter() - started)
        kernel_seconds = min(kernel_seconds, sum((e.profile.end - e.profile.start) * 1e-9 for e in aligner.last_kernel_events))
        if not all(np.array_equal(a, b) for a, b in zip(result, again)):
            raise BenchError("two runs of the same call returned different results")
    return result, kernel_seconds, call_seconds


def check(name, got, expected, count: int) -> None:
    for field, (kernel, wanted) in enumerate(zip(got, expected)):
        kernel = kernel[:count] if field < 5 else kernel
        if not np.array_equal(kernel, wanted):
            raise BenchError(f"{name}: field {field} differs from the NumPy reference")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", metavar="SPEC", help="as bowmap's --devices (default: every GPU, else the CPU)")
    parser.add_argument("--pairs", type=int, default=262_144, metavar="N", help="pairs for the score kernel (default 262144)")
    parser.add_argument("--trace-pairs", type=int, default=32_768, metavar="N", help="pairs for the traceback kernel (default 32768)")
    parser.add_argument("--check", type=int, default=64, metavar="N", help="pairs compared with (and timing) the NumPy reference (default 64)")
    parser.add_argument("--repeat", type=int, default=3, metavar="N", help="timed runs after a warm-up; the best counts (default 3)")
    parser.add_argument("--peak-gops", type=float, metavar="G", help="device peak integer Gops/s (default: from the device's properties)")
    parser.add_argument("--read-lengths", default=",".join(map(str, READ_LENGTHS)), metavar="L,L", help="default 100,150,250")
    args = parser.parse_args()
    lengths = [int(word) for word in args.read_lengths.split(",")]
    if args.pairs < 1 or args.trace_pairs < 1 or args.check < 1 or args.repeat < 1 or min(lengths) < 1:
        parser.error("--pairs, --trace-pairs, --check, --repeat and read lengths must be positive")
    args.check = min(args.check, args.pairs, args.trace_pairs)

    import pyopencl as cl

    from bowmap.align.references import smith_waterman as reference
    from bowmap.align.extend.smith_waterman import Scoring, SmithWaterman
    from bowmap.runtime.devices import format_memory, open_devices
    from bowmap.runtime.errors import BowmapError

    try:
        for device in open_devices(args.devices):
            queue = cl.CommandQueue(device.context, device.device, properties=cl.command_queue_properties.PROFILING_ENABLE)
            peak, peak_source = peak_gops(device, args.peak_gops)
            info = device.info
            print(f"device: {info.name} ({info.compute_units} compute units, {format_memory(info.global_memory)}); "
                  f"peak integer: {'n/a' if peak is None else f'{peak:,.0f} Gops/s'} ({peak_source}); "
                  f"windows: read + 2 x {FLANK}; best of {args.repeat}; reference timed on {args.check} pairs")
            print(f"{'read':>5} {'window':>6} {'mode':<10} {'kernel':<11} {'pairs':>8} {'ms':>9} {'GCUPS':>8} "
                  f"{'call GCUPS':>10} {'ceiling':>8} {'ratio':>6} {'ref GCUPS':>9}")
            rng = np.random.default_rng(SEED)
            for read_length in lengths:
                arrays = make_pairs(rng, max(args.pairs, args.trace_pairs), read_length)
                cells = read_length * (read_length + 2 * FLANK)
                for end_to_end in (False, True):
                    scoring = Scoring(end_to_end=end_to_end)
                    aligner = SmithWaterman(device, scoring, queue, packed_scores=False, teams=False)
                    twins = SmithWaterman(device, scoring, queue, packed_scores=True, teams=False)
                    teams = SmithWaterman(device, scoring, queue, packed_scores=True, teams=True)
                    variants = [("score", args.pairs, aligner.best, aligner, OPS_PER_CELL[end_to_end]),
                                ("score2x16", args.pairs, twins.best, twins, OPS_PER_CELL_2X16[end_to_end]),
                                ("teams", args.pairs, teams.best, teams, OPS_PER_CELL_2X16[end_to_end])]
                    if twins.packed_asm:
                        portable = SmithWaterman(device, scoring, queue, packed_scores=True, packed_asm=False)
                        variants.append(("score2x16cl", args.pairs, portable.best, portable, OPS_PER_CELL_2X16[end_to_end]))
                    variants.append(("traceback", args.trace_pairs, aligner.traceback, aligner, OPS_PER_CELL[end_to_end]))
                    variants.append(("trace_teams", args.trace_pairs, teams.traceback, teams, OPS_PER_CELL[end_to_end]))
                    sample = subset(arrays, args.check)
                    started = time.perf_counter()
                    expected = reference.traceback(scoring, *sample)
                    reference_gcups = args.check * cells / (time.perf_counter() - started) / 1e9
                    for name, count, call, owner, ops in variants:
                        ceiling = None if peak is None else peak / ops
                        chosen = subset(arrays, count)
                        result, kernel_seconds, call_seconds = timed(lambda: call(*chosen), owner, args.repeat)
                        if not name.startswith("trace"):
                            check(name, result, (expected[0], expected[2], expected[4]), args.check)
                        else:
                            check(name, result[:5], expected[:5], args.check)
                            used = int(result[6][args.check]) if count > args.check else len(result[5])
                            if not np.array_equal(result[5][:used], expected[5]):
                                raise BenchError(f"{name}: CIGARs differ from the NumPy reference")
                        gcups = count * cells / kernel_seconds / 1e9
                        bound, ratio = ("n/a", "") if ceiling is None else (f"{ceiling:,.1f}", f"{gcups / ceiling:.3f}")
                        print(f"{read_length:>5} {read_length + 2 * FLANK:>6} {'end-to-end' if end_to_end else 'local':<10} "
                              f"{name:<11} {count:>8,} {kernel_seconds * 1e3:>9.2f} {gcups:>8.2f} "
                              f"{count * cells / call_seconds / 1e9:>10.2f} {bound:>8} {ratio:>6} {reference_gcups:>9.4f}")
            print(f"check: the first {args.check} pairs of every run equal the NumPy reference (scores, ends, CIGARs); "
                  "ref GCUPS: NumPy reference with traceback, sequential, on those pairs", file=sys.stderr)
    except (BenchError, BowmapError) as error:
        print(f"smith_waterman bench: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
