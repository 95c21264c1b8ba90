"""The SAM/BAM output stage of ``bowmap align``: header, chunk formatting, and the one writer.

A chunk's SAM text is built with NumPy for all its reads at once, never with a Python loop over
reads or over CIGAR operations. Every field of a batch of lines is a ``uint8`` matrix of
left-aligned rows, one a line, with each row's length (:mod:`.sam_text`): integers as 64-bit
words of digits from tables of four-digit groups, their prefix (a tab, a tag) shifted in front;
read names, SEQ and QUAL as rows gathered from the concatenated bytes (no index array a byte),
the bytes after each row's length left as they are; CIGAR and MD as pieces (an operation, an
event) joined by row. NM and MD compare each aligned operation's read and reference bases eight
at a time. The lines are then assembled by writing each field's rows at their exact offsets in
the output, field after field (:func:`.sam_text.assemble`): nothing is padded, concatenated or
dropped afterwards.

Coordinates: ``ChunkAlignments.position`` is 0-based in its contig; SAM POS is 1-based.
Reference "text" positions are 0-based offsets in the concatenation of all contigs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bowmap.align.extend.mapq import NO_SCORE, mapping_quality
from bowmap.align.output.reference import ReferenceText
from bowmap.align.output.sam_tags import Alternatives, alternative_entries, alternatives_text, tail_tags
from bowmap.align.output.sam_text import (
    assemble,
    constant_rows,
    decimal_rows,
    joined_rows,
    md_rows,
    mismatches,
    rows_of,
    segment_sum,
    table_rows,
)
from bowmap.runtime.arrays import exclusive_cumsum, segment_ranges, windows

__all__ = [
    "NO_SCORE",
    "ChunkAlignments",
    "format_chunk",
    "mapping_quality",
]

# BAM CIGAR operation codes (op = length << 4 | code) and their letters.
CIGAR_LETTERS = np.frombuffer(b"MIDNSHP=X", dtype=np.uint8)
_QUERY_CONSUMING = np.array([1, 1, 0, 0, 1, 0, 0, 1, 1] + [0] * 7, dtype=bool)  # M I S = X
_REFERENCE_CONSUMING = np.array([1, 0, 1, 0, 0, 0, 0, 1, 1] + [0] * 7, dtype=bool)  # M D = X
_ALIGNED = np.array([1, 0, 0, 0, 0, 0, 0, 1, 1] + [0] * 7, dtype=bool)  # M = X
_SUPPORTED = np.array([1, 1, 1, 0, 1, 0, 0, 1, 1] + [0] * 7, dtype=bool)  # M I D S = X
INSERTION, DELETION, SOFT_CLIP = 1, 2, 4

FLAG_REVERSE, FLAG_UNMAPPED, FLAG_SECONDARY, FLAG_SUPPLEMENTARY = 16, 4, 256, 2048

# Lines are formatted in batches whose estimated width (below) stays near this many bytes, which also
# bounds the per-base arrays of NM/MD (about 30 bytes per aligned base).
_BATCH_BYTES = 8 << 20


@dataclass
class ChunkAlignments:
    """Alignments of one chunk, one row per SAM line, in input order.

    By default there is exactly one row per read (row i is read i). With ``read_index`` a read
    may have several rows (its primary then its secondary alignments, ``secondary`` True),
    ``read_index`` non-decreasing.
    """

    mapped: np.ndarray  # bool[m]
    reverse: np.ndarray  # bool[m]: the read's reverse complement aligns
    contig: np.ndarray  # int32[m]: index into the reference's contigs (any value when unmapped)
    position: np.ndarray  # int64[m]: 0-based leftmost reference base of the alignment in its contig
    score: np.ndarray  # int32[m]: best alignment score (AS)
    second_score: np.ndarray  # int32[m]: second-best score, or NO_SCORE (XS:i:0)
    cigar_ops: np.ndarray  # uint32: BAM encoding (length << 4 | op; M=0 I=1 D=2 S=4 ==7 X=8), rows concatenated
    cigar_offsets: np.ndarray  # int64[m + 1]
    mapq: np.ndarray | None = None  # uint8[m]; None: computed by format_chunk from the scores
    secondary: np.ndarray | None = None  # bool[m]; None: all primary
    read_index: np.ndarray | None = None  # int64[m]; None: row i is read i
    proper: np.ndarray | None = None  # bool[m], paired chunks: the pair is properly paired (FLAG 0x2)
    supplementary: np.ndarray | None = None  # bool[m]: FLAG 0x800 (a split read's other part)
    partner: np.ndarray | None = None  # int64[m]: the row the SA tag names (-1: none), a row of the same read
    alternatives: ChunkAlignments | None = None  # XA entries: rows with read_index, by read then rank
    hard_clipped: np.ndarray | None = None  # bool[m]: clips written as H, SEQ/QUAL without them

    def primary_rows(self) -> np.ndarray:
        """Mask of the rows that are reads' primary records (one a read)."""
        rows = np.ones(len(self.mapped), dtype=bool)
        for extra in (self.secondary, self.supplementary):
            if extra is not None:
                rows &= ~extra
        return rows

    @classmethod
    def all_unmapped(cls, count: int) -> ChunkAlignments:
        zeros = np.zeros(count, dtype=np.int64)
        return cls(
            mapped=np.zeros(count, dtype=bool),
            reverse=np.zeros(count, dtype=bool),
            contig=zeros.astype(np.int32),
            position=zeros,
            score=zeros.astype(np.int32),
            second_score=np.full(count, NO_SCORE, dtype=np.int32),
            cigar_ops=np.zeros(0, dtype=np.uint32),
            cigar_offsets=np.zeros(count + 1, dtype=np.int64),
        )


# ------------------------------------------------------------------------------- formatting


@dataclass
class LineFields:
    """CIGAR, NM and MD of mapped lines (CIGAR and MD as left-aligned rows, see sam_text), made
    here (_alignment_fields) or on the device (bowmap.align.output.sam_fields)."""

    cigar: np.ndarray
    cigar_lengths: np.ndarray
    edit_distance: np.ndarray
    md: np.ndarray | None
    md_lengths: np.ndarray | None
    span: np.ndarray  # reference bases each alignment covers

    def take(self, rows) -> LineFields:
        """The lines ``rows`` (a slice: views, no copies)."""
        return LineFields(*(None if value is None else value[rows] for value in (
            self.cigar, self.cigar_lengths, self.edit_distance, self.md, self.md_lengths, self.span)))


def _alignment_fields(chunk, alignments, rows, reads, reverse, context, with_md: bool = True) -> LineFields:
    """CIGAR text, NM and MD (unless not ``with_md``) for mapped alignment ``rows`` (of ``reads``,
    ``reverse`` where the reverse complement aligns), vectorised over every operation and every
    aligned base. NM and MD follow samtools calmd: a base matches only when read and reference
    hold the same unambiguous base."""
    reference = context.reference
    count = len(rows)
    op_first = alignments.cigar_offsets[rows].astype(np.int64)
    op_counts = alignments.cigar_offsets[rows + 1].astype(np.int64) - op_first
    ops = np.asarray(alignments.cigar_ops, dtype=np.uint32)[segment_ranges(op_first, op_counts)]
    op_row = np.repeat(np.arange(count, dtype=np.int64), op_counts)
    op_length = (ops >> 4).astype(np.int64)
    op_code = (ops & 0xF).astype(np.intp)
    read_lengths = context.read_lengths[reads]

    if not _SUPPORTED[op_code].all() or (op_length <= 0).any():
        raise ValueError("CIGAR with an unsupported operation (only M I D S = X) or a zero length")
    first_op = exclusive_cumsum(op_counts)
    op_rank = np.arange(len(ops)) - first_op[op_row]
    clip_inside = (op_code == SOFT_CLIP) & (op_rank != 0) & (op_rank != op_counts[op_row] - 1)
    if clip_inside.any():
        raise ValueError(f"CIGAR of read {int(reads[op_row[clip_inside][0]])} has a soft clip between other operations")
    query_use = np.where(_QUERY_CONSUMING[op_code], op_length, 0)
    reference_use = np.where(_REFERENCE_CONSUMING[op_code], op_length, 0)
    query_total = segment_sum(query_use, op_counts)
    span = segment_sum(reference_use, op_counts)
    wrong = (query_total != read_lengths) | (span == 0)
    if wrong.any():
        row = int(np.flatnonzero(wrong)[0])
        raise ValueError(f"CIGAR of read {int(reads[row])} covers {int(query_total[row])} read bases and {int(span[row])} reference bases; the read has {int(read_lengths[row])}")
    contig = alignments.contig[rows].astype(np.int64)
    position = alignments.position[rows].astype(np.int64)
    if ((contig < 0) | (contig >= len(reference.contig_lengths))).any():
        raise ValueError("alignment on a contig the reference does not have")
    outside = (position < 0) | (position + span > reference.contig_lengths[contig])
    if outside.any():
        raise ValueError(f"alignment of read {int(reads[np.flatnonzero(outside)[0]])} runs past its contig")

    # Where each operation starts in its read (aligned strand) and on the reference text.
    query_before = exclusive_cumsum(query_use)
    query_before -= np.repeat(query_before[first_op], op_counts)
    reference_before = exclusive_cumsum(reference_use)
    reference_before -= np.repeat(reference_before[first_op], op_counts)
    text_start = (reference.contig_starts[contig] + position)[op_row] + reference_before

    # CIGAR text: a piece an operation (its length digits, its letter), a row's pieces joined.
    pieces, piece_lengths = decimal_rows(op_length)
    pieces = np.concatenate((pieces, np.zeros((len(ops), 1), dtype=np.uint8)), axis=1)
    pieces[np.arange(len(ops)), piece_lengths] = CIGAR_LETTERS[op_code]
    cigar, cigar_lengths = joined_rows(pieces, piece_lengths + 1, op_counts)

    # Every aligned (M = X) operation: its read bases against its reference bases, as two
    # matrices of one row an operation (read from the pool of forward then reverse strands).
    aligned = np.flatnonzero(_ALIGNED[op_code])
    aligned_length = op_length[aligned]
    reference_codes = reference.span_rows(text_start[aligned], aligned_length)
    width = reference_codes.shape[1]
    read_start = chunk.offsets[reads] + np.where(reverse, len(chunk.codes), 0)
    read_codes = rows_of(context.read_pool, read_start[op_row[aligned]] + query_before[aligned], width)
    mismatch_run, mismatch_column = mismatches(read_codes, reference_codes, aligned_length)
    mismatch_op = aligned[mismatch_run]
    mismatch_row = op_row[mismatch_op]

    gaps = np.where((op_code == INSERTION) | (op_code == DELETION), op_length, 0)
    edit_distance = np.bincount(mismatch_row, minlength=count) + segment_sum(gaps, op_counts)
    md = md_lengths = None
    if with_md:
        mismatch_code = reference_codes[mismatch_run, mismatch_column]
        mismatch_offset = reference_before[mismatch_op] + mismatch_column
        md, md_lengths = md_rows(reference, span, op_row, op_length, op_code, reference_before, text_start, mismatch_row, mismatch_offset, mismatch_code)
    return LineFields(cigar, cigar_lengths, edit_distance, md, md_lengths, span)


# Codes 0..4 -> SEQ letters (anything above 4 is N, as the reader never makes), and the same
# for two codes at once read as a little-endian 16-bit word: half the look-ups.
_SEQUENCE_LETTERS = np.frombuffer(b"ACGTN" + b"N" * 251, dtype=np.uint8)
_SEQUENCE_PAIRS = _SEQUENCE_LETTERS[np.arange(1 << 16) & 255].astype("<u2") | (_SEQUENCE_LETTERS[np.arange(1 << 16) >> 8].astype("<u2") << 8)


def _pick(condition: np.ndarray) -> np.ndarray | None:
    """A field's rows: None for every line, else the lines where ``condition``."""
    return None if condition.all() else np.flatnonzero(condition)


@dataclass
class _Lines:
    """A batch's lines before they are text (:func:`_line_values`): what both formatters, the
    host's (:func:`_format_rows`) and the device's (bowmap.align.output.sam_lines), write."""

    count: int
    reads: np.ndarray
    read_lengths: np.ndarray
    read_starts: np.ndarray
    mapped: np.ndarray
    reverse: np.ndarray
    mapped_rows: np.ndarray
    partner: np.ndarray  # the batch row SA names, -1: none
    hidden: np.ndarray  # secondary records: SEQ and QUAL '*', no XS
    fields: LineFields  # of the mapped rows
    edit_distance: np.ndarray
    span: np.ndarray
    hard: np.ndarray  # clips written as H, SEQ and QUAL without them (lead and trail bases)
    lead: np.ndarray
    trail: np.ndarray
    shown: np.ndarray  # SEQ and QUAL bases (1 where starred)
    starred: np.ndarray  # SEQ and QUAL '*'
    flag: np.ndarray
    contig: np.ndarray  # -1: none
    position: np.ndarray  # 1-based POS
    mapq: np.ndarray
    rname: np.ndarray  # row of context.rnames
    second: np.ndarray  # XS (where ``scored``)
    scored: np.ndarray | None  # rows with XS (None: every row)
    mate: tuple | None  # paired: (mate row, RNEXT row of context.rnames, PNEXT, TLEN, rows with MC/MQ or None: every row)

    def cigar_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """CIGAR of every line ('*' unmapped) with its soft clips, as SA and MC name them."""
        fields = self.fields
        if len(self.mapped_rows) == self.count:
            return fields.cigar, fields.cigar_lengths
        cigar = np.empty((self.count, fields.cigar.shape[1]), dtype=np.uint8)
        cigar[self.mapped_rows] = fields.cigar
        cigar[:, 0] = np.where(self.mapped, cigar[:, 0], ord("*"))
        cigar_lengths = np.ones(self.count, dtype=np.int64)
        cigar_lengths[self.mapped_rows] = fields.cigar_lengths
        return cigar, cigar_lengths


def _line_values(chunk, alignments, rows, context) -> _Lines:
    """The values of the SAM lines of alignment ``rows`` (sorted, of reads in input order)."""
    count = len(rows)
    reads = context.read_index[rows]
    read_lengths = context.read_lengths[reads]
    read_starts = chunk.offsets[reads]
    mapped = alignments.mapped[rows]
    reverse = alignments.reverse[rows] & mapped
    empty = read_lengths == 0
    mapped_rows = np.flatnonzero(mapped)

    partner = np.full(count, -1, dtype=np.int64)
    if alignments.partner is not None:  # the batch holds every row of its reads: partners too
        global_partner = alignments.partner[rows]
        partner = np.where(global_partner >= 0, np.searchsorted(rows, global_partner), -1)
    hidden = np.zeros(count, dtype=bool)  # secondary records: SEQ and QUAL '*', as bwa -a writes them
    if alignments.secondary is not None:
        hidden = alignments.secondary[rows] & (partner < 0)

    if context.device_fields is not None:  # the batch's mapped rows: a run of the chunk's
        lines, made = context.device_fields
        first = int(np.searchsorted(lines, rows[0])) if count else 0
        fields = made.take(slice(first, first + len(mapped_rows)))
    else:
        fields = _alignment_fields(chunk, alignments, rows[mapped_rows], reads[mapped_rows], reverse[mapped_rows], context)
    edit_distance = np.zeros(count, dtype=np.int64)
    edit_distance[mapped_rows] = fields.edit_distance
    span = np.zeros(count, dtype=np.int64)
    span[mapped_rows] = fields.span

    # Hard-clipped rows: SEQ and QUAL without the clipped bases, S written as H.
    lead = trail = np.zeros(count, dtype=np.int64)
    hard = np.zeros(count, dtype=bool)
    if alignments.hard_clipped is not None:
        hard = alignments.hard_clipped[rows] & mapped & ~hidden
    if hard.any():
        ops = np.asarray(alignments.cigar_ops, dtype=np.uint32)
        first_op = ops[alignments.cigar_offsets[rows[hard]]]
        last_op = ops[alignments.cigar_offsets[rows[hard] + 1] - 1]
        lead, trail = np.zeros(count, dtype=np.int64), np.zeros(count, dtype=np.int64)
        lead[hard] = np.where((first_op & 0xF) == SOFT_CLIP, first_op >> 4, 0)
        trail[hard] = np.where((last_op & 0xF) == SOFT_CLIP, last_op >> 4, 0)
    starred = empty | hidden
    shown = np.where(starred, 1, read_lengths - lead - trail)

    flag = np.where(mapped, np.where(reverse, FLAG_REVERSE, 0), FLAG_UNMAPPED)
    if alignments.secondary is not None:
        flag += np.where(alignments.secondary[rows] & mapped, FLAG_SECONDARY, 0)
    if alignments.supplementary is not None:
        flag += np.where(alignments.supplementary[rows] & mapped, FLAG_SUPPLEMENTARY, 0)
    contig = np.where(mapped, alignments.contig[rows], -1).astype(np.int64)
    position = np.where(mapped, alignments.position[rows].astype(np.int64) + 1, 0)
    mate = None
    if chunk.paired:
        flag, contig, position, mate = _mate_values(alignments, rows, reads, flag, mapped, reverse, contig, position, span, len(context.rnames[0]))
    # XS on every mapped read, 0 when no other alignment was found (as bwa mem writes it).
    second = alignments.second_score[rows]
    second = np.where(second == NO_SCORE, 0, np.maximum(second, 0))
    return _Lines(
        count, reads, read_lengths, read_starts, mapped, reverse, mapped_rows, partner, hidden, fields, edit_distance, span, hard, lead,
        trail, shown, starred, flag, contig, position, np.where(mapped, context.mapq[rows], 0),
        np.where(contig >= 0, contig, len(context.reference.contig_names)), second, _pick(mapped & ~hidden), mate,
    )  # fmt: skip


def _format_rows(chunk, alignments, rows, context) -> np.ndarray:
    """SAM lines for alignment ``rows`` (sorted, of reads in input order), as uint8 text."""
    values = _line_values(chunk, alignments, rows, context)
    count, reads, mapped_rows, fields = values.count, values.reads, values.mapped_rows, values.fields
    cigar, cigar_lengths = values.cigar_rows()
    line_cigar = cigar
    if values.hard.any():
        line_cigar = cigar.copy()
        letters = line_cigar[values.hard]
        letters[letters == ord("S")] = ord("H")
        line_cigar[values.hard] = letters

    # SEQ is the aligned strand: a reverse read's comes from the reverse complements (second in
    # the pool); QUAL the qualities, read backwards (a reversed view) for a reverse read.
    reverse, read_starts, read_lengths, lead, shown, starred = values.reverse, values.read_starts, values.read_lengths, values.lead, values.shown, values.starred
    strand_starts = read_starts + np.where(reverse, len(chunk.codes), 0) + lead
    width = max(int(shown.max()), 1)
    even_width = width + width % 2  # whole code pairs
    sequence = np.take(_SEQUENCE_PAIRS, rows_of(context.read_pool, strand_starts, even_width).view("<u2")).view(np.uint8)
    sequence[starred, 0] = ord("*")
    if chunk.qualities is None:
        quality, quality_lengths = constant_rows(b"*", count)
    else:
        quality = rows_of(chunk.qualities, read_starts + lead, width)
        flipped = np.flatnonzero(reverse)
        if len(flipped):  # a reverse read's read backwards: rows of the qualities reversed
            backwards = chunk.qualities[::-1]
            quality[flipped] = windows(backwards, (len(backwards) - read_starts - read_lengths + lead)[flipped], width)
        quality[starred, 0] = ord("*")
        quality_lengths = shown

    rnames, rname_lengths = context.rnames
    if values.mate is not None:
        mate, rnext, mate_position, template, with_tags = values.mate
        mate_shown = mate if with_tags is None else mate[with_tags]
        mate_fields = [
            (rnames[rnext], rname_lengths[rnext], None),
            (*decimal_rows(mate_position, b"\t"), None),
            (*decimal_rows(template, b"\t"), None),
        ]
        mate_tags = [
            (*constant_rows(b"\tMC:Z:", len(mate_shown)), with_tags),
            (cigar[mate_shown], cigar_lengths[mate_shown], with_tags),
            (*decimal_rows(values.mapq[mate_shown], b"\tMQ:i:"), with_tags),
        ]
    else:
        mate_fields, mate_tags = [(*constant_rows(b"\t*\t0\t0", count), None)], []

    name_lengths = context.name_lengths[reads]
    names = rows_of(chunk.names, chunk.name_offsets[reads], max(int(name_lengths.max()), 1))
    names[name_lengths == 0, 0] = ord("*")
    tab = constant_rows(b"\t", count)
    on_mapped = None if len(mapped_rows) == count else mapped_rows
    scored = values.scored
    lines = [
        (names, np.maximum(name_lengths, 1), None),
        (*decimal_rows(values.flag, b"\t"), None),
        (rnames[values.rname], rname_lengths[values.rname], None),
        (*decimal_rows(values.position, b"\t"), None),
        (*decimal_rows(values.mapq, b"\t"), None),
        (*tab, None),
        (line_cigar, cigar_lengths, None),
        *mate_fields,
        (*tab, None),
        (sequence, shown, None),
        (*tab, None),
        (quality, quality_lengths, None),
        (*decimal_rows(fields.edit_distance, b"\tNM:i:"), on_mapped),
        (*constant_rows(b"\tMD:Z:", len(mapped_rows)), on_mapped),
        (fields.md, fields.md_lengths, on_mapped),
        (*decimal_rows(alignments.score[rows[mapped_rows]], b"\tAS:i:"), on_mapped),
        (*decimal_rows(values.second if scored is None else values.second[scored], b"\tXS:i:"), scored),
        *mate_tags,
    ]  # fmt: skip
    if context.read_group_id is not None:
        lines.append((*constant_rows(b"\tRG:Z:" + context.read_group_id.encode(), count), None))
    lines += tail_tags(alignments, rows, values, cigar, cigar_lengths, context)
    lines.append((*constant_rows(b"\n", count), None))
    return assemble(count, lines)[0]


def _fields_on_device(chunk, alignments, rows, context, fields_on_device, entries=None) -> tuple | None:
    """The mapped lines of ``rows``, their fields made on the device (see format_chunk) and
    those of the alternatives ``entries`` (None: none) made in the same launch; or None where a
    line is wrong (the reference, _alignment_fields, then raises its message)."""
    reference = context.reference
    lines = rows[alignments.mapped[rows]]
    parts = [(alignments, lines, context.read_index[lines])]
    if entries is not None:
        parts.append((alignments.alternatives, entries, alignments.alternatives.read_index[entries]))
    columns, base = [], 0
    for source, picked, reads in parts:
        contig = source.contig[picked].astype(np.int64)
        position = source.position[picked].astype(np.int64)
        if ((contig < 0) | (contig >= len(reference.contig_lengths)) | (position < 0)).any():
            return None
        offsets = np.asarray(source.cigar_offsets, dtype=np.int64)
        contig_start = reference.contig_starts[contig]
        columns.append((base + offsets[picked], offsets[picked + 1] - offsets[picked],
                        chunk.offsets[reads] + np.where(source.reverse[picked], len(chunk.codes), 0), context.read_lengths[reads],
                        contig_start + position, contig_start + reference.contig_lengths[contig]))  # fmt: skip
        base += len(source.cigar_ops)
    ops = np.concatenate([np.asarray(source.cigar_ops, dtype=np.uint32) for source, _, _ in parts])
    made = fields_on_device(ops, *(np.concatenate(column) for column in zip(*columns)))
    if made is None:
        return None
    return lines, made.take(slice(0, len(lines))), (made.take(slice(len(lines), None)) if entries is not None else None)


FLAG_PAIRED, FLAG_PROPER, FLAG_MATE_UNMAPPED, FLAG_MATE_REVERSE, FLAG_FIRST, FLAG_SECOND = 0x1, 0x2, 0x8, 0x20, 0x40, 0x80


def _mate_values(alignments, rows, reads, flag, mapped, reverse, contig, position, span, names: int):
    """The pair fields of paired rows (reads 2j and 2j + 1 are the mates of a pair, R1 first; the
    batch holds every row of its pairs, each read's primary first), each row's from its mate's
    primary row: FLAG bits 0x1 0x2 0x8 0x20 0x40 0x80; an unmapped mate placed at its mate's
    RNAME and POS (as the SAM specification recommends; its own strand and SEQ kept, as samtools
    fixmate does); RNEXT (``=`` on the same reference), PNEXT; TLEN from the leftmost to the
    rightmost mapped base of the two, positive on the leftmost mate (R1 when both start
    together), 0 unless both map to one reference; MC and MQ, the mate's CIGAR and MAPQ, where
    the mate is mapped. Returns flag, contig, position and (mate row, RNEXT row of the ``names``
    rows of context.rnames, PNEXT, TLEN, the rows with MC and MQ or None: every row)."""
    count = len(rows)
    mate = np.searchsorted(reads, reads ^ 1, side="left")  # the mate's primary row
    mate_mapped = mapped[mate]
    proper = alignments.proper[rows] if alignments.proper is not None else np.zeros(count, dtype=bool)
    flag = flag | FLAG_PAIRED | np.where(reads % 2 == 0, FLAG_FIRST, FLAG_SECOND) | np.where(proper & mapped & mate_mapped, FLAG_PROPER, 0)
    flag |= np.where(mate_mapped, np.where(reverse[mate], FLAG_MATE_REVERSE, 0), FLAG_MATE_UNMAPPED)
    placed = ~mapped & mate_mapped
    contig = np.where(placed, contig[mate], contig)
    position = np.where(placed, position[mate], position)
    mate_contig, mate_position = contig[mate], position[mate]
    start = position - 1
    end = start + span
    both = mapped & mate_mapped & (contig == mate_contig)
    left = np.minimum(start, start[mate])
    right = np.maximum(end, end[mate])
    leftmost = (start < start[mate]) | ((start == start[mate]) & (reads % 2 == 0))
    template = np.where(both, np.where(leftmost, right - left, left - right), 0)
    # RNEXT: the mate's reference name, '*' (the table's row after the contigs) or '=' (the next).
    rnext = np.where(mate_contig < 0, names - 2, np.where(mate_contig == contig, names - 1, mate_contig))
    return flag, contig, position, (mate, rnext, mate_position, template, _pick(mate_mapped))


@dataclass
class _Context:
    """What every batch of a chunk reads."""

    reference: ReferenceText
    read_group_id: str | None
    read_index: np.ndarray  # int64[rows]
    read_lengths: np.ndarray  # int64[reads]
    name_lengths: np.ndarray  # int64[reads]
    mapq: np.ndarray  # uint8[rows]
    read_pool: np.ndarray  # the chunk's codes, then its reverse complements at the same offsets
    rnames: tuple  # '\t' and RNAME of each contig, then '\t*' and '\t=', as left-aligned rows
    split_names: tuple  # '\tSA:Z:' and each contig's name (then '*')
    alternative_names: tuple  # each contig's name (then '*')
    alternatives: Alternatives | None = None  # the XA text of the chunk's reads
    device_fields: tuple | None = None  # (mapped rows, their LineFields) made on the device


def format_chunk(chunk, alignments: ChunkAlignments, reference_text: ReferenceText, read_group_id: str | None, write_unaligned: bool, scoring=None,
                 on_device=None) -> bytes | bytearray:
    """SAM text (no header) of one chunk, lines in input order (a bytearray when written on the
    device).

    ``chunk`` is the reader's ReadChunk; ``reference_text`` a :class:`ReferenceText` (contig
    names for RNAME, reference codes for NM/MD). MAPQ is ``alignments.mapq`` when given, else
    :func:`mapping_quality` under ``scoring``; secondary lines get MAPQ 0. Unmapped reads are
    written (FLAG 4) only when ``write_unaligned``. A CIGAR that disagrees with its read or runs
    past its contig raises ValueError (a bug upstream, not a user error). ``on_device``: a
    :class:`bowmap.align.output.sam_fields.BoundSamFields` (the chunk's read codes on its
    device): the CIGAR, NM and MD of the mapped lines are made there (its ``fields``), then the
    whole text (its ``text``, bowmap.align.output.sam_lines; unless its ``lines`` is None: the
    host writes the lines), once a chunk.
    """
    rows_total = len(alignments.mapped)
    read_index = np.arange(chunk.count, dtype=np.int64) if alignments.read_index is None else np.asarray(alignments.read_index, dtype=np.int64)
    if len(read_index) != rows_total or len(alignments.cigar_offsets) != rows_total + 1:
        raise ValueError(f"alignments have {rows_total} rows, read_index {len(read_index)}, cigar_offsets {len(alignments.cigar_offsets)} for a chunk of {chunk.count} reads")
    if rows_total and (np.diff(read_index) < 0).any():
        raise ValueError("alignment rows are not in input order")
    read_lengths = np.diff(np.asarray(chunk.offsets, dtype=np.int64))
    if (alignments.mapped & (read_lengths[read_index] == 0)).any():
        raise ValueError("an empty read is marked mapped")
    if alignments.mapq is not None:
        mapq = np.asarray(alignments.mapq, dtype=np.uint8)
    elif scoring is not None:
        mapq = mapping_quality(alignments.score, alignments.second_score, read_lengths[read_index], scoring)
    else:
        raise ValueError("format_chunk needs alignments.mapq or a scoring to compute it")
    if alignments.secondary is not None:  # secondary records: MAPQ 0 (a split part marked so keeps its own)
        split = alignments.partner >= 0 if alignments.partner is not None else np.zeros(rows_total, dtype=bool)
        mapq = np.where(alignments.secondary & ~split, 0, mapq).astype(np.uint8)
    if chunk.paired and (np.bincount(read_index // 2, minlength=chunk.count // 2) < 2).any():
        raise ValueError("paired chunks need a row for each mate")
    if write_unaligned:
        rows = np.arange(rows_total, dtype=np.int64)
    elif chunk.paired:  # --no-unal leaves out only pairs with both mates unmapped
        pair_mapped = np.zeros(chunk.count // 2, dtype=bool)
        pair_mapped[read_index[alignments.mapped] // 2] = True
        rows = np.flatnonzero(pair_mapped[read_index // 2])
    else:
        rows = np.flatnonzero(alignments.mapped)
    if len(rows) == 0:
        return b""
    name_lengths = np.diff(np.asarray(chunk.name_offsets, dtype=np.int64))
    context = _Context(
        reference=reference_text,
        read_group_id=read_group_id,
        read_index=read_index,
        read_lengths=read_lengths,
        name_lengths=name_lengths,
        mapq=mapq,
        read_pool=np.asarray(chunk.both_codes, dtype=np.uint8),
        rnames=table_rows([b"\t" + name.encode() for name in reference_text.contig_names] + [b"\t*", b"\t="]),
        split_names=table_rows([b"\tSA:Z:" + name.encode() for name in reference_text.contig_names] + [b"\tSA:Z:*"]),
        alternative_names=table_rows([name.encode() for name in reference_text.contig_names] + [b"*"]),
    )
    entries = alternative_entries(alignments, rows, context)
    made = None if on_device is None else _fields_on_device(chunk, alignments, rows, context, on_device.fields, entries)
    if entries is not None:  # XA: the alternatives' CIGAR and NM made with the lines' on the device, or here
        others = alignments.alternatives
        fields = made[2] if made is not None else _alignment_fields(chunk, others, entries, others.read_index[entries], others.reverse[entries],
                                                                    context, with_md=False)
        context.alternatives = alternatives_text(alignments, entries, fields, context)
    if made is not None:
        context.device_fields = made[:2]
        if on_device.lines is not None:
            return on_device.text(chunk, alignments, rows, context)
    # Bytes a line's fields may take (SEQ, QUAL, name, CIGAR at 11 a op, MD, fixed): the batch size.
    op_counts = np.diff(np.asarray(alignments.cigar_offsets, dtype=np.int64))[rows]
    width = 4 * read_lengths[read_index[rows]] + name_lengths[read_index[rows]] + 12 * op_counts + 160
    pieces = []
    start = 0
    lookahead = 4096
    unit = read_index // 2 if chunk.paired else read_index
    while start < len(rows):
        # The longest batch whose rows x widest line stays under the budget (at least one row).
        widest = np.maximum.accumulate(width[start : start + lookahead])
        size = max(1, int(np.searchsorted(widest * np.arange(1, len(widest) + 1), _BATCH_BYTES, side="right")))
        # Never split a read's rows (a pair's, for pairs): the batch ends where one ends.
        end = start + size
        if end < len(rows):
            end = int(np.searchsorted(unit[rows], unit[rows[end]], side="left"))
            end = end if end > start else int(np.searchsorted(unit[rows], unit[rows[start]], side="right"))
        pieces.append(memoryview(_format_rows(chunk, alignments, rows[start:end], context)))
        lookahead = max(4096, 2 * (end - start))
        start = end
    return b"".join(pieces)
