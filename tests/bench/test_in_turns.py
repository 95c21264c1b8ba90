"""bench/in_turns.py: whole commands of checkouts in turns, their SAM hashed without @PG."""

from __future__ import annotations

import subprocess
import sys

from tests.bench.conftest import BENCH, checkout_environment, load_bench
from tests.conftest import DEVICE_SPECS


def test_the_md5_leaves_the_command_line_out(tmp_path):
    in_turns = load_bench("in_turns")
    one, two = tmp_path / "one.sam", tmp_path / "two.sam"
    one.write_bytes(b"@HD\tVN:1.6\n@PG\tID:bowmap\tCL:bowmap align a\nr\t4\t*\n")
    two.write_bytes(b"@HD\tVN:1.6\n@PG\tID:bowmap\tCL:bowmap align b\nr\t4\t*\n")
    assert in_turns.sam_md5(one) == in_turns.sam_md5(two)
    two.write_bytes(b"@HD\tVN:1.6\n@PG\tID:bowmap\tCL:bowmap align b\nr\t0\t*\n")
    assert in_turns.sam_md5(one) != in_turns.sam_md5(two)


def test_smoke_two_names_for_this_checkout_give_one_md5(tmp_path):
    done = subprocess.run([sys.executable, str(BENCH / "in_turns.py"), "--trees", f"a={BENCH.parent},b={BENCH.parent}", "--rounds", "1",
                           "--devices", DEVICE_SPECS[0], "--work", str(tmp_path)], capture_output=True, text=True, timeout=600,
                          check=False, env=checkout_environment())  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines()[1:]]
    assert [row[2] for row in rows] == ["a", "b"] and rows[0][-1] == rows[1][-1] and len(rows[0][-1]) == 10
    assert all(float(row[4]) > 0 for row in rows)  # the process tree's CPU seconds
