"""`bowmap sw-search`: Smith-Waterman database search of protein (or DNA) queries."""

from __future__ import annotations

import logging

from bowmap.commands.options import add_devices_option, integer
from bowmap.modules.sw_search.matrices import TABLES
from bowmap.runtime.errors import BowmapError, UsageError

log = logging.getLogger("bowmap.modules.sw_search")

HEADER = "#query\ttarget\tscore\ttarget_length\n"
MATRICES = tuple(TABLES)


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "sw-search",
        help="Smith-Waterman database search: best local alignment scores of each query against a database",
        description="For every query of QUERIES.fa: the local alignment score (Smith-Waterman, affine gaps) "
        "against every sequence of DB.fa, and the --top best, by score then database order, as tab-separated "
        "lines: query, target, score, target length. Residues are scored without regard to case; B, Z, X and * "
        "score as the matrix's own rows; U, O and any other letter as X (as N with --match/--mismatch). A gap "
        "of L residues costs --gap-open + L x --gap-extend (BLAST's convention: parasail's open is ours plus "
        "one extend).",
    )
    parser.add_argument("queries", metavar="QUERIES.fa", help="queries, FASTA (gzipped or not)")
    parser.add_argument("database", metavar="DB.fa", help="database sequences, FASTA (gzipped or not)")
    parser.add_argument("--matrix", type=str.upper, choices=MATRICES, metavar="NAME",
                        help=f"substitution matrix as NCBI prints it: {', '.join(MATRICES)} (default BLOSUM62)")
    parser.add_argument("--match", type=integer(1, 1000), metavar="M", help="DNA: score of a match (with --mismatch; instead of --matrix)")
    parser.add_argument("--mismatch", type=integer(-1000, 0), metavar="X", help="DNA: score of a mismatch, <= 0 (with --match)")
    parser.add_argument("--gap-open", type=integer(0, 1000), default=11, metavar="G", help="gap opening cost (default 11)")
    parser.add_argument("--gap-extend", type=integer(0, 1000), default=1, metavar="E", help="cost a gap residue (default 1)")
    parser.add_argument("--top", type=integer(1, 1 << 24), default=10, metavar="N", help="hits a query (default 10)")
    parser.add_argument(
        "--method", choices=("intertask", "intratask", "auto"), default="auto",
        help="intertask: two database sequences a work-item (packed 16-bit lanes); intratask: one a work-group "
        "(anti-diagonals); auto: intratask for a batch's longest sequences when they are too few to fill the device, "
        "or for those longer than --crossover (default auto; see docs/sw_search.md)",
    )
    parser.add_argument("--crossover", type=integer(1, 1 << 31), metavar="LENGTH",
                        help="auto: database sequences longer than this go to intratask (default: chosen a batch at a time from the "
                        "device's compute units and the batch's lengths)")
    parser.add_argument("--batch-residues", type=integer(1, 1 << 40), metavar="N",
                        help="database residues sent to a device at a time (default: from the device's memory)")
    parser.add_argument("-o", "--output", metavar="OUT", help="output file (default: standard output)")
    add_devices_option(parser)
    return run


def _scoring(args):
    from bowmap.modules.sw_search.scoring import Scoring

    dna = args.match is not None or args.mismatch is not None
    if dna and (args.match is None or args.mismatch is None):
        raise UsageError("--match and --mismatch go together")
    if dna and args.matrix is not None:
        raise UsageError("--matrix and --match/--mismatch exclude each other")
    if args.gap_open + args.gap_extend < 1:
        raise UsageError("--gap-open + --gap-extend must be at least 1")
    if dna:
        return Scoring(None, args.gap_open, args.gap_extend, args.match, args.mismatch)
    return Scoring(args.matrix or "BLOSUM62", args.gap_open, args.gap_extend)


def _read(path: str, scoring, unique_names: bool):
    """(records, Targets) of a FASTA file, every residue coded; a byte that is no residue is a
    one-line error naming its file, line and record."""
    import numpy as np

    from bowmap.modules.sw_search.kernels import Targets
    from bowmap.modules.sw_search.scoring import INVALID
    from bowmap.runtime.fasta import invalid_symbol_error, read_fasta

    records = read_fasta(path, unique_names=unique_names)
    lengths = np.array([len(record.sequence) for record in records], dtype=np.int64)
    codes = scoring.encode(b"".join(record.sequence for record in records))
    bad = np.flatnonzero(codes == INVALID)
    if len(bad):
        record = records[int(np.searchsorted(np.cumsum(lengths), bad[0], side="right"))]
        raise invalid_symbol_error(path, record, scoring.codes != INVALID)
    offsets = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    return records, Targets(codes, offsets, lengths)


def run(args) -> int:
    scoring = _scoring(args)

    import numpy as np

    from bowmap.modules.sw_search.search import SearchOptions, search
    from bowmap.runtime.devices import open_devices
    from bowmap.runtime.output import OutputFile, refuse_inputs

    refuse_inputs({"-o": args.output}, {"the queries": args.queries, "the database": args.database})
    query_records, queries = _read(args.queries, scoring, unique_names=False)
    target_records, targets = _read(args.database, scoring, unique_names=False)
    devices = open_devices(args.devices)
    options = SearchOptions(method=args.method, top=args.top, crossover=args.crossover, batch_residues=args.batch_residues)
    query_codes = [queries.codes[start : start + length] for start, length in zip(queries.offsets, queries.lengths)]
    log.info("sw-search: %d queries (%d residues) against %d sequences (%d residues), %s, gaps %d + L x %d, %s on %d device(s)",
             len(query_records), int(queries.lengths.sum()), len(target_records), int(targets.lengths.sum()),
             scoring.matrix or f"match {scoring.match} mismatch {scoring.mismatch}", scoring.gap_open, scoring.gap_extend,
             args.method, len(devices))
    try:
        hits = search(query_codes, targets, scoring, devices, options)
    except ValueError as error:
        raise BowmapError(f"sw-search: {error}") from None
    log.info("sw-search: %d cells in %.2f s: %.1f GCUPS (intertask %d, intratask %d sequences a query; %d re-run in 32 bits)",
             hits.cells, hits.seconds, hits.gcups, hits.methods["intertask"], hits.methods["intratask"], hits.reruns)
    names = np.array([record.name for record in target_records], dtype=object)
    with OutputFile(args.output) as output:  # "-" or none: standard output
        output.write(HEADER)
        for record, indexes, scores in zip(query_records, hits.targets, hits.scores):
            lines = [f"{record.name}\t{name}\t{score}\t{length}\n" for name, score, length in
                     zip(names[indexes], scores.tolist(), targets.lengths[indexes].tolist())]
            output.write("".join(lines))
    return 0
