"""The command line: the main job on data/, and one clear line with exit code 1 (or 2) for every
kind of bad input, with nothing half-written left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bowmap.cli import main

DATA = Path(__file__).resolve().parent.parent / "data"
LAMBDA = DATA / "lambda_virus.fa"


def run(capsys, *argv):
    code = main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_line_error(err: str, *needles: str):
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("bowmap: error: ")
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0]


def test_index_and_inspect_the_bundled_genome(tmp_path, capsys):
    prefix = tmp_path / "lambda"
    code, _, err = run(capsys, "index", LAMBDA, prefix, "--no-progress")
    assert code == 0, err
    assert "1 contig(s), 48502 bases" in err and "written" in err
    code, out, err = run(capsys, "inspect", prefix)
    assert code == 0, err
    assert "contig\tgi|9626243|ref|NC_001416.1|\t48502" in out


def test_small_device_memory_gives_many_blocks(tmp_path, capsys):
    prefix = tmp_path / "lambda"
    code, _, err = run(capsys, "-q", "index", LAMBDA, prefix, "--device-mem", "16K", "--max-read-length", "100")
    assert code == 0, err
    manifest = json.loads((tmp_path / "lambda.bmi").read_text())
    assert len(manifest["blocks"]) >= 5
    starts = [block["start"] for block in manifest["blocks"]]
    ends = [block["start"] + block["length"] for block in manifest["blocks"]]
    assert all(end - start >= 356 for start, end in zip(starts[1:], ends[:-1]))  # overlap = 100 + 256
    assert ends[-1] == 48502


def write(tmp_path, name, content: str) -> Path:
    path = tmp_path / name
    path.write_text(content)
    return path


@pytest.mark.parametrize(
    "content, needles",
    [
        (None, ("no such file",)),
        ("", ("empty file",)),
        ("@read1\nACGT\n+\nIIII\n", (":1: not a FASTA file",)),
        (">a\nACGT\n>b\n\n>c\nAC\n", (":3: record 'b' has no sequence",)),
        (">a\nACGT\n>a\nAC\n", (":3: duplicate record name 'a'",)),
    ],
)
def test_bad_reference(tmp_path, capsys, content, needles):
    reference = tmp_path / "ref.fa" if content is None else write(tmp_path, "ref.fa", content)
    before = set(os.listdir(tmp_path))
    code, _, err = run(capsys, "index", reference, tmp_path / "idx", "--device-mem", "1G")
    assert code == 1
    assert_one_line_error(err, str(reference), *needles)
    assert set(os.listdir(tmp_path)) == before  # nothing half-written


def test_unwritable_output_folder(tmp_path, capsys):
    blocker = write(tmp_path, "file", "not a folder")
    for prefix in (blocker / "idx", tmp_path / "absent" / "idx"):
        code, _, err = run(capsys, "index", LAMBDA, prefix, "--device-mem", "1G")
        assert code == 1
        assert_one_line_error(err, str(prefix), "cannot write")


@pytest.fixture
def lambda_index(tmp_path, capsys):
    prefix = tmp_path / "lambda"
    assert run(capsys, "-q", "index", LAMBDA, prefix, "--device-mem", "1G")[0] == 0
    return prefix


def test_index_of_another_format_version(lambda_index, capsys):
    manifest_path = Path(f"{lambda_index}.bmi")
    manifest = json.loads(manifest_path.read_text())
    manifest["format_version"] = 99
    manifest_path.write_text(json.dumps(manifest))
    code, _, err = run(capsys, "inspect", lambda_index)
    assert code == 1
    assert_one_line_error(err, str(manifest_path), "format version 99")


def test_truncated_index_file(lambda_index, capsys):
    occ = Path(f"{lambda_index}.0.occ")
    os.truncate(occ, occ.stat().st_size // 2)
    code, _, err = run(capsys, "inspect", lambda_index)
    assert code == 1
    assert_one_line_error(err, str(occ), "truncated")


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["index", "x.fa"], "the following arguments are required"),
        (["index", "x.fa", "p", "--device-mem", "lots"], "not a memory size"),
        (["index", "x.fa", "p", "--device-mem", "0"], "must be positive"),
        (["index", "x.fa", "p", "--device-mem", "inf"], "must be positive and finite"),
        (["index", "x.fa", "p", "--sa-sample", "0"], "--sa-sample"),
        (["devices", "--devices", "7"], "there is no device 7"),
        (["devices", "--devices", "fast"], "expected gpu, cpu, all"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_usage_errors_exit_2(capsys, argv, needle):
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert_one_line_error(err, needle)


def test_devices_lists_the_cpu(capsys):
    """True on any machine: the CPU is listed, and selected when asked for (with GPUs the
    default selection is the GPUs)."""
    code, out, _ = run(capsys, "devices", "--devices", "cpu")
    assert code == 0
    header, *rows = out.strip().splitlines()
    assert header.split("\t")[:4] == ["#", "platform", "device", "type"]
    selected = [row.split("\t") for row in rows if row.endswith("*")]
    assert len(selected) == 1 and selected[0][3] == "CPU"
    code, out, _ = run(capsys, "devices")
    fields = [row.split("\t") for row in out.strip().splitlines()[1:]]
    chosen = [row[3] for row in fields if row[-1] == "*"]
    assert code == 0 and chosen and set(chosen) == ({"GPU"} if any(row[3] == "GPU" for row in fields) else {"CPU"})


def test_devices_says_which_of_several_cpu_devices_is_used(capsys, monkeypatch):
    """PoCL from PyPI and the system's PoCL list one processor twice: a hint says which one
    `--devices cpu` takes."""
    from bowmap.runtime import devices

    fake = [devices.DeviceInfo(index, "Portable Computing Language", f"pthread-{index}", "CPU", 2, 1 << 32, 1 << 31, 1 << 20, "OpenCL 3.0")
            for index in range(2)]
    monkeypatch.setattr(devices, "list_devices", lambda: fake)
    monkeypatch.setattr(devices, "build_problem", lambda index: "unknown target CPU 'generic'" if index == 0 else None)
    code, out, err = run(capsys, "devices")
    assert code == 0 and out.splitlines()[2].endswith("\t*")
    assert "2 CPU devices (0, 1) drive the same processor through different OpenCL platforms" in err
    assert "--devices cpu uses device 1" in err


def test_console_script_reports_errors_without_traceback(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "bowmap", "index", str(tmp_path / "missing.fa"), str(tmp_path / "idx")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.returncode == 1
    assert_one_line_error(result.stderr, "missing.fa", "no such file")


def test_kernel_module_outputs_that_cannot_be_written(tmp_path, capsys):
    fasta = write(tmp_path, "two.fa", ">a\nACGTACGTAC\n>b\nACGTTCGTAC\n")
    folder = tmp_path / "folder"
    folder.mkdir()
    for argv in (["-q", "motifs", fasta, "-k", "3", "-o", folder], ["-q", "motifs", fasta, "-k", "3", "--dense", folder]):
        code, _, err = run(capsys, *argv)
        assert code == 1
        assert_one_line_error(err, str(folder), "cannot write")
    assert os.listdir(folder) == [] and sorted(os.listdir(tmp_path)) == ["folder", "two.fa"]


def test_primers_with_k_beyond_the_sequences(tmp_path, capsys):
    alpha = write(tmp_path, "a.fa", ">a\nACGTACGT\n")
    beta = write(tmp_path, "b.fa", ">b\nTTTTTTTT\n")
    outputs = []
    for parallelism in ("coarse", "sequential"):
        code, out, err = run(capsys, "-q", "primers", alpha, beta, "-k", str(1 << 30), "--parallelism", parallelism)
        assert code == 0, err
        outputs.append(out)
    assert outputs[0] == outputs[1] and len(outputs[0].splitlines()) == 1  # the header: no start has a solution


def test_align_option_defaults_are_the_options_dataclasses():
    """Each default of `bowmap align` is written once, in its options dataclass: the parser's
    defaults are read from the fields, and help shows them (STYLE.md, 13)."""
    import dataclasses

    from bowmap.align.extend.smith_waterman import Scoring
    from bowmap.align.options import AlignOptions, RecordOptions
    from bowmap.align.seed.seeds import SeedOptions
    from bowmap.cli import _build_parser
    from bowmap.commands.align import OptionDefault

    parser, _ = _build_parser()
    align = parser._subparsers._group_actions[0].choices["align"]  # noqa: SLF001 - the subcommand's parser
    defaults = {action.dest: action.default for action in align._actions if isinstance(action.default, OptionDefault)}  # noqa: SLF001
    holders = {"AlignOptions": AlignOptions, "RecordOptions": RecordOptions, "SeedOptions": SeedOptions, "Scoring": Scoring}
    assert set(defaults) >= {"match", "mismatch", "gap_open", "gap_extend", "clip_penalty", "seed_length", "positions_per_read",
                             "windows_per_read", "unpaired_penalty", "max_alternatives", "secondary", "skip"}
    for dest, default in defaults.items():
        field = next(field for field in dataclasses.fields(holders[default.dataclass]) if field.name == default.name)
        assert default.value == field.default and default.name == dest, dest
    text = align.format_help()
    for dest, default in defaults.items():
        assert f"(default {default.value}" in " ".join(text.split()), dest


@pytest.mark.parametrize(
    "extra, needle",
    [(["y.fq", "--interleaved"], "--interleaved takes one READS file"), (["--insert-size", "300,30"], "--insert-size is for paired-end")],
)
def test_align_options_that_do_not_go_together(lambda_index, tmp_path, capsys, extra, needle):
    """Checks across options live in AlignOptions.check; the command reports them as usage errors."""
    from bowmap.align.options import AlignOptions
    from bowmap.runtime.errors import UsageError

    given = AlignOptions(index="p", reads="x.fq", mates="y.fq" if "y.fq" in extra else None, interleaved="--interleaved" in extra,
                         insert_size=object() if "--insert-size" in extra else None)
    with pytest.raises(UsageError, match=needle):
        given.check()
    reads = tmp_path / "x.fq"
    reads.write_text("@r\nACGT\n+\nIIII\n")
    code, _, err = run(capsys, "align", lambda_index, reads, *[str(tmp_path / part) if part == "y.fq" else part for part in extra])
    assert code == 2
    assert_one_line_error(err, needle)
