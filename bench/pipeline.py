"""The align pipeline's ceilings on this machine: how fast the parent process (reading, sending
chunks, receiving and writing SAM text) and the worker processes' host work could go.

The GPU run of ``bowmap align`` is host-bound; this tells which host side binds it. One table:

* ``parent``: ``bowmap.align.runners.run_processes`` over what ``bowmap align`` hands out (byte
  ranges of an uncompressed FASTQ, which the workers read and parse) with workers that answer
  each chunk at once with SAM-sized text (--sam-bytes a read): the parent's ceiling in reads/s,
  with its CPU time (all its threads) a read. ``parent-parsing``: the same with the parent
  parsing the FASTQ itself and sending the chunks (as it does for gzip or stdin input).
* ``workers``: the real aligner (``ProcessWorker``: seeds, windows, Smith-Waterman, SAM text) on
  --chunks chunks held in memory, in each of --processes worker processes at once, none of them
  waiting on a parent: the workers' ceiling (sum of their rates), after a warm-up chunk each.
* ``align``: the whole ``bowmap align`` command for comparison, and its rate after the first
  chunk is written (the start-up left out).

Command (GPU machine, the chr20 data of bench/end_to_end.py):
  python bench/pipeline.py --index bench/work/end_to_end/chr20/index/bowmap/index \\
      --reads bench/work/end_to_end/chr20/reads/reads_150.fq --processes 15
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import subprocess
import sys
import time


class InstantWorker:
    """Answers a chunk at once with ``sam_bytes`` bytes a read (picklable, for spawned workers)."""

    def __init__(self, sam_bytes: int):
        self.sam_bytes = sam_bytes

    def __call__(self, rank: int):
        from bowmap.align.reads import as_chunk

        from bowmap.align.workers import ChunkResult, Counts

        def answer(chunk):
            chunk = as_chunk(chunk)  # a byte range is read and parsed by the worker, as in align
            return ChunkResult(b"x" * (self.sam_bytes * chunk.count), Counts(reads=chunk.count, mapped=chunk.count))

        return answer


def parent_ceiling(reads: str, processes: int, sam_bytes: int, chunk_bases: int, ranges: bool) -> tuple[int, float, float]:
    from bowmap.align.runners import run_processes
    from bowmap.align.reads import input_chunks, read_chunks

    count = [0]
    with open(os.devnull, "wb") as sink:

        def write(result):
            sink.write(result.text)
            count[0] += result.counts.reads

        before = resource.getrusage(resource.RUSAGE_SELF)
        started = time.perf_counter()
        chunks = input_chunks(reads, chunk_bases, 1 << 16) if ranges else read_chunks(reads, chunk_bases, 1 << 16)
        run_processes(chunks, InstantWorker(sam_bytes), write, processes)
        seconds = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return count[0], seconds, cpu


def _worker_rate(arguments) -> tuple[int, float]:
    """In a fresh process: map ``chunks`` chunks of the reads (after one warm-up chunk)."""
    index, reads, chunks, chunk_bases, start_line = arguments
    import itertools

    from bowmap.align.options import AlignOptions
    from bowmap.align.reads import read_chunks
    from bowmap.align.extend.smith_waterman import Scoring
    from bowmap.align.workers import ProcessWorker

    options = AlignOptions(index=index, reads=reads)
    from bowmap.runtime.devices import list_devices, parse_device_spec

    device = parse_device_spec(None, list_devices())[0]
    stages = ProcessWorker(options, Scoring(), [device], 1)(0)
    held = list(itertools.islice(read_chunks(reads, chunk_bases), start_line, start_line + chunks + 1))

    def run(chunk):
        for workers in stages:
            chunk = workers[0](chunk)
        return chunk

    run(held[0])
    started = time.perf_counter()
    mapped = sum(run(chunk)[1] for chunk in held[1:])
    return mapped, time.perf_counter() - started


def workers_ceiling(index: str, reads: str, processes: int, chunks: int, chunk_bases: int) -> tuple[int, float]:
    context = multiprocessing.get_context("spawn")
    with context.Pool(processes) as pool:
        # Every process maps its own chunks, so none is favoured by a warm cache.
        results = pool.map(_worker_rate, [(index, reads, chunks, chunk_bases, rank * (chunks + 1)) for rank in range(processes)])
    reads_mapped = sum(count for count, _ in results)
    rate = sum(count / seconds for count, seconds in results)
    return reads_mapped, rate


def whole_command(index: str, reads: str, processes: int) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "bowmap", "align", index, reads, "-o", os.devnull, "-p", str(processes), "--no-progress"],
        capture_output=True, text=True, env={**os.environ, "BOWMAP_PROFILE": "/tmp"}, check=False,
    )
    if done.returncode:
        raise SystemExit(f"bowmap align failed:\n{done.stderr}")
    return time.perf_counter() - started, done.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", required=True)
    parser.add_argument("--reads", required=True, help="FASTQ (the parent and align rows read all of it)")
    parser.add_argument("--processes", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    parser.add_argument("--chunks", type=int, default=3, help="chunks each worker maps for its rate (default 3)")
    parser.add_argument("--chunk-bases", type=int, default=4 << 20)
    parser.add_argument("--sam-bytes", type=int, default=330, help="SAM bytes a read the instant workers send (default 330)")
    parser.add_argument("--skip", default="", help="comma-separated rows to leave out: parent, parent-parsing, workers, align")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    rows = []
    for ranges, name in ((True, "parent"), (False, "parent-parsing")):
        if name not in skip:
            count, seconds, cpu = parent_ceiling(args.reads, args.processes, args.sam_bytes, args.chunk_bases, ranges)
            what = "byte ranges out, workers parse" if ranges else "parent parses, chunks out"
            rows.append((f"{name} (instant workers)", f"{count / seconds:,.0f}", f"{cpu / count * 1e6:.2f} us CPU a read; {what}"))
    if "workers" not in skip:
        count, rate = workers_ceiling(args.index, args.reads, args.processes, args.chunks, args.chunk_bases)
        rows.append((f"workers x {args.processes} (no parent)", f"{rate:,.0f}", f"{count:,} reads, {rate / args.processes:,.0f} a worker"))
    if "align" not in skip:
        seconds, log = whole_command(args.index, args.reads, args.processes)
        first = [line for line in log.splitlines() if "first chunk written after" in line]
        total = [line for line in log.splitlines() if "reads," in line and "mapped" in line]
        reads = int(total[-1].split("]")[1].split()[0]) if total else 0
        note = ""
        if first:
            from bowmap.align.reads import as_chunk, input_chunks

            after = float(first[-1].split("after")[1].split()[0])
            later = reads - as_chunk(next(input_chunks(args.reads, args.chunk_bases, 1 << 16))).count
            note = f"{later / max(seconds - after, 1e-9):,.0f} reads/s after the first chunk ({after:.2f} s)"
        rows.append((f"bowmap align -p {args.processes}", f"{reads / seconds:,.0f}", note))
    print(f"{'pipeline part':32} {'reads/s':>12}  note")
    for name, rate, note in rows:
        print(f"{name:32} {rate:>12}  {note}")


if __name__ == "__main__":
    main()
