"""The SAM fields kernel (opencl/align/sam_fields.cl: CIGAR text, NM, MD) against its reference,
the host's vectorised formatter: format_chunk with the fields made on the device writes the same
bytes, on random alignments (clips, indels, = and X, Ns in reads and reference, reads of 0 to
5,000 bases, MDs past the bytes read back first) and on wrong CIGARs."""

from __future__ import annotations

import functools

import numpy as np
import pyopencl as cl
import pytest

from bowmap.align.extend.smith_waterman import PackedText
from bowmap.align.output import sam_fields
from bowmap.align.output.sam import ChunkAlignments, format_chunk
from bowmap.align.output.sam_fields import SamFields
from bowmap.index.format import pack_2bit
from bowmap.runtime.devices import DeviceArray, make_buffer

from .test_sam import make_case


def device_fields(device, case, masked: bool = True):
    """format_chunk's ``fields_on_device`` for ``case``: its contigs packed (Ns as stand-ins
    marked ambiguous) and its reads' codes on ``device``."""
    flat = np.concatenate(case.contigs)
    ambiguous = np.concatenate(([0], (flat == 4).astype(np.int8), [0]))
    starts = np.flatnonzero(np.diff(ambiguous) == 1)
    ends = np.flatnonzero(np.diff(ambiguous) == -1)
    if not masked:
        assert len(starts) == 0
    stand_ins = np.where(flat == 4, np.arange(len(flat)) % 4, flat).astype(np.uint8)  # any base: the mask says N
    text = PackedText(device, pack_2bit(stand_ins), len(flat), starts, ends - starts)
    both = case.chunk.both_codes
    codes = DeviceArray(make_buffer(device.context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR, hostbuf=both if len(both) else np.zeros(1, np.uint8)), both)
    made = functools.partial(SamFields(device, device.queue(), text).fields, codes)

    def fields(*arguments):
        result = made(*arguments)
        fields.results.append(result)
        return result

    fields.results = []
    return fields


@pytest.mark.parametrize(
    "seed, count, long_reads, ambiguous, write_unaligned",
    [
        (1, 1, False, True, True),
        (2, 2, False, False, True),
        (3, 255, False, True, False),
        (5, 257, True, True, True),
        (6, 1000, False, False, False),
        (7, 333, True, False, True),
    ],
)
def test_fields_on_the_device_give_the_same_text(device, seed, count, long_reads, ambiguous, write_unaligned):
    case = make_case(seed, count, long_reads=long_reads, ambiguous=ambiguous)
    expected = format_chunk(case.chunk, case.alignments, case.reference, "rg", write_unaligned)
    fields = device_fields(device, case, masked=ambiguous)
    assert format_chunk(case.chunk, case.alignments, case.reference, "rg", write_unaligned, fields_on_device=fields) == expected
    assert len(fields.results) == 1 and fields.results[0] is not None  # made on the device, not by the reference


def test_long_texts_small_batches_and_a_short_head(device, monkeypatch):
    """MDs and CIGARs past the head (the second read-back), batches of a few lines each."""
    case = make_case(11, 300, long_reads=True)
    expected = format_chunk(case.chunk, case.alignments, case.reference, None, True)
    monkeypatch.setattr(sam_fields, "HEAD_BYTES", 3)
    monkeypatch.setattr("bowmap.align.output.sam._BATCH_BYTES", 20_000)
    fields = device_fields(device, case)
    assert format_chunk(case.chunk, case.alignments, case.reference, None, True, fields_on_device=fields) == expected
    made = fields.results[0]
    assert made is not None and made.md_lengths.max() > 3 and made.cigar_lengths.max() > 3


def test_every_line_unmapped(device):
    case = make_case(12, 40)
    alignments = case.alignments
    alignments.mapped[:] = False
    expected = format_chunk(case.chunk, alignments, case.reference, None, True)
    assert format_chunk(case.chunk, alignments, case.reference, None, True, fields_on_device=device_fields(device, case)) == expected


@pytest.mark.parametrize("wrong", ["inside clip", "too few bases", "past the contig", "unknown operation"])
def test_a_wrong_cigar_gets_the_reference_message(device, wrong):
    case = make_case(13, 60)
    alignments: ChunkAlignments = case.alignments
    lengths = np.diff(case.chunk.offsets)
    line = int(np.flatnonzero(alignments.mapped & (lengths >= 3))[0])
    first, end = int(alignments.cigar_offsets[line]), int(alignments.cigar_offsets[line + 1])
    length = int(lengths[line])
    new = {
        "inside clip": [(length - 2) << 4, 1 << 4 | 4, 1 << 4],  # M, S, M
        "too few bases": [(length - 1) << 4],
        "unknown operation": [length << 4 | 3],  # N: not an operation of an aligned read here
        "past the contig": [length << 4],
    }[wrong]
    alignments.cigar_ops = np.concatenate((alignments.cigar_ops[:first], np.array(new, dtype=np.uint32), alignments.cigar_ops[end:]))
    alignments.cigar_offsets[line + 1 :] += len(new) - (end - first)
    if wrong == "past the contig":
        alignments.position[line] = case.reference.contig_lengths[alignments.contig[line]] - length + 1
    with pytest.raises(ValueError) as host:
        format_chunk(case.chunk, alignments, case.reference, None, True)
    fields = device_fields(device, case)
    with pytest.raises(ValueError) as on_device:
        format_chunk(case.chunk, alignments, case.reference, None, True, fields_on_device=fields)
    assert str(on_device.value) == str(host.value)
    assert fields.results == [None]  # the kernel found it, and left the message to the reference
