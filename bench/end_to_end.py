"""End to end: ``bowmap align`` beside bowtie2, bwa mem and minimap2 -ax sr, speed and accuracy in one run.

Everything goes under ``--work`` (default bench/work/end_to_end/), one folder a reference, and is
reused by a later run while its parameters match: params.json beside each reference,
reads_{L}.params.json beside each read set, build.json beside each index, a .json beside each
alignment's SAM (keyed on the command, the reads, the index, the tool's version or bowmap's source
files, and the machine). So a run cut off by a time limit goes on where it stopped when called
again on the same machine; ``--rerun`` times every alignment again.

1. References (``--references``, comma-separated), written uncompressed as <work>/<name>/reference.fa:
   * ``chr20``: human chromosome 20 of GRCh37 (63,025,520 bp, one contig "20", with N runs): the
     file usr/share/doc/vt/examples/ref/20.fa.gz of Debian's vt-examples package. ``--vt-deb``
     names the .deb, unpacked with ``dpkg -x`` into the work folder; or ``--chr20`` names a FASTA
     (gzipped or not). Once prepared, later runs need neither.
   * ``synthetic_<N>mbp`` (e.g. synthetic_1000mbp): N Mbp made by bench/fm_search.py's
     ``make_genome`` with its fixed seed and written by its ``write_fasta``; that script's
     docstring gives the layers (i.i.d. bases with GC 41%, then interspersed repeat families,
     segmental duplications, tandem repeats and low-complexity runs; contigs chr1..chr4; no N).
2. Reads, simulated here with NumPy (a Generator seeded by ``--seed`` and the read length; batches
   of 50,000 reads, no loop over reads): ``--reads`` reads of each of ``--read-lengths``. A read's
   fragment starts uniformly among the positions whose window of L + 32 bases lies inside one
   contig and holds no N (others are drawn again). Walking the window from its start, each
   reference base is substituted with probability 0.8%, starts a deletion of 1-3 bases with 0.1%,
   and is preceded by an insertion of 1-3 random bases with 0.1% (none at the first base, so the
   fragment's first base is the true leftmost position); the first L bases emitted are the read,
   reverse-complemented for half of the reads (chosen at random). Qualities are all Phred 30.
   Written as reads_{L}.fq (plain FASTQ, so no tool spends its time in zlib), truth_{L}.tsv in
   bench/align_accuracy.py's format (read, strand, 1-based leftmost reference position of the
   true alignment, contig) and reads_{L}_first{S}.fq, the first ``--subset`` S reads.
3. Indexes, each built once (wall time and peak memory shown) and kept:
   ``python -m bowmap index REF PREFIX --no-progress`` (plus ``--bowmap-index-args``),
   ``bwa index -p PREFIX REF``, ``bowtie2-build --threads T REF PREFIX``,
   ``minimap2 -x sr -d ref.mmi -t T REF``. With ``--skip-peer-index-above MBP``, bwa and bowtie2
   (whose builds are slow: ~20 minutes for 1 Gbp with bwa) build no index for a larger reference
   and get a row saying so; an index already in the work folder is still used.
4. Align runs, each the whole command (start-up and index loading included), SAM to a file in the
   work folder, unaligned reads kept, T = ``--threads``:
   ``python -m bowmap align PREFIX READS -o OUT --no-progress`` plus ``--bowmap-args`` and, for
   each ``--bowmap-variants`` entry (``label=ARGS;label=ARGS``), its own arguments (a row each);
   ``bowtie2 -p T -x IDX -U READS -S OUT`` (end-to-end, its default);
   ``bwa mem -t T IDX READS > OUT``; ``minimap2 -ax sr -t T ref.mmi READS > OUT``.
   Each runs on the subset, then on the full set.
5. Measured, per tool and read set:
   * whole s: the full set's wall time; reads/s and Gbp/h (read bases an hour) from it;
   * steady: (N_full - N_subset) / (t_full - t_subset) reads/s and its Gbp/h: the rate once
     running, start-up and index loading cancelled out;
   * peak RSS: the largest sum over samples, every 0.2 s, of VmRSS (/proc/PID/status) of the
     command and all its descendants (bowmap runs worker processes; a page shared by several
     processes counts once for each), or the largest VmHWM (a process's own peak) any of them
     showed, if larger (a run shorter than a sample period). Not ru_maxrss: a child made by
     posix_spawn or vfork shares this script's memory until exec, and Linux counts it there;
   * accuracy of the full run, by bench/align_accuracy.py's ``read_truth`` and ``score_sam``:
     mapped %, correct % (primary line on the true strand and contig, unclipped start within 5 bp
     of the truth), wrong at MAPQ >= 20 (count and per mille of all reads);
   * x peer: bowmap's steady rate over each peer's (above 1: bowmap is faster);
   * ``--repeat-bowmap 10x``: bowmap (first variant) also maps the 150-bp set (else the first
     length) copied 10 times with renamed reads; peak RSS at N and 10N side by side (the goal:
     flat memory, within 10%). Mind the time limit of one call: 10N reads take 10 times as long.
   The machine (CPU, cores, GPUs from ``nvidia-smi -L``) and the tools' versions come first, the
   tables last; ``--json PATH`` saves them for machines.

Commands:
  here (PoCL):  python bench/end_to_end.py --references synthetic_4mbp --reads 4000 --subset 1000 \\
                    --threads 2 --bowmap-args "--devices cpu"
  GPU machine (the README's table; DEB = Debian's vt-examples_0.57721+ds-3_all.deb):
                python bench/end_to_end.py --references chr20 --vt-deb DEB --reads 2000000 \\
                    --subset 100000 --threads 16 --repeat-bowmap 10x
                python bench/end_to_end.py --references synthetic_1000mbp --peers minimap2 \\
                    --skip-peer-index-above 500 --reads 2000000 --subset 100000 --threads 16
                python bench/end_to_end.py --references chr20 --vt-deb DEB --reads 500000 \\
                    --subset 50000 --read-lengths 100,250 --threads 16
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # bench/ is no package: its shared modules are imported from here
# The harness and the simulation, under their old names here too: human_scale and paired_end use them as end_to_end.X.
from harness import (  # noqa: E402, F401
    STARTED, BenchError, align_accuracy, bowmap_index_format, bowmap_sources_sha, describe_machine, fm_search, fmt,
    index_build, load_bench, note, process_tree_memory_kib, read_json, run_measured, tool_versions, write_json,
)
from simulated_reads import (  # noqa: E402, F401
    BATCH, CODES, DELETION, INSERTION, MAX_INDEL, QUALITY, SIMULATOR_VERSION, SUBSTITUTION, SYNTHETIC, VT_FILE,
    WINDOW_PAD, Reference, ReadSet, chr20_file, chr20_source, constant, digit_columns, draw_starts, joined_rows,
    prepare_reads, prepare_reference, read_reference, reference_info, repeated_reads, simulate_batch, simulate_reads,
    sparse_hits,
)

DEFAULT_WORK = HERE / "work" / "end_to_end"
PEERS = ("bowtie2", "bwa", "minimap2")
SLOW_INDEX_PEERS = ("bowtie2", "bwa")
RSS_FLAT = 0.10  # --repeat-bowmap: peak RSS at 10N within 10% of N



@dataclass
class Tool:
    name: str  # bowmap, bowtie2, bwa, minimap2: the index's folder
    label: str  # a table row
    build: list[str]  # placeholders {ref} {prefix}
    align: list[str]  # placeholders {prefix} {reads} {out}; without {out} the SAM is on stdout
    prefix_name: str = "index"
    identity: str = ""  # version, or bowmap's sources: part of every cached run's key

    @property
    def slug(self) -> str:
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", self.label)


def make_tools(args, bowmap: list[str], versions: dict, sources_sha: str) -> list[Tool]:
    threads = str(args.threads)
    bowmap_base = [
        *bowmap,
        "align",
        "{prefix}",
        "{reads}",
        "-o",
        "{out}",
        "--no-progress",
        *shlex.split(args.bowmap_args),
    ]
    bowmap_build = [*bowmap, "index", "{ref}", "{prefix}", "--no-progress", *shlex.split(args.bowmap_index_args)]
    tools = [
        Tool("bowmap", "bowmap" if label is None else f"bowmap {label}", bowmap_build, [*bowmap_base, *extra],
             identity=f"{versions['bowmap']} {sources_sha}")
        for label, extra in args.variants
    ]  # fmt: skip
    peers = {
        "bowtie2": Tool("bowtie2", f"bowtie2 -p {threads}", ["bowtie2-build", "--threads", threads, "{ref}", "{prefix}"],
                        ["bowtie2", "-p", threads, "-x", "{prefix}", "-U", "{reads}", "-S", "{out}"]),
        "bwa": Tool("bwa", f"bwa mem -t {threads}", ["bwa", "index", "-p", "{prefix}", "{ref}"],
                    ["bwa", "mem", "-t", threads, "{prefix}", "{reads}"]),
        "minimap2": Tool("minimap2", f"minimap2 -ax sr -t {threads}", ["minimap2", "-x", "sr", "-d", "{prefix}", "-t", threads, "{ref}"],
                         ["minimap2", "-ax", "sr", "-t", threads, "{prefix}", "{reads}"], prefix_name="ref.mmi"),
    }  # fmt: skip
    for name in args.peers:
        peers[name].identity = f"{name} {versions[name]}"
        tools.append(peers[name])
    return tools


@dataclass
class Index:
    prefix: Path | None  # None: no index (missing tool, or build skipped)
    key: dict
    row: dict  # the index-build table's row


def prepare_index(tool: Tool, reference: Reference, args) -> Index:
    folder = reference.folder / "index" / tool.name
    prefix = folder / tool.prefix_name
    row = {
        "reference": reference.name,
        "tool": tool.name,
        "seconds": None,
        "peak_rss_kib": None,
        "bytes": None,
        "note": "",
    }
    if tool.name == "bowmap":
        key = {
            "reference_sha256": reference.info["sha256"],
            "args": args.bowmap_index_args,
            "format": bowmap_index_format(),
        }
    else:
        key = {"reference_sha256": reference.info["sha256"], "tool": tool.identity}
    if shutil.which(tool.build[0]) is None or shutil.which(tool.align[0]) is None:
        row["note"] = "not installed"
        return Index(None, key, row)
    stamp = read_json(folder / "build.json")
    if stamp and stamp.get("key") == key:
        row.update({name: stamp[name] for name in ("seconds", "peak_rss_kib", "bytes", "threads")})
        row["note"] = "built earlier"
        return Index(prefix, key, row)
    if tool.name in SLOW_INDEX_PEERS and 0 < args.skip_peer_index_above < reference.mbp:
        row["note"] = f"skipped: {reference.mbp:,.0f} Mbp > --skip-peer-index-above {args.skip_peer_index_above:g}"
        return Index(None, key, row)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    note(f"{reference.name}: building the {tool.name} index")
    command = [part.format(ref=reference.fasta, prefix=prefix) for part in tool.build]
    seconds, peak = run_measured(command, folder / "build.log")
    size = sum(entry.stat().st_size for entry in os.scandir(folder) if entry.is_file() and entry.name != "build.log")
    threads = None if tool.name == "bowmap" else args.threads
    stamp = {
        "key": key,
        "seconds": seconds,
        "peak_rss_kib": peak,
        "bytes": size,
        "threads": threads,
        "command": command,
    }
    write_json(folder / "build.json", stamp)
    row.update({"seconds": seconds, "peak_rss_kib": peak, "bytes": size, "threads": stamp["threads"]})
    note(f"{reference.name}: {tool.name} index built [{seconds:.1f} s]")
    return Index(prefix, key, row)


def align_run(
    tool: Tool, index: Index, read_set: ReadSet, kind: str, reads: Path, count: int, machine: dict, args
) -> dict:
    """One measured alignment (or its cached result): seconds, peak RSS, and the score of a full run."""
    folder = read_set.reference.folder / "runs"
    folder.mkdir(exist_ok=True)
    out = folder / f"{tool.slug}_{read_set.length}_{kind}.sam"
    stamp_path = out.with_suffix(".json")
    command = [part.format(prefix=index.prefix, reads=reads, out=out) for part in tool.align]
    key = {"command": command, "reads": read_set.params, "index": index.key, "tool": tool.identity, "machine": machine}
    stamp = read_json(stamp_path)
    if not args.rerun and stamp and stamp.get("key") == key:
        return stamp["result"]
    stamp_path.unlink(missing_ok=True)
    note(f"{read_set.reference.name}: {tool.label} on {count:,} reads of {read_set.length} bp ({kind})")
    log = out.with_suffix(".log")
    seconds, peak = run_measured(command, log, None if "{out}" in tool.align else out)
    result = {"reads": count, "seconds": seconds, "peak_rss_kib": peak, "devices": None, "score": None}
    if tool.name == "bowmap":
        for line in log.read_text(errors="replace").splitlines():
            if "] devices: " in line:
                result["devices"] = re.sub(r"\s*\[[0-9.]+ s\]$", "", line.split("] devices: ", 1)[1])
    if kind == "full":
        score = align_accuracy.score_sam(out, read_set.truth_table())
        result["score"] = {
            "reads": score.reads,
            "mapped": score.mapped,
            "correct": score.correct,
            "wrong_confident": score.wrong_confident,
        }
    else:
        out.unlink(missing_ok=True)  # only the full run is scored
    note(f"{read_set.reference.name}: {tool.label} {kind}: {seconds:.2f} s, peak RSS {peak / 2**20:.2f} GiB")
    write_json(stamp_path, {"key": key, "result": result})
    return result


# ---------------------------------------------------------------- tables



def summarise(full: dict, subset: dict, length: int) -> dict:
    """The row of one tool on one read set: rates, steady state, memory, accuracy."""
    row = {
        "reads": full["reads"],
        "subset_reads": subset["reads"],
        "seconds": full["seconds"],
        "subset_seconds": subset["seconds"],
        "reads_per_s": full["reads"] / full["seconds"],
        "peak_rss_kib": max(full["peak_rss_kib"], subset["peak_rss_kib"]),
        "devices": full["devices"],
        "steady_reads_per_s": None,
    }
    row["gbp_per_h"] = row["reads_per_s"] * length * 3600 / 1e9
    extra_seconds = full["seconds"] - subset["seconds"]
    if extra_seconds > 0:
        row["steady_reads_per_s"] = (full["reads"] - subset["reads"]) / extra_seconds
    row["steady_gbp_per_h"] = (
        None if row["steady_reads_per_s"] is None else row["steady_reads_per_s"] * length * 3600 / 1e9
    )
    score = full["score"]
    row.update(
        mapped_pct=100 * score["mapped"] / score["reads"],
        correct_pct=100 * score["correct"] / score["reads"],
        wrong_confident=score["wrong_confident"],
        wrong_per_mille=1000 * score["wrong_confident"] / score["reads"],
    )
    return row


def print_tables(results: dict) -> None:
    print()
    print(f"{'index build':<18} {'tool':<9} {'threads':>7} {'seconds':>8} {'peak RSS GiB':>12} {'size GiB':>8}  note")
    for row in results["index_builds"]:
        print(
            f"{row['reference']:<18} {row['tool']:<9} {fmt(row.get('threads'), 'd'):>7} {fmt(row['seconds'], '.1f'):>8} "
            f"{fmt(row['peak_rss_kib'] and row['peak_rss_kib'] / 2**20, '.2f'):>12} {fmt(row['bytes'] and row['bytes'] / 2**30, '.2f'):>8}  {row['note']}"
        )
    if not results["runs"]:
        return  # --prepare-only

    print()
    print(
        f"{'reference':<18} {'len':>4} {'tool':<24} {'reads':>9} {'whole s':>8} {'reads/s':>9} {'Gbp/h':>6} "
        f"{'steady/s':>9} {'Gbp/h':>6} {'RSS GiB':>7} {'mapped%':>7} {'correct%':>8} {'wrong MAPQ>=20':>15}"
    )
    for row in results["runs"]:
        lead = f"{row['reference']:<18} {row['length']:>4} {row['tool']:<24}"
        if row.get("note"):
            print(f"{lead} {row['note']}")
            continue
        wrong = f"{row['wrong_confident']} ({row['wrong_per_mille']:.2f}\u2030)"
        print(
            f"{lead} {row['reads']:>9,} {row['seconds']:>8.2f} {row['reads_per_s']:>9,.0f} {row['gbp_per_h']:>6.2f} "
            f"{fmt(row['steady_reads_per_s'], ',.0f', 'n/a'):>9} {fmt(row['steady_gbp_per_h'], '.2f', 'n/a'):>6} "
            f"{row['peak_rss_kib'] / 2**20:>7.2f} {row['mapped_pct']:>7.2f} {row['correct_pct']:>8.2f} {wrong:>15}"
        )
    devices = sorted({f"{row['tool']}: {row['devices']}" for row in results["runs"] if row.get("devices")})
    for line in devices:
        print(f"  {line}")

    if results["ratios"]:
        peers = list(results["ratios"][0]["steady_ratio"])
        print()
        print("steady-state reads/s of bowmap over each peer's (x > 1: bowmap is faster)")
        print(f"{'reference':<18} {'len':>4} {'bowmap':<24} " + " ".join(f"{'x ' + peer:>11}" for peer in peers))
        for row in results["ratios"]:
            ratios = " ".join(f"{fmt(row['steady_ratio'][peer], '.2f', 'n/a'):>11}" for peer in peers)
            print(f"{row['reference']:<18} {row['length']:>4} {row['tool']:<24} {ratios}")

    if results["repeat"]:
        print()
        print(f"peak RSS at N and at K x N reads (goal: flat, within {RSS_FLAT:.0%}); steady between them")
        print("(steady here = (KN - N) / (t_KN - t_N): start-up, whose spread of a second or so swamps the")
        print(" subset-based figure at bowmap's rate, cancels out over the longer runs)")
        print(
            f"{'reference':<18} {'len':>4} {'tool':<24} {'N':>9} {'s':>8} {'RSS GiB':>7} {'K x N':>10} {'s':>8} {'RSS GiB':>7} {'ratio':>6}  flat"
            f" {'steady/s':>10} {'Gbp/h':>7}"
        )
        for row in results["repeat"]:
            steady = (row["repeat_reads"] - row["reads"]) / max(row["repeat_seconds"] - row["seconds"], 1e-9)
            print(
                f"{row['reference']:<18} {row['length']:>4} {row['tool']:<24} {row['reads']:>9,} {row['seconds']:>8.2f} "
                f"{row['peak_rss_kib'] / 2**20:>7.2f} {row['repeat_reads']:>10,} {row['repeat_seconds']:>8.2f} "
                f"{row['repeat_peak_rss_kib'] / 2**20:>7.2f} {row['rss_ratio']:>6.3f}  {'yes ' if row['flat'] else 'NO  '}"
                f" {steady:>10,.0f} {steady * row['length'] * 3600 / 1e9:>7.1f}"
            )


# ---------------------------------------------------------------- main


def parse_variants(text: str | None) -> list[tuple[str | None, list[str]]]:
    if not text:
        return [(None, [])]
    variants = []
    for entry in text.split(";"):
        if not entry.strip():
            continue
        label, equals, arguments = entry.partition("=")
        label = label.strip()
        if not equals or not label:
            raise ValueError(f"--bowmap-variants: {entry!r} is not LABEL=ARGS")
        if label in (seen[0] for seen in variants):
            raise ValueError(f"--bowmap-variants: label {label!r} given twice")
        try:
            variants.append((label, shlex.split(arguments)))
        except ValueError as error:
            raise ValueError(f"--bowmap-variants: {label}: {error}") from None
    if not variants:
        raise ValueError("--bowmap-variants: no LABEL=ARGS entry")
    return variants


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--work",
        type=Path,
        default=DEFAULT_WORK,
        metavar="DIR",
        help="work folder, reused by later runs (default bench/work/end_to_end)",
    )
    parser.add_argument(
        "--references", default="chr20", metavar="NAME[,NAME]", help="chr20 and/or synthetic_<N>mbp (default chr20)"
    )
    parser.add_argument("--vt-deb", type=Path, metavar="DEB", help="Debian's vt-examples_*_all.deb, for chr20")
    parser.add_argument("--chr20", type=Path, metavar="FASTA", help="chr20 FASTA (gzipped or not) instead of --vt-deb")
    parser.add_argument(
        "--reads", type=int, default=1_000_000, metavar="N", help="reads simulated per length (default 1000000)"
    )
    parser.add_argument(
        "--read-lengths", default="150", metavar="L[,L]", help="read lengths (default 150; e.g. 100,150,250)"
    )
    parser.add_argument(
        "--subset",
        type=int,
        default=20_000,
        metavar="N",
        help="reads of the small run for the steady state (default 20000)",
    )
    parser.add_argument("--seed", type=int, default=7, help="read simulation seed (default 7)")
    parser.add_argument(
        "--threads", type=int, default=16, metavar="T", help="threads of the peers and their index builds (default 16)"
    )
    parser.add_argument(
        "--peers",
        default=",".join(PEERS),
        metavar="LIST",
        help="peers to run: bowtie2,bwa,minimap2 (default all; 'none' for none)",
    )
    parser.add_argument(
        "--skip-peer-index-above",
        type=float,
        default=0,
        metavar="MBP",
        help="build no bwa or bowtie2 index for larger references (default 0: never skip)",
    )
    parser.add_argument(
        "--bowmap-args", default="", metavar="ARGS", help='more `bowmap align` arguments, e.g. "--devices gpu"'
    )
    parser.add_argument(
        "--bowmap-variants",
        metavar="L=ARGS;L=ARGS",
        help='bowmap rows: label and arguments added to --bowmap-args each, e.g. "p1=-p 1;p4=-p 4"',
    )
    parser.add_argument(
        "--bowmap-index-args", default="", metavar="ARGS", help='more `bowmap index` arguments, e.g. "--device-mem 40G"'
    )
    parser.add_argument(
        "--repeat-bowmap",
        metavar="Kx",
        help="also map the 150-bp set K times over with bowmap, e.g. 10x, for peak RSS at N and K x N",
    )
    parser.add_argument(
        "--prepare-only", action="store_true", help="prepare references, reads and indexes; align nothing"
    )
    parser.add_argument(
        "--rerun", action="store_true", help="time every alignment again, even with a matching cached result"
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args()  # fmt: skip
    try:
        try:
            args.lengths = sorted({int(word) for word in args.read_lengths.split(",") if word.strip()})
        except ValueError:
            raise ValueError(f"--read-lengths: {args.read_lengths!r} is not a list of numbers") from None
        args.variants = parse_variants(args.bowmap_variants)
        for option, text in (("--bowmap-args", args.bowmap_args), ("--bowmap-index-args", args.bowmap_index_args)):
            try:
                shlex.split(text)  # fails here, not in the middle of the run
            except ValueError as error:
                raise ValueError(f"{option}: {error}") from None
        try:
            args.repeat_times = int(args.repeat_bowmap.lower().removesuffix("x")) if args.repeat_bowmap else None
        except ValueError:
            raise ValueError(f"--repeat-bowmap: {args.repeat_bowmap!r} is not K or Kx, e.g. 10x") from None
    except ValueError as error:
        parser.error(str(error))
    args.peers = (
        [] if args.peers.strip() == "none" else [word.strip() for word in args.peers.split(",") if word.strip()]
    )
    unknown = [name for name in args.peers if name not in PEERS]
    if unknown:
        parser.error(f"--peers: unknown {', '.join(unknown)} (choose from {', '.join(PEERS)})")
    if not args.lengths or min(args.lengths) < 32 or max(args.lengths) > 1000:
        parser.error("--read-lengths: lengths from 32 to 1000")
    if args.subset < 1 or args.reads <= args.subset or args.threads < 1:
        parser.error("need --subset >= 1, --reads > --subset and --threads >= 1")
    if args.repeat_times is not None and args.repeat_times < 2:
        parser.error("--repeat-bowmap: K of at least 2, e.g. 10x")
    references = [name.strip() for name in args.references.split(",") if name.strip()]
    for name in references:
        if name != "chr20" and not SYNTHETIC.fullmatch(name):
            parser.error(f"--references: unknown {name!r} (chr20 or synthetic_<N>mbp)")

    bowmap = [sys.executable, "-m", "bowmap"]
    results = {
        "machine": None,
        "versions": None,
        "arguments": sys.argv[1:],
        "references": {},
        "index_builds": [],
        "runs": [],
        "ratios": [],
        "repeat": [],
    }
    try:
        args.work = args.work.resolve()
        args.work.mkdir(parents=True, exist_ok=True)
        machine = results["machine"] = describe_machine()
        sources_sha = bowmap_sources_sha()
        versions = results["versions"] = tool_versions(bowmap, sources_sha)
        tools = make_tools(args, bowmap, versions, sources_sha)
        repeat_length = 150 if 150 in args.lengths else args.lengths[0]

        for name in references:
            reference = prepare_reference(name, args, args.work)
            results["references"][name] = reference.info
            read_sets = [prepare_reads(reference, length, args) for length in args.lengths]
            if args.repeat_times:
                for read_set in read_sets:
                    if read_set.length == repeat_length:
                        read_set.copies[args.repeat_times] = repeated_reads(read_set, args.repeat_times)
            indexes = {}
            for tool in tools:
                if tool.name not in indexes:
                    indexes[tool.name] = prepare_index(tool, reference, args)
                    results["index_builds"].append(indexes[tool.name].row)
            if args.prepare_only:
                continue

            for read_set in read_sets:
                rows = {}
                for tool in tools:
                    index = indexes[tool.name]
                    base = {"reference": name, "length": read_set.length, "tool": tool.label}
                    if index.prefix is None:
                        results["runs"].append({**base, "note": f"no index ({index.row['note']})"})
                        continue
                    subset = align_run(
                        tool, index, read_set, "subset", read_set.subset, read_set.subset_count, machine, args
                    )
                    full = align_run(tool, index, read_set, "full", read_set.full, read_set.count, machine, args)
                    rows[tool.label] = {**base, **summarise(full, subset, read_set.length)}
                    results["runs"].append(rows[tool.label])
                    if tool is tools[0] and read_set.copies:
                        times, path = next(iter(read_set.copies.items()))
                        repeated = align_run(
                            tool, index, read_set, f"x{times}", path, times * read_set.count, machine, args
                        )
                        ratio = repeated["peak_rss_kib"] / full["peak_rss_kib"]
                        results["repeat"].append({
                            **base, "reads": full["reads"], "seconds": full["seconds"], "peak_rss_kib": full["peak_rss_kib"],
                            "repeat_reads": repeated["reads"], "repeat_seconds": repeated["seconds"],
                            "repeat_peak_rss_kib": repeated["peak_rss_kib"], "rss_ratio": ratio, "flat": abs(ratio - 1) <= RSS_FLAT,
                        })  # fmt: skip
                peer_labels = [tool.label for tool in tools if tool.name != "bowmap"]
                for tool in tools:
                    if tool.name != "bowmap" or tool.label not in rows:
                        continue
                    mine = rows[tool.label]["steady_reads_per_s"]
                    ratios = {}
                    for label in peer_labels:
                        theirs = rows[label]["steady_reads_per_s"] if label in rows else None
                        ratios[label.split()[0]] = None if mine is None or not theirs else mine / theirs
                    results["ratios"].append(
                        {"reference": name, "length": read_set.length, "tool": tool.label, "steady_ratio": ratios}
                    )
        if args.json is not None:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            write_json(args.json, results)
    except (BenchError, OSError, subprocess.CalledProcessError) as error:
        print(f"end_to_end: error: {error}", file=sys.stderr)
        return 1

    print(
        f"machine: {machine['cpu']}, {machine['cores']} cores (nproc {machine['nproc']}), {machine['memory_gib']} GiB; "
        f"GPUs: {'; '.join(machine['gpus']) or 'none (no nvidia-smi)'}"
    )
    print("versions: " + ", ".join(f"{tool} {version}" for tool, version in versions.items()))
    for name, info in results["references"].items():
        print(
            f"reference {name}: {info['bases']:,} bp in {len(info['contigs'])} contig(s), {info['ambiguous']:,} N, "
            f"sha256 {info['sha256'][:12]}; {info['source']}"
        )
    print(
        f"reads: {args.reads:,} of each of {', '.join(map(str, args.lengths))} bp (subset {args.subset:,}), seed {args.seed}; "
        f"substitutions {SUBSTITUTION:.1%}, insertions {INSERTION:.1%}, deletions {DELETION:.1%} a base (indels 1-{MAX_INDEL}); "
        f"peers' threads {args.threads}; bowmap args {args.bowmap_args!r}"
    )
    print(
        "correct: primary line on the true strand and contig, unclipped start within 5 bp; steady = (N - n) / (t_N - t_n)"
    )
    print_tables(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
