"""The progress bar of `bowmap align`: bytes of the input against its size (a total, an ETA)
where the input is handed out as byte ranges of the file; log lines printed above the bar."""

from __future__ import annotations

import gzip
import logging
from types import SimpleNamespace

import numpy as np
import pytest

from bowmap.align.output.progress import Progress
from bowmap.align.reads import as_chunk, input_chunks, read_chunks
from bowmap.align.reads.pairs import read_pairs
from bowmap.cli import _setup_logging


def test_byte_ranges_of_a_file_count_against_its_size(tmp_path, capsys):
    reads = tmp_path / "reads.fq"
    reads.write_bytes(b"@r\nACGT\n+\nIIII\n" * 100)
    progress = Progress(str(reads), enabled=True)
    assert progress._bar.total == 1500
    for end in (500, 1000, 1500):
        progress.handed_out(SimpleNamespace(end=end, text=None))
    progress.written(33)
    assert progress._bar.n == 500
    progress.written(33)
    progress.written(34)
    assert progress._bar.n == 1500 and progress._reads == 100
    progress.close()


def test_runs_that_hand_nothing_out_count_reads_without_a_total(tmp_path):
    reads = tmp_path / "reads.fa"
    reads.write_bytes(b">r\nACGT\n" * 10)
    progress = Progress(str(reads), enabled=True)
    progress.written(10)
    assert progress._bar.total is None and progress._bar.n == 10
    progress.close()


def shown_reads(progress) -> int:
    """The read count printed beside the bar now."""
    text = str(progress._bar)
    return int(text.rsplit(", ", 1)[-1].split(" reads")[0].split()[-1].replace(",", ""))


@pytest.mark.parametrize("kind", ["fastq", "fastq.gz", "fasta", "fasta.gz"])
def test_one_unit_input_bytes_and_the_reads_of_the_same_moment(tmp_path, kind):
    """Whatever the input (byte ranges, gzip ranges, parsed chunks), the bar counts bytes of the
    file (compressed for gzip) up to its size, rising, with the reads written so far beside it."""
    rng = np.random.default_rng(30)
    records = []
    for i in range(3000):
        sequence = "".join(rng.choice(list("ACGT"), 100))
        records.append(f"@r{i}\n{sequence}\n+\n{'I' * 100}\n" if kind.startswith("fastq") else f">r{i}\n{sequence}\n")
    text = "".join(records).encode()
    path = tmp_path / f"reads.{kind}"
    path.write_bytes(gzip.compress(text) if kind.endswith(".gz") else text)
    progress = Progress(str(path), enabled=True)
    assert progress._bar.total == path.stat().st_size
    items = list(input_chunks(str(path), 20_000, 1024, ramp=2))
    assert len(items) > 4
    for item in items:
        progress.handed_out(item)
    seen, written = [], 0
    for item in items:
        count = as_chunk(item).count
        written += count
        progress.written(count)
        seen.append(progress._bar.n)
        assert shown_reads(progress) == written  # not one update behind
        assert progress._bar.unit == "B" and progress._bar.total == path.stat().st_size
    assert seen == sorted(seen) and seen[-1] == path.stat().st_size
    assert written == 3000
    progress.close()
    # FASTQ is cut into ranges at record starts: each has its own position. Parsed chunks take
    # the position of the reader's block (4 MiB of input), here made small.
    chunks = input_chunks(str(path), 20_000, 1024) if kind.startswith("fastq") else read_chunks(str(path), 20_000, 1024, block_bytes=30_000)
    positions = [as_chunk(item).input_end for item in chunks]
    assert positions == sorted(positions) and positions[-1] == path.stat().st_size and len(set(positions)) > 4


def test_an_empty_input_is_warned_about(tmp_path, caplog):
    for name, data in (("empty.fq", b""), ("empty.fq.gz", gzip.compress(b"")), ("blank.fa", b"\n\n")):
        path = tmp_path / name
        path.write_bytes(data)
        caplog.clear()
        assert list(input_chunks(str(path), 1000, 100)) == []
        assert [record.levelname for record in caplog.records] == ["WARNING"]
        assert f"{path} holds no reads" in caplog.text
    caplog.clear()
    assert list(read_pairs(str(tmp_path / "empty.fq"), str(tmp_path / "empty.fq.gz"))) == []
    assert "holds no reads" in caplog.text


def test_log_lines_go_above_the_bar_while_it_shows(tmp_path, capsys):
    _setup_logging()
    log = logging.getLogger("bowmap.align")
    log.setLevel(logging.INFO)
    reads = tmp_path / "reads.fq"
    reads.write_bytes(b"@r\nACGT\n+\nIIII\n")
    progress = Progress(str(reads), enabled=True)
    handlers = logging.getLogger("bowmap").handlers
    assert any(type(handler).__name__ == "_TqdmLoggingHandler" for handler in handlers)
    log.info("a line while the bar shows")
    progress.close()
    assert not any(type(handler).__name__ == "_TqdmLoggingHandler" for handler in logging.getLogger("bowmap").handlers)
    assert "[bowmap.align] a line while the bar shows\n" in capsys.readouterr().err
    log.setLevel(logging.NOTSET)
