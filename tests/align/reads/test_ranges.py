"""Byte ranges of an uncompressed FASTQ file (what `bowmap align` hands its workers, who read
and parse them): together they hold exactly the reads of the whole-file reader, whatever the
range and probe sizes; a malformed file still gets the whole-file reader's error."""

from __future__ import annotations

import gzip
import os
import re
import threading

import numpy as np
import pytest
from read_cases import ERROR_CASES, FIRST_GOOD, GOOD, error_case_file, expected, random_reads

from bowmap.align import reads as reader
from bowmap.align.reads import RangeInputError, as_chunk, fastq_ranges, first_input_error, gzip_ranges, input_chunks, read_chunks
from bowmap.align.reads import parse as read_parse
from bowmap.align.reads import ranges as read_ranges
from bowmap.runtime.errors import BowmapError

TARGETS = [1, 2, 7, 61, 4096, 1 << 22]


def reads_of(chunks) -> list:
    """(name, codes, reverse codes, quality) of every read, as read_cases.collect gives them."""
    reads = []
    for chunk in chunks:
        for i in range(chunk.count):
            low, high = chunk.offsets[i], chunk.offsets[i + 1]
            quality = chunk.qualities[low:high].tobytes().decode("latin-1")
            reads.append((chunk.name(i), chunk.codes[low:high].tolist(), chunk.reverse_codes[low:high].tolist(), quality))
    return reads


def check_ranges(ranges, text: bytes) -> None:
    """Ranges follow each other from the first record (blank lines before it skipped) to the end."""
    assert ranges[0].start == len(text) - len(text.lstrip(b" \t\r\n")) and ranges[-1].end == len(text)
    assert all(a.end == b.start and a.start < a.end for a, b in zip(ranges, ranges[1:]))
    assert [r.number for r in ranges] == list(range(len(ranges)))
    assert [r.last for r in ranges] == [False] * (len(ranges) - 1) + [True]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("probe", [2, 3, 17, 1 << 16])
def test_ranges_hold_the_reads_of_the_whole_file_reader(tmp_path, monkeypatch, seed, probe):
    monkeypatch.setattr(read_ranges, "_PROBE_BYTES", probe)
    rng = np.random.default_rng(seed)
    text, reads = random_reads(rng, int(rng.integers(1, 60)), fasta=False)
    if seed % 2:  # some reads far longer than a probe, and '@' or '+' leading quality lines
        long = "A" * 300
        text += f"\n@long x\n{long}\n+\n@{'+' * 299}\n@tail\nAC\n+\n+@\n".encode()
        reads += [("long", long, "@" + "+" * 299), ("tail", "AC", "+@")]
    path = tmp_path / "reads.fq"
    path.write_bytes(text)
    want = expected(reads)
    for target in TARGETS:
        ranges = list(fastq_ranges(str(path), target, 1000))
        check_ranges(ranges, text)
        chunks = [as_chunk(r) for r in ranges]
        assert reads_of(chunks) == want, target
        assert all(chunk.number == r.number for chunk, r in zip(chunks, ranges))
        if target == 1:  # every record starts a range, the first one after any blank lines
            assert len(ranges) == len(reads)
        zipped = tmp_path / "reads.fq.gz"
        zipped.write_bytes(gzip.compress(text))
        carried = list(gzip_ranges(str(zipped), target, 1000))
        assert [(r.start, r.end, r.last) for r in carried] == [(r.start, r.end, r.last) for r in ranges]
        assert reads_of(as_chunk(r) for r in carried) == want


def test_which_inputs_are_cut(tmp_path):
    """Uncompressed FASTQ files: ranges the workers read; gzipped ones: ranges carrying their
    text; anything else (FASTA, empty or blank files, pipes, stdin): the whole-file reader."""
    fastq = b"@a\nACGT\n+\nIIII\n"
    cases = {
        "reads.fa": b">a\nACGT\n",
        "reads.fa.gz": gzip.compress(b">a\nACGT\n"),
        "empty.fq": b"",
        "empty.fq.gz": gzip.compress(b""),
        "blank.fq": b"\n \n",
        "blank.fq.gz": gzip.compress(b"\n \n"),
        "indented.fq": b"\n  " + fastq,
    }
    for name, content in cases.items():
        (tmp_path / name).write_bytes(content)
        assert fastq_ranges(str(tmp_path / name), 10, 100) is None, name
        if name != "indented.fq":  # (the whole-file reader refuses that one)
            assert not any(isinstance(item, reader.ReadRange) for item in input_chunks(str(tmp_path / name), 10, 100))
    assert fastq_ranges("-", 10, 100) is None and gzip_ranges("-", 10, 100) is None
    assert fastq_ranges(str(tmp_path / "absent.fq"), 10, 100) is None
    assert fastq_ranges(str(tmp_path), 10, 100) is None
    (tmp_path / "reads.fq").write_bytes(fastq)
    (only,) = input_chunks(str(tmp_path / "reads.fq"), 10, 100)
    assert isinstance(only, reader.ReadRange) and only.last and only.end == len(fastq) and only.text is None
    (tmp_path / "reads.fq.gz").write_bytes(gzip.compress(b"\n" + fastq))
    (only,) = input_chunks(str(tmp_path / "reads.fq.gz"), 10, 100)
    assert isinstance(only, reader.ReadRange) and only.last and only.text == fastq


def whole_file_error(path) -> str:
    with pytest.raises(BowmapError) as caught:
        for _ in read_chunks(str(path), max_read_length=20):
            pass
    return str(caught.value)


@pytest.mark.parametrize("tail, follows, message", ERROR_CASES)
@pytest.mark.parametrize("zipped", [False, True], ids=["plain", "gzip"])
def test_a_malformed_file_gets_the_whole_file_readers_error(tmp_path, tail, follows, message, zipped):
    path = error_case_file(tmp_path, tail, follows, zipped)
    want = whole_file_error(path)
    assert re.search(message, want)
    for target in (1, 13, 60, 1 << 20):
        with pytest.raises(RangeInputError) as caught:
            for item in input_chunks(str(path), target, 20):
                as_chunk(item)
        assert str(first_input_error(str(path), 20, caught.value)) == want, target


def test_a_named_pipe_is_left_to_the_whole_file_reader(tmp_path):
    fifo = tmp_path / "reads.fq"
    os.mkfifo(fifo)
    text = b"@a\nACGT\n+\nIIII\n" * 1000
    writer = threading.Thread(target=fifo.write_bytes, args=(text,), daemon=True)
    writer.start()
    assert fastq_ranges(str(fifo), 10, 100) is None  # without opening it (that would lose its data)
    chunks = list(input_chunks(str(fifo), 10, 100))
    writer.join(5)
    assert sum(chunk.count for chunk in chunks) == 1000


@pytest.mark.parametrize("where", ["header", "plus", "wrapped"])
@pytest.mark.parametrize("zipped", [False, True], ids=["plain", "gzip"])
def test_runaway_lines_are_refused_as_by_the_whole_file_reader(tmp_path, monkeypatch, where, zipped):
    """Lines past the whole-file reader's limit (made small here), inside a range or where no
    record starts for longer than a record can be: the whole-file reader's error."""
    monkeypatch.setattr(read_parse, "LONGEST_OTHER_LINE", 200)
    long = "x" * (5 << 20)  # longer than the whole-file reader's blocks: it carries part of it over
    bad = {
        "header": f"@b {long}\nACGT\n+\nIIII\n",
        "plus": f"@b\nACGT\n+{long}\nIIII\n",
        "wrapped": "@b\n" + "ACGT\n" * 400 + "+\n" + "IIII\n" * 400,
    }[where]
    path = tmp_path / "reads.fq"
    text = (FIRST_GOOD + bad + GOOD.format(20)).encode()
    path.write_bytes(gzip.compress(text) if zipped else text)
    want = whole_file_error(path)
    for target in (1, 50, 1 << 20):
        with pytest.raises(RangeInputError) as caught:
            for item in input_chunks(str(path), target, 20):
                as_chunk(item)
        assert str(first_input_error(str(path), 20, caught.value)) == want


def test_a_file_that_shrinks_while_read_is_an_error(tmp_path):
    path = tmp_path / "reads.fq"
    path.write_text(FIRST_GOOD)
    ranges = list(fastq_ranges(str(path), 20, 100))
    path.write_text(GOOD.format(0))
    with pytest.raises(BowmapError, match="changed while it was read"):
        for item in ranges:
            as_chunk(item)


def test_damaged_gzip_after_a_malformed_record_gets_the_first_error(tmp_path):
    """The parent meets the damaged gzip data before a worker parses the bad record before it:
    the error is still the first one in the file, as the whole-file reader reports it."""
    text = (FIRST_GOOD + "@bad\nACGT\n+\nIII\n" + "".join(GOOD.format(i) for i in range(10, 5000))).encode()
    packed = gzip.compress(text)
    path = tmp_path / "reads.fq.gz"
    path.write_bytes(packed[: len(packed) // 2])  # truncated
    want = whole_file_error(path)
    assert "quality length 3 differs" in want
    with pytest.raises(RangeInputError) as caught:
        for _ in input_chunks(str(path), 40, 20):  # (ranges not parsed: the parent fails first)
            pass
    assert "truncated gzip" in str(caught.value)
    assert str(first_input_error(str(path), 20, caught.value)) == want


@pytest.mark.parametrize("ramp", [1, 4, 40])
def test_the_first_chunks_grow_to_the_chunk_size_and_hold_the_same_reads(tmp_path, ramp):
    """input_chunks(ramp=K): ranges of a FASTQ file, of a gzipped one and chunks of a FASTA file
    whose first K hold about 1/2**K, 1/2**(K-1), ... of the chunk's bases, then whole chunks: the
    same reads in the same order as without, numbered 0, 1, 2, ...; and ramped's schedule."""
    from bowmap.align.reads.chunk import ramped

    assert [ramped(64, number, 4) for number in range(6)] == [4, 8, 16, 32, 64, 64]
    assert ramped(3, 0, 4) == 1 and ramped(64, 0, 0) == 64
    rng = np.random.default_rng(ramp)
    codes = rng.integers(0, 4, (3000, 100))
    sequences = ["".join("ACGT"[code] for code in row) for row in codes]
    fastq = tmp_path / "reads.fq"
    fastq.write_text("".join(f"@r{i}\n{sequence}\n+\n{'I' * 100}\n" for i, sequence in enumerate(sequences)))
    zipped = tmp_path / "reads.fq.gz"
    zipped.write_bytes(gzip.compress(fastq.read_bytes()))
    fasta = tmp_path / "reads.fa"
    fasta.write_text("".join(f">r{i}\n{sequence}\n" for i, sequence in enumerate(sequences)))
    chunk_bases = 40_000
    for path in (fastq, zipped, fasta):
        plain = [as_chunk(item) for item in input_chunks(str(path), chunk_bases, 1000)]
        ramped_chunks = [as_chunk(item) for item in input_chunks(str(path), chunk_bases, 1000, ramp)]
        assert [chunk.number for chunk in ramped_chunks] == list(range(len(ramped_chunks)))
        def names_and_codes(chunks):
            return [(chunk.name(i), chunk.codes[chunk.offsets[i] : chunk.offsets[i + 1]].tolist()) for chunk in chunks for i in range(chunk.count)]

        assert names_and_codes(ramped_chunks) == names_and_codes(plain)
        if path is not fasta:
            assert reads_of(ramped_chunks) == reads_of(plain)
        # A FASTQ range is cut at 2 bytes a base (its names make it hold a little less).
        bases = [int(chunk.offsets[-1]) for chunk in ramped_chunks]
        for number, held in enumerate(bases[:-1]):
            target = ramped(chunk_bases, number, ramp)
            assert 0.9 * target - 100 <= held <= target + 100, (path.name, number, bases[:8])
        assert len(ramped_chunks) <= len(plain) + ramp
