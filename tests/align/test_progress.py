"""The progress bar of `bowmap align`: bytes of the input against its size (a total, an ETA)
where the input is handed out as byte ranges of the file; log lines printed above the bar."""

from __future__ import annotations

import logging
from types import SimpleNamespace

from bowmap.align.progress import Progress
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


def test_chunks_without_byte_positions_count_reads_without_a_total(tmp_path):
    reads = tmp_path / "reads.fa"
    reads.write_bytes(b">r\nACGT\n" * 10)
    progress = Progress(str(reads), enabled=True)
    progress.handed_out(SimpleNamespace(number=0))  # a parsed chunk
    progress.written(10)
    assert progress._bar.total is None and progress._bar.n == 10
    progress.close()


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
