"""`bowmap closest-substring`: a centre string within Hamming distance d of a window of every sequence."""

from __future__ import annotations

import logging
import time

from bowmap.commands.options import add_devices_option, integer
from bowmap.runtime.errors import BowmapError, UsageError

log = logging.getLogger("bowmap")

METHODS = ("s-gpu", "pp-gpu", "sequential")  # as bowmap.modules.closest_substring.kernels.METHODS; kept here so --help imports nothing heavy
MAX_EXACT_LENGTH = 14


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "closest-substring",
        help="centre string of length L within Hamming distance d of a window of every sequence",
        description="Closest substring by the pitch/chord method (every window of the first sequence is a pitch; "
        "each other sequence's closest window is a note; the best valid chord's column-wise majority, the root, "
        "is the answer). --exact also searches every DNA centre for the true optimum. Positions printed are 1-based.",
    )
    parser.add_argument("sequences", metavar="SEQS.fa[.gz]", help="FASTA with at least 2 records; the first gives the pitches")
    parser.add_argument("-L", "--length", type=integer(1, 1 << 20), required=True, metavar="L", help="centre (window) length")
    parser.add_argument("-d", "--max-distance", type=integer(0, 1 << 20), required=True, metavar="D", help="maximum Hamming distance")
    parser.add_argument("--method", choices=METHODS, default="s-gpu",
                        help="s-gpu: a work-group per pitch (default, fastest); pp-gpu: a work-group per pitch and "
                        "sequence; sequential: the CPU reference")
    parser.add_argument("--exact", action="store_true",
                        help=f"also search all 4^L centres on the device (DNA, L <= {MAX_EXACT_LENGTH}): least maximum "
                        "distance, then least total, ties to the lexicographically smallest centre")
    parser.add_argument("--alphabet", choices=("dna", "protein"), default="dna",
                        help="dna: ACGT (default); protein: the 20 standard amino acids (either case; anything else is an error)")
    parser.add_argument("--format", choices=("text", "tsv"), default="text", help="output format (default text)")
    parser.add_argument("-o", "--output", metavar="FILE", help="write here instead of standard output")
    add_devices_option(parser)
    return run


def read_sequences(path: str, length: int, alphabet: str):
    """Records of ``path`` as code arrays, with one-line errors naming file, line and record."""
    import numpy as np

    from bowmap.modules.closest_substring.kernels import encode, symbol_codes
    from bowmap.runtime.fasta import invalid_symbol_error, read_fasta

    records = read_fasta(path, unique_names=False)
    if len(records) < 2:
        raise BowmapError(f"{path}: {len(records)} record; closest-substring needs at least 2 sequences")
    valid = symbol_codes(alphabet) != 255
    for record in records:
        error = invalid_symbol_error(path, record, valid)
        if error is not None:
            raise BowmapError(f"{error} (alphabet {alphabet})")
        if len(record.sequence) < length:
            raise BowmapError(
                f"{path}:{record.line}: record {record.name!r} has {len(record.sequence)} symbols, fewer than -L {length}"
            )
    codes = encode([record.sequence for record in records], alphabet)
    return [record.name for record in records], [np.asarray(c) for c in codes]


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def format_tsv(result, names) -> str:
    reports = [("root", result.root), ("pitch", result.pitch)] + ([("exact", result.exact)] if result.exact else [])
    lines = [
        f"#closest-substring\tL={result.length}\td={result.max_distance}\talphabet={result.alphabet}\t"
        f"method={result.method}\tsequences={len(names)}",
    ]
    for kind, report in reports:
        extra = f"\tstart={result.pitch_position + 1}\tchord_distance={result.chord_distance}" if kind == "pitch" else ""
        lines.append(
            f"#{kind}={report.centre}{extra}\tmax_distance={report.max_distance}\t"
            f"total_distance={report.total_distance}\tvalid={_yes(report.valid)}"
        )
    lines.append("\t".join(["sequence"] + [f"{kind}_{field}" for kind, _ in reports for field in ("start", "distance")]))
    for number, name in enumerate(names):
        cells = [name]
        for _, report in reports:
            cells += [str(int(report.positions[number]) + 1), str(int(report.distances[number]))]
        lines.append("\t".join(cells))
    return "\n".join(lines) + "\n"


def format_text(result, names, sequences) -> str:
    from bowmap.modules.closest_substring.kernels import decode

    reports = [("root", result.root), ("pitch", result.pitch)] + ([("exact", result.exact)] if result.exact else [])
    lines = [
        f"closest substring of {len(names)} sequences, L={result.length}, d={result.max_distance} "
        f"({result.alphabet}, method {result.method})",
    ]
    for kind, report in reports:
        where = (
            f"pitch at {names[0]}:{result.pitch_position + 1}, chord distance {result.chord_distance}, "
            if kind == "pitch" else ""
        )
        verdict = "valid" if report.valid else "NOT valid"
        lines.append(
            f"{kind:<6} {report.centre}  {where}max distance {report.max_distance}, total {report.total_distance}: "
            f"{verdict} (d={result.max_distance})"
        )
    if result.exact is not None:
        lines.append(
            f"       exact: the optimum over all 4^{result.length} centres (least max, then least total; "
            "ties to the lexicographically smallest centre)"
        )
    lines.append("")
    header = ["sequence"]
    for kind, _ in reports:
        header += [f"{kind} start", "dist", "window"]
    rows = [header]
    for number, name in enumerate(names):
        row = [name]
        for _, report in reports:
            start = int(report.positions[number])
            window = decode(sequences[number][start : start + result.length], result.alphabet)
            row += [str(start + 1), str(int(report.distances[number])), window]
        rows.append(row)
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    lines += ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(lines) + "\n"


def run(args) -> int:
    from bowmap.modules.closest_substring.kernels import closest_substring
    from bowmap.runtime.output import OutputFile, refuse_inputs

    if args.exact and args.alphabet != "dna":
        raise UsageError("--exact needs --alphabet dna")
    if args.exact and args.length > MAX_EXACT_LENGTH:
        raise UsageError(f"--exact takes -L of at most {MAX_EXACT_LENGTH} (4^L centres), got {args.length}")
    refuse_inputs({"-o": args.output}, {"the input SEQS.fa": args.sequences})
    with OutputFile(args.output) as output:  # opened first: an unwritable output fails before the work
        started = time.perf_counter()
        names, sequences = read_sequences(args.sequences, args.length, args.alphabet)
        device = None
        if args.method != "sequential" or args.exact:
            from bowmap.runtime.devices import open_devices

            device = open_devices(args.devices)[0]
        result = closest_substring(sequences, args.length, args.max_distance, args.alphabet, args.method, args.exact, device, names)
        output.write(format_tsv(result, names) if args.format == "tsv" else format_text(result, names, sequences))
    where = f" on {device.info.name}" if device is not None else ""
    log.info(
        f"closest-substring: {len(names)} sequences, L={args.length}, d={args.max_distance}, method {args.method}"
        f"{' + exact' if args.exact else ''}{where}: root max distance {result.root.max_distance}, "
        f"{time.perf_counter() - started:.2f} s"
    )
    return 0
