"""Device layer: selection rules, the program cache, memory sizes, the NVIDIA hint."""

from __future__ import annotations

import dataclasses
import re
import threading

import pytest

from bowmap.runtime import devices as devices_module
from bowmap.runtime.devices import (
    DeviceInfo,
    kernel_source,
    open_devices,
    parse_device_spec,
    parse_memory,
)
from bowmap.runtime.errors import BowmapError, UsageError


def fake(index, kind, platform="P"):
    return DeviceInfo(index, platform, f"dev{index}", kind, 4, 1 << 30, 1 << 28, 1 << 15, "OpenCL 3.0")


MIXED = [fake(0, "CPU"), fake(1, "GPU"), fake(2, "CPU", "Q"), fake(3, "GPU")]


@pytest.mark.parametrize(
    "spec, expected",
    [(None, [1, 3]), ("gpu", [1, 3]), ("GPU", [1, 3]), ("all", [0, 1, 2, 3]), ("cpu", [0]), ("2,0,2", [2, 0]), (" 3 ", [3])],
)
def test_selection(spec, expected):
    assert [info.index for info in parse_device_spec(spec, MIXED, builds=lambda info: True)] == expected


def test_default_without_gpu_is_the_first_cpu_that_builds_kernels():
    cpus = [fake(0, "CPU"), fake(1, "CPU", "Q")]
    assert [info.index for info in parse_device_spec(None, cpus, builds=lambda info: info.index == 1)] == [1]


def test_selection_errors(monkeypatch):
    with pytest.raises(BowmapError, match="no OpenCL device"):
        parse_device_spec(None, [])
    with pytest.raises(BowmapError, match="no GPU"):
        parse_device_spec("gpu", [fake(0, "CPU")])
    with pytest.raises(UsageError, match="no device 9"):
        parse_device_spec("9", MIXED)
    with pytest.raises(UsageError):
        parse_device_spec("0,x", MIXED)
    monkeypatch.setattr(devices_module, "build_problem", lambda index: "unknown target CPU 'generic'")
    with pytest.raises(BowmapError, match="can build kernels here .*unknown target CPU"):
        parse_device_spec("cpu", [fake(0, "CPU")], builds=lambda info: False)


@pytest.mark.parametrize(
    "text, size", [("4096", 4096), ("16K", 16 << 10), ("512M", 512 << 20), ("2g", 2 << 30), ("1.5GiB", 3 << 29), ("8GB", 8 << 30)]
)
def test_parse_memory(text, size):
    assert parse_memory(text) == size


@pytest.mark.parametrize("text", ["abc", "0", "0.5", "1e-9", "-2G", "nan", "inf", ""])
def test_parse_memory_refuses_what_is_no_size(text):
    """A usage error (exit 2), never a size that reads as 'no cap' (0 bytes once truncated)."""
    with pytest.raises(UsageError):
        parse_memory(text)


def test_program_is_built_once_per_context_and_options():
    device = open_devices("cpu")[0]
    assert open_devices("cpu")[0] is device  # one context per device
    programs = []
    threads = [threading.Thread(target=lambda: programs.append(device.program("align/fm_search.cl"))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(program is programs[0] for program in programs)
    assert device.program("align/fm_search.cl", ("-DUNUSED=1",)) is not programs[0]


def test_kernel_sources_are_package_data():
    assert "__kernel void fm_search" in kernel_source("align/fm_search.cl")
    with pytest.raises(BowmapError, match="missing"):
        kernel_source("absent.cl")


def test_nvidia_hint(monkeypatch):
    monkeypatch.setattr(devices_module.ctypes, "CDLL", lambda name: object())
    hint = devices_module.nvidia_hint([fake(0, "CPU")])
    assert "OCL_ICD_VENDORS" in hint and "nvidia.icd" in hint
    assert devices_module.nvidia_hint([fake(0, "GPU", "NVIDIA CUDA")]) is None

    def missing(name):
        raise OSError(name)

    monkeypatch.setattr(devices_module.ctypes, "CDLL", missing)
    assert devices_module.nvidia_hint([fake(0, "CPU")]) is None


def test_kernel_sources_take_in_their_headers():
    from bowmap.runtime.devices import kernel_source

    for name in ("modules/asm.cl", "modules/closest_substring.cl"):
        text = kernel_source(name)
        assert not re.search(r"^\s*#\s*include", text, re.MULTILINE)
        assert "WORK_GROUP_MIN(work_group_min_ulong, ulong)" in text
    assert kernel_source("align/fm_search.cl").count("BOWMAP_REDUCTIONS_H") == 0


def test_a_worker_opens_the_device_the_parent_listed():
    """context_for_info opens the listed device through its own platform, and through the full
    list when the platform's device at that place has another name."""
    from bowmap.runtime.devices import context_for, context_for_info, list_devices

    info = parse_device_spec("cpu", list_devices())[0]
    assert context_for_info(info).device.int_ptr == context_for(info.index).device.int_ptr
    renamed = dataclasses.replace(info, name="not this device")
    assert context_for_info(renamed).info.name == info.name  # the full list's device at that index


@pytest.mark.parametrize("size", [1, 7, 4096 + 3, (1 << 20) + 1])
def test_a_filled_buffer_holds_its_array_on_the_device_and_through_an_owner(device, size):
    import numpy as np
    import pyopencl as cl

    from bowmap.runtime.devices import filled_buffer
    from bowmap.runtime.owner import DeviceOwner
    from bowmap.runtime.remote import RemoteDevice

    array = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8)
    buffer = filled_buffer(device, array)
    assert buffer.size == size and buffer.flags & cl.mem_flags.READ_ONLY
    back = np.empty_like(array)
    cl.enqueue_copy(device.queue(), back, buffer, is_blocking=True)
    assert np.array_equal(back, array)
    owner = DeviceOwner(lambda: device, lambda _: {})
    try:
        client = RemoteDevice(device.info, *owner.endpoint)
        remote = filled_buffer(client, array)
        back = np.empty_like(array)
        queue = client.queue()
        queue.copy(back, remote, is_blocking=True)
        assert np.array_equal(back, array)
    finally:
        owner.close()
