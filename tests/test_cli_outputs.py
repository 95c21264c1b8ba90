"""Outputs, exits and options of every command, as users of bwa, samtools and bowtie2 try them:
devices and pipes written in place, full disks and closed pipes reported with their cause (or
quietly, for a closed pipe), inputs never overwritten, every number checked, SAM or BAM as asked."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from bowmap.cli import main

DATA = Path(__file__).resolve().parent.parent / "data"
LAMBDA = DATA / "lambda_virus.fa"
READS = DATA / "lambda_reads_100bp.fq.gz"
NO_SPACE = "No space left on device"


def run(capsys, *argv):
    code = main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line_error(err: str, *needles: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bowmap: error: ") and "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("inputs")
    files = {
        "alpha": ">alpha\nACGTACGTTAGCCGATAGGCTTACG\n",
        "beta": ">beta\nTTTTACGTACGAAAAGGGGCCCCTT\n",
        "seqs": ">s1\nACGTACGTAC\n>s2\nACGTTCGTAC\n>s3\nTCGTACGAAC\n",
    }
    for name, text in files.items():
        (folder / f"{name}.fa").write_text(text)
    return {name: folder / f"{name}.fa" for name in files}


def kernel_command(name: str, inputs) -> list:
    """A quick run of each kernel-module command, output left to the caller's -o."""
    return {
        "primers": ["primers", inputs["alpha"], inputs["beta"], "-k", "2", "--parallelism", "sequential"],
        "closest-substring": ["closest-substring", inputs["seqs"], "-L", "4", "-d", "1", "--method", "sequential"],
        "motifs": ["motifs", inputs["seqs"], "-k", "3", "--devices", "cpu"],
        "asm": ["asm", inputs["alpha"], inputs["beta"], "--devices", "cpu"],
    }[name]


COMMANDS = ["primers", "closest-substring", "motifs", "asm"]


# ------------------------------------------------------------------------ items 1, 6, 11, 12


@pytest.mark.parametrize("command", COMMANDS)
def test_kernel_commands_write_into_a_named_pipe_and_leave_it_a_pipe(tmp_path, capsys, inputs, command):
    """A device or pipe given as -o is written in place: a temporary renamed onto it would
    replace it (as root, /dev/null itself)."""
    pipe = tmp_path / "out"
    os.mkfifo(pipe)
    received = []
    reader = threading.Thread(target=lambda: received.append(pipe.read_bytes()), daemon=True)
    reader.start()
    code, _, err = run(capsys, "-q", *kernel_command(command, inputs), "-o", pipe)
    reader.join(30)
    assert code == 0, err
    assert stat.S_ISFIFO(os.stat(pipe).st_mode) and received and received[0]
    assert os.listdir(tmp_path) == ["out"]  # no temporary beside it


@pytest.mark.parametrize("command", COMMANDS + ["motifs --dense"])
def test_a_full_device_is_an_error_with_its_cause(tmp_path, capsys, inputs, command):
    if command == "motifs --dense":
        argv = [*kernel_command("motifs", inputs), "-o", tmp_path / "edges.tsv", "--dense", "/dev/full"]
    else:
        argv = [*kernel_command(command, inputs), "-o", "/dev/full"]
    code, _, err = run(capsys, "-q", *argv)
    assert code == 1
    one_line_error(err, "/dev/full", NO_SPACE)
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    assert os.listdir(tmp_path) == []  # motifs: the edges are not left looking complete either


@pytest.mark.parametrize("command", COMMANDS)
def test_kernel_command_outputs_have_the_umasks_mode(tmp_path, capsys, inputs, command):
    previous = os.umask(0o027)
    try:
        out = tmp_path / "out.txt"
        code, _, err = run(capsys, "-q", *kernel_command(command, inputs), "-o", out)
        assert code == 0, err
        assert stat.S_IMODE(os.stat(out).st_mode) == 0o640
    finally:
        os.umask(previous)


def test_asm_dash_is_standard_output(tmp_path, capsys, inputs, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "-q", *kernel_command("asm", inputs), "-o", "-")
    assert code == 0, err
    assert out.startswith("#pattern\ttext\tdistance") and "alpha\tbeta\t" in out
    assert os.listdir(tmp_path) == []


def bowmap_process(*argv, **kwargs):
    return subprocess.run([sys.executable, "-m", "bowmap", *map(str, argv)], capture_output=False, text=True, **kwargs)


@pytest.mark.parametrize("command", ["primers", "closest-substring", "asm"])
def test_a_full_standard_output_is_one_line_and_exit_1(inputs, command):
    with open("/dev/full", "w") as full:
        result = bowmap_process("-q", *kernel_command(command, inputs), stdout=full, stderr=subprocess.PIPE)
    assert result.returncode == 1
    one_line_error(result.stderr, "standard output", NO_SPACE)


@pytest.mark.parametrize("command", COMMANDS)
def test_kernel_commands_refuse_an_output_that_is_an_input(tmp_path, capsys, inputs, command):
    argv = kernel_command(command, inputs)
    source = next(arg for arg in argv if isinstance(arg, Path))
    before = source.read_bytes()
    code, _, err = run(capsys, *argv, "-o", source)
    assert code == 2
    one_line_error(err, str(source), "refusing to overwrite")
    assert source.read_bytes() == before


def test_motifs_refuses_one_file_for_both_outputs(tmp_path, capsys, inputs):
    code, _, err = run(capsys, *kernel_command("motifs", inputs), "-o", tmp_path / "x", "--dense", tmp_path / "x")
    assert code == 2
    one_line_error(err, "--dense", "also the output of -o")


# ---------------------------------------------------------------------------------- item 7


@pytest.mark.parametrize(
    "argv, option",
    [
        (["index", "R.fa", "P", "--sa-sample", str(1 << 40)], "--sa-sample"),
        (["index", "R.fa", "P", "--max-read-length", "0"], "--max-read-length"),
        (["asm", "X.fa", "Y.fa", "--pieces", "0"], "--pieces"),
        (["asm", "X.fa", "Y.fa", "--all", "--max-dist", "-1"], "--max-dist"),
        (["primers", "A.fa", "B.fa", "-k", "0"], "-k"),
        (["closest-substring", "S.fa", "-L", "0", "-d", "1"], "-L"),
        (["closest-substring", "S.fa", "-L", "3", "-d", "-2"], "-d"),
        (["motifs", "R.fa", "-k", "21"], "-k"),
        (["motifs", "R.fa", "--buckets", str(1 << 20)], "--buckets"),
        (["motifs", "R.fa", "--seed", "-1"], "--seed"),
        (["motifs", "R.fa", "--min-weight", "nan"], "--min-weight"),
    ],
)
def test_every_numeric_option_has_a_checked_range(capsys, argv, option):
    code, _, err = run(capsys, *argv)
    assert code == 2
    one_line_error(err, f"bowmap {argv[0]}: argument", option)
