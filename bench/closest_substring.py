"""Closest substring kernels (``bowmap.modules.closest_substring.kernels``) beside the sequential CPU version.

One run builds planted-motif instances (fixed seed), checks every device method against the
sequential reference, times each method and prints a table with the speedup over the sequential
CPU version measured in the same run.

Commands:
  GPU (the paper's sizes, the default):  python bench/closest_substring.py --devices gpu
  PoCL (CPU, small):  python bench/closest_substring.py --devices cpu --strings 64 --string-length 256 \
                        --exact-strings 16 --exact-length 8 --exact-string-length 256

Instances: random DNA strings (uniform i.i.d. bases); a random centre of length L is implanted
in every string at a random place with exactly floor(d / 2) substitutions at random positions,
so the chord of the planted pitch is valid (its notes lie within 2 floor(d / 2) <= d); in the
exact case with exactly --exact-distance substitutions. Cases (the paper's Figures 11-13): --strings x
--string-length with L=16, d=4 and L=3, d=3; exact mode: --exact-strings x --exact-string-length
with L = --exact-length.

Measurements (one warm-up, then the best of --repeat runs):
* kernel: the summed device time of a call's kernel launches (profiling queue): the chord kernels
  and the on-device min-reduction over pitches (s-gpu, pp-gpu), or the exact search's launches
  and reduction.
* call: wall time of the library call: ``best_pitch`` (kernels + reading back the 8-byte best
  key), or ``exact_centre``; "whole" rows time ``closest_substring()`` end to end (packing,
  uploads, notes, root, scoring the root).
* sequential: ``bowmap.modules.closest_substring.reference.chord_keys`` (NumPy, one pitch after another,
  vectorised over strings and windows; the method's sequential CPU version) on every pitch (about
  4 s for 1024 x 1024), or on the first --sequential-pitches pitches extrapolated linearly to all
  (every pitch costs the same; the row then says so). Its keys are compared with each kernel's
  keys for the same pitches, and the device's best pitch is checked against the smallest key. For the exact mode the CPU
  version scores --sequential-centres centres (each against every window of every string, no
  pruning) and is extrapolated to all 4^L; the kernel prunes with the heuristic's bound, so that
  speedup includes the algorithmic gain: the "unbounded" row shows the kernel without the
  heuristic's bound (it still prunes with the bound it finds itself).
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

SEED = 20261122


class BenchError(Exception):
    pass


def planted_instance(rng, count: int, string_length: int, length: int, mutations: int):
    strings = [rng.integers(0, 4, size=string_length, dtype=np.uint8) for _ in range(count)]
    motif = rng.integers(0, 4, size=length, dtype=np.uint8)
    for string in strings:
        copy = motif.copy()
        where = rng.choice(length, size=min(mutations, length), replace=False)
        copy[where] = (copy[where] + rng.integers(1, 4, size=len(where))) % 4
        start = int(rng.integers(0, string_length - length + 1))
        string[start : start + length] = copy
    return strings, motif


def kernel_seconds(events) -> float:
    return sum((event.profile.end - event.profile.start) * 1e-9 for _, event in events)


def best_of(repeat: int, call, events_of=None):
    """Warm-up, then ``repeat`` runs: (first result, best wall seconds, best kernel seconds)."""
    result = call()
    wall = kernel = math.inf
    for _ in range(repeat):
        started = time.perf_counter()
        again = call()
        wall = min(wall, time.perf_counter() - started)
        if events_of is not None:
            kernel = min(kernel, kernel_seconds(events_of()))
        if not _same(result, again):
            raise BenchError("two runs of the same call returned different results")
    return result, wall, kernel


def _same(a, b) -> bool:
    if isinstance(a, tuple):
        return all(_same(x, y) for x, y in zip(a, b))
    return bool(np.array_equal(np.asarray(a), np.asarray(b)))


def heuristic_case(device, queue, length, max_distance, args, rows):
    from bowmap.modules.closest_substring import reference
    from bowmap.modules.closest_substring.kernels import ClosestSubstringSearch, closest_substring

    rng = np.random.default_rng(SEED + length)
    strings, _ = planted_instance(rng, args.strings, args.string_length, length, max_distance // 2)
    search = ClosestSubstringSearch(device, strings, length, "dna", queue)
    pitch_count = search.pitch_count
    sliced = range(min(args.sequential_pitches or pitch_count, pitch_count))
    started = time.perf_counter()
    excess, total = reference.chord_keys(strings, length, max_distance, sliced)
    sequential = (time.perf_counter() - started) * pitch_count / len(sliced)
    expected = reference.pack_keys(excess, total)
    case = f"{args.strings}x{args.string_length} L={length} d={max_distance}"
    timed = "all pitches" if len(sliced) == pitch_count else f"{len(sliced)}/{pitch_count} pitches, extrapolated"
    rows.append((case, f"sequential CPU ({timed})", None, sequential, sequential))
    for method in ("s-gpu", "pp-gpu"):
        keys = search.chord_keys(method, max_distance)
        if not np.array_equal(keys[: len(sliced)], expected):
            wrong = int(np.flatnonzero(keys[: len(sliced)] != expected)[0])
            raise BenchError(f"{method}: chord key of pitch {wrong} is {keys[wrong]}, the reference says {expected[wrong]}")
        (pitch, key), wall, kernel = best_of(args.repeat, lambda: search.best_pitch(method, max_distance), lambda: search.events)
        if key != int(keys.min()):
            raise BenchError(f"{method}: the device reduction picked key {key}, the smallest key is {int(keys.min())}")
        excess_one, total_one = reference.chord_keys(strings, length, max_distance, range(pitch, pitch + 1))
        if int(reference.pack_keys(excess_one, total_one, pitch)[0]) != key:
            raise BenchError(f"{method}: the best pitch {pitch}'s key differs from the reference's")
        rows.append((case, f"{method} (chord kernels + min-reduction)", kernel, wall, sequential))
    result, wall, _ = best_of(args.repeat, lambda: _summary(closest_substring(strings, length, max_distance, "dna", "s-gpu", device=device)))
    rows.append((case, "s-gpu whole closest_substring() call", None, wall, sequential))
    return result


def _summary(result):
    return (result.pitch_position, result.root.centre, result.root.distances, result.root.positions)


def exact_case(device, queue, args, rows):
    from bowmap.modules.closest_substring import reference
    from bowmap.modules.closest_substring.kernels import (
        ClosestSubstringSearch,
        closest_substring,
        decode,
        exact_key,
    )

    length = args.exact_length
    rng = np.random.default_rng(SEED + 100 + length)
    strings, motif = planted_instance(rng, args.exact_strings, args.exact_string_length, length, args.exact_distance)
    heuristic = closest_substring(strings, length, args.exact_distance, "dna", "s-gpu", device=device)
    bound = min(exact_key(heuristic.root), exact_key(heuristic.pitch))
    search = ClosestSubstringSearch(device, strings, length, "dna", queue)
    centre_count = 4**length
    sample = min(args.sequential_centres, centre_count)
    centres = ((np.arange(sample)[:, None] >> (2 * (length - 1 - np.arange(length)))) & 3).astype(np.uint8)
    started = time.perf_counter()
    scores = [reference.closest_windows(strings, centre)[0] for centre in centres]
    sequential = (time.perf_counter() - started) * centre_count / sample
    case = f"exact {args.exact_strings}x{args.exact_string_length} L={length}"
    rows.append((case, f"sequential CPU ({sample}/{centre_count} centres, extrapolated)", None, sequential, sequential))
    for label, start in (("exact kernel, heuristic bound", bound), ("exact kernel, unbounded", None)):
        (centre, key), wall, kernel = best_of(args.repeat, lambda: search.exact_centre(start), lambda: search.events)
        distances, _ = search.closest_windows(centre)
        if (int(distances.max()) << 24 | int(distances.sum())) != key or key > bound:
            raise BenchError(f"{label}: the centre's own score disagrees with its key, or it is worse than the heuristic's")
        cpu_best = min((int(s.max()) << 24) | int(s.sum()) for s in scores)
        if key > cpu_best:
            raise BenchError(f"{label}: key {key} is worse than a sampled centre's {cpu_best}")
        rows.append((case, label, kernel, wall, sequential))
    return (f"exact centre {decode(centre, 'dna')} max {key >> 24} total {key & 0xFFFFFF}; planted {decode(motif, 'dna')}; "
            f"heuristic root max {heuristic.root.max_distance} total {heuristic.root.total_distance}")


def print_table(rows) -> None:
    print(f"{'case':<26} {'method':<48} {'kernel ms':>10} {'call ms':>11} {'speedup':>9}")
    for case, method, kernel, wall, sequential in rows:
        kernel_text = f"{kernel * 1e3:10.3f}" if kernel is not None else f"{'':>10}"
        fastest = kernel if kernel is not None else wall
        print(f"{case:<26} {method:<48} {kernel_text} {wall * 1e3:11.3f} {sequential / fastest:8.1f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", metavar="SPEC", help="as bowmap's --devices (default: every GPU, else the CPU); the first device runs")
    parser.add_argument("--strings", type=int, default=1024, metavar="N", help="strings in the heuristic cases (default 1024)")
    parser.add_argument("--string-length", type=int, default=1024, metavar="N", help="bases a string (default 1024)")
    parser.add_argument("--cases", default="16:4,3:3", metavar="L:D,...", help="window length and distance pairs (default 16:4,3:3)")
    parser.add_argument("--exact-strings", type=int, default=64, metavar="N", help="strings in the exact case (default 64; 0 skips it)")
    parser.add_argument("--exact-string-length", type=int, default=1024, metavar="N", help="bases a string in the exact case (default 1024)")
    parser.add_argument("--exact-length", type=int, default=12, metavar="L", help="window length in the exact case (default 12)")
    parser.add_argument("--exact-distance", type=int, default=3, metavar="D", help="substitutions of the planted motif in the exact case (default 3)")
    parser.add_argument("--sequential-pitches", type=int, default=0, metavar="N", help="pitches the sequential version times (default 0: all)")
    parser.add_argument("--sequential-centres", type=int, default=256, metavar="N", help="centres the sequential exact version times (default 256)")
    parser.add_argument("--repeat", type=int, default=3, metavar="N", help="timed runs after a warm-up; the best counts (default 3)")
    args = parser.parse_args()
    try:
        cases = [tuple(int(x) for x in part.split(":")) for part in args.cases.split(",") if part]
    except ValueError:
        parser.error("--cases takes L:D pairs such as 16:4,3:3")
    if args.strings < 2 or args.repeat < 1 or args.sequential_pitches < 0 or args.sequential_centres < 1:
        parser.error("need --strings >= 2, --repeat >= 1, --sequential-pitches >= 0, --sequential-centres >= 1")

    import pyopencl as cl

    from bowmap.runtime.devices import format_memory, open_devices
    from bowmap.runtime.errors import BowmapError

    try:
        device = open_devices(args.devices)[0]
        queue = cl.CommandQueue(device.context, device.device, properties=cl.command_queue_properties.PROFILING_ENABLE)
        rows, notes = [], []
        started = time.perf_counter()
        for length, max_distance in cases:
            result = heuristic_case(device, queue, length, max_distance, args, rows)
            notes.append(f"L={length} d={max_distance}: pitch {result[0] + 1}, root {result[1]}, root max {int(result[2].max())} total {int(result[2].sum())}")
        if args.exact_strings >= 2:
            notes.append(exact_case(device, queue, args, rows))
        info = device.info
        print(
            f"device: {info.name} ({info.compute_units} compute units, {format_memory(info.global_memory)}); "
            f"planted-motif DNA instances, seed {SEED}; best of {args.repeat}; speedup = sequential CPU time / "
            f"kernel time (call time where no kernel time is given); bench wall time {time.perf_counter() - started:.1f} s"
        )
        for note in notes:
            print(f"  {note}")
        print_table(rows)
    except (BenchError, BowmapError) as error:
        print(f"closest_substring bench: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
