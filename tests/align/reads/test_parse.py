"""The reader stage: FASTQ/FASTA parsed in blocks equals a plain per-line Python parser, whatever
the block size; every kind of bad input is one error naming the exact file line.
"""

from __future__ import annotations

import gzip
import io
import re
import sys

import numpy as np
import pytest
from read_cases import BLOCK_SIZES, ERROR_CASES, GOOD, collect, error_case_file, error_messages, expected, python_parse, random_reads

from bowmap.align.reads import read_chunks
from bowmap.runtime.errors import BowmapError


def check_chunks(chunks, chunk_bases):
    """Chunk numbering, read numbering, array shapes and the size rule."""
    first = 0
    for number, chunk in enumerate(chunks):
        assert chunk.number == number and chunk.first_read == first
        assert chunk.offsets.dtype == np.int64 and chunk.name_offsets.dtype == np.int64
        assert chunk.codes.dtype == np.uint8 and chunk.reverse_codes.dtype == np.uint8
        assert len(chunk.offsets) == len(chunk.name_offsets) == chunk.count + 1 >= 2
        assert chunk.offsets[0] == 0 and chunk.offsets[-1] == len(chunk.codes) == len(chunk.reverse_codes)
        assert chunk.name_offsets[-1] == len(chunk.names)
        assert chunk.lengths.tolist() == np.diff(chunk.offsets).tolist()
        weights = np.maximum(chunk.lengths, 1)
        assert weights[:-1].sum() < chunk_bases
        if number < len(chunks) - 1:
            assert weights.sum() >= chunk_bases
        first += chunk.count


# ------------------------------------------------------------------------------ valid input


@pytest.mark.parametrize("fasta", [False, True], ids=["fastq", "fasta"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_files_equal_plain_parser_for_every_block_size(tmp_path, fasta, seed):
    rng = np.random.default_rng(seed)
    text, reads = random_reads(rng, int(rng.integers(1, 60)), fasta)
    assert python_parse(text) == reads
    plain = tmp_path / "reads.txt"
    plain.write_bytes(text)
    zipped = tmp_path / "reads.txt.gz"
    zipped.write_bytes(gzip.compress(text))
    want = expected(reads)
    reference_chunks = None
    for block_bytes in BLOCK_SIZES:
        for path in (plain, zipped):
            got, chunks = collect(path, chunk_bases=50, block_bytes=block_bytes)
            assert got == want, (block_bytes, path)
            check_chunks(chunks, 50)
            boundaries = [(chunk.first_read, chunk.count) for chunk in chunks]
            reference_chunks = reference_chunks or boundaries
            assert boundaries == reference_chunks  # chunks do not depend on the block size


@pytest.mark.parametrize("chunk_bases", [1, 2, 7, 100, 1 << 22])
def test_chunk_sizes(tmp_path, chunk_bases):
    rng = np.random.default_rng(7)
    text, reads = random_reads(rng, 80, fasta=False)
    path = tmp_path / "reads.fq"
    path.write_bytes(text)
    got, chunks = collect(path, chunk_bases=chunk_bases, block_bytes=37)
    assert got == expected(reads)
    check_chunks(chunks, chunk_bases)
    if chunk_bases == 1:
        assert [chunk.count for chunk in chunks] == [1] * len(reads)


def test_longer_reads_and_equal_lengths(tmp_path):
    """Reads of one length take the 2-D reverse-complement path; long ones cross many blocks."""
    rng = np.random.default_rng(11)
    sequences = ["".join(rng.choice(list("ACGTN"), size=150)) for _ in range(30)]
    text = "".join(f"@r{i}\n{s}\n+\n{'I' * 150}\n" for i, s in enumerate(sequences)).encode()
    path = tmp_path / "reads.fq"
    path.write_bytes(text)
    for block_bytes in (7, 333, 1 << 20):
        got, _ = collect(path, block_bytes=block_bytes, max_read_length=150)
        assert got == expected([(f"r{i}", s, "I" * 150) for i, s in enumerate(sequences)])


def test_names_follow_bwa():
    text = b"@r/1 x\nA\n+\nI\n@ab/3\nA\n+\nI\n@/1\nA\n+\nI\n@a/x\nA\n+\nI\n@q\tz\nA\n+\nI\n@c/12\nA\n+\nI\n"
    assert [name for name, *_ in python_parse(text)] == ["r", "ab", "/1", "a/x", "q", "c/12"]


def test_names_codes_and_empty_reads(tmp_path):
    path = tmp_path / "reads.fq"
    path.write_bytes(b"@r/1 x\nAcGtNnRy.\n+\nIIIIIIIII\n@ab/3\n\n+\n\n@/1\nA\n+\nI\n@a/x\nT\n+\n#\n@c/12\r\nG\r\n+\r\n~\r\n")
    (chunk,) = read_chunks(str(path))
    assert [chunk.name(i) for i in range(chunk.count)] == ["r", "ab", "/1", "a/x", "c/12"]
    assert chunk.lengths.tolist() == [9, 0, 1, 1, 1]
    assert chunk.codes.tolist() == [0, 1, 2, 3, 4, 4, 4, 4, 4, 0, 3, 2]
    assert chunk.reverse_codes.tolist() == [4, 4, 4, 4, 4, 0, 1, 2, 3, 3, 0, 1]
    assert chunk.qualities.tobytes() == b"IIIIIIIII" + b"I#~"


@pytest.mark.parametrize("content", [b"", b"\n\n", b"  \r\n\t\n", gzip.compress(b""), gzip.compress(b"\n")])
def test_empty_input_gives_no_chunks(tmp_path, content):
    path = tmp_path / "reads.fq"
    path.write_bytes(content)
    assert list(read_chunks(str(path), block_bytes=1)) == []


def test_fasta_has_no_qualities(tmp_path):
    path = tmp_path / "reads.fa"
    path.write_bytes(b"\n>one\nAC\nGT\n\n>two x\n>three\nN\n")
    (chunk,) = read_chunks(str(path), block_bytes=2)
    assert chunk.qualities is None
    assert [chunk.name(i) for i in range(chunk.count)] == ["one", "two", "three"]
    assert chunk.lengths.tolist() == [4, 0, 1]


def test_several_gzip_members(tmp_path):
    rng = np.random.default_rng(5)
    text, reads = random_reads(rng, 30, fasta=False)
    text = text.rstrip(b"\n") + b"\n"
    middle = text.index(b"\n@read1") + 1
    path = tmp_path / "reads.fq.gz"
    path.write_bytes(gzip.compress(text[:middle]) + gzip.compress(text[middle:]))
    for block_bytes in (3, 1 << 20):
        assert collect(path, block_bytes=block_bytes)[0] == expected(reads)


@pytest.mark.parametrize("zipped", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("block_bytes", [1, 1 << 20])
def test_stdin(monkeypatch, zipped, block_bytes):
    rng = np.random.default_rng(9)
    text, reads = random_reads(rng, 25, fasta=False)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(gzip.compress(text) if zipped else text)))
    assert collect("-", block_bytes=block_bytes)[0] == expected(reads)


@pytest.mark.parametrize("tail, follows, message", ERROR_CASES)
@pytest.mark.parametrize("zipped", [False, True], ids=["plain", "gzip"])
def test_fastq_errors_name_the_exact_line(tmp_path, tail, follows, message, zipped):
    path = error_case_file(tmp_path, tail, follows, zipped)
    (error,) = error_messages(path, [1, 4, 13, 1 << 20], max_read_length=20, chunk_bases=3)
    assert re.search(message, error) and "\n" not in error


@pytest.mark.parametrize(
    "content, message",
    [
        (b">a\nACGT\n>b\nAC\nG*T\n", r"reads\.fa:5: invalid character '\*' in the sequence \(record b\)"),
        (b">a\r\nAC\r\n\r\n>b\r\nACGT\r\nAC;T\r\n", r"reads\.fa:6: invalid character ';' in the sequence \(record b\)"),
        (b">a\nACGT\n>\nAC\n", r"reads\.fa:3: read with no name after '>' \(after record a\)"),
        (b">a\nACGT\n>@b\nAC\n", r"reads\.fa:3: read name not usable in SAM .*\(record @b\)"),
        (b">a\nACGT\n>b\n" + b"ACGTA\n" * 5, r"reads\.fa:3: read longer than the index's maximum "
         r"read length 20 \(rebuild the index with a larger --max-read-length\) \(record b\)"),
        (b">a\nACGT\n>b\n" + b"ACGTA\n" * 5 + b">c\nA\n", r"reads\.fa:3: read longer than.*\(record b\)"),
        (b">a\nACGT\n>b\n" + b"A" * 300, r"reads\.fa:3: read longer than.*\(record b\)"),
        (b"\n\n  x\n>a\nACGT\n", r"reads\.fa:3: not a FASTQ or FASTA file \(the first line with text starts with ' ', "
         r"expected '@' or '>'\)"),
        (b"\n \n\tx\n", r"reads\.fa:3: not a FASTQ or FASTA file \(.*starts with byte 0x09"),
        (b"\n \n  >a\nACGT\n", r"reads\.fa:3: not a FASTQ or FASTA file \(.*starts with ' '"),
        (b"\r\n \n  @a\nACGT\n+\nIIII\n", r"reads\.fa:3: not a FASTQ or FASTA file \(.*starts with ' '"),
        (b"\xef\xbb\xbf>a\nACGT\n", r"reads\.fa:1: not a FASTQ or FASTA file \(.*starts with byte 0xef"),
        (b"x", r"reads\.fa:1: not a FASTQ or FASTA file \(.*starts with 'x'"),
    ],
)
def test_fasta_errors_name_the_exact_line(tmp_path, content, message):
    path = tmp_path / "reads.fa"
    path.write_bytes(content)
    (error,) = error_messages(path, [1, 5, 1 << 20], max_read_length=20)
    assert re.search(message, error)


def test_error_line_far_into_a_file_with_tiny_blocks(tmp_path):
    rng = np.random.default_rng(3)
    text, reads = random_reads(rng, 40, fasta=False)
    lines = text.split(b"\n")
    # Records have 4 lines after the leading blank ones; break the quality of read 31.
    blank = next(i for i, line in enumerate(lines) if line)
    target = blank + 4 * 31 + 3
    lines[target] = lines[target].rstrip(b"\r") + b"I"
    path = tmp_path / "reads.fq"
    path.write_bytes(b"\n".join(lines))
    (error,) = error_messages(path, [1, 2, 7, 100, 1 << 20])
    assert re.search(rf"reads\.fq:{target + 1}: quality length \d+ differs from sequence length \d+ \(record read31\)", error)


def test_file_errors(tmp_path):
    with pytest.raises(BowmapError, match=r"missing\.fq: no such file"):
        list(read_chunks(str(tmp_path / "missing.fq")))
    with pytest.raises(BowmapError, match="is a directory"):
        list(read_chunks(str(tmp_path)))
    data = gzip.compress(("".join(GOOD.format(i) for i in range(2000))).encode())
    truncated = tmp_path / "truncated.fq.gz"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(BowmapError, match=r"truncated\.fq\.gz: truncated gzip data"):
        list(read_chunks(str(truncated)))
    damaged = tmp_path / "damaged.fq.gz"
    damaged.write_bytes(data[:20] + bytes(b ^ 0x55 for b in data[20:200]) + data[200:])
    with pytest.raises(BowmapError, match=r"damaged\.fq\.gz: damaged gzip data"):
        list(read_chunks(str(damaged)))
    garbage = tmp_path / "garbage.fq.gz"
    garbage.write_bytes(data + b"not gzip")
    with pytest.raises(BowmapError, match=r"garbage\.fq\.gz: damaged gzip data"):
        list(read_chunks(str(garbage)))


def test_stdin_errors_are_named_stdin(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"@a\nACGT\n+\nIII\n")))
    with pytest.raises(BowmapError, match=r"^stdin:4: quality length 3"):
        list(read_chunks("-", block_bytes=3))


@pytest.mark.parametrize("block_bytes", [1, 3, 1 << 20])
def test_empty_last_read_without_final_newline(tmp_path, block_bytes):
    path = tmp_path / "reads.fq"
    path.write_bytes(b"@a\nAC\n+\nII\n@b\n\n+")
    got, _ = collect(path, block_bytes=block_bytes)
    assert got == [("a", [0, 1], [2, 3], "II"), ("b", [], [], "")]


def test_longest_sam_name_and_inner_at_are_accepted(tmp_path):
    path = tmp_path / "reads.fq"
    path.write_bytes(b"@" + b"n" * 254 + b"\nACGT\n+\nIIII\n@a@b\nAC\n+\nII\n")
    (chunk,) = list(read_chunks(str(path)))
    assert [chunk.name(0), chunk.name(1)] == ["n" * 254, "a@b"]
