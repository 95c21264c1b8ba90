"""`bowmap inspect`: check an index and print its contigs and blocks."""

from __future__ import annotations


def add_parser(subparsers):
    inspect = subparsers.add_parser("inspect", help="check an index and print its contigs and blocks")
    inspect.add_argument("prefix", metavar="PREFIX")
    return run


def run(args) -> int:
    from bowmap.index.load import index_prefix, load_index

    args.prefix = index_prefix(args.prefix)
    index = load_index(args.prefix)
    parameters = index.manifest["parameters"]
    unit = "bases" if index.alphabet == "dna" else "symbols"
    print(f"index\t{args.prefix}\tformat {index.manifest['format_version']}\t{index.total_length} {unit}\talphabet {index.alphabet}")
    if index.alphabet != "dna":
        print(f"symbols\t{len(index.symbols)}\t{bytes(index.symbols)!r}")
    print(
        f"parameters\tsa_sample {parameters['sa_sample']}\tmax_read_length {parameters['max_read_length']}"
        f"\toverlap {parameters['overlap']}\tblock_bases {parameters['block_bases']}"
    )
    for name, start, length in zip(index.contig_names, index.contig_starts, index.contig_lengths):
        print(f"contig\t{name}\t{length}\tstart {start}")
    print(f"ambiguous\t{len(index.ambiguous_starts)} run(s)\t{int(index.ambiguous_lengths.sum())} bases")
    for block in index.blocks:
        print(f"block\t{block.number}\tstart {block.start}\tlength {block.length}\tprimary {block.primary}")
    return 0
