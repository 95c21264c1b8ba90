"""Options several subcommands share."""

from __future__ import annotations

import argparse


def add_devices_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--devices",
        metavar="SPEC",
        help="OpenCL devices to use: gpu, cpu, all, or indexes from `bowmap devices` such as 0,1 "
        "(default: every GPU, else the CPU)",
    )
