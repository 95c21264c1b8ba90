"""`bowmap asm`: approximate string matching of patterns (X.fa) against texts (Y.fa)."""

from __future__ import annotations

import logging
import time

from bowmap.commands.options import add_devices_option, integer
from bowmap.runtime.errors import BowmapError, UsageError

log = logging.getLogger("bowmap.modules.asm.kernels")

BEST_HEADER = "#pattern\ttext\tdistance\tstart\tend\t(positions 1-based, inclusive)"
ALL_HEADER = "#pattern\ttext\tend\tdistance\t(end 1-based, inclusive)"


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "asm",
        help="approximate string matching: least edit distance of each pattern to a substring of a text",
        description="For every record X of PATTERNS and Y of TEXTS: the least edit distance between X "
        "and any substring of Y, and where a best substring starts and ends (the smallest end, then the "
        "longest match). Symbols are bytes compared without regard to case (soft-masked, lowercase "
        "bases are bases): DNA, protein or text. Forward strand only: Y is searched as given; for the "
        "reverse strand, add X's reverse complement as another pattern.",
    )
    parser.add_argument("patterns", metavar="X.fa", help="patterns, FASTA (gzipped or not), one or more records")
    parser.add_argument("texts", metavar="Y.fa", help="texts, FASTA (gzipped or not), one or more records")
    parser.add_argument(
        "--method", choices=("dp", "bitvector"), default="dp",
        help="dp: anti-diagonal DP (Man, Nakano, Ito); bitvector: Myers' bit-vector DP (default dp)",
    )
    parser.add_argument(
        "--pieces", type=integer(1, 1 << 20), metavar="D",
        help="overlapping pieces the text is cut into, one pipeline each (default: from the device's compute units; "
        "at most one a pattern's length of text)",
    )
    parser.add_argument("--all", action="store_true", help="list every end position with distance <= --max-dist")
    parser.add_argument("--max-dist", type=integer(0, 1 << 30), metavar="K", help="largest distance --all lists (required with --all)")
    parser.add_argument("-o", "--output", metavar="OUT", help="output file (default: standard output)")
    add_devices_option(parser)
    return run


def _check_options(args) -> None:
    if args.all and args.max_dist is None:
        raise UsageError("--all needs --max-dist K")
    if args.max_dist is not None and not args.all:
        raise UsageError("--max-dist only applies with --all")


def _hit_lines(prefix: str, ends, distances) -> str:
    """Lines ``prefix end distance`` for numbered hits, formatted by NumPy rather than per hit."""
    import numpy as np

    if len(ends) == 0:
        return ""
    fields = np.char.add(np.char.add(ends.astype(str), "\t"), distances.astype(str))
    return prefix + ("\n" + prefix).join(fields.tolist()) + "\n"


def run(args) -> int:
    _check_options(args)

    from bowmap.modules.asm.kernels import ApproximateMatcher, approximate_match, distance_slices
    from bowmap.runtime.devices import open_devices
    from bowmap.runtime.fasta import read_fasta
    from bowmap.runtime.output import OutputFile, refuse_inputs

    refuse_inputs({"-o": args.output}, {"the patterns X.fa": args.patterns, "the texts Y.fa": args.texts})
    patterns = read_fasta(args.patterns)
    texts = read_fasta(args.texts)
    device = open_devices(args.devices)[0]
    matcher = ApproximateMatcher(device)
    # Case-insensitive, as aligners read FASTA: soft-masked (lowercase) bases are bases.
    sequences = [record.sequence.upper() for record in patterns]
    for text in texts:
        text.sequence = text.sequence.upper()

    def chunks():
        yield (ALL_HEADER if args.all else BEST_HEADER) + "\n"
        for text in texts:
            started = time.perf_counter()
            try:
                if args.all:
                    # A slice of patterns at a time: every end's distance is patterns x text long.
                    for first, table in distance_slices(device, sequences, text.sequence, args.method, args.pieces, matcher):
                        for index, row in enumerate(table, start=first):
                            ends = (row <= args.max_dist).nonzero()[0]
                            yield _hit_lines(f"{patterns[index].name}\t{text.name}\t", ends + 1, row[ends])
                else:
                    matches = approximate_match(device, sequences, text.sequence, args.method, args.pieces, matcher=matcher)
                    for index, pattern in enumerate(patterns):
                        # 0-based half-open [start, end) is 1-based inclusive start + 1 .. end.
                        yield (
                            f"{pattern.name}\t{text.name}\t{matches.distance[index]}\t"
                            f"{matches.start[index] + 1}\t{matches.end[index]}\n"
                        )
            except ValueError as error:
                raise BowmapError(f"{args.texts}:{text.line}: record {text.name!r}: {error}") from None
            log.info(
                "asm: %d pattern(s) against %s (%d symbols), %s [%.2f s]",
                len(patterns), text.name, len(text.sequence), args.method, time.perf_counter() - started,
            )

    with OutputFile(args.output) as output:  # "-" or none: standard output
        for chunk in chunks():
            output.write(chunk)
    return 0
