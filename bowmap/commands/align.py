"""`bowmap align`: map reads (FASTQ or FASTA, gzipped or not) to an index, write SAM or BAM."""

from __future__ import annotations

import sys

from bowmap.commands.options import add_devices_option
from bowmap.runtime.errors import UsageError


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "align",
        help="map reads to an index and write SAM/BAM",
        description="Map READS (FASTQ or FASTA, gzipped or not, - for stdin) to the index at PREFIX; "
        "with READS2 (or --interleaved), paired-end reads: READS holds R1, READS2 their mates in the same order.",
    )
    parser.add_argument("index", metavar="PREFIX")
    parser.add_argument("reads", metavar="READS")
    parser.add_argument("mates", metavar="READS2", nargs="?", help="R2 file of paired-end reads")
    parser.add_argument("-o", "--output", metavar="OUT", help="SAM file, or BAM when it ends in .bam (default: SAM on stdout)")
    add_devices_option(parser)
    parser.add_argument(
        "-p", "--processes", type=int, metavar="N",
        help="worker processes, each with its own device context and queue pair, devices taken in turn "
        "(default: one per CPU core but one with GPUs, where the host's work limits speed, as many as "
        "the devices' memory holds; 1 with a CPU device)",
    )
    parser.add_argument(
        "--queues-per-device", type=int, metavar="N",
        help="command queues (and seed/Smith-Waterman thread pairs) per device in each process "
        "(default: 2 with one process, 1 in each of several)",
    )
    parser.add_argument("--end-to-end", action="store_true", help="align whole reads (default: local, with soft clipping)")
    parser.add_argument("--min-score", type=int, metavar="S", help="report alignments scoring at least S (default: 30 local, half a perfect score end-to-end)")
    scoring = parser.add_argument_group("scoring (BWA-MEM's defaults)")
    scoring.add_argument("--match", type=int, default=1, metavar="A", help="match score (default 1)")
    scoring.add_argument("--mismatch", type=int, default=4, metavar="B", help="mismatch penalty (default 4)")
    scoring.add_argument("--gap-open", type=int, default=6, metavar="O", help="gap open penalty; a gap of k costs O + k*E (default 6)")
    scoring.add_argument("--gap-extend", type=int, default=1, metavar="E", help="gap extension penalty (default 1)")
    scoring.add_argument("--clip-penalty", type=int, default=5, metavar="C", help="local mode: soft clipping a read end costs C when alignments are compared, as BWA-MEM's -L (default 5)")
    seeds = parser.add_argument_group("seeds")
    seeds.add_argument("--seed-length", type=int, default=20, metavar="L", help="exact seed length (default 20)")
    seeds.add_argument("--positions-per-read", type=int, default=256, metavar="N", help="located seed positions per read, narrowest intervals first (default 256)")
    seeds.add_argument("--windows-per-read", type=int, default=16, metavar="N", help="candidate windows per read given to Smith-Waterman (default 16)")
    pairs = parser.add_argument_group("paired-end reads")
    pairs.add_argument("--interleaved", action="store_true", help="READS holds pairs: R1, R2, R1, R2, ... (bwa's -p)")
    pairs.add_argument(
        "-I", "--insert-size", metavar="MEAN,SD[,MAX[,MIN]]",
        help="insert-size model, as bwa's -I (default: estimated from the first 25,000 pairs; SD 10%% of MEAN, MIN..MAX MEAN -/+ 4 SD when left out)",
    )
    pairs.add_argument("-U", "--unpaired-penalty", type=int, default=17, metavar="P", help="a pair's mates are aligned apart only when that scores P more than their best pair (default 17, bwa's -U)")
    output = parser.add_argument_group("output")
    output.add_argument("--no-unal", action="store_true", help="leave unaligned reads out")
    output.add_argument("--rg-id", metavar="ID", help="read group ID: an @RG header line and an RG tag on every read")
    output.add_argument("--rg", action="append", default=[], metavar="TAG:VALUE", help="more @RG fields (repeatable; needs --rg-id)")
    part = parser.add_argument_group("part of the input (one job of several: see workflow/ and the README)")
    part.add_argument(
        "-s", "--skip", type=int, default=0, metavar="N",
        help="leave out the first N reads (pairs for paired input), as bowtie2's -s; with -I left out, "
        "the insert-size model is still estimated from the input's first 25,000 pairs (default 0)",
    )
    part.add_argument(
        "-u", "--upto", type=int, metavar="N",
        help="map N reads (pairs) after those skipped, then stop, as bowtie2's -u (default: to the end). "
        "Jobs mapping --skip K*N --upto N for K = 0, 1, ... give together the records of one whole run",
    )
    parser.add_argument("--chunk-bases", type=int, default=4 << 20, metavar="N", help="bases of reads per chunk (default 4 Mi)")
    parser.add_argument("--serial", action="store_true", help="debugging: no threads, one device queue")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (it shows only on a terminal)")
    return run


def run(args) -> int:
    from bowmap.align.options import AlignOptions
    from bowmap.align.run import run_align
    from bowmap.align.seeds import SeedOptions
    from bowmap.align.smith_waterman import Scoring

    if args.processes is not None and args.processes < 1:
        raise UsageError("--processes must be at least 1")
    if args.queues_per_device is not None and args.queues_per_device < 1:
        raise UsageError("--queues-per-device must be at least 1")
    for name in ("match", "seed_length", "positions_per_read", "windows_per_read", "chunk_bases"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1")
    if args.mismatch < 1:
        raise UsageError("--mismatch must be at least 1 (MAPQ weighs mismatches against matches)")
    for name in ("gap_open", "gap_extend", "clip_penalty"):
        if getattr(args, name) < 0:
            raise UsageError(f"--{name.replace('_', '-')} must not be negative")
    try:
        scoring = Scoring(match=args.match, mismatch=args.mismatch, gap_open=args.gap_open, gap_extend=args.gap_extend, end_to_end=args.end_to_end,
                          clip_penalty=args.clip_penalty)
    except ValueError as error:
        raise UsageError(f"scoring options: {error}") from None
    if args.skip < 0:
        raise UsageError("--skip must not be negative")
    if args.upto is not None and args.upto < 1:
        raise UsageError("--upto must be at least 1")
    if args.rg and not args.rg_id:
        raise UsageError("--rg needs --rg-id")
    if args.interleaved and args.mates is not None:
        raise UsageError("--interleaved takes one READS file holding both mates, not two files")
    if args.unpaired_penalty < 0:
        raise UsageError("--unpaired-penalty must not be negative")
    paired = args.interleaved or args.mates is not None
    if args.insert_size is not None and not paired:
        raise UsageError("--insert-size is for paired-end reads (READS2 or --interleaved)")
    insert_size = None
    if args.insert_size is not None:
        from bowmap.align.pairs import parse_insert_size

        insert_size = parse_insert_size(args.insert_size)
    options = AlignOptions(
        index=args.index,
        reads=args.reads,
        mates=args.mates,
        interleaved=args.interleaved,
        insert_size=insert_size,
        unpaired_penalty=args.unpaired_penalty,
        output=args.output,
        devices=args.devices,
        queues_per_device=args.queues_per_device,
        processes=args.processes,
        end_to_end=args.end_to_end,
        seed=SeedOptions(seed_length=args.seed_length, positions_per_read=args.positions_per_read, windows_per_read=args.windows_per_read),
        scoring=scoring,
        min_score=args.min_score,
        write_unaligned=not args.no_unal,
        read_group=(args.rg_id, list(args.rg)) if args.rg_id else None,
        chunk_bases=args.chunk_bases,
        skip=args.skip,
        upto=args.upto,
        serial=args.serial,
        progress=not args.no_progress and sys.stderr.isatty(),
        command_line=args.command_line,
    )
    run_align(options)
    return 0
