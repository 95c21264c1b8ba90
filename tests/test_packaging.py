"""A plain (non-editable) install carries the kernel sources and finds them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_contains_and_finds_the_kernel_sources(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path / "wheel"), str(ROOT)],
        check=True,
    )
    (wheel,) = (tmp_path / "wheel").glob("bowmap-*.whl")
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)], check=True)
    probe = (
        "import bowmap.runtime.devices, bowmap.index_builder.build, pathlib;"
        "print(bowmap.runtime.devices.__file__);"
        "print(bowmap.runtime.devices.kernel_source('align/fm_search.cl').count('__kernel'))"
    )
    # The installed copy first; the rest of the path (where pyopencl may be installed) after it.
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])}
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path, env=environment, check=True)
    module_path, kernels = result.stdout.split()
    assert Path(module_path).is_relative_to(target)  # the installed copy, not the checkout
    # fm_search, seed_search, fm_locate, fm_locate_intervals, choose_seeds, locate_hits, and for several
    # blocks add_block_occurrences, subtract_overlaps, block_rows
    assert int(kernels) == 9
    for pattern in ("*/*.cl", "*/*.h"):  # kernel sources and the headers they include, in align/ and modules/
        shipped = sorted(str(path.relative_to(target / "bowmap" / "opencl")) for path in (target / "bowmap" / "opencl").glob(pattern))
        assert shipped == sorted(str(path.relative_to(ROOT / "opencl")) for path in (ROOT / "opencl").glob(pattern)) and shipped
