"""`bowmap find`: exact occurrences of patterns in an index (DNA, protein or text)."""

from __future__ import annotations

from bowmap.commands.options import add_devices_option, integer


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "find",
        help="exact search: every occurrence of each pattern in an index (dna, protein or text)",
        description="For each pattern of PATTERNS (FASTA, or one pattern a line whose id is its line number), "
        "print 'ID COUNT POSITIONS': every exact occurrence on the forward strand, overlapping ones too, as "
        "CONTIG:OFFSET (1-based, in reference order, comma-separated), or '*' when there are none or more than "
        "--max-hits. Occurrences spanning two contigs or (DNA) touching an N run are not counted.",
    )
    parser.add_argument("prefix", metavar="PREFIX", help="index built by `bowmap index` (any --alphabet)")
    parser.add_argument("patterns", metavar="PATTERNS", help="FASTA (gzipped or not) or one pattern a line")
    parser.add_argument("--max-hits", type=integer(0, 1 << 30), default=100, metavar="N",
                        help="list at most N positions a pattern; more prints '*' (default 100)")
    parser.add_argument("--device-mem", metavar="SIZE",
                        help="device memory to plan for, e.g. 512M: the blocks stay on the device when they fit half "
                        "of it, else each is uploaded in turn (default: the device's memory)")
    parser.add_argument("-o", "--output", metavar="OUT", help="output file (default: standard output)")
    add_devices_option(parser)
    return run


def run(args) -> int:
    from bowmap.index.load import load_index
    from bowmap.modules.find.search import find, format_lines, read_patterns
    from bowmap.runtime.devices import open_devices, parse_memory
    from bowmap.runtime.output import OutputFile, refuse_inputs

    device_memory = None if args.device_mem is None else parse_memory(args.device_mem)
    refuse_inputs({"-o": args.output}, {"the patterns": args.patterns, "the index manifest": args.prefix + ".bmi"})
    index = load_index(args.prefix)
    patterns = read_patterns(args.patterns, index)
    devices = open_devices(args.devices)
    result = find(index, devices, patterns, args.max_hits, device_memory)
    with OutputFile(args.output) as output:
        output.write(format_lines(index, patterns.ids, result, args.max_hits))
    return 0
