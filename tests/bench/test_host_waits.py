"""bench/host_waits.py: the usage files summed by kind of process, the rows made of them, and a
smoke run of the owner layout (whose usage files the bench reads) on the suite's device."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.bench.conftest import BENCH, checkout_environment, load_bench
from tests.conftest import DEVICE_SPECS


def test_usage_files_summed_by_kind(tmp_path):
    host_waits = load_bench("host_waits")
    records = {
        "worker0": {"user_s": 1.0, "system_s": 0.5, "age_s": 4.0, "waits": {"owner answers": [10, 1.5], "next chunk": [3, 0.25]}},
        "worker1": {"user_s": 2.0, "system_s": 0.0, "age_s": 4.0, "waits": {"owner answers": [12, 0.5]}},
        "owner-0.0": {"user_s": 3.0, "system_s": 1.0, "age_s": 5.0, "waits": {"batches": [22, 1.75], "device waits in batches": [22, 1.25]}},
        "parent": {"user_s": 0.5, "system_s": 0.25, "age_s": 6.0, "waits": {"writing": [4, 0.125]}},
    }
    for name, record in records.items():
        (tmp_path / f"{name}.usage.json").write_text(json.dumps({"ready_s": None, **record}))
    kinds = host_waits.usage_totals(str(tmp_path))
    assert kinds["worker"] == {"count": 2, "cpu": 3.5, "age": 8.0, "waits": {"owner answers": 2.0, "next chunk": 0.25},
                               "counts": {"owner answers": 22, "next chunk": 3}}
    assert kinds["owner"]["cpu"] == 4.0 and kinds["parent"]["waits"] == {"writing": 0.125}
    rows = host_waits.rows_of("run", 7.0, kinds)
    assert rows[0] == ["run", "7.00", "host workers x2", "8.00", "3.50 s (44%)", "2.00 s (25%)", "0.25 s (3%)", "2.25 s (28%)"]
    assert rows[1][2:] == ["owner x1", "5.00", "4.00 s (80%)", "batches 1.75 s", "device waits 1.25 s", "own work 0.50 s"]
    assert rows[2][2:6] == ["first process", "6.00", "0.75 s (12%)", "writing 0.12 s"]
    # A run of one process writes no worker or owner files: only its own row.
    assert [row[2] for row in host_waits.rows_of("one", 1.0, {"parent": kinds["parent"]})] == ["first process"]


def test_phases_and_round_trips_from_the_marks(tmp_path):
    """--phases and --round-trips: the whole command laid out from the processes' marks, and each
    request split into its pieces by matching the worker's and the owner's marks."""
    host_waits = load_bench("host_waits")
    marks = {
        "parent": [["run", None, 10.5], ["handed out", 0, 11.0], ["handed out", 1, 11.1], ["written", 0, 11.5], ["written", 1, 12.0],
                   ["closed", None, 12.25]],
        "worker0": [["received", 0, 11.25], ["finished", 0, 11.4], ["sent w", 1, 11.3], ["received w", 1, 11.35]],
        "worker1": [["received", 1, 11.5], ["finished", 1, 11.75]],
        "owner-0.0": [["owner set-up", None, 10.75], ["read w", 1, 11.31], ["queued w", 1, 11.32], ["done w", 1, 11.34], ["replied w", 1, 11.345]],
    }
    for name, made in marks.items():
        (tmp_path / f"{name}.usage.json").write_text(json.dumps({"user_s": 0, "system_s": 0, "age_s": 1, "marks": made}))
    rows = {row[1]: row[2:] for row in host_waits.phase_rows("run", str(tmp_path), 10.0, 12.5)}
    assert rows["start: interpreter, imports, parsing"] == ["0.500 s", "0.000 -> 0.500"]
    assert rows["set-up: index, devices, owners, workers"][0] == "0.500 s" and rows["tail: last handed out to last written"][0] == "0.900 s"
    assert rows["wind-down: workers, owners, output closed"][0] == "0.250 s" and rows["exit"][0] == "0.250 s"
    assert rows["workers idle: after their last chunk, before the last written (mean)"][0] == "0.425 s"  # (0.6 + 0.25) / 2
    assert rows["mark: owner set-up (x1)"][1].startswith("0.750")
    pieces = {row[1]: row[2:] for row in host_waits.round_trip_rows("run", str(tmp_path))}
    assert pieces["to the owner"][:2] == ["1", "10.00"] and pieces["device (until seen done)"][1] == "20.00"
    assert pieces["back to the worker"][1] == "5.00" and pieces["whole round trip"][1] == "50.00"


def test_smoke_owner_layout_on_lambda(tmp_path):
    done = subprocess.run([sys.executable, str(BENCH / "host_waits.py"), "--devices", DEVICE_SPECS[0], "-p", "2", "--owners", "1,2",
                           "--work", str(tmp_path)], capture_output=True, text=True, timeout=600, check=False,
                          env=checkout_environment())  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split()[:3] == ["run", "whole", "s"]
    for owners in (1, 2):
        run = [line for line in lines[1:] if line.startswith(f"{owners} owner(s) a device")]
        # workers, owner, its loop (two lines), its commands (three kinds a line), first process, the two's threads
        first = next(number for number, line in enumerate(run) if "first process" in line)
        assert "host workers x2" in run[0] and f"owner x{owners}" in run[1] and "writing" in run[first]
        assert "device waits" in run[1] and "owner's threads" in run[first + 1] and "MainThread" in run[first + 2]
        commands = " ".join(run[4:first])
        assert all(kind in commands for kind in ("kernel", "write", "read", "create", "arena mapped"))
        assert "owner's loop" in run[2] and "select" in run[3] and "owner's commands" in run[4] and "kernel" in run[4]
