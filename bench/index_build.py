"""Index build: bowmap beside bowtie2-build and BWA on one real bacterial genome.

Every tool indexes the same FASTA, each into its own empty folder under bench/work/index_build/:

* ``bowmap index REF PREFIX --no-progress`` as a user runs it: with no ``--device-mem`` it sizes
  blocks for the smallest OpenCL device, so it loads the OpenCL platforms (PoCL on a CPU machine);
* the same with ``--device-mem 16G``, which skips that device query;
* ``bowtie2-build --threads 2 REF PREFIX`` (fixed at two threads, so rows compare across machines);
* ``bwa index -p PREFIX REF``.

The indexes do not hold the same things: bowmap's is one FM-index of the forward strand with the
suffix array sampled every 32 positions; BWA's is one BWT of both strands, SA sampled every 32;
bowtie2's is a forward and a mirror FM-index. The table is what a user waits for and pays, not
equal work.

For each build it measures
* wall time: from spawning the command to reaping it (perf_counter), the best of ``--repeat`` runs;
* peak resident memory: ``ru_maxrss`` that ``os.wait4`` returns for the command's process. On
  Linux that is the largest of the process and every descendant it waited for (bowtie2-build is a
  Python wrapper around bowtie2-build-s), and it belongs to this one command only, unlike
  RUSAGE_CHILDREN of this script. The largest over the ``--repeat`` runs is shown;
* index size: the bytes of every file the build left in its folder.

Then ``bowmap inspect`` reads each bowmap index back, which checks every file's SHA-256; the
benchmark fails unless it exits 0.

The reference is E. coli K-12 MG1655 (4,639,675 bp, one contig) from Debian's
ragout-examples package, fetched with ``apt-get download`` and unpacked with ``dpkg -x`` when it
is not installed; ``--reference`` indexes any other FASTA (gzipped or not) instead.

Human scale (issue 20, item 3): ``--bowmap-only --threads 1,2 --device-mem 120M`` builds only
bowmap indexes, one row per ``--threads`` value (``--device-mem`` forces small blocks where the
genome is small; ``--max-memory`` is passed on), on ``--reference`` or on a synthetic genome:
``--human-like-gbp G`` writes (once, cached under bench/work/) the human-like genome of
bench/human_genome.py, ``--synthetic-mbp M`` bench/fm_search.py's genome. For these rows it
also prints the build's own prediction (the "predicted peak" log line) beside the measured
peak of the whole process tree: the sum of VmRSS over ``bowmap index`` and its worker processes,
sampled every 50 ms (ru_maxrss is the largest single process only), and checks that every
``--threads`` value wrote byte-identical block files (the manifests' SHA-256s). On the GPU
machine (16 cores), a 3.1 Gbp genome against the goal of 10 min and 16 GB:

    python bench/index_build.py --bowmap-only --human-like-gbp 3.1 --threads 16

Usage: python bench/index_build.py [--repeat N] [--reference REF.fa[.gz]] [--bowmap-only]
       [--threads T1,T2,..] [--device-mem SIZE] [--max-memory SIZE]
       [--human-like-gbp G | --synthetic-mbp M]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

WORK = Path(__file__).resolve().parent / "work" / "index_build"

PACKAGE = "ragout-examples"
PACKAGE_FILE = "usr/share/doc/ragout/examples/E.Coli/references/MG1655-K12.fasta.gz"
# SHA-256 of the uncompressed FASTA: the same genome whatever the package's version.
REFERENCE_SHA256 = "3d70cf9dee928a6bf8f4763a3db0e0f8bf0ae32d25123a73f7a5bf2fe4d16828"
REFERENCE_DESCRIPTION = f"E. coli K-12 MG1655, Debian {PACKAGE} {Path(PACKAGE_FILE).name}"


class BenchError(Exception):
    pass


@dataclass
class Build:
    label: str
    command: list[str]  # with {ref} and {prefix} placeholders
    folder: Path
    wall_seconds: float = float("inf")
    peak_rss_kib: int = 0
    index_bytes: int = 0
    tree_peak_bytes: int = 0  # largest sum of VmRSS over the command's process tree
    predicted_bytes: int = 0  # bowmap's "predicted peak" log line, 0 where it printed none

    @property
    def prefix(self) -> Path:
        return self.folder / "index"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def packaged_reference() -> Path:
    """The MG1655 FASTA under WORK, unpacked from the Debian package (downloaded if need be)."""
    fasta = WORK / "reference" / "MG1655-K12.fasta"
    if fasta.exists() and sha256_of(fasta) == REFERENCE_SHA256:
        return fasta
    unpacked = WORK / "deb"
    candidates = [Path("/") / PACKAGE_FILE, unpacked / PACKAGE_FILE]
    compressed = next((path for path in candidates if path.exists()), None)
    if compressed is None:
        hint = f"run `apt-get download {PACKAGE}` and `dpkg -x {PACKAGE}_*.deb {unpacked}`, or pass --reference"
        if shutil.which("apt-get") is None or shutil.which("dpkg") is None:
            raise BenchError(f"reference {PACKAGE_FILE} not found: {hint}")
        unpacked.mkdir(parents=True, exist_ok=True)
        print(f"fetching the reference: apt-get download {PACKAGE}", file=sys.stderr)
        fetched = subprocess.run(["apt-get", "download", PACKAGE], cwd=unpacked, capture_output=True, text=True)
        debs = sorted(unpacked.glob(f"{PACKAGE}_*.deb"))
        if fetched.returncode != 0 or not debs:
            raise BenchError(f"`apt-get download {PACKAGE}` failed ({fetched.stderr.strip()[-200:]}): {hint}")
        subprocess.run(["dpkg", "-x", str(debs[-1]), str(unpacked)], check=True)
        compressed = unpacked / PACKAGE_FILE
    fasta.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(compressed, "rb") as source, open(fasta, "wb") as target:
        shutil.copyfileobj(source, target)
    if sha256_of(fasta) != REFERENCE_SHA256:
        raise BenchError(f"{compressed}: not the MG1655 FASTA this benchmark expects (SHA-256 differs)")
    return fasta


def describe_reference(path: Path, source: str) -> str:
    """One line: first record's name, bases, records, SHA-256 prefix, where it came from."""
    with open(path, "rb") as handle:
        opener = gzip.open if handle.read(2) == b"\x1f\x8b" else open
    name, bases, records = "", 0, 0
    with opener(path, "rb") as handle:
        for line in handle:
            if line.startswith(b">"):
                records += 1
                name = name or line[1:].split()[0].decode("ascii", "replace")
            else:
                bases += len(line.strip())
    return f"reference: {name}, {bases:,} bp in {records} record(s), sha256 {sha256_of(path)[:12]}, {source}"


def describe_machine() -> str:
    model = platform.processor() or "unknown CPU"
    with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return f"machine: nproc {len(os.sched_getaffinity(0))}, {model}"


def tool_version(command: list[str], marker: str) -> str:
    """The word after ``marker`` in what ``command`` prints (bwa prints its version to stderr)."""
    try:
        finished = subprocess.run(command, capture_output=True, text=True)
    except FileNotFoundError:
        return "not installed"
    for line in (finished.stdout + finished.stderr).splitlines():
        if marker in line:
            return line.split(marker, 1)[1].split()[0]
    return "?"


def process_tree_rss(root: int) -> int:
    """Sum of VmRSS (bytes) over ``root`` and all its descendants, read from /proc."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", encoding="ascii", errors="replace") as status:
                fields = dict(line.split(":", 1) for line in status if ":" in line)
        except OSError:
            continue
        pid = int(entry)
        children.setdefault(int(fields.get("PPid", "0").strip() or 0), []).append(pid)
        rss[pid] = int(fields.get("VmRSS", "0 kB").split()[0]) * 1024
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total


def run_measured(command: list[str], log_path: Path, sample_tree: bool = False) -> tuple[float, int, int]:
    """Run ``command`` with its output in ``log_path``; return (wall seconds, peak RSS in KiB,
    peak of the process tree's summed RSS in bytes, sampled every 50 ms when ``sample_tree``)."""
    with open(log_path, "wb") as log:
        output = [(os.POSIX_SPAWN_DUP2, log.fileno(), 1), (os.POSIX_SPAWN_DUP2, log.fileno(), 2)]
        started = time.perf_counter()
        pid = os.posix_spawnp(command[0], command, os.environ, file_actions=output)
        tree_peak = 0
        while True:
            reaped, status, usage = os.wait4(pid, os.WNOHANG if sample_tree else 0)
            if reaped:
                break
            tree_peak = max(tree_peak, process_tree_rss(pid))
            time.sleep(0.05)
        wall_seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        tail = log_path.read_text(errors="replace").strip().splitlines()[-5:]
        raise BenchError(f"`{' '.join(command)}` exited {os.waitstatus_to_exitcode(status)}:\n  " + "\n  ".join(tail))
    return wall_seconds, usage.ru_maxrss, tree_peak  # Linux reports ru_maxrss in KiB


def predicted_peak(log_path: Path) -> int:
    """Bytes of the build's "predicted peak X GiB" log line (0 where there is none)."""
    found = re.search(r"predicted peak ([0-9.]+) GiB", log_path.read_text(errors="replace"))
    return int(float(found.group(1)) * 2**30) if found else 0


def block_checksums(prefix: Path) -> list:
    """Each block's (start, length, SHA-256 of its files) from the manifest."""
    with open(f"{prefix}.bmi", encoding="utf-8") as handle:
        manifest = json.load(handle)
    return [
        (block["start"], block["length"], sorted(entry["sha256"] for entry in block["files"].values()))
        for block in manifest["blocks"]
    ]


def synthetic_reference(human_like_gbp: float | None, synthetic_mbp: float | None) -> tuple[Path, str]:
    """The FASTA of a generated genome under bench/work/ (written once), and its description."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    if human_like_gbp is not None:
        import human_genome

        return human_genome.cached_fasta(human_like_gbp), f"bench/human_genome.py, {human_like_gbp:g} Gbp"
    import fm_search

    path = WORK / f"synthetic_{synthetic_mbp:g}mbp_v{fm_search.GENOME_VERSION}_seed{fm_search.GENOME_SEED}.fa"
    if not path.exists():
        WORK.mkdir(parents=True, exist_ok=True)
        fm_search.write_fasta(path, fm_search.make_genome(int(round(synthetic_mbp * 1e6)), fm_search.GENOME_SEED))
    return path, f"bench/fm_search.py make_genome, {synthetic_mbp:g} Mbp, seed {fm_search.GENOME_SEED}"


def folder_bytes(folder: Path) -> int:
    return sum(entry.stat().st_size for entry in os.scandir(folder) if entry.is_file())


def find_bowmap() -> str:
    """The ``bowmap`` entry point of this interpreter's environment, else the one on PATH."""
    beside = Path(sys.executable).with_name("bowmap")
    found = str(beside) if beside.exists() else shutil.which("bowmap")
    if found is None:
        raise BenchError("no `bowmap` command: install it with `pip install -e .` in this environment")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=1, metavar="N", help="runs per tool; the best wall time counts (default 1)")
    parser.add_argument("--reference", type=Path, metavar="REF", help=f"FASTA to index (default: {REFERENCE_DESCRIPTION})")
    parser.add_argument("--bowmap-only", action="store_true", help="build only bowmap indexes (no peers)")
    parser.add_argument("--threads", metavar="T1,T2", help="one bowmap row per value of --threads, e.g. 1,2")
    parser.add_argument("--device-mem", metavar="SIZE", help="passed to bowmap index (small: many blocks)")
    parser.add_argument("--max-memory", metavar="SIZE", help="passed to bowmap index")
    generated = parser.add_mutually_exclusive_group()
    generated.add_argument("--human-like-gbp", type=float, metavar="G", help="index bench/human_genome.py's genome of G Gbp")
    generated.add_argument("--synthetic-mbp", type=float, metavar="M", help="index bench/fm_search.py's genome of M Mbp")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    try:
        thread_counts = [int(word) for word in args.threads.split(",")] if args.threads else []
    except ValueError:
        parser.error(f"--threads {args.threads!r}: expected whole numbers separated by commas")
    if (args.human_like_gbp or args.synthetic_mbp) and args.reference:
        parser.error("--reference and a generated genome exclude each other")

    try:
        if args.reference is not None:
            if not args.reference.is_file():
                raise BenchError(f"{args.reference}: no such file")
            reference, source = args.reference.resolve(), f"--reference {args.reference}"
        elif args.human_like_gbp or args.synthetic_mbp:
            reference, source = synthetic_reference(args.human_like_gbp, args.synthetic_mbp)
        else:
            reference, source = packaged_reference(), REFERENCE_DESCRIPTION
        bowmap = find_bowmap()
        passed = [option for name, value in (("--device-mem", args.device_mem), ("--max-memory", args.max_memory)) if value for option in (name, value)]
        base = [bowmap, "index", "{ref}", "{prefix}", "--no-progress"]
        if thread_counts:
            builds = [
                Build(" ".join(["bowmap index --threads", str(count)] + passed), base + ["--threads", str(count)] + passed, WORK / f"bowmap_t{count}")
                for count in thread_counts
            ]
        else:
            builds = [
                Build(" ".join(["bowmap index"] + passed), base + passed, WORK / "bowmap"),
                Build(
                    "bowmap index --device-mem 16G",
                    [bowmap, "index", "{ref}", "{prefix}", "--no-progress", "--device-mem", "16G"],
                    WORK / "bowmap_16G",
                ),
            ]
        bowmap_builds = list(builds)
        if not args.bowmap_only:
            builds += [
                Build("bowtie2-build --threads 2", ["bowtie2-build", "--threads", "2", "{ref}", "{prefix}"], WORK / "bowtie2"),
                Build("bwa index", ["bwa", "index", "-p", "{prefix}", "{ref}"], WORK / "bwa"),
            ]
        # bowmap always runs; a peer that is not installed gets a row saying so.
        missing = [build for build in builds if shutil.which(build.command[0]) is None]
        builds = [build for build in builds if build not in missing]

        # Runs are interleaved so that a slow spell of the machine does not fall on one tool only.
        for _ in range(args.repeat):
            for build in builds:
                shutil.rmtree(build.folder, ignore_errors=True)
                build.folder.mkdir(parents=True)
                command = [part.format(ref=reference, prefix=build.prefix) for part in build.command]
                log_path = build.folder.with_suffix(".log")
                wall_seconds, peak_rss_kib, tree_peak = run_measured(command, log_path, sample_tree=True)
                build.wall_seconds = min(build.wall_seconds, wall_seconds)
                build.peak_rss_kib = max(build.peak_rss_kib, peak_rss_kib)
                build.tree_peak_bytes = max(build.tree_peak_bytes, tree_peak)
                build.predicted_bytes = predicted_peak(log_path)
                build.index_bytes = folder_bytes(build.folder)

        checksums = {build.label: block_checksums(build.prefix) for build in bowmap_builds}
        if len({json.dumps(value) for value in checksums.values()}) != 1:
            raise BenchError("bowmap builds wrote different block files: " + ", ".join(checksums))
        for build in bowmap_builds:
            inspected = subprocess.run([bowmap, "inspect", str(build.prefix)], capture_output=True, text=True)
            if inspected.returncode != 0:
                raise BenchError(f"`bowmap inspect {build.prefix}` exited {inspected.returncode}: {inspected.stderr.strip()}")
        versions = (
            f"bowmap {tool_version([bowmap, '--version'], 'bowmap ')}, "
            f"bowtie2 {tool_version(['bowtie2-build', '--version'], 'version ')}, "
            f"bwa {tool_version(['bwa'], 'Version: ')}"
        )
        print(describe_reference(reference, source))
        print(f"{describe_machine()}; best of {args.repeat} run(s); {versions}")
    except BenchError as error:
        print(f"index_build: error: {error}", file=sys.stderr)
        return 1

    width = max(30, *(len(build.label) for build in builds + missing))
    print(f"{'tool':<{width}} {'wall s':>7} {'peak RSS MiB':>13} {'tree peak GiB':>14} {'predicted GiB':>14} {'index MiB':>10}")
    for build in builds:
        predicted = f"{build.predicted_bytes / 2**30:.2f}" if build.predicted_bytes else "-"
        print(
            f"{build.label:<{width}} {build.wall_seconds:>7.2f} {build.peak_rss_kib / 1024:>13.1f} "
            f"{build.tree_peak_bytes / 2**30:>14.2f} {predicted:>14} {build.index_bytes / 2**20:>10.1f}"
        )
    for build in missing:
        print(f"{build.label:<{width}} {'not installed':>7}")
    print(f"bowmap inspect: the {len(bowmap_builds)} bowmap indexes load, pass their SHA-256 checks and hold identical blocks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
