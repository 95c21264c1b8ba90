"""Reads the reader tests share: a plain-Python FASTQ/FASTA parser (the reference), random read
files, and malformed inputs with the error each must give.
"""

from __future__ import annotations

import gzip
import re

import numpy as np
import pytest

from bowmap.align.reads import read_chunks
from bowmap.runtime.errors import BowmapError

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
