"""Inputs are checked before the first byte of output (issue 30, item 2): with SAM on standard
output, `bowmap align ... | samtools sort -o x.bam -` must not see a header (a valid, empty BAM
downstream) when a reads file is missing or malformed, or the index is damaged. A missing reads
file is reported before any device is opened and before the index's checksums are read."""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from bowmap.cli import main
from test_cli_outputs import index, one_line_error  # noqa: F401 - index: the lambda index fixture

DATA = Path(__file__).resolve().parent.parent / "data"
READS = DATA / "lambda_reads_100bp.fq.gz"
R1, R2 = DATA / "lambda_pairs_R1.fq.gz", DATA / "lambda_pairs_R2.fq.gz"

# Each output path of `bowmap align`: the arguments, and the output file it names (None: stdout).
OUTPUTS = {
    "sam to stdout": ([], None),
    "-o -": (["-o", "-"], None),
    "-o out.sam": (["-o", "{folder}/out.sam"], "out.sam"),
    "-O bam -o out": (["-O", "bam", "-o", "{folder}/out"], "out"),
    "bam to stdout": (["-O", "bam"], None),
}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    """Reads files whose first record is malformed (the rest is good), plain and gzipped."""
    folder = tmp_path_factory.mktemp("reads")
    good = gzip.decompress(READS.read_bytes())
    bad_first = b"@r1\nACGT\n+\nIII\n" + good  # quality shorter than the sequence
    files = {
        "plain.fq": good,
        "bad.fq": bad_first,
        "bad.fa": b"ACGT\n>r2\nACGT\n" + good,  # no header line before the first sequence
        "bad_2.fq": b"@r1\nACGT\nIIII\n" + good,  # no '+' line
    }
    for name, data in files.items():
        (folder / name).write_bytes(data)
    (folder / "bad.fq.gz").write_bytes(gzip.compress(bad_first))
    return {name: folder / name for name in [*files, "bad.fq.gz"]}


@pytest.fixture
def no_device(monkeypatch):
    """Every way run_align opens a device or reads the index's checksums, made to fail and
    recorded: an input error must come first."""
    from bowmap.index import load
    from bowmap.runtime import devices

    called = []

    def refused(name):
        def opened(*args, **kwargs):
            called.append(name)
            raise AssertionError(f"{name} called before the reads were checked")

        return opened

    for module, name in ((devices, "list_devices"), (devices, "context_for"), (load, "verify_index")):
        monkeypatch.setattr(module, name, refused(name))
    return called


def align(capsysbinary, index, reads, output: str, folder: Path, *more):
    arguments, _ = OUTPUTS[output]
    argv = ["-q", "align", str(index), *map(str, reads), *(a.format(folder=folder) for a in arguments), "--devices", "cpu", *more]
    code = main(argv)
    captured = capsysbinary.readouterr()
    return code, captured.out, captured.err.decode()


def assert_nothing_written(out: bytes, folder: Path):
    assert out == b""
    assert os.listdir(folder) == []  # no output, and no temporary left beside it


INPUT_ERRORS = {
    "missing reads": (lambda files, tmp: [tmp / "missing.fq"], ["missing.fq: no such file"]),
    "missing mates": (lambda files, tmp: [files["plain.fq"], tmp / "missing_2.fq"], ["missing_2.fq: no such file"]),
    "reads a folder": (lambda files, tmp: [tmp], ["is a directory"]),
    "malformed first record": (lambda files, tmp: [files["bad.fq"]], ["bad.fq:4:", "quality length 3 differs", "(record r1)"]),
    "malformed gzipped": (lambda files, tmp: [files["bad.fq.gz"]], ["bad.fq.gz:4:", "quality length 3 differs"]),
    "malformed fasta": (lambda files, tmp: [files["bad.fa"]], ["bad.fa:1:"]),
    "malformed mates": (lambda files, tmp: [files["plain.fq"], files["bad_2.fq"]], ["bad_2.fq:3:", "'+'"]),
}


@pytest.mark.parametrize("output", OUTPUTS)
@pytest.mark.parametrize("case", INPUT_ERRORS)
def test_an_input_error_comes_before_any_output_and_any_device(index, inputs, tmp_path, capsysbinary, no_device, case, output):
    make, needles = INPUT_ERRORS[case]
    folder = tmp_path / "out"
    folder.mkdir()
    code, out, err = align(capsysbinary, index, make(inputs, tmp_path), output, folder)
    assert code == 1, err
    one_line_error(err, *needles)
    assert_nothing_written(out, folder)
    assert no_device == []  # neither a device opened nor a checksum read


def test_the_reads_checked_first_still_map(index, inputs, tmp_path, capsysbinary):
    """The check reads the files' heads only: the run reads them again from the start (a
    FASTQ file of ranges, a gzipped one, pairs)."""
    paired = []
    for reads in ([inputs["plain.fq"]], [READS], [R1, R2]):
        code, out, err = align(capsysbinary, index, reads, "sam to stdout", tmp_path)
        assert code == 0, err
        records = [line for line in out.decode().splitlines() if not line.startswith("@")]
        paired.append(len(records))
    assert paired[0] == paired[1] == 2000 and paired[2] > 0


@pytest.fixture
def damaged_index(index, tmp_path) -> Path:
    """A copy of the index with one byte of its packed reference changed: it loads (sizes and
    layout hold), only its checksums tell."""
    folder = tmp_path / "index"
    shutil.copytree(index.parent, folder)
    pac = folder / f"{index.name}.pac"
    data = bytearray(pac.read_bytes())
    data[len(data) // 2] ^= 0xFF
    pac.write_bytes(bytes(data))
    return folder / index.name


@pytest.mark.parametrize("output", OUTPUTS)
def test_a_damaged_index_writes_nothing(damaged_index, tmp_path, capsysbinary, output):
    folder = tmp_path / "out"
    folder.mkdir()
    code, out, err = align(capsysbinary, damaged_index, [READS], output, folder)
    assert code == 1, err
    one_line_error(err, ".pac", "index file corrupted")
    assert_nothing_written(out, folder)


def test_a_damaged_index_writes_nothing_into_a_pipe(damaged_index, tmp_path, capsys):
    """-o naming a named pipe (or /dev/stdout): written in place, so nothing may go there
    before the index's checksums match."""
    pipe = tmp_path / "out.sam"
    os.mkfifo(pipe)
    received = []
    reader = threading.Thread(target=lambda: received.append(pipe.read_bytes()), daemon=True)
    reader.start()
    code = main(["-q", "align", str(damaged_index), str(READS), "-o", str(pipe), "--devices", "cpu"])
    reader.join(30)
    assert code == 1
    one_line_error(capsys.readouterr().err, "index file corrupted")
    assert received == [b""]


def test_a_malformed_first_record_on_stdin_writes_nothing(index, inputs):
    """Standard input cannot be read twice: what it holds is checked before the header is
    written all the same."""
    with open(inputs["bad.fq"], "rb") as stdin:
        result = subprocess.run([sys.executable, "-m", "bowmap", "-q", "align", str(index), "-", "--devices", "cpu"],
                                stdin=stdin, capture_output=True)
    assert result.returncode == 1
    one_line_error(result.stderr.decode(), "stdin:4:", "quality length 3 differs")
    assert result.stdout == b""
