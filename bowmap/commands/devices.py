"""`bowmap devices`: list OpenCL platforms and devices."""

from __future__ import annotations

import logging

from bowmap.commands.options import add_devices_option
from bowmap.runtime.errors import BowmapError

log = logging.getLogger("bowmap")


def add_parser(subparsers):
    parser = subparsers.add_parser("devices", help="list OpenCL platforms and devices")
    add_devices_option(parser)
    return run


def run(args) -> int:
    from bowmap.runtime.devices import (
        build_problem,
        format_memory,
        list_devices,
        nvidia_hint,
        parse_device_spec,
    )

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
