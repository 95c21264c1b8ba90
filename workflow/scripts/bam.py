"""BAM steps of the workflow (workflow/Snakefile), through pysam's bundled samtools: nothing to
install beyond bowmap itself, and one samtools version everywhere (a samtools binary on PATH
is not used).

    python bam.py sort IN OUT THREADS
        IN (SAM or BAM, - for stdin) sorted by coordinate into the BAM OUT.
    python bam.py merge OUT.bam OUT.flagstat THREADS PART.bam ...
        The coordinate-sorted parts merged into OUT.bam, with OUT.bam.bai and OUT.flagstat.

Each output is written under a hidden temporary name beside it and renamed into place only when
complete (the BAM last), so a failed or killed step leaves nothing that looks finished.
"""

from __future__ import annotations

import os
import re
import shlex
import sys

import pysam

# The options that differ between the parts' @PG command lines: the part of the input, the output.
WINDOW = re.compile(r" (?:-s|--skip|-u|--upto|-o|--output)(?: |=)\S+")


def temporary(path: str) -> str:
    folder, name = os.path.split(path)
    return os.path.join(folder, f".{name}.{os.getpid()}.tmp")


def sort(source: str, target: str, threads: int) -> None:
    """Coordinate sort, records of equal coordinates kept in input order (samtools sort is
    stable), to a hidden name first."""
    partial = temporary(target)
    try:
        pysam.sort("--no-PG", "-@", str(threads), "-m", "512M", "-T", partial + ".sort", "-o", partial, source, catch_stdout=False)
        os.replace(partial, target)
    finally:
        if os.path.exists(partial):
            os.remove(partial)


def merged_header(parts: list[str], target: str, threads: int) -> str:
    """The parts' header (they must agree but for their window options), with one @PG for
    bowmap: the parts' command line without its --skip/--upto/-o, the parts named in DS; then
    one for samtools merge as a user who ran it by hand would have (PP: bowmap; the parts in, the
    final ``target`` out, not the hidden files this script writes first)."""
    headers = []
    for path in parts:
        with pysam.AlignmentFile(path, "rb") as bam:
            headers.append(bam.header.to_dict())
    first = headers[0]
    programs = [program for program in first.get("PG", []) if program.get("ID") == "bowmap"]
    if len(programs) != 1:
        raise SystemExit(f"bam.py: {parts[0]}: expected one @PG ID:bowmap, found {len(programs)}")
    whole = WINDOW.sub("", programs[0].get("CL", ""))
    for path, header in zip(parts, headers):
        command = [WINDOW.sub("", p.get("CL", "")) for p in header.get("PG", []) if p.get("ID") == "bowmap"]
        same = {key: header.get(key) for key in ("SQ", "RG")} == {key: first.get(key) for key in ("SQ", "RG")}
        if command != [whole] or not same:
            raise SystemExit(f"bam.py: {path}: its header or bowmap command line differs from {parts[0]}'s beyond --skip/--upto/-o")
    program = {"ID": "bowmap", **programs[0], "CL": whole, "DS": f"merged from {len(parts)} parts mapped with --skip/--upto (workflow/Snakefile)"}
    header = {key: value for key, value in first.items() if key != "PG"}
    merging = {
        "ID": "samtools", "PN": "samtools", "PP": "bowmap", "VN": pysam.__samtools_version__,
        "CL": shlex.join(["samtools", "merge", "-c", "-p", "-@", str(threads), "-o", target, *parts]),
    }
    header["PG"] = [program, merging]  # the parts' sort wrote no @PG (--no-PG)
    header["HD"] = dict(first.get("HD", {"VN": "1.6"}), SO="coordinate")
    return str(pysam.AlignmentHeader.from_dict(header))


def merge(target: str, flagstat: str, threads: int, parts: list[str]) -> None:
    partial, header_path, flagstat_partial = temporary(target), temporary(target) + ".header.sam", temporary(flagstat)
    try:
        with open(header_path, "w") as handle:
            handle.write(merged_header(parts, target, threads))
        # -c -p: the parts' @RG and @PG lines are one set, not renamed apart; -h: the header above
        # (with merge's own @PG: --no-PG keeps samtools from adding one naming the hidden files).
        # Records at equal coordinates come in the order of the parts, then of each part: the
        # parts hold consecutive reads, so that is the whole input's order.
        pysam.merge("--no-PG", "-c", "-p", "-f", "-@", str(threads), "-h", header_path, "-o", partial, *parts, catch_stdout=False)
        pysam.index("-@", str(threads), partial, partial + ".bai", catch_stdout=False)
        with open(flagstat_partial, "w") as handle:
            handle.write(pysam.flagstat("-@", str(threads), partial))
        os.replace(flagstat_partial, flagstat)
        os.replace(partial + ".bai", target + ".bai")  # the index first: written after the BAM, it stays newer
        os.replace(partial, target)
    finally:
        for path in (partial, partial + ".bai", header_path, flagstat_partial):
            if os.path.exists(path):
                os.remove(path)


def main(argv: list[str]) -> int:
    try:
        if len(argv) == 4 and argv[0] == "sort":
            sort(argv[1], argv[2], int(argv[3]))
        elif len(argv) >= 5 and argv[0] == "merge":
            merge(argv[1], argv[2], int(argv[3]), argv[4:])
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except pysam.SamtoolsError as error:
        print(f"bam.py {shlex.join(argv[:1])}: {' '.join(str(error).split())[:300]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
