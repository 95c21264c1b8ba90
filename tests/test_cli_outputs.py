"""Outputs, exits and options of every command, as users of bwa, samtools and bowtie2 try them:
devices and pipes written in place, full disks and closed pipes reported with their cause (or
quietly, for a closed pipe), inputs never overwritten, every number checked, SAM or BAM as asked."""

from __future__ import annotations

import gzip
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pysam
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


# ----------------------------------------------------------------------------------- align


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> Path:
    prefix = tmp_path_factory.mktemp("index") / "lambda"
    assert main(["-q", "index", str(LAMBDA), str(prefix), "--device-mem", "1G"]) == 0
    return prefix


@pytest.fixture(scope="module")
def plain_reads(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("reads") / "reads.fq"
    path.write_bytes(gzip.decompress(READS.read_bytes()))
    return path


def test_closed_standard_output_is_one_line_and_exit_1(index):
    result = subprocess.run(
        f"{sys.executable} -m bowmap -q align {index} {READS} --devices cpu >&-", shell=True, capture_output=True, text=True
    )
    assert result.returncode == 1
    one_line_error(result.stderr, "standard output is closed")


def test_a_closed_pipe_exits_quietly_with_141(index, tmp_path):
    """`bowmap align ... | head -1`: what samtools and bwa do there (they die of SIGPIPE,
    which a shell reports as 141), with nothing on standard error."""
    result = subprocess.run(
        f"set -o pipefail; {sys.executable} -m bowmap -q align {index} {READS} --devices cpu --chunk-bases 3000 | head -1",
        shell=True, capture_output=True, text=True, executable="/bin/bash",
    )
    assert result.stdout.startswith("@HD")
    assert result.returncode == 141 and result.stderr == ""


def test_sigterm_to_a_single_process_run_exits_143(index, tmp_path):
    reads = tmp_path / "many.fq"
    reads.write_bytes(gzip.decompress(READS.read_bytes()) * 40)
    out = tmp_path / "out.sam"
    process = subprocess.Popen(
        [sys.executable, "-m", "bowmap", "align", str(index), str(reads), "-o", str(out), "--devices", "cpu", "-p", "1",
         "--chunk-bases", "5000", "--no-progress"],
        stderr=subprocess.PIPE, text=True,
    )
    lines = []
    for line in process.stderr:  # mapping has begun once the checksums are known
        lines.append(line)
        if "checksums match" in line:
            break
    time.sleep(0.5)
    process.send_signal(signal.SIGTERM)
    rest = process.stderr.read()
    assert process.wait(60) == 143, lines + [rest]
    assert rest.strip().splitlines()[-1] == "bowmap: terminated"
    assert os.listdir(tmp_path) == ["many.fq"]


def test_bam_to_a_full_device_names_the_cause(index, capsys):
    code, _, err = run(capsys, "-q", "align", index, READS, "-o", "/dev/full", "-O", "bam", "--devices", "cpu")
    assert code == 1
    one_line_error(err, "/dev/full", NO_SPACE)


def test_align_refuses_an_output_that_is_an_input(index, plain_reads, tmp_path, capsys):
    before = {path: path.read_bytes() for path in [plain_reads, *index.parent.iterdir()]}
    link = tmp_path / "link.sam"
    os.link(plain_reads, link)
    for output, needle in (
        (plain_reads, "is the reads file"),
        (link, "is the reads file"),
        (f"{index}.bmi", "manifest of index"),
        (f"{index}.pac", "a file of index"),
        (f"{index}.0.occ", "a file of index"),
        (f"{index}.0.sa", "a file of index"),
    ):
        code, _, err = run(capsys, "align", index, plain_reads, "-o", output, "--devices", "cpu")
        assert code == 2
        one_line_error(err, str(output), needle, "refusing to overwrite")
    assert {path: path.read_bytes() for path in before} == before


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
        (["align", "P", "R", "--seed-length", "33"], "--seed-length"),
        (["align", "P", "R", "--min-score", str(10**20)], "--min-score"),
        (["align", "P", "R", "--min-score", "1e20"], "--min-score"),
        (["align", "P", "R", "--windows-per-read", str(10**9)], "--windows-per-read"),
        (["align", "P", "R", "--positions-per-read", "0"], "--positions-per-read"),
        (["align", "P", "R", "-p", str(10**20)], "--processes"),
        (["align", "P", "R", "--queues-per-device", "0"], "--queues-per-device"),
        (["align", "P", "R", "--chunk-bases", str(1 << 40)], "--chunk-bases"),
        (["align", "P", "R", "--match", "5000"], "--match"),
        (["align", "P", "R", "--gap-open", "-1"], "--gap-open"),
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


# ------------------------------------------------------------------------------- item 15, 16


def test_threads_option_as_bwa_and_read_group_line_as_bwa(index, tmp_path, capsys):
    out = tmp_path / "out.sam"
    code, _, err = run(capsys, "-q", "align", index, READS, "-o", out, "-t", "1", "-R", r"@RG\tID:lane1\tSM:lambda", "--devices", "cpu")
    assert code == 0, err
    with pysam.AlignmentFile(str(out)) as sam:
        assert sam.header.to_dict()["RG"] == [{"ID": "lane1", "SM": "lambda"}]
        assert all(read.get_tag("RG") == "lane1" for read in sam)


@pytest.mark.parametrize(
    "arguments, needle",
    [
        (["--rg-id", r"@RG\tID:x\tSM:y"], "-R"),
        (["--rg-id", "a b"], "without spaces"),
        (["-R", r"@RG\tSM:y"], "one ID"),
        (["-R", r"ID:x\tSM:y"], "starts with @RG"),
        (["-R", r"@RG\tID:x\tSMX:y"], "'SMX:y'"),
        (["-R", r"@RG\tID:x", "--rg-id", "x"], "instead of"),
    ],
)
def test_bad_read_groups_are_usage_errors(index, tmp_path, capsys, arguments, needle):
    code, _, err = run(capsys, "align", index, READS, "-o", tmp_path / "out.sam", *arguments)
    assert code == 2
    one_line_error(err, needle)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("name, needle", [("x.cram", "CRAM"), ("x.sam.gz", "gzip"), ("x.BAM.bz2", "bzip2")])
def test_formats_not_written_are_refused(index, tmp_path, capsys, name, needle):
    code, _, err = run(capsys, "align", index, READS, "-o", tmp_path / name)
    assert code == 2
    one_line_error(err, name, needle, "SAM", "BAM")
    assert os.listdir(tmp_path) == []


def test_bam_by_any_case_of_its_name_and_on_standard_output(index, tmp_path, capsysbinary):
    out = tmp_path / "X.BAM"
    assert main(["-q", "align", str(index), str(READS), "-o", str(out), "--devices", "cpu"]) == 0
    capsysbinary.readouterr()
    assert main(["-q", "align", str(index), str(READS), "-O", "BAM", "--devices", "cpu", "--chunk-bases", "20000"]) == 0
    streamed = tmp_path / "streamed.bam"
    streamed.write_bytes(capsysbinary.readouterr().out)
    records = []
    for path in (out, streamed):
        assert path.read_bytes()[:4] == b"\x1f\x8b\x08\x04"  # BGZF
        with pysam.AlignmentFile(str(path), "rb") as bam:
            header = str(bam.header)
            assert ".tmp" not in header and "samtools" not in header  # no temporary path, no @PG but bowmap's
            assert [entry["ID"] for entry in bam.header.to_dict()["PG"]] == ["bowmap"]
            records.append([read.to_string() for read in bam])
    assert len(records[0]) == 2000 and records[0] == records[1]


# --------------------------------------------------------------------------------- item 17


def test_usage_errors_name_the_subcommands_help(capsys):
    code, _, err = run(capsys, "align", "P", "R", "--no-such-option")
    assert code == 2
    one_line_error(err, "unrecognized arguments: --no-such-option", "see bowmap align --help")


def test_version_and_quiet_after_the_subcommand(index, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["align", "--version"])
    assert exit_info.value.code == 0 and capsys.readouterr().out.startswith("bowmap ")
    code, out, err = run(capsys, "align", index, READS, "-q", "--devices", "cpu")
    assert code == 0 and out.startswith("@HD") and err == ""


def test_reads_given_as_the_prefix_are_named_as_such(index, plain_reads, capsys):
    code, _, err = run(capsys, "align", plain_reads, index)
    assert code == 2
    one_line_error(err, str(plain_reads), "a FASTQ file given as PREFIX", "swapped")
    code, _, err = run(capsys, "align", READS, index)  # gzipped
    assert code == 2 and "a FASTQ file given as PREFIX" in err
    code, _, err = run(capsys, "align", LAMBDA, READS)  # a reference not indexed yet
    assert code == 2
    one_line_error(err, "a FASTA file given as PREFIX", f"bowmap index {LAMBDA} PREFIX")


def test_index_refuses_a_reference_it_would_replace(tmp_path, capsys):
    reference = tmp_path / "genome.pac"
    reference.write_text(">c\nACGTACGTTAGCCGATAGGCTTACG\n")
    code, _, err = run(capsys, "index", reference, tmp_path / "genome", "--device-mem", "1G")
    assert code == 2
    one_line_error(err, str(reference), "refusing to overwrite")
    assert sorted(os.listdir(tmp_path)) == ["genome.pac"]
