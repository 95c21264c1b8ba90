"""The SAM fields kernel (opencl/align/sam_fields.cl: CIGAR text, NM, MD) against its reference,
the host's vectorised formatter: format_chunk with the fields made on the device writes the same
bytes, on random alignments (clips, indels, = and X, Ns in reads and reference, reads of 0 to
5,000 bases, MDs past the bytes read back first) and on wrong CIGARs."""

from __future__ import annotations


import numpy as np
import pyopencl as cl
import pytest

from bowmap.align.extend.packed_text import PackedText
from bowmap.align.output import sam_fields
from bowmap.align.output.sam import ChunkAlignments, format_chunk
from bowmap.align.output.sam_fields import SamFields
from bowmap.index.format import pack_2bit
from bowmap.runtime.devices import DeviceArray, make_buffer

from .test_sam import make_case


class OnDevice:
    """format_chunk's ``on_device`` for a chunk of reads on ``contigs``: the contigs packed (Ns
    as stand-ins marked ambiguous) and the reads' codes on ``device``; ``lines``: the lines
    written there too (else the host writes them from the fields made there). ``results``:
    what each fields call gave."""

    def __init__(self, device, contigs, chunk, masked: bool = True, lines: bool = False):
        flat = np.concatenate([contig if isinstance(contig, np.ndarray) else _whole(contig) for contig in contigs])
        ambiguous = np.concatenate(([0], (flat == 4).astype(np.int8), [0]))
        starts = np.flatnonzero(np.diff(ambiguous) == 1)
        ends = np.flatnonzero(np.diff(ambiguous) == -1)
        if not masked:
            assert len(starts) == 0
        stand_ins = np.where(flat == 4, np.arange(len(flat)) % 4, flat).astype(np.uint8)  # any base: the mask says N
        text = PackedText(device, pack_2bit(stand_ins), len(flat), starts, ends - starts)
        both = chunk.both_codes
        flags = cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR
        codes = DeviceArray(make_buffer(device.context, flags, hostbuf=both if len(both) else np.zeros(1, np.uint8)), both)
        self.bound = SamFields(device, device.queue(), text).on(codes)
        self.lines = self.bound.lines if lines else None
        self.results = []

    def fields(self, *arguments):
        result = self.bound.fields(*arguments)
        self.results.append(result)
        return result

    def text(self, *arguments):
        return self.bound.text(*arguments)


def _whole(far) -> np.ndarray:
    """A test_sam_records FarEnd contig (150 Mbp known only at its end) as a whole array."""
    codes = np.zeros(len(far), dtype=np.uint8)
    codes[far.offset :] = far.codes
    return codes


def device_fields(device, case, masked: bool = True, lines: bool = False) -> OnDevice:
    return OnDevice(device, case.contigs, case.chunk, masked, lines)


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
@pytest.mark.parametrize("lines", [False, True])
def test_fields_on_the_device_give_the_same_text(device, seed, count, long_reads, ambiguous, write_unaligned, lines):
    case = make_case(seed, count, long_reads=long_reads, ambiguous=ambiguous)
    expected = format_chunk(case.chunk, case.alignments, case.reference, "rg", write_unaligned)
    fields = device_fields(device, case, masked=ambiguous, lines=lines)
    assert format_chunk(case.chunk, case.alignments, case.reference, "rg", write_unaligned, on_device=fields) == expected
    assert len(fields.results) == 1 and fields.results[0] is not None  # made on the device, not by the reference


@pytest.mark.parametrize("lines", [False, True])
def test_long_texts_small_batches_and_a_short_head(device, monkeypatch, lines):
    """MDs and CIGARs past the head (the second read-back), batches of a few lines each."""
    case = make_case(11, 300, long_reads=True)
    expected = format_chunk(case.chunk, case.alignments, case.reference, None, True)
    monkeypatch.setattr(sam_fields, "HEAD_BYTES", 3)
    monkeypatch.setattr("bowmap.align.output.sam._BATCH_BYTES", 20_000)
    fields = device_fields(device, case, lines=lines)
    assert format_chunk(case.chunk, case.alignments, case.reference, None, True, on_device=fields) == expected
    made = fields.results[0]
    assert made is not None and made.md_lengths.max() > 3 and made.cigar_lengths.max() > 3


@pytest.mark.parametrize("lines", [False, True])
def test_every_line_unmapped(device, lines):
    case = make_case(12, 40)
    alignments = case.alignments
    alignments.mapped[:] = False
    expected = format_chunk(case.chunk, alignments, case.reference, None, True)
    assert format_chunk(case.chunk, alignments, case.reference, None, True, on_device=device_fields(device, case, lines=lines)) == expected


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
    fields = device_fields(device, case, lines=True)
    with pytest.raises(ValueError) as on_device:
        format_chunk(case.chunk, alignments, case.reference, None, True, on_device=fields)
    assert str(on_device.value) == str(host.value)
    assert fields.results == [None]  # the kernel found it, and left the message to the reference


@pytest.mark.parametrize("seed", range(12))
def test_every_kind_of_record_written_on_the_device(device, seed):
    """The lines written on the device (sam_lines) against the host's, byte for byte, on every
    kind of record: pairs, secondary and supplementary records with SA and hard clips, XA, read
    groups, FASTA input, empty reads and names, numbers past 10**8 (test_sam_records' cases)."""
    from .test_sam_records import random_case

    rng = np.random.default_rng(2000 + seed)
    paired, fasta, far = bool(seed % 2 == 0), bool(seed % 3 == 1), bool(seed % 4 == 3)
    count = int(rng.choice([2, 64, 255, 600])) // (2 if paired else 1) * (2 if paired else 1)
    chunk, alignments, reference, contigs, _, _ = random_case(seed, count, paired, fasta, far)
    for read_group, write_unaligned in (("lane1", True), (None, False)):
        expected = format_chunk(chunk, alignments, reference, read_group, write_unaligned)
        on_device = OnDevice(device, contigs, chunk, masked=any((np.asarray(getattr(contig, 'codes', contig)) == 4).any() for contig in contigs), lines=True)
        assert format_chunk(chunk, alignments, reference, read_group, write_unaligned, on_device=on_device) == expected
        assert len(on_device.results) == 1 and on_device.results[0] is not None
