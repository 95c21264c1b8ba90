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

Usage: python bench/index_build.py [--repeat N] [--reference REF.fa[.gz]]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
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


def run_measured(command: list[str], log_path: Path) -> tuple[float, int]:
    """Run ``command`` with its output in ``log_path``; return (wall seconds, peak RSS in KiB)."""
    with open(log_path, "wb") as log:
        output = [(os.POSIX_SPAWN_DUP2, log.fileno(), 1), (os.POSIX_SPAWN_DUP2, log.fileno(), 2)]
        started = time.perf_counter()
        pid = os.posix_spawnp(command[0], command, os.environ, file_actions=output)
        _, status, usage = os.wait4(pid, 0)
        wall_seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        tail = log_path.read_text(errors="replace").strip().splitlines()[-5:]
        raise BenchError(f"`{' '.join(command)}` exited {os.waitstatus_to_exitcode(status)}:\n  " + "\n  ".join(tail))
    return wall_seconds, usage.ru_maxrss  # Linux reports ru_maxrss in KiB


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
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")

    try:
        if args.reference is not None:
            if not args.reference.is_file():
                raise BenchError(f"{args.reference}: no such file")
            reference, source = args.reference.resolve(), f"--reference {args.reference}"
        else:
            reference, source = packaged_reference(), REFERENCE_DESCRIPTION
        bowmap = find_bowmap()
        builds = [
            Build("bowmap index", [bowmap, "index", "{ref}", "{prefix}", "--no-progress"], WORK / "bowmap"),
            Build(
                "bowmap index --device-mem 16G",
                [bowmap, "index", "{ref}", "{prefix}", "--no-progress", "--device-mem", "16G"],
                WORK / "bowmap_16G",
            ),
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
                wall_seconds, peak_rss_kib = run_measured(command, build.folder.with_suffix(".log"))
                build.wall_seconds = min(build.wall_seconds, wall_seconds)
                build.peak_rss_kib = max(build.peak_rss_kib, peak_rss_kib)
                build.index_bytes = folder_bytes(build.folder)

        for build in builds[:2]:
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

    print(f"{'tool':<30} {'wall s':>7} {'peak RSS MiB':>13} {'index MiB':>10}")
    for build in builds:
        print(
            f"{build.label:<30} {build.wall_seconds:>7.2f} {build.peak_rss_kib / 1024:>13.1f} "
            f"{build.index_bytes / 2**20:>10.1f}"
        )
    for build in missing:
        print(f"{build.label:<30} {'not installed':>7}")
    print("bowmap inspect: both bowmap indexes load and pass their SHA-256 checks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
