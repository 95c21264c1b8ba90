"""bowmap.runtime.usage: the developers' usage files (bench/host_waits.py reads them)."""

from __future__ import annotations

import json
import sys
import threading
import time

import pytest

from bowmap.runtime import usage


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="threads' CPU from /proc")
def test_a_usage_file_lists_the_live_threads_cpu_busiest_first_by_their_python_names(tmp_path):
    started = time.monotonic()
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            pass

    spinner = threading.Thread(target=spin, name="spinner", daemon=True)
    idle = threading.Thread(target=stop.wait, name="idler", daemon=True)
    spinner.start()
    idle.start()
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and dict((row[0], row[1] + row[2]) for row in usage.thread_times()).get("spinner", 0) < 0.05:
            time.sleep(0.01)
        usage.write_usage(str(tmp_path / "u.json"), started)
    finally:
        stop.set()
    threads = json.loads((tmp_path / "u.json").read_text())["threads"]
    cpu = {name: user + system for name, user, system in threads}
    assert {"spinner", "idler", "MainThread"} <= set(cpu)
    assert cpu["spinner"] >= 0.05 and cpu["spinner"] > cpu["idler"]
    assert [row[1] + row[2] for row in threads] == sorted((row[1] + row[2] for row in threads), reverse=True)
