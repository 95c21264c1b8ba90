"""Paired-end speed and accuracy: ``bowmap align PREFIX R1 R2`` beside ``bwa mem`` and ``minimap2
-ax sr`` (and bowmap's own single-end rate) on the same simulated pairs, in one run.

Runs anywhere; on the GPU machine it needs no network: chr20 comes from Debian's vt-examples
.deb (``--vt-deb``, as bench/end_to_end.py takes it) and the pairs are simulated here with NumPy.

1. Reference: bench/end_to_end.py's ``prepare_reference`` (chr20 or synthetic_<N>mbp).
2. Pairs: ``--pairs`` fragments, length normal(``--fragment-mean``, ``--fragment-sd``) clipped to
   [2 x read length, mean + 6 sd], uniform over N-free stretches of one contig; each mate is
   end_to_end's ``simulate_batch`` (0.8% substitutions, 0.1% insertions and deletions of 1-3
   bases) from the fragment's first and last ``--read-length`` bases, the second mate reverse
   complemented; for half of the pairs (drawn) the mates swap, so R1 lies on either strand.
   Written as r1.fq and r2.fq (plain FASTQ, names pairN/1 and pairN/2, Phred 30), their first
   ``--subset`` pairs as r1_first.fq / r2_first.fq, and truth.tsv (mate, strand, 1-based leftmost
   position of the true alignment).
3. Indexes, built once and kept under ``--work``: bowmap, bwa, minimap2 (-x sr), SNAP, strobealign
   (``--create-index -r READ_LENGTH``), each peer where it is on PATH.
4. Runs, each the whole command, SAM to a file: bowmap paired, bowmap single-end on r1.fq (the
   same reads' per-read rate), ``bwa mem -t T``, ``minimap2 -ax sr -t T``, ``snap-aligner paired
   -t T``, ``strobealign --use-index -t T``, and with ``--bowmap-before DIR`` bowmap paired from
   that checkout (a main before a change, in the same call); each on the subset and
   on the full set. steady = (N_full - N_subset) / (t_full - t_subset) pairs/s.
5. Accuracy of the subset runs (primary records): mates right (strand, and unclipped start within
   5 bp of the truth), wrong at MAPQ >= 20, properly paired (FLAG 0x2).

    python bench/paired_end.py --vt-deb vt-examples_0.57721+ds-3_all.deb --pairs 2000000 --threads 16 --devices gpu
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import end_to_end  # noqa: E402  (bench/ is no package)

BenchError = end_to_end.BenchError
note = end_to_end.note


def simulate_pairs(reference, args, folder: Path) -> None:
    _, lengths, text = end_to_end.read_reference(reference.fasta)
    contig_starts = np.cumsum(lengths) - lengths
    contig_ends = contig_starts + lengths
    ambiguous = np.concatenate([[False], text == 4, [False]])
    edges = np.flatnonzero(ambiguous[1:] != ambiguous[:-1])
    n_starts, n_ends = edges[0::2], edges[1::2]
    length, longest = args.read_length, int(args.fragment_mean + 6 * args.fragment_sd)
    rng = np.random.default_rng([args.seed, length, 2])
    letters = np.frombuffer(b"ACGT", dtype=np.uint8)
    width = len(str(args.pairs - 1))
    files = [open(folder / name, "wb") for name in ("r1.fq.partial", "r2.fq.partial", "truth.tsv.partial")]
    files[2].write(b"read\tstrand\tposition_1based\tcontig\n")
    for first in range(0, args.pairs, end_to_end.BATCH):
        count = min(end_to_end.BATCH, args.pairs - first)
        starts, _ = end_to_end.draw_starts(rng, count, len(text), contig_starts, contig_ends, n_starts, n_ends, longest + end_to_end.WINDOW_PAD)
        fragment = np.clip(np.rint(rng.normal(args.fragment_mean, args.fragment_sd, size=count)), 2 * length, longest).astype(np.int64)
        left, ok_left = end_to_end.simulate_batch(rng, text, starts, length)
        right_start = starts + fragment - length
        right, ok_right = end_to_end.simulate_batch(rng, text, right_start, length)
        right = 3 - right[:, ::-1]  # the second mate reads the other strand
        usable = ok_left & ok_right  # rare misses: kept as they are, the truth says where they came from
        del usable
        swap = rng.random(count) < 0.5
        mates = [np.where(swap[:, None], right, left), np.where(swap[:, None], left, right)]
        reverse = [swap, ~swap]
        position = [np.where(swap, right_start, starts), np.where(swap, starts, right_start)]
        numbers = end_to_end.digit_columns(np.arange(first, first + count), width)
        for mate in (0, 1):
            name = np.concatenate([end_to_end.constant(count, b"pair"), numbers, end_to_end.constant(count, f"/{mate + 1}".encode())], axis=1)
            files[mate].write(end_to_end.joined_rows([
                (end_to_end.constant(count, b"@"), None), (name, None), (end_to_end.constant(count, b"\n"), None),
                (letters[mates[mate]], None), (end_to_end.constant(count, b"\n+\n"), None),
                (np.full((count, length), 33 + end_to_end.QUALITY, dtype=np.uint8), None), (end_to_end.constant(count, b"\n"), None),
            ]))  # fmt: skip
            contig = np.searchsorted(contig_starts, position[mate], side="right") - 1
            lines = [
                f"pair{n:0{width}d}/{mate + 1}\t{'-' if r else '+'}\t{p - contig_starts[c] + 1}\t{reference.info['contigs'][c][0]}\n"
                for n, r, p, c in zip(range(first, first + count), reverse[mate], position[mate], contig)
            ]  # the truth file only: not a hot path of the aligner
            files[2].write("".join(lines).encode())
    for handle in files:
        handle.close()
    for name in ("r1.fq", "r2.fq", "truth.tsv"):
        (folder / f"{name}.partial").replace(folder / name)
    record = 1 + 4 + width + 2 + 1 + length + 3 + length + 1
    for mate in (1, 2):
        with open(folder / f"r{mate}.fq", "rb") as source, open(folder / f"r{mate}_first.fq", "wb") as target:
            target.write(source.read(args.subset * record))


def prepare_pairs(reference, args) -> Path:
    folder = reference.folder / f"pairs_{args.read_length}"
    folder.mkdir(parents=True, exist_ok=True)
    params = {k: getattr(args, k) for k in ("pairs", "subset", "read_length", "fragment_mean", "fragment_sd", "seed")}
    params["reference"] = reference.info["sha256"]
    params_path = folder / "params.json"
    if end_to_end.read_json(params_path) != params or not (folder / "truth.tsv").exists():
        started = time.perf_counter()
        note(f"{reference.name}: simulating {args.pairs:,} pairs of {args.read_length} bp")
        simulate_pairs(reference, args, folder)
        end_to_end.write_json(params_path, params)
        note(f"{reference.name}: pairs written [{time.perf_counter() - started:.1f} s]")
    return folder


def build_indexes(reference, args, bowmap: list[str]) -> dict[str, Path]:
    folder = reference.folder / "indexes"
    folder.mkdir(exist_ok=True)
    prefixes = {"bowmap": folder / "bowmap" / "index", "bwa": folder / "bwa" / "index", "minimap2": folder / "minimap2" / "ref.mmi",
                "snap-aligner": folder / "snap" / "index", "strobealign": Path(f"{reference.fasta}.r{args.read_length}.sti")}
    commands = {
        "bowmap": [*bowmap, "index", str(reference.fasta), str(prefixes["bowmap"]), "--no-progress"],
        "bwa": ["bwa", "index", "-p", str(prefixes["bwa"]), str(reference.fasta)],
        "minimap2": ["minimap2", "-x", "sr", "-t", str(args.threads), "-d", str(prefixes["minimap2"]), str(reference.fasta)],
        "snap-aligner": ["snap-aligner", "index", str(reference.fasta), str(prefixes["snap-aligner"]), f"-t{args.threads}"],
        "strobealign": ["strobealign", "--create-index", "-t", str(args.threads), "-r", str(args.read_length), str(reference.fasta)],
    }
    done = {"bowmap": ".bmi", "bwa": ".bwt", "minimap2": "", "snap-aligner": "/Genome", "strobealign": ""}
    for tool, prefix in prefixes.items():
        if (tool != "bowmap" and shutil.which(tool) is None) or (args.only and tool.split("-")[0] not in args.only.split(",")):
            continue
        marker = Path(str(prefix) + done[tool])
        if marker.exists():
            continue
        prefix.parent.mkdir(parents=True, exist_ok=True)
        seconds, rss = end_to_end.run_measured(commands[tool], prefix.parent / "build.log")
        note(f"{reference.name}: {tool} index [{seconds:.1f} s, {rss / 1024:.0f} MiB]")
    return prefixes


def runs(args, bowmap, prefixes, folder: Path) -> list[tuple[str, list[str], int]]:
    """(label, command with {r1} {r2} {out}, mates per pair mapped)."""
    threads, devices = str(args.threads), ["--devices", args.devices] if args.devices else []
    listed = [
        ("bowmap paired", [*bowmap, "align", str(prefixes["bowmap"]), "{r1}", "{r2}", "-o", "{out}", "--no-progress", *devices], 2),
        ("bowmap single (R1)", [*bowmap, "align", str(prefixes["bowmap"]), "{r1}", "-o", "{out}", "--no-progress", *devices], 1),
    ]
    if shutil.which("bwa"):
        listed.append(("bwa mem", ["bwa", "mem", "-t", threads, str(prefixes["bwa"]), "{r1}", "{r2}"], 2))
    if shutil.which("minimap2"):
        listed.append(("minimap2 -ax sr", ["minimap2", "-ax", "sr", "-t", threads, str(prefixes["minimap2"]), "{r1}", "{r2}"], 2))
    if shutil.which("snap-aligner"):
        listed.append(("snap paired", ["snap-aligner", "paired", str(prefixes["snap-aligner"]), "{r1}", "{r2}", "-o", "{out}", "-t", threads], 2))
    if shutil.which("strobealign"):
        fasta = str(prefixes["strobealign"]).rsplit(".", 2)[0]
        listed.append(("strobealign", ["strobealign", "--use-index", "-t", threads, fasta, "{r1}", "{r2}"], 2))
    if args.bowmap_before:  # the same bowmap command from another checkout (a main to compare with), same call
        # -P: not the current folder first on sys.path (it may be this checkout)
        before = ["env", f"PYTHONPATH={args.bowmap_before}:{os.environ.get('PYTHONPATH', '')}", sys.executable, "-P", "-m", "bowmap"]
        listed.insert(1, ("bowmap-before paired", [*before, "align", str(prefixes["bowmap"]), "{r1}", "{r2}", "-o", "{out}", "--no-progress", *devices], 2))
    return listed


def score(sam: Path, truth: dict) -> dict:
    import pysam

    right = wrong_confident = proper = records = 0
    with pysam.AlignmentFile(str(sam), "r", check_sq=False) as alignments:
        for read in alignments:
            if read.is_secondary or read.is_supplementary:
                continue
            records += 1
            proper += read.is_proper_pair
            if read.is_unmapped:
                continue
            name = f"{read.query_name}/{2 if read.is_read2 else 1}"
            reverse, start, contig = truth[name]
            clip = read.cigartuples[0][1] if read.cigartuples[0][0] in (4, 5) else 0
            correct = read.is_reverse == reverse and abs(read.reference_start - clip - start) <= 5 and contig in (None, read.reference_name)
            right += correct
            wrong_confident += (not correct) and read.mapping_quality >= 20
    return {"records": records, "right": right, "wrong_q20": wrong_confident, "proper": proper}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--references", default="chr20")
    parser.add_argument("--vt-deb", type=Path)
    parser.add_argument("--chr20", type=Path)
    parser.add_argument("--pairs", type=int, default=2_000_000)
    parser.add_argument("--subset", type=int, default=200_000)
    parser.add_argument("--read-length", type=int, default=150)
    parser.add_argument("--fragment-mean", type=float, default=400.0)
    parser.add_argument("--fragment-sd", type=float, default=40.0)
    parser.add_argument("--seed", type=int, default=20261124)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--devices")
    parser.add_argument("--only", help="comma-separated run labels' first words to run (bowmap,bwa,minimap2,snap,strobealign,bowmap-before)")
    parser.add_argument("--bowmap-before", metavar="DIR", help="also run bowmap from this checkout (e.g. `git archive` of the main before a change)")
    parser.add_argument("--work", type=Path, default=HERE / "work" / "end_to_end")
    parser.add_argument("--prepare-only", action="store_true", help="reference, pairs and indexes, no runs")
    args = parser.parse_args()
    args.subset = min(args.subset, args.pairs)
    bowmap = [sys.executable, "-m", "bowmap"]
    rows = []
    try:
        for name in args.references.split(","):
            reference = end_to_end.prepare_reference(name, args, args.work)
            folder = prepare_pairs(reference, args)
            prefixes = build_indexes(reference, args, bowmap)
            if args.prepare_only:
                continue
            truth = end_to_end.align_accuracy.read_truth(folder / "truth.tsv")
            for label, command, mates in runs(args, bowmap, prefixes, folder):
                if args.only and label.split()[0] not in args.only.split(","):
                    continue
                times = {}
                if label.startswith("bowmap"):  # untimed: kernels built, index in the page cache, as for the peers' indexes
                    filled = [word.format(r1=folder / "r1_first.fq", r2=folder / "r2_first.fq", out=folder / "warm-up.sam") for word in command]
                    end_to_end.run_measured(filled, folder / "warm-up.log", None if "{out}" in " ".join(command) else folder / "warm-up.sam")
                for part, r1, r2, pairs in (("subset", "r1_first.fq", "r2_first.fq", args.subset), ("full", "r1.fq", "r2.fq", args.pairs)):
                    out = folder / f"{label.replace(' ', '_').replace('(', '').replace(')', '')}.{part}.sam"
                    filled = [word.format(r1=folder / r1, r2=folder / r2, out=out) for word in command]
                    stdout = out if "{out}" not in " ".join(command) else None
                    seconds, rss = end_to_end.run_measured(filled, out.with_suffix(".log"), stdout)
                    times[part] = (seconds, rss, pairs)
                    if part == "subset":
                        accuracy = score(out, truth)
                    out.unlink() if part == "full" else None
                (t_subset, _, n_subset), (t_full, rss, n_full) = times["subset"], times["full"]
                steady = (n_full - n_subset) / max(t_full - t_subset, 1e-9)
                row = {"reference": name, "run": label, "pairs": n_full, "whole_s": t_full, "whole_pairs_s": n_full / t_full,
                       "steady_pairs_s": steady, "steady_reads_s": steady * mates, "peak_rss_mib": rss / 1024, **accuracy}
                rows.append(row)
                note(json.dumps(row))
    except BenchError as error:
        print(f"paired_end: {error}", file=sys.stderr)
        return 1
    if rows:
        print()
        print(f"{'reference':10} {'run':20} {'whole s':>8} {'steady pairs/s':>15} {'steady reads/s':>15} {'right %':>8} {'wrong q20':>9} {'proper %':>8} {'RSS MiB':>8}")
        for row in rows:
            mates = row["records"] or 1
            print(f"{row['reference']:10} {row['run']:20} {row['whole_s']:8.1f} {row['steady_pairs_s']:15,.0f} {row['steady_reads_s']:15,.0f} "
                  f"{100 * row['right'] / mates:8.2f} {row['wrong_q20']:9d} {100 * row['proper'] / mates:8.2f} {row['peak_rss_mib']:8.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
