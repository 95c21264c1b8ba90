"""Command line: parses arguments, builds the options of each phase, and reports errors.

Subcommands live in :mod:`bowmap.commands`, one module each. Nothing below this module reads
``sys.argv``. Exit codes: 0 ok, 1 failure, 2 usage, 130 interrupted (^C), 143 terminated
(SIGTERM), 141 standard output closed by its reader (as a shell shows for samtools or bwa).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import pkgutil
import shlex
import signal
import sys
import threading

from bowmap import __version__, commands
from bowmap.runtime.errors import BowmapError, UsageError
from bowmap.runtime.output import silence_stdout

log = logging.getLogger("bowmap")


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line (and exit code 2), not the whole usage."""

    def error(self, message):
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def _build_parser() -> tuple[argparse.ArgumentParser, dict]:
    """The parser and, for each subcommand, the function that runs it."""
    parser = _Parser(prog="bowmap", description="Map DNA reads to a reference with OpenCL kernels (GPU or CPU).")
    parser.add_argument("--version", action="version", version=f"bowmap {__version__}")
    parser.add_argument("-q", "--quiet", action="store_true", help="log only warnings and errors")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    runners = {}
    for module_info in pkgutil.iter_modules(commands.__path__):
        if module_info.name != "options":
            module = importlib.import_module(f"{commands.__name__}.{module_info.name}")
            before = set(subparsers.choices)
            runner = module.add_parser(subparsers)
            for name in set(subparsers.choices) - before:
                runners[name] = runner
                _add_common_options(subparsers.choices[name])
    return parser, runners


def _add_common_options(parser: argparse.ArgumentParser) -> None:
    """--version and -q after the subcommand too (``bowmap align --version``, ``bowmap align -q``);
    -q's default is left unset, so a -q given before the subcommand still counts."""
    parser.add_argument("--version", action="version", version=f"bowmap {__version__}")
    parser.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help="log only warnings and errors")


def _parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """parse_args, but an unknown option after a subcommand is that subcommand's usage error
    (``see bowmap align --help``), not the top-level parser's."""
    args, extras = parser.parse_known_args(argv)
    if extras:
        command = getattr(args, "command", None)
        prog = f"{parser.prog} {command}" if command else parser.prog
        raise UsageError(f"{prog}: unrecognized arguments: {' '.join(extras)} (see {prog} --help)")
    return args


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


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled as ^C is (workers stopped, temporary output removed), exit code 143."""


def _raise_terminated(signum, frame):
    raise Terminated


def entry() -> None:
    """The ``bowmap`` program (its console script, and ``python -m bowmap``): :func:`main`, then
    an exit without the interpreter's teardown. The run has closed its outputs and ended its
    processes by then; what the teardown would add is the release of the device context, its
    programs, queues and buffers one by one, while an interrupted run's threads may still be
    enqueueing on them. multiprocessing's own finalizers still run (a semaphore left behind
    makes its resource tracker warn on standard error)."""
    from bowmap.runtime.devices import allow_forks_of_device_users

    allow_forks_of_device_users()  # nothing has asked OpenCL anything yet in this process
    code = main()
    try:
        if sys.stdout is not None:  # None: started with standard output closed
            sys.stdout.flush()
    except BrokenPipeError:  # as main() reports it: the reader has gone
        silence_stdout()
        code = code or 141
    except OSError:
        code = code or 1
    from multiprocessing import util

    util._run_finalizers(0)  # noqa: SLF001 - what multiprocessing runs at exit, less the joins
    logging.shutdown()
    if sys.stderr is not None:
        sys.stderr.flush()
    os._exit(code)


def main(argv: list[str] | None = None) -> int:
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _raise_terminated) if in_main_thread else None
    try:
        return _main(argv)
    finally:
        if in_main_thread:
            signal.signal(signal.SIGTERM, previous)


def _main(argv: list[str] | None) -> int:
    _setup_logging()
    try:
        parser, runners = _build_parser()
        args = _parse(parser, argv)
        args.command_line = shlex.join(["bowmap", *(sys.argv[1:] if argv is None else argv)])  # for @PG
        logging.getLogger("bowmap").setLevel(logging.WARNING if args.quiet else logging.INFO)
        if args.command is None:
            parser.print_help(sys.stderr)
            return 2
        return runners[args.command](args)
    except BowmapError as error:
        print(f"bowmap: error: {error}", file=sys.stderr)
        return error.exit_code
    except Terminated:
        print("bowmap: terminated", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("bowmap: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of standard output has gone (`bowmap align ... | head`): exit quietly with
        # 141 (128 + SIGPIPE), what a shell reports for samtools, bwa or bowtie2 there (they die
        # of SIGPIPE, silently); pipefail scripts see the same status as for them.
        silence_stdout()
        return 141
