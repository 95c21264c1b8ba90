"""`bowmap find` patterns/s on DNA, protein and text, beside a CPU FM search (the NumPy twin of
find.cl, bowmap.modules.find.reference, one core) and Python's substring search stepping one
position at a time (the tests' ground truth), in one run.

Commands (from the repository root):
  PoCL (CPU):  python bench/find.py --devices cpu
  GPU:         python bench/find.py --devices gpu --size 50000000 --patterns 1000000
  rank structures alone (GPU, about a minute):
               python bench/find.py --devices gpu --size 10000000 --patterns 1000000 --kinds protein,text,binary --rank-only --repeat 2
Inputs are made here, seeded: DNA a random genome with repeats (bench/work/find/dna.fa), protein
sequences of 3,000 residues drawn with UniProt's amino-acid frequencies (a simdb-like database,
protein.fa), text English-like prose from a fixed word list with UTF-8 words (text.txt), binary
uniform random bytes 1..255 (binary.bin, a text index of sigma 255; --kinds binary), each --size
symbols, indexed once (--alphabet dna|protein|text) into bench/work/find/.
Patterns: --patterns a kind, 60% substrings of the reference, 40% random strings, lengths drawn
from --lengths (default 12..32 for DNA, 6..16 for protein and text). "find" is the device's
whole `find()` call (search, locate, filtering, ordering: the index already loaded, kernels
already built by a warm-up call), best of --repeat. "numpy FM" runs the twin's search and
locate of every occurrence on --cpu-patterns patterns; "python" runs the substring search on
--python-patterns patterns; their rates are patterns/s over those subsets. Counts must agree
(device, NumPy twin, Python) on the subsets or the script stops.

Rank structures (protein and text): the wavelet matrix the index stores, beside per-symbol
sampled counts every L symbols (--rank-steps, bowmap.modules.find.sampled, built here in memory
from each block's wavelet matrix), on the same patterns: the whole find() (results must be equal
to the wavelet matrix's or the script stops), the search kernel alone over every pattern, and
the locate kernel alone over the block's first --patterns rows (LF steps to a sample),
best of --repeat, with each structure's device bytes a symbol (rank lines, then with marks and
samples). --kinds protein,text --rank-only skips the NumPy and Python columns.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = os.path.join(ROOT, "bench", "work", "find")
# UniProtKB/Swiss-Prot amino-acid composition (release 2024_01, percent).
UNIPROT = {"A": 8.25, "R": 5.53, "Q": 3.93, "E": 6.72, "G": 7.07, "H": 2.27, "I": 5.91, "L": 9.65, "K": 5.80, "M": 2.41,
           "F": 3.86, "P": 4.74, "S": 6.65, "T": 5.36, "W": 1.10, "Y": 2.92, "V": 6.86, "N": 4.06, "D": 5.46, "C": 1.38}
WORDS = ("the of and to in is was that for it with as his on be at by had are but from or have an they which one you "
         "were all we when there can been has more if no out do so what up said about into than them only could new "
         "café naïve über résumé façade jalapeño smörgåsbord 東京 Ελλάδα").split()


def make_inputs(size: int) -> dict[str, str]:
    os.makedirs(WORK, exist_ok=True)
    rng = np.random.default_rng(31)
    kinds = (("dna", "fa"), ("protein", "fa"), ("text", "txt"), ("binary", "bin"))
    paths = {kind: os.path.join(WORK, f"{kind}_{size}.{ext}") for kind, ext in kinds}
    if not os.path.exists(paths["dna"]):
        genome = rng.choice(np.frombuffer(b"ACGT", dtype=np.uint8), size=size)
        for _ in range(size // 5000):  # copied segments: repeats for the search to find
            length = int(rng.integers(50, 500))
            source, target = rng.integers(0, size - length, size=2)
            genome[target : target + length] = genome[source : source + length]
        with open(paths["dna"], "wb") as handle:
            handle.write(b">chr1\n" + b"\n".join(genome[i : i + 80].tobytes() for i in range(0, size, 80)) + b"\n")
    if not os.path.exists(paths["protein"]):
        letters = np.frombuffer("".join(UNIPROT).encode(), dtype=np.uint8)
        weights = np.array(list(UNIPROT.values()))
        residues = rng.choice(letters, size=size, p=weights / weights.sum())
        with open(paths["protein"], "wb") as handle:
            for number, first in enumerate(range(0, size, 3000)):
                handle.write(f">seq{number}\n".encode() + residues[first : first + 3000].tobytes() + b"\n")
    if not os.path.exists(paths["text"]):
        words = np.array(WORDS, dtype=object)[rng.integers(0, len(WORDS), size=size // 4)]
        data = " ".join(words.tolist()).encode()[:size]
        with open(paths["text"], "wb") as handle:
            handle.write(data.decode("utf-8", errors="ignore").encode())
    if not os.path.exists(paths["binary"]):  # its own seed: the other inputs stay as they were
        data = np.random.default_rng(37).integers(1, 256, size=size, dtype=np.uint8)
        with open(paths["binary"], "wb") as handle:
            handle.write(data.tobytes())
    return paths


def make_patterns(index, count: int, lengths: tuple[int, int], rng) -> list[bytes]:
    from bowmap.index.format import UNPACK_2BIT

    total = index.total_length
    sizes = rng.integers(lengths[0], lengths[1] + 1, size=count)
    starts = rng.integers(0, total - lengths[1], size=count)
    if index.alphabet == "dna":
        text = np.frombuffer(b"ACGT", dtype=np.uint8)[UNPACK_2BIT[np.asarray(index.packed)].reshape(-1)[:total]]
        alphabet = np.frombuffer(b"ACGT", dtype=np.uint8)
    else:
        text = np.asarray(index.packed)
        alphabet = index.symbols[~np.isin(index.symbols, (10, 13))]
    patterns = []
    random = rng.random(count) < 0.4
    for size, start, is_random in zip(sizes.tolist(), starts.tolist(), random.tolist()):
        piece = rng.choice(alphabet, size=size) if is_random else text[start : start + size]
        patterns.append(piece.tobytes().replace(b"\n", b" ").replace(b"\r", b" "))
    return patterns


def contig_texts(index, path: str) -> list[bytes]:
    if index.alphabet == "text":
        return [open(path, "rb").read()]
    from bowmap.runtime.fasta import read_fasta

    return [record.sequence.upper() for record in read_fasta(path)]


def compare_ranks(kind: str, index, devices, patterns, wavelet_result, wavelet_seconds: float, args) -> list[tuple]:
    """Rows of the rank-structure table for one index: the wavelet matrix, then each sampled step."""
    from bowmap.modules.find.kernels import FindBlock, FindSearch, block_device_bytes
    from bowmap.modules.find.sampled import build_sampled
    from bowmap.modules.find.search import find

    def best_of(call, warm: bool = False) -> float:
        if not warm:
            call()  # warm-up: kernels built, buffers sized
        best = float("inf")
        for _ in range(args.repeat):
            started = time.perf_counter()
            call()
            best = min(best, time.perf_counter() - started)
        return best

    n = sum(block.length for block in index.blocks)
    block = index.blocks[0]
    located = min(len(patterns), block.length)  # rows 1..located: after one step each chain wanders the BWT
    out = []
    for step in [None] + [int(s) for s in args.rank_steps.split(",")]:
        sampled = None if step is None else [build_sampled(b, step) for b in index.blocks]
        if step is not None:
            result = find(index, devices, patterns, args.max_hits, sampled=sampled)
            if not all(np.array_equal(getattr(result, f), getattr(wavelet_result, f)) for f in ("counts", "first", "positions")):
                raise SystemExit(f"{index.alphabet}: find through sampled counts (step {step}) differs from the wavelet matrix")
            seconds = best_of(lambda: find(index, devices, patterns, args.max_hits, sampled=sampled), warm=True)
        else:
            seconds = wavelet_seconds
        search = FindSearch(devices[0], wavelet=True, sampled_step=step)
        device_block = FindBlock(devices[0], block, None if sampled is None else sampled[0])
        search_seconds = best_of(lambda: search.search(device_block, patterns.codes, patterns.offsets, patterns.lengths))
        locate_seconds = best_of(lambda: search.locate(device_block, [1], [located]))
        device_block.release()
        rank_bytes = sum(b.occ.nbytes for b in index.blocks) if sampled is None else sum(s.lines.nbytes for s in sampled)
        device_bytes = sum(block_device_bytes(b, None if sampled is None else sampled[k]) for k, b in enumerate(index.blocks))
        out.append((kind, len(index.symbols), "wavelet matrix" if step is None else f"sampled {step}",
                    rank_bytes / n, device_bytes / n, len(patterns) / seconds, len(patterns) / search_seconds,
                    located / locate_seconds, wavelet_seconds / seconds))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--devices", default=None)
    parser.add_argument("--size", type=int, default=2_000_000, help="symbols a reference (default 2 M)")
    parser.add_argument("--patterns", type=int, default=100_000)
    parser.add_argument("--cpu-patterns", type=int, default=2_000)
    parser.add_argument("--python-patterns", type=int, default=200)
    parser.add_argument("--max-hits", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--kinds", default="dna,protein,text")
    parser.add_argument("--rank-steps", default="64,128,256", help="sampled-count steps to measure ('' for none)")
    parser.add_argument("--rank-only", action="store_true", help="only the rank structures' table")
    args = parser.parse_args()
    sys.path.insert(0, ROOT)
    from bowmap.index_builder.build import IndexOptions, build_index

    from bowmap.index.load import load_index
    from bowmap.modules.find import reference
    from bowmap.modules.find.search import Patterns, find, symbol_table
    from bowmap.runtime.devices import open_devices

    devices = open_devices(args.devices)
    paths = make_inputs(args.size)
    rows, rank_rows = [], []
    for kind in args.kinds.split(","):
        prefix = os.path.join(WORK, f"{kind}_{args.size}")
        if not os.path.exists(prefix + ".bmi"):
            alphabet = "text" if kind == "binary" else kind
            build_index(IndexOptions(reference=paths[kind], prefix=prefix, alphabet=alphabet, max_read_length=64))
        index = load_index(prefix)
        rng = np.random.default_rng(7)
        lengths = (12, 32) if kind == "dna" else (6, 16)
        raw = make_patterns(index, args.patterns, lengths, rng)
        sizes = np.array([len(p) for p in raw], dtype=np.int64)
        patterns = Patterns([str(i + 1) for i in range(len(raw))], np.arange(len(raw)), symbol_table(index)[np.frombuffer(b"".join(raw), dtype=np.uint8)],
                            np.cumsum(sizes) - sizes, sizes)
        find(index, devices, Patterns(patterns.ids[:10], patterns.lines[:10], patterns.codes, patterns.offsets[:10], patterns.lengths[:10]), args.max_hits)
        best = float("inf")
        for _ in range(args.repeat):
            started = time.perf_counter()
            result = find(index, devices, patterns, args.max_hits)
            best = min(best, time.perf_counter() - started)
        if kind != "dna" and args.rank_steps:
            rank_rows += compare_ranks(kind, index, devices, patterns, result, best, args)
        if args.rank_only:
            continue
        # CPU FM search: the NumPy twin on one block (these references fit one block).
        block = index.blocks[0]
        subset = min(args.cpu_patterns, len(raw))
        started = time.perf_counter()
        lo, hi = reference.search(block, patterns.codes, patterns.offsets[:subset], patterns.lengths[:subset])
        rows_ = np.concatenate([np.arange(a, b) for a, b in zip(lo.tolist(), hi.tolist())] + [np.zeros(0, dtype=np.int64)])
        reference.locate(block, rows_)
        numpy_seconds = time.perf_counter() - started
        texts = contig_texts(index, paths[kind])
        few = min(args.python_patterns, len(raw))
        started = time.perf_counter()
        python_counts = [len(reference.python_find(texts, p if index.alphabet == "text" else p.upper())) for p in raw[:few]]
        python_seconds = time.perf_counter() - started
        if len(index.blocks) == 1 and len(index.contig_names) == 1:
            numpy_counts = (hi.astype(np.int64) - lo)
            if not np.array_equal(numpy_counts, result.counts[:subset]):
                raise SystemExit(f"{kind}: device counts differ from the NumPy twin's")
        if python_counts != result.counts[:few].tolist():
            raise SystemExit(f"{kind}: device counts differ from Python's substring search")
        rows.append((kind, index.total_length, len(index.symbols) or 4, len(index.blocks), len(raw), int(result.counts.sum()),
                     len(raw) / best, subset / numpy_seconds, few / python_seconds))
    if rank_rows:
        print(f"\nrank structures on {devices[0].info.name}, best of {args.repeat}; find results equal the wavelet matrix's")
        print(f"{'alphabet':9} {'sigma':>5} {'structure':14} {'rank B/sym':>10} {'device B/sym':>12} {'find pat/s':>12} "
              f"{'search pat/s':>13} {'locate rows/s':>14} {'find vs wm':>10}")
        for kind, sigma, name, rank_bytes, device_bytes, find_rate, search_rate, locate_rate, ratio in rank_rows:
            print(f"{kind:9} {sigma:>5} {name:14} {rank_bytes:>10.2f} {device_bytes:>12.2f} {find_rate:>12,.0f} "
                  f"{search_rate:>13,.0f} {locate_rate:>14,.0f} {ratio:>9.2f}x")
    if not rows:
        return 0
    print(f"\nbowmap find on {devices[0].info.name}, best of {args.repeat}; counts equal NumPy twin and Python")
    print(f"{'alphabet':9} {'symbols':>11} {'sigma':>5} {'blocks':>6} {'patterns':>9} {'occurrences':>12} "
          f"{'find pat/s':>12} {'numpy FM pat/s':>15} {'python pat/s':>13} {'vs numpy':>9} {'vs python':>10}")
    for kind, total, sigma, blocks, count, hits, device_rate, numpy_rate, python_rate in rows:
        print(f"{kind:9} {total:>11,} {sigma:>5} {blocks:>6} {count:>9,} {hits:>12,} {device_rate:>12,.0f} {numpy_rate:>15,.0f} "
              f"{python_rate:>13,.1f} {device_rate / numpy_rate:>8.1f}x {device_rate / python_rate:>9.0f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
