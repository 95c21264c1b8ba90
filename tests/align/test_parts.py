"""Part of the input (--skip / --upto): the window against plain slicing of the reads, and jobs
that map consecutive parts giving together the records of one whole run, single-end (byte
ranges and gzip) and paired (every part paired under the whole input's insert-size model)."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from bowmap.align.reads import input_chunks, read_chunks, record_window
from bowmap.align.reads.pairs import read_pairs
from bowmap.cli import main

DATA = Path(__file__).resolve().parents[2] / "data"
LAMBDA = DATA / "lambda_virus.fa"
READS = DATA / "lambda_reads_100bp.fq.gz"  # 2,000 reads
R1, R2 = DATA / "lambda_pairs_R1.fq.gz", DATA / "lambda_pairs_R2.fq.gz"  # 1,000 pairs


def names(chunks) -> list[str]:
    return [chunk.name(i) for chunk in chunks for i in range(chunk.count)]


@pytest.fixture(scope="module")
def plain_reads(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("plain") / "reads.fq"
    path.write_bytes(gzip.decompress(READS.read_bytes()))
    return path


@pytest.mark.parametrize("chunk_bases", [1, 333, 5000, 1 << 22])
def test_the_window_is_a_slice_of_the_reads(plain_reads, chunk_bases):
    everything = names(read_chunks(str(plain_reads), 1 << 22, 1024))
    assert len(everything) == 2000
    for skip, upto in [(0, None), (0, 1), (0, 2000), (1, 1), (7, 333), (1999, None), (1999, 5), (2000, None), (2500, 3), (0, 10**9)]:
        # Byte ranges (parsed by the window) and parsed chunks alike.
        for items in (input_chunks(str(plain_reads), chunk_bases, 1024), read_chunks(str(plain_reads), chunk_bases, 1024)):
            chunks = list(record_window(items, skip, upto))
            assert [chunk.number for chunk in chunks] == list(range(len(chunks)))
            assert all(chunk.count for chunk in chunks)
            assert names(chunks) == everything[skip : None if upto is None else skip + upto], (skip, upto)


@pytest.mark.parametrize("chunk_bases", [1, 777, 1 << 22])
def test_the_window_of_pairs_keeps_mates_together(chunk_bases):
    everything = names(read_pairs(str(R1), str(R2), 1 << 22, 1024))
    for skip, upto in [(0, 1), (3, 400), (999, None), (1000, None), (400, 600)]:
        chunks = list(record_window(read_pairs(str(R1), str(R2), chunk_bases, 1024), skip, upto, unit=2))
        assert names(chunks) == everything[2 * skip : None if upto is None else 2 * (skip + upto)]


def test_the_window_reads_no_further_than_it_needs():
    taken = []

    def items():
        for chunk in read_chunks(str(READS), 1000, 1024):
            taken.append(chunk.number)
            yield chunk

    chunks = list(record_window(items(), 0, 25))
    assert sum(chunk.count for chunk in chunks) == 25 and taken == [0, 1, 2]  # 10 reads a chunk


# ------------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    prefix = tmp_path_factory.mktemp("parts_index") / "lambda"
    assert main(["-q", "index", str(LAMBDA), str(prefix)]) == 0
    return prefix


def body(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if not line.startswith("@")]


def mapped_in_parts(index, inputs, tmp_path, capsys, records: int, parts: int, *options) -> tuple[list[str], list[str]]:
    """SAM records of ``parts`` jobs mapping consecutive parts (the last one to the end), and
    each job's log."""
    size = -(-records // parts)
    found, logs = [], []
    for part in range(parts):
        window = ["--skip", str(part * size)] + (["--upto", str(size)] if part < parts - 1 else [])
        out = tmp_path / f"part{part}.sam"
        code = main(["align", str(index), *map(str, inputs), "-o", str(out), "--devices", "cpu", "--no-progress", *window, *options])
        logs.append(capsys.readouterr().err)
        assert code == 0, logs[-1]
        found += body(out)
    return found, logs


@pytest.mark.parametrize("reads", ["plain", "gzip"])
def test_parts_of_single_end_reads_make_the_whole_run(index, plain_reads, reads, tmp_path, capsys):
    path = plain_reads if reads == "plain" else READS
    whole = tmp_path / "whole.sam"
    assert main(["-q", "align", str(index), str(path), "-o", str(whole), "--devices", "cpu", "--chunk-bases", "20000"]) == 0
    for parts in (1, 3):
        found, _ = mapped_in_parts(index, [path], tmp_path, capsys, 2000, parts, "--chunk-bases", "20000")
        assert found == body(whole), parts


def test_parts_of_pairs_make_the_whole_run_under_one_model(index, tmp_path, capsys):
    whole = tmp_path / "whole.sam"
    assert main(["align", str(index), str(R1), str(R2), "-o", str(whole), "--devices", "cpu", "--no-progress"]) == 0
    model = re.search(r"insert size from [^[\n]*", capsys.readouterr().err).group(0).strip()  # without its time
    assert "from 1000 of the first pairs" in model
    for parts in (1, 3):
        # Chunks smaller than a part: the model's sample holds chunks of several parts.
        found, logs = mapped_in_parts(index, [R1, R2], tmp_path, capsys, 1000, parts, "--chunk-bases", "9000")
        assert found == body(whole), parts
        assert all(model in log for log in logs)


def test_a_window_past_the_end_writes_no_records(index, tmp_path, capsys):
    out = tmp_path / "out.sam"
    assert main(["-q", "align", str(index), str(R1), str(R2), "-o", str(out), "--devices", "cpu", "--skip", "1000"]) == 0
    assert body(out) == [] and out.read_text().startswith("@HD")


@pytest.mark.parametrize("arguments, message", [(["--skip", "-1"], "argument -s/--skip: -1 is out of range"), (["--upto", "0"], "argument -u/--upto: 0 is out of range")])
def test_usage_errors(index, tmp_path, capsys, arguments, message):
    out = tmp_path / "out.sam"
    code = main(["align", str(index), str(READS), "-o", str(out), *arguments])
    err = capsys.readouterr().err
    assert code == 2 and message in err and not out.exists()
