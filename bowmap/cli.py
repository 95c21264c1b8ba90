"""Command line: parses arguments, builds the options of each phase, and reports errors.

Nothing below this module reads ``sys.argv``. Exit codes: 0 ok, 1 failure, 2 usage, 130 interrupted.
"""

from __future__ import annotations

import argparse
import logging
import sys

from bowmap import __version__
from bowmap.errors import BowmapError, UsageError

log = logging.getLogger("bowmap")


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line (and exit code 2), not the whole usage."""

    def error(self, message):
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def _add_devices_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--devices",
        metavar="SPEC",
        help="OpenCL devices to use: gpu, cpu, all, or indexes from `bowmap devices` such as 0,1 "
        "(default: every GPU, else the CPU)",
    )


def _build_parser() -> argparse.ArgumentParser:
    from bowmap.index_format import DEFAULT_MAX_READ_LENGTH, DEFAULT_SA_SAMPLE

    parser = _Parser(prog="bowmap", description="Map DNA reads to a reference with OpenCL kernels (GPU or CPU).")
    parser.add_argument("--version", action="version", version=f"bowmap {__version__}")
    parser.add_argument("-q", "--quiet", action="store_true", help="log only warnings and errors")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    devices = commands.add_parser("devices", help="list OpenCL platforms and devices")
    _add_devices_option(devices)

    index = commands.add_parser(
        "index",
        help="build the blocked FM-index of a reference",
        description="Build the FM-index of REF (FASTA, optionally gzipped) at PREFIX, split into "
        "blocks that each fit one device's memory.",
    )
    index.add_argument("reference", metavar="REF.fa[.gz]")
    index.add_argument("prefix", metavar="PREFIX", help="index files are written as PREFIX.*")
    index.add_argument(
        "--device-mem",
        metavar="SIZE",
        help="global memory of the device the index must fit, e.g. 16G (default: the smallest "
        "selected device); half of it goes to one index block, the rest to align buffers",
    )
    index.add_argument(
        "--sa-sample",
        type=int,
        default=DEFAULT_SA_SAMPLE,
        metavar="N",
        help=f"keep the suffix array at every N-th text position: a locate takes under N steps (default {DEFAULT_SA_SAMPLE})",
    )
    index.add_argument(
        "--max-read-length",
        type=int,
        default=DEFAULT_MAX_READ_LENGTH,
        metavar="N",
        help=f"longest read the index must serve; blocks overlap by N + 256 bases (default {DEFAULT_MAX_READ_LENGTH})",
    )
    index.add_argument("--no-progress", action="store_true", help="no progress bar (it shows only on a terminal)")
    _add_devices_option(index)

    inspect = commands.add_parser("inspect", help="check an index and print its contigs and blocks")
    inspect.add_argument("prefix", metavar="PREFIX")
    return parser


def _run_devices(args) -> int:
    from bowmap.devices import build_problem, format_memory, list_devices, nvidia_hint, parse_device_spec

    devices = list_devices()
    selected = {info.index for info in parse_device_spec(args.devices, devices)} if devices else set()
    print("#\tplatform\tdevice\ttype\tcompute_units\tglobal_memory\tmax_allocation\tlocal_memory\tkernels\tselected")
    for info in devices:
        problem = build_problem(info.index)
        print(
            f"{info.index}\t{info.platform}\t{info.name}\t{info.kind}\t{info.compute_units}\t"
            f"{format_memory(info.global_memory)}\t{format_memory(info.max_allocation)}\t"
            f"{format_memory(info.local_memory)}\t{'build' if problem is None else 'FAIL: ' + problem}\t"
            f"{'*' if info.index in selected else ''}"
        )
    hint = nvidia_hint(devices)
    if hint:
        log.warning(hint)
    if not devices:
        raise BowmapError("no OpenCL device found; install a CPU device with: pip install 'bowmap[pocl]'")
    return 0


def _run_index(args) -> int:
    from bowmap.devices import parse_memory
    from bowmap.index_builder.build import IndexOptions, build_index

    if args.sa_sample < 1:
        raise UsageError(f"--sa-sample {args.sa_sample}: must be at least 1")
    if args.max_read_length < 1:
        raise UsageError(f"--max-read-length {args.max_read_length}: must be at least 1")
    device_memory = max_allocation = None
    if args.device_mem is not None:
        device_memory = parse_memory(args.device_mem)
        # OpenCL guarantees a single buffer at least a quarter of global memory.
        max_allocation = device_memory // 4
    options = IndexOptions(
        reference=args.reference,
        prefix=args.prefix,
        device_memory=device_memory,
        max_allocation=max_allocation,
        devices=args.devices,
        sa_sample=args.sa_sample,
        max_read_length=args.max_read_length,
        progress=not args.no_progress and sys.stderr.isatty(),
    )
    build_index(options)
    return 0


def _run_inspect(args) -> int:
    from bowmap.index import load_index

    index = load_index(args.prefix)
    parameters = index.manifest["parameters"]
    print(f"index\t{args.prefix}\tformat {index.manifest['format_version']}\t{index.total_length} bases")
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


_COMMANDS = {"devices": _run_devices, "index": _run_index, "inspect": _run_inspect}


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time (tests swap it), not the one at start."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):
        pass


def _setup_logging() -> None:
    root = logging.getLogger("bowmap")
    if not any(isinstance(handler, _StderrHandler) for handler in root.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
        root.addHandler(handler)
        root.propagate = False


def main(argv: list[str] | None = None) -> int:
    _setup_logging()
    try:
        args = _build_parser().parse_args(argv)
        logging.getLogger("bowmap").setLevel(logging.WARNING if args.quiet else logging.INFO)
        if args.command is None:
            _build_parser().print_help(sys.stderr)
            return 2
        return _COMMANDS[args.command](args)
    except BowmapError as error:
        print(f"bowmap: error: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("bowmap: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
