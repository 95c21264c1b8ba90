"""The reader stage: FASTQ/FASTA parsed in blocks equals a plain per-line Python parser, whatever
the block size; every kind of bad input is one error naming the exact file line."""

from __future__ import annotations

import gzip
import io
import re
import sys

import numpy as np
import pytest

from bowmap.errors import BowmapError
from bowmap.reader import read_chunks

BLOCK_SIZES = [1, 2, 3, 5, 16, 61, 4096, 1 << 22]
CODE_OF = {"A": 0, "C": 1, "G": 2, "T": 3}


# ------------------------------------------------------------------------------ plain reference


def python_parse(text: bytes) -> list[tuple[str, str, str | None]]:
    """(name, sequence, quality or None) of every read, the obvious way: one line at a time."""
    lines = text.decode("latin-1").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    if len(lines) % 4 == 3 and lines[-3].startswith("@") and lines[-2] == "" and lines[-1].startswith("+"):
        lines.append("")  # an empty last read whose (empty) quality line lost its newline
    while lines and lines[0].strip(" \t") == "":
        lines.pop(0)
    if not lines:
        return []

    def name_of(header: str) -> str:
        name = re.split("[ \t]", header[1:])[0]
        if len(name) > 2 and name[-2] == "/" and name[-1].isdigit():
            name = name[:-2]
        return name

    reads = []
    if lines[0].startswith("@"):
        while lines and lines[-1] == "" and len(lines) % 4 != 0:
            lines.pop()
        while len(lines) >= 4 and lines[-4:] == ["", "", "", ""]:
            del lines[-4:]
        for start in range(0, len(lines), 4):
            header, sequence, plus, quality = lines[start : start + 4]
            assert header.startswith("@") and plus.startswith("+") and len(sequence) == len(quality)
            reads.append((name_of(header), sequence, quality))
    else:
        for line in lines:
            if line.startswith(">"):
                reads.append([name_of(line), "", None])
            else:
                reads[-1][1] += line
        reads = [tuple(read) for read in reads]
    return reads


def python_codes(sequence: str) -> list[int]:
    return [CODE_OF.get(base.upper(), 4) for base in sequence]


def python_reverse_complement(codes: list[int]) -> list[int]:
    return [3 - code if code < 4 else 4 for code in reversed(codes)]


def random_reads(rng: np.random.Generator, count: int, fasta: bool) -> tuple[bytes, list]:
    """A random read file (lengths 0..40 with 0 and 1 frequent, N, IUPAC, '.', lowercase, names
    with comments and /1 /2, CRLF on some lines, blank lines around) and the reads it holds."""
    alphabet = np.array(list("ACGTACGTACGTacgtNnRykM."))
    out = []
    out.append("\n" * int(rng.integers(0, 3)))
    reads = []
    for index in range(count):
        length = int(rng.choice([0, 1, 2, int(rng.integers(3, 41))], p=[0.1, 0.1, 0.1, 0.7]))
        sequence = "".join(rng.choice(alphabet, size=length))
        name = f"read{index}" + str(rng.choice(["", "/1", "/2", "/x", "_a"]))
        comment = str(rng.choice(["", " comment here", "\tBC:Z:ACGT", " 1:N:0:ATCACG"]))
        newline = "\r\n" if rng.random() < 0.3 else "\n"
        if fasta:
            width = int(rng.integers(1, 12))
            out.append(f">{name}{comment}{newline}")
            for start in range(0, length, width):
                out.append(sequence[start : start + width] + ("\r\n" if rng.random() < 0.3 else "\n"))
            if rng.random() < 0.1:
                out.append("\n")  # blank lines inside a FASTA record are allowed
            quality = None
        else:
            quality = "".join(chr(c) for c in rng.integers(33, 127, size=length))
            plus = str(rng.choice(["+", "+" + name]))
            out.append(f"@{name}{comment}{newline}{sequence}{newline}{plus}{newline}{quality}{newline}")
        stripped = name[:-2] if name[-2] == "/" and name[-1].isdigit() else name
        reads.append((stripped, sequence, quality))
    text = "".join(out)
    if rng.random() < 0.5 and text.endswith("\n"):
        text = text[:-1]  # no newline at the end of the file (after an empty read: no quality line)
    elif rng.random() < 0.5:
        text += "\n\n"
    return text.encode(), reads


def collect(path, **options):
    """Every read of every chunk as (name, codes, reverse codes, quality), and the chunks."""
    chunks = list(read_chunks(str(path), **options))
    reads = []
    for chunk in chunks:
        for i in range(chunk.count):
            low, high = chunk.offsets[i], chunk.offsets[i + 1]
            quality = None if chunk.qualities is None else chunk.qualities[low:high].tobytes().decode("latin-1")
            reads.append((chunk.name(i), chunk.codes[low:high].tolist(), chunk.reverse_codes[low:high].tolist(), quality))
    return reads, chunks


def expected(reads):
    return [(name, python_codes(seq), python_reverse_complement(python_codes(seq)), qual) for name, seq, qual in reads]


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


# ------------------------------------------------------------------------------ bad input

GOOD = "@r{0}\nACGT\n+\nIIII\n"
FIRST_GOOD = "".join(GOOD.format(i) for i in range(9))  # lines 1..36


ERROR_CASES = [
    # (text after 9 good records on lines 1..36, whether good records follow it, error expected)
    ("@bad\nACGT\nIIII\n@next\nA\n+\nI\n", True, r"reads\.fq:39: expected a '\+' line after the sequence, "
     r"found 'IIII' \(multi-line FASTQ is not supported\) \(record bad\)"),
    ("@bad\nACGT\nACGT\n+\nIIIIIIII\n", True, r":39: expected a '\+' line.*multi-line FASTQ.*\(record bad\)"),
    ("bad\nACGT\n+\nIIII\n", True, r"reads\.fq:37: expected a FASTQ header line starting with '@', found 'bad' "
     r"\(after record r8\)"),
    ("\n@r9\nACGT\n+\nIIII\n", True, r":37: expected a FASTQ header.*found ''.*after record r8"),
    ("@bad\nACGT\n+\nIII\n", True, r"reads\.fq:40: quality length 3 differs from sequence length 4 \(record bad\)"),
    ("@bad\r\nACGT\r\n+\r\nIIIII\r\n", True, r":40: quality length 5 differs from sequence length 4 \(record bad\)"),
    ("@bad\nACGT\n", False, r"reads\.fq:37: truncated record: the file ends after 2 of its 4 lines \(record bad\)"),
    ("@bad\nACGT\n\n\n", False, r":39: expected a '\+' line after the sequence, found ''.*\(record bad\)"),
    ("@bad\nACGT\n+", False, r":37: truncated record: the file ends after 3 of its 4 lines \(record bad\)"),
    ("@bad", False, r":37: truncated record: the file ends after 1 of its 4 lines \(record bad\)"),
    ("@bad\nACGT\nII\n", False, r":39: expected a '\+' line.*found 'II'.*\(record bad\)"),
    ("@bad\nACGT\n+\nII", False, r":40: quality length 2 differs from sequence length 4 \(record bad\)"),
    ("@bad\nAC GT\n+\nIIIII\n", True, r"reads\.fq:38: invalid character ' ' in the sequence \(record bad\)"),
    ("@bad\nAC-T\n+\nIIII\n", True, r":38: invalid character '-' in the sequence \(record bad\)"),
    ("@bad\nAC\x00T\n+\nIIII\n", True, r":38: invalid character byte 0x00 in the sequence \(record bad\)"),
    ("@bad\nACGT\n+\nII I\n", True, r"reads\.fq:40: invalid quality character ' ' \(record bad\)"),
    ("@\nACGT\n+\nIIII\n", True, r"reads\.fq:37: read with no name after '@' \(after record r8\)"),
    ("@ comment\nACGT\n+\nIIII\n", True, r":37: read with no name after '@' \(after record r8\)"),
    ("@bad\n" + "A" * 21 + "\n+\n" + "I" * 21 + "\n", True, r"reads\.fq:38: read longer than the index's "
     r"maximum read length 20 \(rebuild the index with a larger --max-read-length\) \(record bad\)"),
    ("@bad\n" + "A" * 500 + "\n+\n" + "I" * 500 + "\n", True, r":38: read longer than.*length 20 .*\(record bad\)"),
    ("\n" + "A" * 500 + "\n+\n", False, r":37: expected a FASTQ header line starting with '@', found '' \(after record r8\)"),
    ("bad\n" + "A" * 500 + "\n", False, r":37: expected a FASTQ header line starting with '@', found 'bad'"),
    ("@\n" + "A" * 500 + "\n", False, r":37: read with no name after '@' \(after record r8\)"),
    ("@bad\n" + "A" * 500, False, r":38: read longer than.*length 20 .*\(record bad\)"),
    ("@@bad\nACGT\n+\nIIII\n", True, r":37: read name not usable in SAM .*\(record @bad\)"),
    ("@" + "n" * 255 + "\nACGT\n+\nIIII\n", True, r":37: read name not usable in SAM"),
    ("@b\x01ad\nACGT\n+\nIIII\n", True, r":37: read name not usable in SAM"),
]


def error_messages(path, block_sizes, **options) -> set[str]:
    """The error raised for ``path`` with each block size (all must raise)."""
    messages = set()
    for block_bytes in block_sizes:
        with pytest.raises(BowmapError) as caught:
            for _ in read_chunks(str(path), block_bytes=block_bytes, **options):
                pass
        messages.add(str(caught.value))
    return messages


def error_case_file(folder, tail: str, follows: bool, zipped: bool):
    """reads.fq in ``folder``: an ERROR_CASES entry after 9 good records, gzipped or not."""
    text = (FIRST_GOOD + tail + ("".join(GOOD.format(i) for i in range(10, 13)) if follows else "")).encode()
    path = folder / "reads.fq"
    path.write_bytes(gzip.compress(text) if zipped else text)
    return path


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
