"""`bowmap index`: build the blocked FM-index of a reference."""

from __future__ import annotations

import sys

from bowmap.commands.options import add_devices_option, integer
from bowmap.index.format import DEFAULT_MAX_READ_LENGTH, DEFAULT_SA_SAMPLE


def add_parser(subparsers):
    index = subparsers.add_parser(
        "index",
        help="build the blocked FM-index of a reference",
        description="Build the FM-index of REF (FASTA, optionally gzipped) at PREFIX, split into "
        "blocks that each fit one device's memory. --alphabet protein indexes amino-acid FASTA, "
        "--alphabet text any file's raw bytes (for `bowmap find`; `bowmap align` needs dna).",
    )
    index.add_argument("reference", metavar="REF.fa[.gz]")
    index.add_argument(
        "--alphabet", choices=("dna", "protein", "text"), default="dna",
        help="dna: FASTA of bases (default); protein: FASTA of amino acids (A-Z, *); text: REF's raw "
        "bytes (1-255), one contig named after the file",
    )
    index.add_argument("prefix", metavar="PREFIX", help="index files are written as PREFIX.*")
    index.add_argument(
        "--device-mem",
        metavar="SIZE",
        help="global memory of the device the index must fit, e.g. 16G (default: the smallest "
        "selected device); half of it goes to one index block, the rest to align buffers",
    )
    index.add_argument(
        "--sa-sample",
        type=integer(1, 1 << 16),
        default=DEFAULT_SA_SAMPLE,
        metavar="N",
        help=f"keep the suffix array at every N-th text position: a locate takes under N steps (default {DEFAULT_SA_SAMPLE})",
    )
    index.add_argument(
        "--max-read-length",
        type=integer(1, 1 << 20),
        default=DEFAULT_MAX_READ_LENGTH,
        metavar="N",
        help=f"longest read the index must serve; blocks overlap by N + 256 bases (default {DEFAULT_MAX_READ_LENGTH})",
    )
    index.add_argument(
        "--threads",
        type=integer(1, 4096),
        metavar="N",
        help="cores for the build: blocks are built by up to N worker processes at once, their "
        "suffix sorts sharing the N cores (default: the cores this process may use)",
    )
    index.add_argument(
        "--max-memory",
        metavar="SIZE",
        help="host memory the build may take, e.g. 16G: blocks run at once only while their predicted "
        "peaks fit, a block predicted over it is built alone (default: 16G, or the memory "
        "available now where that is less)",
    )
    index.add_argument("--no-progress", action="store_true", help="no progress bar (it shows only on a terminal)")
    add_devices_option(index)
    return run


def run(args) -> int:
    from bowmap.index_builder.build import IndexOptions, build_index
    from bowmap.runtime.devices import parse_memory
    from bowmap.runtime.output import refuse_inputs

    refuse_inputs(_index_outputs(args.prefix), {"the reference": args.reference})

    device_memory = max_allocation = None
    if args.device_mem is not None:
        device_memory = parse_memory(args.device_mem)
        # OpenCL guarantees a single buffer at least a quarter of global memory.
        max_allocation = device_memory // 4
    max_memory = None if args.max_memory is None else parse_memory(args.max_memory)
    options = IndexOptions(
        reference=args.reference,
        prefix=args.prefix,
        device_memory=device_memory,
        max_allocation=max_allocation,
        devices=args.devices,
        sa_sample=args.sa_sample,
        max_read_length=args.max_read_length,
        progress=not args.no_progress and sys.stderr.isatty(),
        threads=args.threads,
        max_memory=max_memory,
        alphabet=args.alphabet,
    )
    build_index(options)
    return 0


def _index_outputs(prefix: str) -> list[tuple[str, str]]:
    """The files an index at PREFIX replaces: its manifest, packed text and the block files of
    an index there now (the new one's block count is not known before the build)."""
    import glob
    import re

    from bowmap.index.format import MANIFEST_SUFFIX

    paths = [prefix + MANIFEST_SUFFIX, prefix + ".pac", prefix + ".sym"]
    paths += [path for path in glob.glob(glob.escape(prefix) + ".*") if re.fullmatch(r"\.\d+\.(occ|wm|mrk|sa)", path[len(prefix):])]
    return [("PREFIX", path) for path in paths]
