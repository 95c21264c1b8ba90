"""A chunk's SAM lines written on the device (``sam_lines`` in opencl/align/sam_fields.cl), in
place of the host's assembly (:func:`bowmap.align.output.sam._format_rows`, the reference; the
tests compare the two byte for byte).

The host computes each line's values as its formatter does (:func:`.sam._line_values`: FLAG,
POS, MAPQ, the pair's fields, which tags a line has) and from them each line's length, so where
it starts; the tags after the read group (SA, XA: a few lines, from texts the host has) it makes
as text (:func:`.sam_tags.tail_tags`). The device copies the rest: read names and qualities
(uploaded), SEQ from the read codes and the CIGAR and MD from the rows ``sam_fields`` left there.
Why: with 15 host workers the cores bind a run, and the SAM text took a fifth of a worker's time
after the CIGAR, NM and MD moved to the device (PoCL profile, 0.1 Gbp human-like genome)."""

from __future__ import annotations

import numpy as np

from bowmap.align.output.sam import _line_values
from bowmap.align.output.sam_tags import tail_tags
from bowmap.align.output.sam_text import assemble, decimal_lengths
from bowmap.runtime.arrays import exclusive_cumsum

# Rows of the kernel's uint32 values, one column a line (as sam_fields.cl's L_* enumeration).
(L_OUT, L_NAME, L_NAME_LENGTH, L_FLAG, L_RNAME, L_MAPQ, L_CIGAR_ROW, L_RNEXT, L_SEQ, L_SHOWN, L_QUAL, L_NM, L_AS, L_XS, L_MATE_ROW, L_MQ,
 L_TAIL, L_TAIL_LENGTH, L_KIND, LINE_VALUES) = range(20)  # fmt: skip
# A line's kind, bits (sam_fields.cl's K_*).
K_MAPPED, K_XS, K_MATE_TAGS, K_HARD, K_STARRED, K_QUAL_REVERSE, K_PAIRED, K_NO_QUAL, K_READ_GROUP = (1 << bit for bit in range(9))
NO_ROW = 0xFFFFFFFF
# Bytes of the constant parts: "\tNM:i:" "\tMD:Z:" "\tAS:i:", "\tXS:i:", "\tMC:Z:" "\tMQ:i:", "\t*\t0\t0".
_MAPPED_TAGS, _XS_TAG, _MATE_TAGS, _NO_MATE = 18, 6, 12, 6


def _mask(rows, count: int) -> np.ndarray:
    """Rows (None: every row) as a mask of ``count`` lines."""
    if rows is None:
        return np.ones(count, dtype=bool)
    mask = np.zeros(count, dtype=bool)
    mask[rows] = True
    return mask


def device_text(chunk, alignments, rows, context, on_device) -> bytearray:
    """The SAM text of alignment ``rows`` (all of a chunk's lines, in order) with ``on_device``'s
    ``lines`` (a :class:`bowmap.align.output.sam_fields.BoundSamFields` whose fields of these
    rows' mapped lines are ``context.device_fields``)."""
    values = _line_values(chunk, alignments, rows, context)
    count, reads, mapped, fields = values.count, values.reads, values.mapped, values.fields
    device_row = np.full(count, NO_ROW, dtype=np.int64)  # the mapped lines' rows of the fields, in order
    device_row[values.mapped_rows] = np.arange(len(values.mapped_rows))
    cigar_lengths = np.ones(count, dtype=np.int64)
    cigar_lengths[values.mapped_rows] = fields.cigar_lengths
    md_lengths = np.zeros(count, dtype=np.int64)
    md_lengths[values.mapped_rows] = fields.md_lengths
    score = np.where(mapped, alignments.score[rows], 0).astype(np.int32)
    rnames, rname_lengths = context.rnames
    name_lengths = context.name_lengths[reads]
    starred, shown, reverse = values.starred, values.shown, values.reverse
    no_quality = chunk.qualities is None
    xs = _mask(values.scored, count)
    read_group = b"" if context.read_group_id is None else b"\tRG:Z:" + context.read_group_id.encode()

    u = np.zeros((LINE_VALUES, count), dtype=np.uint32)
    long_values = np.zeros((3, count), dtype=np.int64)
    long_values[0] = values.position
    kind = np.where(mapped, K_MAPPED, 0) | np.where(xs, K_XS, 0) | np.where(values.hard, K_HARD, 0) | np.where(starred, K_STARRED, 0)
    kind |= np.where(reverse, K_QUAL_REVERSE, 0) | (K_NO_QUAL if no_quality else 0) | (K_READ_GROUP if read_group else 0)
    length = (np.maximum(name_lengths, 1) + 1 + decimal_lengths(values.flag) + rname_lengths[values.rname] + 1 + decimal_lengths(values.position)
              + 1 + decimal_lengths(values.mapq) + 1 + cigar_lengths + 1 + shown + 1 + np.where(no_quality, 1, shown) + len(read_group) + 1)
    length += np.where(mapped, _MAPPED_TAGS + decimal_lengths(values.edit_distance) + md_lengths + decimal_lengths(score), 0)
    length += np.where(xs, _XS_TAG + decimal_lengths(values.second), 0)
    if values.mate is not None:
        mate, rnext, mate_position, template, with_tags = values.mate
        tags = _mask(with_tags, count)
        kind |= K_PAIRED | np.where(tags, K_MATE_TAGS, 0)
        long_values[1], long_values[2] = mate_position, template
        u[L_RNEXT], u[L_MATE_ROW], u[L_MQ] = rnext, np.where(tags, device_row[mate], NO_ROW), values.mapq[mate]
        length += rname_lengths[rnext] + 2 + decimal_lengths(mate_position) + decimal_lengths(template)
        length += np.where(tags, _MATE_TAGS + cigar_lengths[mate] + decimal_lengths(values.mapq[mate]), 0)
    else:
        length += _NO_MATE

    tail = np.zeros(0, dtype=np.uint8)
    split = (values.partner >= 0).any()
    if split or context.alternatives is not None:
        cigar, line_cigar_lengths = values.cigar_rows() if split else (None, None)  # SA names its partner's CIGAR
        tags = tail_tags(alignments, rows, values, cigar, line_cigar_lengths, context)
        if tags:
            tail, tail_lengths = assemble(count, tags)
            u[L_TAIL], u[L_TAIL_LENGTH] = exclusive_cumsum(tail_lengths), tail_lengths
            length += tail_lengths

    offsets = exclusive_cumsum(length)
    u[L_OUT], u[L_FLAG], u[L_RNAME], u[L_MAPQ], u[L_KIND] = offsets, values.flag, values.rname, values.mapq, kind
    u[L_NAME], u[L_NAME_LENGTH] = chunk.name_offsets[reads], name_lengths
    u[L_CIGAR_ROW], u[L_SHOWN], u[L_NM], u[L_AS], u[L_XS] = device_row, shown, values.edit_distance, score.view(np.uint32), values.second
    lead, starts, read_lengths = values.lead, values.read_starts, values.read_lengths
    u[L_SEQ] = np.where(starred, 0, starts + np.where(reverse, len(chunk.codes), 0) + lead)
    u[L_QUAL] = np.where(starred | no_quality, 0, np.where(reverse, starts + read_lengths - 1 - lead, starts + lead))
    strings = rnames[np.arange(rnames.shape[1]) < rname_lengths[:, None]]
    string_offsets = np.concatenate(([0], np.cumsum(rname_lengths)))
    return on_device.lines(u, long_values, chunk.names, chunk.qualities, strings, string_offsets, tail, read_group, int(length.sum()))
