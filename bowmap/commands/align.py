"""`bowmap align`: map reads (FASTQ or FASTA, gzipped or not) to an index, write SAM or BAM."""

from __future__ import annotations

import dataclasses
import functools
import importlib
import sys

from bowmap.commands.options import INT32, add_devices_option, integer
from bowmap.runtime.errors import BowmapError, UsageError


class OptionDefault:
    """An option's default, taken from the field of the options dataclass that holds it (each
    default once, there: AlignOptions, RecordOptions, SeedOptions, Scoring) when help or the
    run needs it, so that building the parser imports neither NumPy nor PyOpenCL. Help shows it
    through ``%(default)s``."""

    def __init__(self, module: str, dataclass: str, name: str):
        self.module, self.dataclass, self.name = module, dataclass, name

    @functools.cached_property
    def value(self):
        holder = getattr(importlib.import_module(self.module), self.dataclass)
        field = next(field for field in dataclasses.fields(holder) if field.name == self.name)
        return field.default

    def __str__(self) -> str:
        return str(self.value)


def option_default(holder: str, name: str) -> OptionDefault:
    """``holder`` is one of the dataclasses of `bowmap align`'s options (see OptionDefault)."""
    modules = {"AlignOptions": "bowmap.align.options", "RecordOptions": "bowmap.align.options",
               "SeedOptions": "bowmap.align.seed.seeds", "Scoring": "bowmap.align.extend.smith_waterman"}
    return OptionDefault(modules[holder], holder, name)




def add_parser(subparsers):
    parser = subparsers.add_parser(
        "align",
        help="map reads to an index and write SAM/BAM",
        description="Map READS (FASTQ or FASTA, gzipped or not, - for stdin) to the index at PREFIX; "
        "with READS2 (or --interleaved), paired-end reads: READS holds R1, READS2 their mates in the same order.",
    )
    parser.add_argument("index", metavar="PREFIX", help="the index's prefix, as given to `bowmap index`, or its PREFIX.bmi file")
    parser.add_argument("reads", metavar="READS")
    parser.add_argument("mates", metavar="READS2", nargs="?", help="R2 file of paired-end reads")
    parser.add_argument("-o", "--output", metavar="OUT", help="SAM file, or BAM when it ends in .bam, any case (default: standard output)")
    parser.add_argument("-O", "--output-fmt", metavar="FORMAT", type=str.lower, choices=("sam", "bam"),
                        help="sam or bam, whatever the name (default: from the name's extension; SAM on standard output)")
    add_devices_option(parser)
    parser.add_argument(
        "-p", "-t", "--processes", type=integer(1, 4096), metavar="N",
        help="host worker processes, devices taken in turn; they share one owner process a device (its "
        "context and one copy of the index) where the index fits, else each has its own context "
        "(default: one per CPU core but one with GPUs, where the host's work limits speed; 1 with a "
        "CPU device); -t as bwa's and minimap2's threads",
    )
    parser.add_argument(
        "--queues-per-device", type=integer(1, 64), metavar="N",
        help="command queues (and seed/Smith-Waterman thread pairs) per device in each process "
        "(default: 2 with one process, 1 in each of several)",
    )
    parser.add_argument("--end-to-end", action="store_true", help="align whole reads (default: local, with soft clipping)")
    parser.add_argument("--min-score", type=integer(-INT32, INT32), metavar="S", help="report alignments scoring at least S (default: 30 local, half a perfect score end-to-end)")
    scoring = parser.add_argument_group("scoring (BWA-MEM's defaults)")
    scoring.add_argument("--match", type=integer(1, 1000), default=option_default("Scoring", "match"), metavar="A", help="match score (default %(default)s)")
    scoring.add_argument("--mismatch", type=integer(1, 1000), default=option_default("Scoring", "mismatch"), metavar="B", help="mismatch penalty (default %(default)s)")
    scoring.add_argument("--gap-open", type=integer(0, 1000), default=option_default("Scoring", "gap_open"), metavar="O",
                         help="gap open penalty; a gap of k costs O + k*E (default %(default)s)")
    scoring.add_argument("--gap-extend", type=integer(0, 1000), default=option_default("Scoring", "gap_extend"), metavar="E", help="gap extension penalty (default %(default)s)")
    scoring.add_argument("--clip-penalty", type=integer(0, 1000), default=option_default("Scoring", "clip_penalty"), metavar="C",
                         help="local mode: soft clipping a read end costs C when alignments are compared, as BWA-MEM's -L (default %(default)s)")
    seeds = parser.add_argument_group("seeds")
    seeds.add_argument("--seed-length", type=integer(1, 32), default=option_default("SeedOptions", "seed_length"), metavar="L",
                       help="exact seed length, at most 32 (default %(default)s)")
    seeds.add_argument("--positions-per-read", type=integer(1, 1 << 16), default=option_default("SeedOptions", "positions_per_read"), metavar="N",
                       help="located seed positions per read, narrowest intervals first (default %(default)s)")
    seeds.add_argument("--windows-per-read", type=integer(1, 1024), default=option_default("SeedOptions", "windows_per_read"), metavar="N",
                       help="candidate windows per read given to Smith-Waterman (default %(default)s)")
    pairs = parser.add_argument_group("paired-end reads")
    pairs.add_argument("--interleaved", action="store_true", help="READS holds pairs: R1, R2, R1, R2, ... (bwa's -p)")
    pairs.add_argument(
        "-I", "--insert-size", metavar="MEAN,SD[,MAX[,MIN]]",
        help="insert-size model, as bwa's -I (default: estimated from the first 25,000 pairs; SD 10%% of MEAN, MIN..MAX MEAN -/+ 4 SD when left out)",
    )
    pairs.add_argument("-U", "--unpaired-penalty", type=integer(0, 1000), default=option_default("AlignOptions", "unpaired_penalty"), metavar="P",
                       help="a pair's mates are aligned apart only when that scores P more than their best pair (default %(default)s, bwa's -U)")
    output = parser.add_argument_group("output")
    output.add_argument("--no-unal", action="store_true", help="leave unaligned reads out")
    output.add_argument("--max-alternatives", type=integer(0, 1000), default=option_default("RecordOptions", "max_alternatives"), metavar="N",
                        help="XA lists a read's alternative hits (scoring 80%% of its best or more) when it has at most N (default %(default)s, bwa's -h; 0: no XA)")
    output.add_argument("--secondary", type=integer(0, 1000), default=option_default("RecordOptions", "secondary"), metavar="N",
                        help="write up to N alternative hits as secondary records (FLAG 0x100) in place of XA (default %(default)s)")
    output.add_argument("--no-supplementary", action="store_true",
                        help="no split reads: by default a part of a read clipped off its primary and aligned elsewhere gets a supplementary record and SA")
    output.add_argument("--hard-clip-supplementary", action="store_true",
                        help="write supplementary records hard-clipped (H; SEQ and QUAL of the aligned part only), as bwa does without -Y (default: soft-clipped)")
    output.add_argument("-M", "--split-as-secondary", action="store_true", help="mark the split reads' supplementary records secondary (FLAG 0x100), as bwa's -M (for Picard)")
    output.add_argument("--rg-id", metavar="ID", help="read group ID: an @RG header line and an RG tag on every read")
    output.add_argument("--rg", action="append", default=[], metavar="TAG:VALUE", help="more @RG fields (repeatable; needs --rg-id)")
    output.add_argument("-R", "--read-group", metavar="LINE", help="the whole @RG line, as bwa's -R: '@RG\\tID:x\\tSM:y' (\\t as typed, "
                        "or tabs); instead of --rg-id and --rg")
    part = parser.add_argument_group("part of the input (one job of several: see workflow/ and the README)")
    part.add_argument(
        "-s", "--skip", type=integer(0, 1 << 62), default=option_default("AlignOptions", "skip"), metavar="N",
        help="leave out the first N reads (pairs for paired input), as bowtie2's -s; with -I left out, "
        "the insert-size model is still estimated from the input's first 25,000 pairs (default %(default)s)",
    )
    part.add_argument(
        "-u", "--upto", type=integer(1, 1 << 62), metavar="N",
        help="map N reads (pairs) after those skipped, then stop, as bowtie2's -u (default: to the end). "
        "Jobs mapping --skip K*N --upto N for K = 0, 1, ... give together the records of one whole run",
    )
    parser.add_argument("--chunk-bases", type=integer(1, 1 << 30), metavar="N",
                        help="bases of reads per chunk (default 4 Mi; mapping block by block, as many as the memory allows, up to 256 Mi)")
    parser.add_argument(
        "--device-mem", metavar="SIZE",
        help="most memory to use of each device, e.g. 16G (default: all of it); when the index's blocks, "
        "the packed reference and the chunks' buffers do not fit, the blocks are streamed through the "
        "device (same output, slower)",
    )
    parser.add_argument("--serial", action="store_true", help="debugging: no threads, one device queue")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (it shows only on a terminal)")
    return run


def run(args) -> int:
    from bowmap.align.options import AlignOptions, RecordOptions
    from bowmap.align.run import run_align
    from bowmap.align.seed.seeds import SeedOptions
    from bowmap.align.extend.smith_waterman import Scoring
    from bowmap.runtime.devices import parse_memory
    from bowmap.runtime.output import refuse_inputs, sam_output_format

    from bowmap.index.load import index_prefix

    for name, value in vars(args).items():
        if isinstance(value, OptionDefault):  # not given: its dataclass's default
            setattr(args, name, value.value)
    args.index = index_prefix(args.index)
    output_format = sam_output_format(args.output, args.output_fmt)
    if output_format == "bam" and args.output is None and sys.stdout.isatty():
        # As gzip and bgzip: binary on a terminal garbles it; `-o -` names standard output on purpose.
        raise BowmapError("-O bam: compressed data not written to a terminal (redirect standard output, or give -o - to write it anyway)")
    device_memory = None if args.device_mem is None else parse_memory(args.device_mem)
    _check_index_prefix(args.index)
    _check_dna_index(args.index)
    reads_files = [("the reads file", args.reads)] + ([("the mates' reads file", args.mates)] if args.mates else [])
    refuse_inputs({"-o": args.output}, [*reads_files, *_index_files(args.index)])
    try:
        scoring = Scoring(match=args.match, mismatch=args.mismatch, gap_open=args.gap_open, gap_extend=args.gap_extend, end_to_end=args.end_to_end,
                          clip_penalty=args.clip_penalty)
    except ValueError as error:
        raise UsageError(f"scoring options: {error}") from None
    read_group = _read_group(args)
    insert_size = None
    if args.insert_size is not None:
        from bowmap.align.extend.pairs import parse_insert_size

        insert_size = parse_insert_size(args.insert_size)
    options = AlignOptions(
        index=args.index,
        reads=args.reads,
        mates=args.mates,
        interleaved=args.interleaved,
        insert_size=insert_size,
        unpaired_penalty=args.unpaired_penalty,
        output=args.output,
        output_format=output_format,
        devices=args.devices,
        queues_per_device=args.queues_per_device,
        processes=args.processes,
        end_to_end=args.end_to_end,
        records=RecordOptions(max_alternatives=args.max_alternatives, secondary=args.secondary, supplementary=not args.no_supplementary,
                              split_as_secondary=args.split_as_secondary, hard_clip_supplementary=args.hard_clip_supplementary),
        seed=SeedOptions(seed_length=args.seed_length, positions_per_read=args.positions_per_read, windows_per_read=args.windows_per_read),
        scoring=scoring,
        min_score=args.min_score,
        write_unaligned=not args.no_unal,
        read_group=read_group,
        chunk_bases=args.chunk_bases,
        device_memory=device_memory,
        skip=args.skip,
        upto=args.upto,
        serial=args.serial,
        progress=not args.no_progress and sys.stderr.isatty(),
        command_line=args.command_line,
    )
    options.check()
    run_align(options)
    return 0


def _read_group(args) -> tuple[str, list[str]] | None:
    """(ID, ["TAG:VALUE", ...]) from --rg-id and --rg, or from -R's whole line as bwa takes it
    (``@RG\\tID:x\\tSM:y``, the two characters backslash and t standing for a tab)."""
    if args.read_group is not None:
        if args.rg_id or args.rg:
            raise UsageError("-R gives the whole @RG line: use it instead of --rg-id and --rg, not with them")
        fields = args.read_group.replace("\\t", "\t").split("\t")
        if fields[0] != "@RG":
            raise UsageError(f"-R {args.read_group!r}: a read group line starts with @RG, as '@RG\\tID:x\\tSM:y'")
        identifiers = [field[3:] for field in fields[1:] if field.startswith("ID:")]
        if len(identifiers) != 1:
            raise UsageError(f"-R {args.read_group!r}: needs exactly one ID:value field")
        identifier, others = identifiers[0], [field for field in fields[1:] if not field.startswith("ID:")]
        for field in others:
            tag, colon, value = field.partition(":")
            if not (len(tag) == 2 and tag.isascii() and tag[0].isalpha() and tag.isalnum() and colon and value):
                raise UsageError(f"-R {args.read_group!r}: {field!r} is no TAG:VALUE field (a two-character tag such as SM:sample)")
        _check_read_group_id(identifier, "-R ID")
        return identifier, others
    if args.rg and not args.rg_id:
        raise UsageError("--rg needs --rg-id")
    if args.rg_id is None:
        return None
    _check_read_group_id(args.rg_id, "--rg-id")
    return args.rg_id, list(args.rg)


def _check_read_group_id(identifier: str, what: str) -> None:
    """An ID goes into every record's RG:Z tag: no whitespace, and no backslash-t (a bwa-style
    line given to --rg-id would become one literal ID)."""
    if not identifier or "\\t" in identifier or any(character.isspace() or not character.isprintable() for character in identifier):
        hint = "; give a whole @RG line with -R" if "\\t" in identifier else ""
        raise UsageError(f"{what} {identifier!r}: a read group ID is printable text without spaces, tabs or \\t{hint}")


def _index_files(prefix: str) -> list[tuple[str, str]]:
    """PREFIX's manifest and the files it names, (description, path); an output must be none of
    them. A manifest that does not load names no files: the run fails on it anyway."""
    import os

    from bowmap.index.format import MANIFEST_SUFFIX
    from bowmap.index.load import read_manifest
    from bowmap.runtime.errors import BowmapError

    files = [(f"the manifest of index {prefix}", prefix + MANIFEST_SUFFIX)]
    try:
        manifest = read_manifest(prefix)
        entries = list(manifest["files"].values()) + [entry for block in manifest["blocks"] for entry in block["files"].values()]
        folder = os.path.dirname(os.path.abspath(prefix))
        files += [(f"a file of index {prefix}", os.path.join(folder, entry["name"])) for entry in entries]
    except (BowmapError, KeyError, TypeError, AttributeError):
        pass
    return files


def _check_dna_index(prefix: str) -> None:
    """Reads align to a DNA index only: a protein or text index (bowmap find's) is one line."""
    import os

    from bowmap.index.format import MANIFEST_SUFFIX
    from bowmap.index.load import read_manifest

    if os.path.exists(prefix + MANIFEST_SUFFIX):
        alphabet = read_manifest(prefix).get("alphabet", "dna")
        if alphabet != "dna":
            raise BowmapError(
                f"{prefix}: a {alphabet} index; bowmap align maps DNA reads to a DNA index (use bowmap find to search it)"
            )


def _check_index_prefix(prefix: str) -> None:
    """A reads file given as PREFIX (the two arguments swapped, or a reference not indexed yet)
    gets a usage error saying so, rather than a suggestion to build an index named after it."""
    import gzip
    import os

    from bowmap.index.format import MANIFEST_SUFFIX

    if os.path.exists(prefix + MANIFEST_SUFFIX) or not os.path.isfile(prefix):
        return
    try:
        with open(prefix, "rb") as handle:
            start = handle.read(2)
        with gzip.open(prefix, "rb") if start == b"\x1f\x8b" else open(prefix, "rb") as handle:
            first = handle.read(4096).lstrip()[:1]
    except (OSError, EOFError):
        return
    if first == b"@":
        raise UsageError(f"{prefix}: a FASTQ file given as PREFIX; usage: bowmap align PREFIX READS (are the two swapped?)")
    if first == b">":
        raise UsageError(
            f"{prefix}: a FASTA file given as PREFIX; index it first (bowmap index {prefix} PREFIX), "
            "then bowmap align PREFIX READS (or are the two swapped?)"
        )
