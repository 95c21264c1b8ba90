"""Options several subcommands share, and the checked number types of every numeric option."""

from __future__ import annotations

import argparse
import math


def add_devices_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--devices",
        metavar="SPEC",
        help="OpenCL devices to use: gpu, cpu, all, or indexes from `bowmap devices` such as 0,1 "
        "(default: every GPU, else the CPU)",
    )


def integer(low: int, high: int):
    """An argparse ``type``: a whole number in ``low..high``; anything else is a one-line usage
    error naming the range (no value reaches the kernels, or a buffer size, unchecked)."""

    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is out of range {low}..{high}")
        return value

    parse.__name__ = "integer"  # argparse names the type in some messages
    return parse


def real(low: float, high: float):
    """An argparse ``type``: a finite number in ``low..high``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value) or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} is out of range {low:g}..{high:g}")
        return value

    parse.__name__ = "real"
    return parse


INT32 = (1 << 31) - 1
