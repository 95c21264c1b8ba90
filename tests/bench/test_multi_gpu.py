"""bench/multi_gpu.py: the layout from bowmap's log lines, the rows of a machine, the SAM check
(which can fail), the table and its goal, and smoke runs on PoCL: lambda's reads and pairs, and
human_scale's cached inputs of a tiny human-like genome."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench.conftest import BENCH, checkout_environment, load_bench
from tests.conftest import DEVICE_SPECS

# The smoke runs' device: the suite's first (BOWMAP_TEST_DEVICES; the CPU by default).
DEVICE = DEVICE_SPECS[0]

ROOT = BENCH.parent
DATA = ROOT / "data"


@pytest.fixture(scope="module")
def multi_gpu():
    return load_bench("multi_gpu")


def _log(devices: str, layout: str, reads: int = 2000, more: str = "") -> str:
    return (f"[bowmap.align] loaded index x: 1 contig(s), 1 block(s) [0.01 s]\n{more}"
            f"[bowmap.align] devices: {devices}; {layout} [0.89 s]\n"
            f"[bowmap.align] index checksums match [0.92 s]\n"
            f"[bowmap.align] {reads} reads, 100.00% mapped, 2.42 s, 413 reads/s, on {devices}\n")  # fmt: skip


def test_layout_of_each_kind_of_run(multi_gpu):
    owned = multi_gpu.parse_layout(_log("NVIDIA H200, NVIDIA H200", "one owner a device, 30 host worker processes of 2 queue pair(s)"))
    assert (owned.devices, owned.owners, owned.processes, owned.queue_pairs) == (["NVIDIA H200", "NVIDIA H200"], 2, 30, 2)
    assert owned.cells() == ["2", "30", "2 each"] and not owned.block_by_block
    processes = multi_gpu.parse_layout(_log("NVIDIA H200", "15 worker processes, 1 queue pair(s) each",
                                            more="[bowmap.align] mapping block by block: 2 blocks\n"))  # fmt: skip
    assert (processes.owners, processes.processes, processes.queue_pairs, processes.block_by_block) == (0, 15, 1, True)
    assert processes.cells() == ["-", "15", "1 each"]
    threads = multi_gpu.parse_layout(_log("pthread-skylake-avx512-AMD EPYC", "2 worker queue pair(s)"))
    assert (threads.devices, threads.owners, threads.processes, threads.queue_pairs) == (["pthread-skylake-avx512-AMD EPYC"], 0, 0, 2)
    assert threads.cells() == ["-", "main", "2"] and threads.text == "2 worker queue pair(s)"
    # An unknown layout or no devices line: None (the bench then fails, not guesses).
    assert multi_gpu.parse_layout(_log("NVIDIA H200", "3 somethings")) is None
    assert multi_gpu.parse_layout("[bowmap.align] loaded index x\n") is None


def test_reads_of_the_summary_line(multi_gpu):
    assert multi_gpu.logged_reads(_log("cpu", "2 worker queue pair(s)", reads=123456)) == 123456
    assert multi_gpu.logged_reads("[bowmap.align] devices: cpu; 2 worker queue pair(s) [0.1 s]\n") is None


def test_rows_of_a_machine(multi_gpu):
    cores = list(range(32))
    rows = multi_gpu.plan_layouts([0, 1], cores, 2)
    assert [(label, spec, len(used)) for label, spec, used in rows] == [
        ("1 device, 1/2 of the cores (16 of 32)", "0", 16), ("2 devices, all 32 cores", "0,1", 32), ("1 device, all 32 cores", "0", 32),
    ]  # fmt: skip
    assert rows[0][2] == list(range(16))
    # One device: one row, or with --share the device on a share of the cores and on all.
    assert [label for label, _, _ in multi_gpu.plan_layouts([3], [0, 1], 1)] == ["1 device, all 2 cores"]
    assert [(label, spec, used) for label, spec, used in multi_gpu.plan_layouts([3], [4, 5], 2)] == [
        ("1 device, 1/2 of the cores (1 of 2)", "3", [4]), ("1 device, all 2 cores", "3", [4, 5]),
    ]  # fmt: skip
    # A share larger than the cores still leaves one core.
    assert multi_gpu.plan_layouts([0, 1, 2], [0, 1], 3)[0][2] == [0]


def test_first_difference_ignores_pg_only(multi_gpu, tmp_path):
    first, other = tmp_path / "a.sam", tmp_path / "b.sam"
    first.write_bytes(b"@HD\tVN:1.6\n@PG\tID:bowmap\tCL:a\nr1\t0\n" + b"r2\t16\n")
    other.write_bytes(b"@HD\tVN:1.6\n@PG\tID:bowmap\tCL:b -p 9\nr1\t0\n" + b"r2\t16\n")
    assert multi_gpu.first_difference(first, other) is None
    other.write_bytes(b"@HD\tVN:1.6\n@PG\tID:bowmap\tCL:b\nr1\t0\nr2\t0\n")
    assert multi_gpu.first_difference(first, other) == 3
    other.write_bytes(b"@HD\tVN:1.6\nr1\t0\n")  # cut short
    assert multi_gpu.first_difference(first, other) == 3
    assert multi_gpu.first_difference(other, first) == 3


def test_measure_marks_a_differing_sam(multi_gpu, tmp_path, monkeypatch):
    """The identity check can fail: a layout writing other records gets "NO" and the bench exits 1."""
    owned = multi_gpu.parse_layout(_log("GPU, GPU", "one owner a device, 4 host worker processes of 1 queue pair(s)"))
    bodies = {"0": b"r1\t0\n", "0,1": b"r1\t16\n"}

    def fake_align(index, inputs, output, devices, cores, extra, reads):
        if output != "-":
            Path(output).write_bytes(b"@PG\tID:bowmap\tCL:" + devices.encode() + b"\n" + bodies[devices])
        return (1.0 if reads == 10 else 3.0), owned

    monkeypatch.setattr(multi_gpu, "align", fake_align)
    inputs = multi_gpu.Inputs("paired", [tmp_path / "r1.fq", tmp_path / "r2.fq"], [tmp_path / "c1.fq", tmp_path / "c2.fq"], 10, 3)
    args = type("Args", (), {"align_args": [], "workers_per_core": None, "runs": 2})()
    layouts = multi_gpu.plan_layouts([0, 1], [0, 1, 2, 3], 2)
    rows = multi_gpu.measure("index", inputs, layouts, args, tmp_path)
    assert [row.same_sam for row in rows] == [True, False, True]
    assert not list(tmp_path.glob("*.sam"))  # every SAM removed
    assert rows[0].steady == pytest.approx(2 * 10 / 2.0) and rows[0].whole == pytest.approx(10.0)


def test_table_pairs_columns_and_goal(multi_gpu):
    def row(mode, label, devices, whole_s, long_s, same=True):
        layout = multi_gpu.Layout(devices, len(devices), 15, 1, False, "one owner a device, 15 host worker processes of 1 queue pair(s)")
        return multi_gpu.Row(mode, label, layout, 2_000_000, whole_s, long_s, 5, same, "")

    rows = [row("single", "1 device, 1/2 of the cores (16 of 32)", ["H200"], 10.0, 26.0),
            row("paired", "1 device, 1/2 of the cores (16 of 32)", ["H200"], 10.0, 26.0),  # 500,000 reads/s
            row("paired", "2 devices, all 32 cores", ["H200", "H200"], 8.0, 16.5, same=False)]  # 941,176: 1.88x  # fmt: skip
    text = multi_gpu.table(rows)
    lines = text.splitlines()
    single = next(line for line in lines if line.startswith("| single"))
    assert "| 500,000 | - | 1.00x | yes |" in single  # no pairs/s for single-end reads
    two = next(line for line in lines if "2 devices" in line)
    assert "| 2 | 15 | 1 each | 8.00 | 250,000 | 125,000 | 941,176 | 470,588 | 1.88x | NO |" in two
    assert "goal: 2 devices, all 32 cores >= 1.8x the first row, steady pairs/s: 1.88x, pass" in lines
    rows[2] = row("paired", "2 devices, all 32 cores", ["H200", "H200"], 8.0, 18.0)  # 800,000: 1.60x
    assert multi_gpu.table(rows).splitlines()[-1].endswith("1.60x, FAIL")


def _run(*arguments, cwd=ROOT, cores: int | None = None):
    """bench/multi_gpu.py with ``arguments``; with ``cores``, on the first ``cores`` usable cores
    only (the bench's rows are laid out by the cores it may use)."""
    env = checkout_environment()
    pinned = sorted(os.sched_getaffinity(0))[:cores] if cores else None
    return subprocess.run([sys.executable, str(BENCH / "multi_gpu.py"), *map(str, arguments)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600, check=False,
                          preexec_fn=(lambda: os.sched_setaffinity(0, pinned)) if pinned else None)  # fmt: skip


def _table_rows(stdout: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in stdout.splitlines() if line.startswith(("| single", "| paired"))]


@pytest.fixture(scope="module")
def lambda_index(tmp_path_factory):
    prefix = tmp_path_factory.mktemp("multi_gpu_index") / "lambda"
    subprocess.run([sys.executable, "-m", "bowmap", "index", str(DATA / "lambda_virus.fa"), str(prefix), "--no-progress"],
                   check=True, capture_output=True, env=checkout_environment())  # fmt: skip
    return prefix


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="the layouts compared need two cores")
def test_smoke_lambda_reads_and_pairs(lambda_index):
    # --share 2: the first row on one core (one process, its queue pairs threads of it), the second
    # on both with -p 2 (an owner and two host worker processes): different layouts, one SAM.
    done = _run("--index", lambda_index, "--reads", DATA / "lambda_pairs_R1.fq.gz", "--mates", DATA / "lambda_pairs_R2.fq.gz",
                "--modes", "single,paired", "--devices", DEVICE, "--share", "2", "--repeat", "2", "--workers-per-core", "2", cores=2)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "single: 1,000 reads and 2 x as many; paired: 2,000 reads and 2 x as many" in done.stdout
    rows = _table_rows(done.stdout)
    assert [(row[0], row[1]) for row in rows] == [(mode, label) for mode in ("single", "paired")
                                                  for label in ("1 device, 1/2 of the cores (1 of 2)", "1 device, all 2 cores")]  # fmt: skip
    for row in rows:
        assert row[-1] == "yes" and float(row[6].replace(",", "")) > 0
        assert (row[7] == "-") == (row[0] == "single")  # whole pairs/s for pairs only
        if row[0] == "paired":
            assert float(row[7].replace(",", "")) == pytest.approx(float(row[6].replace(",", "")) / 2, abs=1)
    first, both = rows[0], rows[1]
    assert first[2:4] == ["-", "main"] and first[4].isdigit()  # one core: -p 1, the queue pairs threads of the main process
    assert both[2:4] == ["1", "2"]  # -p 2: the device's owner and two host worker processes
    assert "index blocks: all resident" in done.stdout


def test_smoke_human_scale_inputs(tmp_path):
    """--human-scale-work: human_scale makes the tiny genome, its reads, pairs, copies and index
    (--prepare), and a paired run then finds them there."""
    work = tmp_path / "human_scale"
    sizes = ["--human-scale-work", work, "--gbp", "0.002", "--contig-mbp", "0.5,1", "--simulated-reads", "400"]
    prepared = _run(*sizes, "--prepare")
    assert prepared.returncode == 0, prepared.stderr
    assert (work / "big" / "index" / "default" / "index.bmi").is_file()
    assert (work / "big" / "pairs_150" / "r1_x5.fq").is_file()
    assert '"id": "index:big"' in (work / "results.jsonl").read_text()
    done = _run(*sizes, "--modes", "paired", "--devices", DEVICE)
    assert done.returncode == 0, done.stderr
    assert "paired: 400 reads and 5 x as many" in done.stdout
    (row,) = _table_rows(done.stdout)
    assert row[0] == "paired" and row[1] == f"1 device, all {len(os.sched_getaffinity(0))} cores" and row[-1] == "yes"
    assert not list((work / "multi_gpu").iterdir())  # no SAM left behind


def test_usage_and_failures_are_one_line(lambda_index, tmp_path):
    usage = _run("--index", lambda_index)
    assert usage.returncode == 2 and "give --index and --reads" in usage.stderr
    missing = _run("--index", lambda_index, "--reads", tmp_path / "none.fq", "--devices", DEVICE)
    assert missing.returncode == 1 and missing.stderr.strip().count("\n") == 0 and "none.fq" in missing.stderr
    wrong = _run("--index", tmp_path / "no_index", "--reads", DATA / "lambda_pairs_R1.fq.gz", "--devices", DEVICE, "--repeat", "2")
    assert wrong.returncode == 1 and "Traceback" not in wrong.stderr and "failed (exit" in wrong.stderr
