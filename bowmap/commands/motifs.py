"""`bowmap motifs`: all-to-all shared k-mers (exact and within Hamming distance d) of gene
upstream regions, as a weighted gene-similarity graph."""

from __future__ import annotations

import logging
import math
import time

from bowmap.commands.options import add_devices_option, integer, real
from bowmap.runtime.errors import UsageError

log = logging.getLogger("bowmap.modules.motifs.kernels")

IUPAC = b"ACGTURYKMSWBDHVN"
KERNEL_CHOICES = ("auto", "thread-to-pair", "thread-to-pair-hash", "sequential-bucket", "warp-to-bucket", "thread-to-bucket")
MOST_CONFIGURATIONS = 4096  # sub-tables per region: C(k, 0) + ... + C(k, d)
WRITE_CHUNK = 1 << 20  # pairs formatted at a time


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "motifs",
        help="shared k-mers (within Hamming distance d) of all pairs of regions, as a weighted graph",
        description="Compare every pair of regions (e.g. gene upstream regions) of a FASTA file by the "
        "k-mers they share exactly or within Hamming distance d, using multi-level hash tables, and "
        "write the weighted similarity graph as a TSV edge list.",
    )
    parser.add_argument("regions", metavar="REGIONS.fa[.gz]")
    parser.add_argument("-o", "--output", metavar="EDGES.tsv", default="-", help="edge list (default: stdout)")
    parser.add_argument("-k", type=integer(1, 20), default=12, help="k-mer length, 1..20 (default 12)")
    parser.add_argument("-d", "--distance", type=integer(0, 20), default=1, help="largest Hamming distance class (default 1)")
    parser.add_argument(
        "--strands", choices=("forward", "reverse", "both"), default="forward",
        help="compare each record as given, its reverse complement, or both as two regions "
        "NAME:+ and NAME:- (default forward)",
    )
    parser.add_argument(
        "--weights", metavar="W0,W1,..", help="weight of S_0..S_d in the edge weight (default 1,1/2,1/4,...)"
    )
    parser.add_argument(
        "--min-weight", type=real(-1e300, 1e300), default=0.0, metavar="W", help="write only edges of weight above W (default 0)"
    )
    parser.add_argument("--dense", metavar="MATRIX.npy", help="also write the n x n weight matrix (float64)")
    parser.add_argument(
        "--encoding", choices=("auto", "32", "64"), default="auto",
        help="k-mer keys: 32 (2 bits a base, k <= 15) or 64 (3 bits a base, k <= 20); auto: 32 when k <= 15",
    )
    parser.add_argument("--hash", choices=("djb2", "universal", "xor"), default="djb2", help="bucket hash (default djb2)")
    parser.add_argument("--buckets", type=integer(1, 1 << 16), default=8, metavar="B", help="buckets per sub-table (default 8)")
    parser.add_argument("--seed", type=integer(0, (1 << 63) - 1), default=0, help="seed of the universal hash's parameters (default 0)")
    parser.add_argument("--kernel", choices=KERNEL_CHOICES, default="auto", help="comparison kernel (default auto: the fastest on a trial slice when there are "
        "2,000,000 pairs or more, else thread-to-pair)")
    add_devices_option(parser)
    return run


def _options(args):
    from bowmap.modules.motifs.kernels import TableOptions

    if args.distance < 0 or args.distance > args.k:
        raise UsageError(f"-d {args.distance}: must be 0..k")
    configurations = sum(math.comb(args.k, delta) for delta in range(args.distance + 1))
    if configurations > MOST_CONFIGURATIONS:
        raise UsageError(f"-k {args.k} -d {args.distance}: {configurations} sub-tables a region, at most {MOST_CONFIGURATIONS}")
    encoding = args.encoding if args.encoding != "auto" else ("32" if args.k <= 15 else "64")
    if encoding == "32" and args.k > 15:
        raise UsageError(f"--encoding 32 holds k <= 15, not {args.k}; use --encoding 64")
    return TableOptions(args.k, args.distance, encoding, args.hash, args.buckets, args.seed)


def _weights(text, distance: int) -> list[float]:
    from bowmap.modules.motifs.kernels import default_weights

    if text is None:
        return default_weights(distance)
    try:
        weights = [float(word) for word in text.split(",")]
    except ValueError:
        raise UsageError(f"--weights {text}: expected numbers separated by commas") from None
    if len(weights) != distance + 1:
        raise UsageError(f"--weights {text}: expected {distance + 1} weights (S_0..S_{distance})")
    if not all(math.isfinite(weight) for weight in weights):
        raise UsageError(f"--weights {text}: weights must be finite")
    return weights


def read_regions(path: str, strands: str):
    """(names, code arrays) of the regions of ``path`` for ``strands``."""
    import numpy as np

    from bowmap.modules.motifs.kernels import encode_sequence, reverse_complement
    from bowmap.runtime.fasta import invalid_symbol_error, read_fasta

    valid = np.zeros(256, dtype=bool)
    valid[list(IUPAC + IUPAC.lower())] = True
    names, regions = [], []
    for record in read_fasta(path):
        error = invalid_symbol_error(path, record, valid)
        if error is not None:
            raise error
        codes = encode_sequence(record.sequence)
        if strands == "forward":
            names.append(record.name)
            regions.append(codes)
        elif strands == "reverse":
            names.append(record.name)
            regions.append(reverse_complement(codes))
        else:
            names += [f"{record.name}:+", f"{record.name}:-"]
            regions += [codes, reverse_complement(codes)]
    return names, regions


def write_edges(handle, names, scores, weights, min_weight: float) -> int:
    """TSV lines ``gene_i gene_j S_0 .. S_d weight`` of the pairs whose weight is above
    ``min_weight``, in packed pair order; returns the number of edges."""
    import numpy as np

    from bowmap.modules.motifs.kernels import edge_weights, pair_indexes

    levels, pairs = scores.shape
    handle.write(("#gene_i\tgene_j\t" + "\t".join(f"S_{delta}" for delta in range(levels)) + "\tweight\n").encode())
    names = np.array(names, dtype=object)
    edges = 0
    for first in range(0, pairs, WRITE_CHUNK):
        last = min(pairs, first + WRITE_CHUNK)
        weight = edge_weights(scores[:, first:last], weights)
        kept = np.flatnonzero(weight > min_weight)
        if len(kept) == 0:
            continue
        rows, columns = pair_indexes(len(names), first, last)
        columns_text = [names[rows[kept]], names[columns[kept]]]
        columns_text += [scores[delta, first + kept].astype(str).astype(object) for delta in range(levels)]
        columns_text.append(np.char.mod("%.10g", weight[kept]).astype(object))
        lines = columns_text[0]
        for column in columns_text[1:]:
            lines = lines + "\t" + column
        handle.write(("\n".join(lines) + "\n").encode())
        edges += len(kept)
    return edges


def run(args) -> int:
    from bowmap.runtime.output import OutputFile, refuse_inputs

    options = _options(args)
    weights = _weights(args.weights, args.distance)
    refuse_inputs({"-o": args.output, "--dense": args.dense}, {"the input REGIONS.fa": args.regions})
    # Both outputs are opened first (an unwritable one fails before the work), written under
    # temporary names and renamed only when both are complete: a failure leaves neither looking finished.
    edges_output = OutputFile(args.output)
    try:
        dense_output = OutputFile(args.dense) if args.dense else None
    except BaseException:
        edges_output.close(success=False)
        raise
    outputs = [output for output in (edges_output, dense_output) if output is not None]
    try:
        _compare_and_write(args, options, weights, edges_output, dense_output)
        for output in outputs:
            output.finish()
        for output in outputs:
            output.commit()
    finally:
        for output in outputs:
            output.close(success=False)  # after commit: nothing left to do
    return 0


def _compare_and_write(args, options, weights, edges_output, dense_output) -> int:
    import numpy as np

    from bowmap.modules.motifs.kernels import (
        concatenate_regions,
        dense_matrix,
        edge_weights,
        pipelined_scores,
    )
    from bowmap.runtime.devices import open_devices

    started = time.perf_counter()
    names, regions = read_regions(args.regions, args.strands)
    log.info("read %d regions (%s strand(s)) in %.2f s", len(regions), args.strands, time.perf_counter() - started)

    started = time.perf_counter()
    device = open_devices(args.devices)[0]
    timings: dict = {}
    scores = pipelined_scores(*concatenate_regions(regions), options, device, args.kernel, timings=timings)
    log.info(
        "built tables (k %d, d %d, %s-bit keys, %s hash, %d buckets; %.2f s of host work) and compared %d pairs "
        "with %s on %s, pipelined, in %.2f s",
        options.k, options.distance, options.encoding, options.hash, options.buckets, timings["build"],
        scores.shape[1], timings["kernel"], device.info.name, time.perf_counter() - started,
    )

    started = time.perf_counter()
    if dense_output is not None:
        np.save(dense_output, dense_matrix(edge_weights(scores, weights), len(names)))
    edges = write_edges(edges_output, names, scores, weights, args.min_weight)
    log.info("wrote %d edges of weight above %g in %.2f s", edges, args.min_weight, time.perf_counter() - started)
    return edges
