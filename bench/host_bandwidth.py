"""How much host worker processes slow each other down: a worker-like NumPy loop (12 MB of read
bytes: 2-bit codes by shifts, the newlines found, 30,000 rows of 150 bytes gathered, a sort and
a cumulative sum of their starts) timed alone and in N processes at once. A host worker's work is
mostly such passes over large arrays, so when N at once take much longer each than one alone,
the memory system, not the instruction count, sets a full run's pace (H200 host, 16 cores,
session 19: 0.187 s alone, 0.283 s each with 15 at once).

    python3 bench/host_bandwidth.py [--processes 1,8,15] [--rounds 10]
"""

from __future__ import annotations

import argparse
import multiprocessing
import time

import numpy as np


def _work(rounds: int, results) -> None:
    rng = np.random.default_rng(0)
    data = rng.integers(0, 256, 12_000_000, dtype=np.uint8)
    starts = rng.integers(0, len(data) - 200, 30_000)
    rows = np.lib.stride_tricks.sliding_window_view(data, 150)
    started = None
    for round_number in range(rounds + 1):  # the first round (first touches of the pages) untimed
        if round_number == 1:
            started = time.perf_counter()
        ((data >> 1) ^ (data >> 2)) & 3  # noqa: B018 - the work is the point
        np.flatnonzero(data == ord("\n"))
        rows[starts].copy()
        np.cumsum(np.sort(starts))
    results.put(time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", default="1,8,15", help="comma-separated numbers of processes at once")
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    context = multiprocessing.get_context("spawn")
    alone = None
    print(f"{'processes':>9}  {'s each (mean)':>13}  {'max':>6}  {'x alone':>7}")
    for count in (int(text) for text in args.processes.split(",")):
        results = context.Queue()
        workers = [context.Process(target=_work, args=(args.rounds, results)) for _ in range(count)]
        for worker in workers:
            worker.start()
        times = [results.get() for _ in workers]
        for worker in workers:
            worker.join()
        mean = sum(times) / len(times)
        alone = mean if alone is None else alone
        print(f"{count:>9}  {mean:>13.3f}  {max(times):>6.3f}  {mean / alone:>7.2f}")


if __name__ == "__main__":
    main()
