"""`bowmap primers`: shortest substrings of ALPHA with at least k differences from all of BETA."""

from __future__ import annotations

from bowmap.commands.options import add_devices_option, integer

HEADER = "#start\tend\tlength\tprimer\t(1-based inclusive coordinates in {name}; k={k})\n"


def add_parser(subparsers):
    from bowmap.modules.primers.kernels import METHODS, PARALLELISMS

    primers = subparsers.add_parser(
        "primers",
        help="k-difference primers: shortest substrings of ALPHA at least k edits from all of BETA",
        description="For every start position of ALPHA, find the shortest substring starting there "
        "whose edit distance (substitutions, insertions, deletions) to every substring of BETA is at "
        "least K. Writes one TSV line per start that has one.",
    )
    primers.add_argument("alpha", metavar="ALPHA.fa", help="the sequence to take primers from (FASTA, optionally gzipped)")
    primers.add_argument("beta", metavar="BETA.fa", help="the sequence primers must not match (FASTA, optionally gzipped)")
    primers.add_argument("-k", type=integer(1, 1 << 30), required=True, metavar="K", help="differences required (at least 1)")
    primers.add_argument("-o", "--output", metavar="OUT.tsv", help="output file (default: standard output)")
    primers.add_argument(
        "--concat",
        action="store_true",
        help="join a multi-record FASTA's sequences end to end, in file order, with no separator "
        "(substrings across a junction then count as real); without it a file must hold one record",
    )
    primers.add_argument(
        "--method",
        choices=METHODS,
        default="landau-vishkin",
        help="landau-vishkin: diagonals L[d][e] (default, fewest comparisons); conventional: the DP matrix by rows",
    )
    primers.add_argument(
        "--parallelism",
        choices=PARALLELISMS,
        default="coarse",
        help="coarse: many starts in flight (Landau-Vishkin: a work-group per start and diagonal tile, working "
        "set in local memory; conventional: a work-item per start) (default, fastest); fine: a work-group per "
        "start (Landau-Vishkin: a column of L across it; conventional: an anti-diagonal of D across it); "
        "sequential: the NumPy reference on the host",
    )
    add_devices_option(primers)
    return run


def _read_sequence(path: str, concat: bool):
    """(name, uppercase bytes) of the file's sequence; letters A-Z only (case-insensitive)."""
    import numpy as np

    from bowmap.runtime.errors import BowmapError
    from bowmap.runtime.fasta import invalid_symbol_error, read_fasta

    records = read_fasta(path, unique_names=False)
    if len(records) > 1 and not concat:
        raise BowmapError(
            f"{path}: {len(records)} records (first {records[0].name!r}, second {records[1].name!r} at line "
            f"{records[1].line}); give one sequence, or --concat to join them end to end"
        )
    letters = np.zeros(256, dtype=bool)
    letters[np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", dtype=np.uint8)] = True
    for record in records:
        error = invalid_symbol_error(path, record, letters)
        if error is not None:
            raise error
    name = records[0].name if len(records) == 1 else f"{records[0].name}+{len(records) - 1} more"
    return name, b"".join(record.sequence for record in records).upper()


def run(args) -> int:
    import logging

    from bowmap.modules.primers.kernels import PrimerOptions, check_options
    from bowmap.runtime.output import OutputFile, refuse_inputs

    log = logging.getLogger("bowmap.modules.primers.kernels")
    options = PrimerOptions(k=args.k, method=args.method, parallelism=args.parallelism)
    check_options(options)
    refuse_inputs({"-o": args.output}, {"the input ALPHA.fa": args.alpha, "the input BETA.fa": args.beta})
    with OutputFile(args.output) as output:  # opened first: an unwritable output fails before the work
        _find_and_write(args, options, output, log)
    return 0


def _find_and_write(args, options, output, log) -> None:
    import time

    import numpy as np

    from bowmap.modules.primers.kernels import PrimerSearch, solutions

    alpha_name, alpha = _read_sequence(args.alpha, args.concat)
    _, beta = _read_sequence(args.beta, args.concat)
    started = time.perf_counter()
    if args.parallelism == "sequential":
        from bowmap.modules.primers.reference import solve

        lengths, comparisons = solve(alpha, beta, args.k, args.method)
        where = "the host (sequential)"
    else:
        from bowmap.runtime.devices import open_devices

        device = open_devices(args.devices)[0]
        lengths, comparisons = PrimerSearch(device).find(alpha, beta, options)
        where = device.info.name
    seconds = time.perf_counter() - started
    starts, ends = solutions(lengths)
    log.info(
        "primers: %d of %d starts have a solution (k=%d, %s, %s) on %s; %d symbol comparisons in %.2f s",
        len(starts), len(alpha), args.k, args.method, args.parallelism, where, comparisons, seconds,
    )

    text = np.frombuffer(alpha, dtype=np.uint8)
    lines = [HEADER.format(name=alpha_name, k=args.k)]
    lines.extend(
        f"{start + 1}\t{end}\t{end - start}\t{text[start:end].tobytes().decode()}\n"
        for start, end in zip(starts.tolist(), ends.tolist())
    )
    output.write("".join(lines))
