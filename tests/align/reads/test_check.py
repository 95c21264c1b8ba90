"""check_reads, the look at each reads file a run takes before it opens a device or writes a byte:
the reader's own error for a file whose first records are bad, nothing for good input, and never
a read of a file that cannot be read twice (a named pipe, standard input)."""

from __future__ import annotations

import gzip
import os
import re
import threading

import numpy as np
import pytest
from read_cases import ERROR_CASES, GOOD, error_case_file, error_messages, random_reads

from bowmap.align.reads import check_reads
from bowmap.align.reads.input import CHECKED_BYTES
from bowmap.runtime.errors import BowmapError


@pytest.mark.parametrize("tail, follows, message", ERROR_CASES)
@pytest.mark.parametrize("zipped", [False, True], ids=["plain", "gzip"])
def test_a_bad_record_among_the_first_is_the_readers_own_error(tmp_path, tail, follows, message, zipped):
    path = error_case_file(tmp_path, tail, follows, zipped)
    with pytest.raises(BowmapError) as caught:
        check_reads([str(path)], 20)
    assert re.search(message, str(caught.value))
    assert {str(caught.value)} == error_messages(path, [1 << 20], max_read_length=20, chunk_bases=3)


@pytest.mark.parametrize("fasta", [False, True], ids=["fastq", "fasta"])
@pytest.mark.parametrize("seed", range(4))
def test_good_files_pass(tmp_path, fasta, seed):
    text, _ = random_reads(np.random.default_rng(seed), 300, fasta)
    plain, zipped = tmp_path / "reads", tmp_path / "reads.gz"
    plain.write_bytes(text)
    zipped.write_bytes(gzip.compress(text))
    check_reads([str(plain), None, str(zipped)], 40)
    (tmp_path / "empty.fq").write_bytes(b"")
    check_reads([str(tmp_path / "empty.fq")], 40)  # the run warns of it


def test_missing_unreadable_and_folders(tmp_path):
    good = tmp_path / "good.fq"
    good.write_text(GOOD.format(1))
    with pytest.raises(BowmapError, match=r"^\S*missing_2\.fq: no such file$"):
        check_reads([str(good), str(tmp_path / "missing_2.fq")], 20)
    with pytest.raises(BowmapError, match="is a directory"):
        check_reads([str(tmp_path)], 20)
    with pytest.raises(BowmapError, match=r"cannot read \(Not a directory\)"):
        check_reads([str(good / "x.fq")], 20)


def test_only_the_head_is_read(tmp_path):
    """A bad record past the checked bytes is the run's to find, as it reads on."""
    good = "".join(GOOD.format(i) for i in range(CHECKED_BYTES // len(GOOD.format(0)) * 2))
    path = tmp_path / "reads.fq"
    path.write_text(good + "@bad\nACGT\n+\nIII\n")
    check_reads([str(path)], 20)


def test_a_named_pipe_and_stdin_are_left_to_the_run(tmp_path):
    """Opening a named pipe would wait for a writer and then take its data: it is only looked up."""
    pipe = tmp_path / "reads.fq"
    os.mkfifo(pipe)
    done = threading.Event()

    def check():
        check_reads([str(pipe), "-"], 20)
        done.set()

    threading.Thread(target=check, daemon=True).start()
    assert done.wait(10)
    with pytest.raises(BowmapError, match="no such file"):
        check_reads([str(tmp_path / "gone.fq")], 20)
