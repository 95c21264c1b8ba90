"""Reading reference FASTA: formats accepted and every kind of bad input."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
from bowmap.index_builder.fasta import read_reference

from bowmap.runtime.errors import BowmapError


def write(tmp_path, text: str | bytes, name="ref.fa"):
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return str(path)


def test_multi_record_lowercase_iupac_and_crlf(tmp_path):
    path = write(tmp_path, ">one first\r\nACgt\r\nNN\r\n\r\n>two\nrykmACGU\n>three\nT")
    reference = read_reference(path)
    assert reference.names == ["one", "two", "three"]
    assert reference.lengths.tolist() == [6, 8, 1]
    assert reference.starts.tolist() == [0, 6, 14]
    assert reference.codes.tolist() == [0, 1, 2, 3, 4, 4] + [4, 4, 4, 4, 0, 1, 2, 4] + [3]
    starts, lengths = reference.ambiguous_runs()
    assert starts.tolist() == [4, 13] and lengths.tolist() == [6, 1]


def test_gzipped_equals_plain(tmp_path):
    text = ">chr\nACGTNACGT\n"
    plain = read_reference(write(tmp_path, text))
    zipped = read_reference(write(tmp_path, gzip.compress(text.encode()), "ref.fa.gz"))
    assert plain.names == zipped.names
    np.testing.assert_array_equal(plain.codes, zipped.codes)


@pytest.mark.parametrize(
    "content, message",
    [
        ("", "empty file"),
        ("\n  \n", "empty file"),
        ("ACGT\n>chr\nACGT\n", ":1: not a FASTA file"),
        ("\n\nhello\n", ":3: not a FASTA file"),
        (">chr\nACGT\n>empty\n>next\nAC\n", ":3: record 'empty' has no sequence"),
        (">chr\nACGT\n>last\n", ":3: record 'last' has no sequence"),
        (">\nACGT\n", ":1: record with no name"),
        (">a\nAC\n>b\nGG\n>a\nTT\n", ":5: duplicate record name 'a' (first at line 1)"),
        (">chr\nACGT\nAC-T\n", ":3: invalid character '-' in record 'chr'"),
        (">chr\nAC GT\n", ":2: invalid character"),
        (">chr\nAC\x00GT\n", "byte 0x00"),
        (">*chr\nACGT\n", "not a valid SAM reference name"),
        (">a,b\nACGT\n", "not a valid SAM reference name"),
    ],
)
def test_bad_input_names_file_and_line(tmp_path, content, message):
    path = write(tmp_path, content)
    with pytest.raises(BowmapError) as caught:
        read_reference(path)
    assert str(caught.value).startswith(path)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_missing_file_directory_and_broken_gzip(tmp_path):
    for path, message in (
        (str(tmp_path / "absent.fa"), "no such file"),
        (str(tmp_path), "is a directory"),
        (write(tmp_path, b"\x1f\x8b\x08\x00garbage", "bad.fa.gz"), "damaged gzip"),
    ):
        with pytest.raises(BowmapError, match=message):
            read_reference(path)
