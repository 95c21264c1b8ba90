"""bench/harness.py's measured runs: the process tree's summed RSS and summed PSS (unique memory),
sampled from /proc while a real process tree runs, and the PSS fallback where smaps_rollup cannot
be read."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.bench.conftest import load_bench

pytestmark = pytest.mark.skipif(not Path("/proc/self/smaps_rollup").exists(), reason="needs /proc/PID/smaps_rollup (Linux >= 4.14)")

SHARED_MIB = 64
# A parent and three children: each touches every page of one shared 64 MiB mapping (counted 4
# times in summed RSS, once in summed PSS) and 8 MiB of its own, then all wait 2 s.
TREE = f"""
import mmap, os, time
shared = mmap.mmap(-1, {SHARED_MIB} << 20)  # anonymous, MAP_SHARED: one copy for the whole tree
for offset in range(0, {SHARED_MIB} << 20, 4096):  # page by page: no 64 MiB temporary in the parent
    shared[offset] = 1
children = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        total = sum(shared[offset] for offset in range(0, {SHARED_MIB} << 20, 4096))
        own = bytearray(b"y" * (8 << 20))
        time.sleep(2.0)  # long enough for several samples with all four in, on a loaded machine
        os._exit(0)
    children.append(pid)
own = bytearray(b"y" * (8 << 20))
time.sleep(2.0)
for pid in children:
    os.waitpid(pid, 0)
"""


@pytest.fixture(scope="module")
def harness():
    return load_bench("harness")


def test_pss_of_a_tree_counts_shared_pages_once(harness, tmp_path):
    memory = harness.run_measured_memory([sys.executable, "-c", TREE], tmp_path / "log", sample_seconds=0.02, pss_share=1.0)
    assert memory.seconds >= 1.0 and memory.pss_samples >= 5
    assert memory.pss_fell_back == 0 and memory.pss_sample_seconds > 0
    assert 0 < memory.peak_pss_kib <= memory.pss_rss_kib <= memory.tree_rss_kib <= memory.peak_rss_kib
    # At the peak the shared mapping is in all four processes: RSS counts it 4 times, PSS once.
    shared_kib = SHARED_MIB << 10
    assert memory.tree_rss_kib >= 4 * shared_kib + 4 * (8 << 10)
    # The largest RSS against the largest PSS, not the RSS of the PSS's peak sample: that sample
    # may come before every child has touched the mapping (a CI run on a 2-core machine: 148 MiB
    # apart at that sample, 214 MiB largest against largest, 160 MiB needed).
    assert memory.tree_rss_kib - memory.peak_pss_kib >= 2.5 * shared_kib
    assert memory.peak_pss_kib >= shared_kib + 4 * (8 << 10)


def test_pss_samples_keep_within_their_share_of_a_core(harness, tmp_path):
    command = [sys.executable, "-c", "import time; x = bytearray(32 << 20); time.sleep(0.6)"]
    # A share so small that after the first sample the next is due long after the run.
    memory = harness.run_measured_memory(command, tmp_path / "log", sample_seconds=0.02, pss_share=1e-9)
    assert memory.pss_samples == 1 and memory.peak_pss_kib > 0
    memory = harness.run_measured_memory(command, tmp_path / "log", sample_seconds=0.02, pss_share=0)
    assert memory.pss_samples == 0 and memory.peak_pss_kib is None and memory.pss_sample_seconds is None
    assert memory.peak_rss_kib >= 32 << 10
    # run_measured keeps its (seconds, peak RSS KiB) for end_to_end and paired_end.
    seconds, peak = harness.run_measured(command, tmp_path / "log")
    assert seconds >= 0.6 and peak >= 32 << 10


def test_unreadable_smaps_rollup_counts_rss_and_says_so(harness, monkeypatch):
    own = os.getpid()
    pss, fell_back = harness.process_tree_pss_kib([own])
    assert fell_back == 0 and pss > 0
    real_open = open

    def refusing(path, *args, **kwargs):
        if str(path).endswith("/smaps_rollup"):
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(harness, "open", refusing, raising=False)
    rss_before = harness._status_kib(own)  # this process alone: pytest may have children
    pss, fell_back = harness.process_tree_pss_kib([own, 2**22 + 1])  # and a pid that does not exist: 0, no fallback
    rss_after = harness._status_kib(own)
    assert fell_back == 1 and min(rss_before, rss_after) - 1024 <= pss <= max(rss_before, rss_after) + 1024


def test_failing_command_is_one_line(harness, tmp_path):
    with pytest.raises(harness.BenchError, match="exited 3: boom"):
        harness.run_measured_memory([sys.executable, "-c", "import sys; print('boom', file=sys.stderr); sys.exit(3)"], tmp_path / "log")
