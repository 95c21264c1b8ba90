"""The SAM/BAM output stage of ``bowmap align``: header, chunk formatting, and the one writer.

A chunk's SAM text is built with NumPy for all its reads at once, never with a Python loop over
reads or over CIGAR operations. Every field of a batch of lines becomes a NUL-padded ``uint8``
matrix (one row per line): integers through tables of four-digit words, read names / SEQ / QUAL
as rows gathered from the concatenated bytes through a strided view
(:func:`bowmap.runtime.arrays.windows`, no index array a byte) with the bytes past each row's length
cleared, CIGAR as one slot of digits and letter an operation, MD as packed items with per-line
lengths. NM and MD compare each aligned operation's read and reference bases as two matrices.
The matrices are laid side by side and the NUL padding is dropped in one step
(``matrix[matrix != 0]``); SAM text never contains a NUL, so only padding goes. A padded field
may sit anywhere in its columns (a reversed QUAL row is right-aligned, an unused CIGAR slot is
all NUL), since all NULs go.

Coordinates: ``ChunkAlignments.position`` is 0-based in its contig; SAM POS is 1-based.
Reference "text" positions are 0-based offsets in the concatenation of all contigs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bowmap.align.extend.mapq import NO_SCORE, mapping_quality
from bowmap.align.output.reference import ReferenceText
from bowmap.align.output.sam_text import (
    constant_text,
    cut_rows,
    decimal_text,
    padded_rows,
    segment_sum,
    tag_blocks,
    text_rows,
)
from bowmap.runtime.arrays import exclusive_cumsum, prefix_mask, segment_ranges, windows

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

# Codes 0..4 -> letters. Padded matrices hold code + 1 so that 0 stays the padding.
_BASE_LETTERS = np.frombuffer(b"ACGTN", dtype=np.uint8)
_FORWARD_LETTERS = np.frombuffer(b"\0ACGTN" + b"N" * 250, dtype=np.uint8)
_COMPLEMENT_LETTERS = np.frombuffer(b"\0TGCAN" + b"N" * 250, dtype=np.uint8)

FLAG_REVERSE, FLAG_UNMAPPED, FLAG_SECONDARY, FLAG_SUPPLEMENTARY = 16, 4, 256, 2048

# Lines are formatted in batches whose padded matrix stays near this many bytes, which also
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
class _Cigars:
    """CIGAR, NM and MD of mapped lines, as padded matrices (one row a line)."""

    cigar: np.ndarray
    edit_distance: np.ndarray
    md: np.ndarray
    span: np.ndarray  # reference bases each alignment covers


def _alignment_fields(chunk, alignments, rows, reads, reverse, context) -> _Cigars:
    """CIGAR text, NM and MD for mapped alignment ``rows`` (of ``reads``, ``reverse`` where the
    reverse complement aligns), vectorised over every operation and every aligned base. NM and
    MD follow samtools calmd: a base matches only when read and reference hold the same
    unambiguous base."""
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

    # CIGAR text: a slot an operation (its length digits, its letter), slot k of a row holding
    # its k-th operation; unused slots stay NUL, so a row needs no packing.
    digits = decimal_text(op_length)
    slots = int(op_counts.max(initial=1))
    cigar = np.zeros((count * slots, digits.shape[1] + 1), dtype=np.uint8)
    op_slot = op_row * slots + op_rank
    cigar[op_slot, :-1] = digits
    cigar[op_slot, -1] = CIGAR_LETTERS[op_code]
    cigar = cigar.reshape(count, slots * cigar.shape[1])

    # Every aligned (M = X) operation: its read bases against its reference bases, as two
    # matrices of one row an operation (read from the pool of forward then reverse strands).
    aligned = np.flatnonzero(_ALIGNED[op_code])
    aligned_length = op_length[aligned]
    reference_codes = reference.span_rows(text_start[aligned], aligned_length)
    width = reference_codes.shape[1]
    read_start = chunk.offsets[reads] + np.where(reverse, len(chunk.codes), 0)
    read_codes = windows(context.read_pool, read_start[op_row[aligned]] + query_before[aligned], width)
    differ = (read_codes != reference_codes) | (np.maximum(read_codes, reference_codes) > 3)
    if (aligned_length < width).any():
        differ &= prefix_mask(aligned_length, width)
    mismatch_run, mismatch_column = np.divmod(np.flatnonzero(differ), width)
    mismatch_code = reference_codes[mismatch_run, mismatch_column]
    mismatch_op = aligned[mismatch_run]
    mismatch_row = op_row[mismatch_op]
    mismatch_offset = reference_before[mismatch_op] + mismatch_column

    gaps = np.where((op_code == INSERTION) | (op_code == DELETION), op_length, 0)
    edit_distance = np.bincount(mismatch_row, minlength=count) + segment_sum(gaps, op_counts)
    return _Cigars(cigar=cigar, edit_distance=edit_distance, span=span, md=_md(reference, span, op_row, op_length, op_code, reference_before, text_start, mismatch_row, mismatch_offset, mismatch_code))


def _md(reference, span, op_row, op_length, op_code, reference_before, text_start, mismatch_row, mismatch_offset, mismatch_code) -> np.ndarray:
    """MD of ``len(span)`` lines: events (a mismatched base, a deletion) in reference order, each
    preceded by the count of matching bases since the previous event; a final count ends every
    row. Built as items, one a matrix row (a count then its event's letter or '^'; the final
    count), packed by dropping their NULs, then the deleted bases are inserted after their '^'."""
    count = len(span)
    deletion = np.flatnonzero(op_code == DELETION)
    event_row = np.concatenate((mismatch_row, op_row[deletion]))
    event_offset = np.concatenate((mismatch_offset, reference_before[deletion]))
    event_span = np.concatenate((np.ones(len(mismatch_row), dtype=np.int64), op_length[deletion]))
    event_letter = np.concatenate((_BASE_LETTERS[np.minimum(mismatch_code, 4)], np.full(len(deletion), ord("^"), dtype=np.uint8)))
    if len(deletion):
        # Mismatches and deletions are each in reference order already: a stable sort merges them
        # (and keeps the deletions in operation order).
        order = np.argsort(exclusive_cumsum(span)[event_row] + event_offset, kind="stable")
        event_row, event_offset, event_span, event_letter = event_row[order], event_offset[order], event_span[order], event_letter[order]
    events_per_row = np.bincount(event_row, minlength=count)
    first_event = exclusive_cumsum(events_per_row)
    rank = np.arange(len(event_row)) - first_event[event_row]
    event_end = event_offset + event_span
    previous_end = np.where(rank == 0, 0, np.concatenate(([0], event_end[:-1])))
    last_end = np.zeros(count, dtype=np.int64)
    has_events = events_per_row > 0
    last_end[has_events] = event_end[first_event[has_events] + events_per_row[has_events] - 1]

    items_per_row = events_per_row + 1
    event_item = exclusive_cumsum(items_per_row)[event_row] + rank
    final_item = np.cumsum(items_per_row) - 1
    numbers = decimal_text(np.concatenate((event_offset - previous_end, span - last_end)))
    items = np.zeros((len(event_row) + count, numbers.shape[1] + 1), dtype=np.uint8)
    items[event_item, :-1] = numbers[: len(event_row)]
    items[final_item, :-1] = numbers[len(event_row) :]
    items[event_item, -1] = event_letter
    item_length = np.count_nonzero(items, axis=1)
    md_flat = items[items != 0]
    if len(deletion):
        deleted_item = event_item[event_letter == ord("^")]
        after_caret = (exclusive_cumsum(item_length) + item_length)[deleted_item]
        deleted_bases = _BASE_LETTERS[np.minimum(reference.spans(text_start[deletion], op_length[deletion]), 4)]
        md_flat = np.insert(md_flat, np.repeat(after_caret, op_length[deletion]), deleted_bases)
        item_length[deleted_item] += op_length[deletion]
    return padded_rows(md_flat, segment_sum(item_length, items_per_row))


# Codes 0..4 -> SEQ letters (anything above 4 is N, as the reader never makes), and the same
# for two codes at once read as a little-endian 16-bit word: half the look-ups.
_SEQUENCE_LETTERS = np.frombuffer(b"ACGTN" + b"N" * 251, dtype=np.uint8)
_SEQUENCE_PAIRS = _SEQUENCE_LETTERS[np.arange(1 << 16) & 255].astype("<u2") | (_SEQUENCE_LETTERS[np.arange(1 << 16) >> 8].astype("<u2") << 8)


def _format_rows(chunk, alignments, rows, context) -> bytes:
    """SAM lines for alignment ``rows`` (sorted, of reads in input order)."""
    count = len(rows)
    reads = context.read_index[rows]
    read_lengths = context.read_lengths[reads]
    read_starts = chunk.offsets[reads]
    mapped = alignments.mapped[rows]
    reverse = alignments.reverse[rows] & mapped
    empty = read_lengths == 0

    name_lengths = context.name_lengths[reads]
    names = text_rows(chunk.names, chunk.name_offsets[reads], name_lengths)
    names[name_lengths == 0, 0] = ord("*")

    # SEQ is the aligned strand: a reverse read's comes from the reverse complements (second in
    # the pool); QUAL is reversed along its row (the padding moves to the front: dropped as any).
    strand_starts = read_starts + np.where(reverse, len(chunk.codes), 0)
    width = max(int(read_lengths.max()), 1)
    even_width = width + width % 2  # whole code pairs; the column added is cut off below
    sequence = np.take(_SEQUENCE_PAIRS, windows(context.read_pool, strand_starts, even_width).view("<u2")).view(np.uint8)
    sequence = cut_rows(sequence, read_lengths)
    sequence[empty, 0] = ord("*")
    if chunk.qualities is None:
        quality = constant_text(b"*", count)
    else:
        quality = text_rows(chunk.qualities, read_starts, read_lengths)
        flipped = np.flatnonzero(reverse)
        quality[flipped] = quality[flipped, ::-1]
        quality[empty, 0] = ord("*")

    partner = np.full(count, -1, dtype=np.int64)
    if alignments.partner is not None:  # the batch holds every row of its reads: partners too
        global_partner = alignments.partner[rows]
        partner = np.where(global_partner >= 0, np.searchsorted(rows, global_partner), -1)
    hidden = np.zeros(count, dtype=bool)  # secondary records: SEQ and QUAL '*', as bwa -a writes them
    if alignments.secondary is not None:
        hidden = alignments.secondary[rows] & (partner < 0)
        sequence[hidden] = 0
        sequence[hidden, 0] = ord("*")
        if chunk.qualities is not None:
            quality[hidden] = 0
            quality[hidden, 0] = ord("*")

    if mapped.all():
        fields = _alignment_fields(chunk, alignments, rows, reads, reverse, context)
        cigar, md, edit_distance = fields.cigar, fields.md, fields.edit_distance
    else:
        mapped_rows = np.flatnonzero(mapped)
        fields = _alignment_fields(chunk, alignments, rows[mapped_rows], reads[mapped_rows], reverse[mapped_rows], context)
        cigar = np.zeros((count, fields.cigar.shape[1]), dtype=np.uint8)
        cigar[mapped_rows] = fields.cigar
        cigar[~mapped, 0] = ord("*")
        md = np.zeros((count, fields.md.shape[1]), dtype=np.uint8)
        md[mapped_rows] = fields.md
        edit_distance = np.zeros(count, dtype=np.int64)
        edit_distance[mapped_rows] = fields.edit_distance
    span = np.zeros(count, dtype=np.int64)
    span[mapped] = fields.span
    second = alignments.second_score[rows]
    flag = np.where(mapped, np.where(reverse, FLAG_REVERSE, 0), FLAG_UNMAPPED)
    if alignments.secondary is not None:
        flag += np.where(alignments.secondary[rows] & mapped, FLAG_SECONDARY, 0)
    if alignments.supplementary is not None:
        flag += np.where(alignments.supplementary[rows] & mapped, FLAG_SUPPLEMENTARY, 0)
    contig = np.where(mapped, alignments.contig[rows], -1).astype(np.int64)
    position = np.where(mapped, alignments.position[rows].astype(np.int64) + 1, 0)
    mapq = np.where(mapped, context.mapq[rows], 0)
    mate_tags = []
    if chunk.paired:
        flag, contig, position, mate_fields, mate_tags = _mate_fields(
            alignments, rows, reads, flag, mapped, reverse, contig, position, span, mapq, cigar, context.reference.rname_table()
        )
    else:
        mate_fields = [constant_text(b"\t*\t0\t0\t", count)]
    rname = context.reference.rname_table()[np.where(contig >= 0, contig, len(context.reference.contig_names))]

    tab = constant_text(b"\t", count)
    blocks = [
        names, tab, decimal_text(flag), tab, rname, tab, decimal_text(position), tab, decimal_text(mapq), tab, cigar,
        *mate_fields, sequence, tab, quality,
        *tag_blocks(b"\tNM:i:", decimal_text(edit_distance), mapped),
        *tag_blocks(b"\tMD:Z:", md, mapped),
        *tag_blocks(b"\tAS:i:", decimal_text(alignments.score[rows]), mapped),
        # XS on every mapped read, 0 when no other alignment was found (as bwa mem writes it).
        *tag_blocks(b"\tXS:i:", decimal_text(np.where(second == NO_SCORE, 0, np.maximum(second, 0))), mapped & ~hidden),
        *mate_tags,
    ]  # fmt: skip
    if context.read_group_id is not None:
        blocks.append(constant_text(b"\tRG:Z:" + context.read_group_id.encode(), count))
    if (partner >= 0).any():  # SA names the partner with its soft clips, whatever its own line shows
        blocks += _split_tag(partner, rname, position, reverse, cigar, mapq, edit_distance)
    if alignments.hard_clipped is not None and (alignments.hard_clipped[rows] & mapped).any():
        _hard_clip(alignments, rows, alignments.hard_clipped[rows] & mapped, read_lengths, sequence, quality, cigar)
    if alignments.alternatives is not None and len(alignments.alternatives.mapped):
        blocks += _alternatives_tag(chunk, alignments, rows, reads, context)
    blocks.append(constant_text(b"\n", count))
    lines = np.concatenate(blocks, axis=1)
    return lines.tobytes().translate(None, b"\0")  # the padding out: a C loop, faster than a mask


def _hard_clip(alignments, rows, hard, read_lengths, sequence, quality, cigar) -> None:
    """Rows ``hard`` written hard-clipped, in place: their clipped bases cleared from SEQ (left-
    aligned rows) and QUAL (reverse rows right-aligned, see _format_rows), S shown as H."""
    ops = np.asarray(alignments.cigar_ops, dtype=np.uint32)
    first = ops[alignments.cigar_offsets[rows]]
    last = ops[alignments.cigar_offsets[rows + 1] - 1]
    lead = np.where(hard & ((first & 0xF) == SOFT_CLIP), first >> 4, 0).astype(np.int64)
    trail = np.where(hard & ((last & 0xF) == SOFT_CLIP), last >> 4, 0).astype(np.int64)
    column = np.arange(sequence.shape[1])
    sequence[(column < lead[:, None]) | (column >= (read_lengths - trail)[:, None])] = 0
    if quality.flags.writeable:  # FASTA input: QUAL is one '*' a line
        reverse = alignments.reverse[rows]
        offset = np.where(reverse, quality.shape[1] - read_lengths, 0)[:, None]  # where a row's first base sits
        column = np.arange(quality.shape[1])
        first_kept = offset + lead[:, None]  # CIGAR and both rows run along the aligned strand
        end_kept = offset + (read_lengths - trail)[:, None]
        quality[hard[:, None] & ((column < first_kept) | (column >= end_kept))] = 0
    letters = cigar[hard]
    letters[letters == ord("S")] = ord("H")
    cigar[hard] = letters


def _split_tag(partner, rname, position, reverse, cigar, mapq, edit_distance) -> list[np.ndarray]:
    """SA:Z on the rows with a partner (the other part of a split read, a row of the batch):
    ``rname,pos,strand,CIGAR,mapQ,NM;`` of the partner, POS 1-based."""
    count = len(partner)
    present = partner >= 0
    other = np.maximum(partner, 0)
    comma = constant_text(b",", count)
    strand = np.where(reverse[other], ord("-"), ord("+")).astype(np.uint8)[:, None]
    block = np.concatenate((
        constant_text(b"\tSA:Z:", count), rname[other], comma, decimal_text(position[other]), comma, strand, comma, cigar[other], comma,
        decimal_text(mapq[other]), comma, decimal_text(edit_distance[other]), constant_text(b";", count),
    ), axis=1)  # fmt: skip
    block[~present] = 0
    return [block]


def _alternatives_tag(chunk, alignments, rows, reads, context) -> list[np.ndarray]:
    """XA:Z on the primary rows of reads with alternatives: ``rname,±pos,CIGAR,NM;`` each, in
    their order (POS 1-based, the sign the strand's)."""
    others = alignments.alternatives
    count = len(rows)
    primary = alignments.primary_rows()[rows] & alignments.mapped[rows]
    # The batch's reads' entries (alternatives are sorted by read).
    low, high = np.searchsorted(others.read_index, [reads.min(initial=0), reads.max(initial=-1) + 1])
    entries = np.arange(low, high)
    entries = entries[np.isin(others.read_index[entries], reads[primary])]
    if len(entries) == 0:
        return []
    entry_reads = others.read_index[entries]
    fields = _alignment_fields(chunk, others, entries, entry_reads, others.reverse[entries], context)
    n = len(entries)
    comma = constant_text(b",", n)
    sign = np.where(others.reverse[entries], ord("-"), ord("+")).astype(np.uint8)[:, None]
    rname = context.reference.rname_table()[others.contig[entries]]
    matrix = np.concatenate((rname, comma, sign, decimal_text(others.position[entries] + 1), comma, fields.cigar, comma,
                             decimal_text(fields.edit_distance), constant_text(b";", n)), axis=1)
    entry_length = np.count_nonzero(matrix, axis=1)
    per_read = np.bincount(np.searchsorted(np.unique(entry_reads), entry_reads), weights=entry_length).astype(np.int64)
    listed_reads = np.unique(entry_reads)
    text = padded_rows(matrix[matrix != 0], per_read)
    present = primary & np.isin(reads, listed_reads)
    block = np.zeros((count, text.shape[1]), dtype=np.uint8)
    block[present] = text[np.searchsorted(listed_reads, reads[present])]
    return tag_blocks(b"\tXA:Z:", block, present)


FLAG_PAIRED, FLAG_PROPER, FLAG_MATE_UNMAPPED, FLAG_MATE_REVERSE, FLAG_FIRST, FLAG_SECOND = 0x1, 0x2, 0x8, 0x20, 0x40, 0x80


def _mate_fields(alignments, rows, reads, flag, mapped, reverse, contig, position, span, mapq, cigar, rname_table):
    """The pair fields of paired rows (reads 2j and 2j + 1 are the mates of a pair, R1 first; the
    batch holds every row of its pairs, each read's primary first), each row's from its mate's
    primary row: FLAG bits 0x1 0x2 0x8 0x20 0x40 0x80; an unmapped mate placed at its mate's
    RNAME and POS (as the SAM specification recommends; its own strand and SEQ kept, as samtools
    fixmate does); RNEXT (``=`` on the same reference), PNEXT; TLEN from the leftmost to the
    rightmost mapped base of the two, positive on the leftmost mate (R1 when both start
    together), 0 unless both map to one reference; MC and MQ, the mate's CIGAR and MAPQ, where
    the mate is mapped. Returns flag, contig, position, the RNEXT/PNEXT/TLEN blocks and tags."""
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
    # RNEXT: the mate's reference name, '*' (the table's last row) or '=' (a row added after it).
    equals = np.zeros((1, rname_table.shape[1]), dtype=np.uint8)
    equals[0, 0] = ord("=")
    names = np.where(mate_contig < 0, len(rname_table) - 1, np.where(mate_contig == contig, len(rname_table), mate_contig))
    return flag, contig, position, [
        constant_text(b"\t", count), np.concatenate((rname_table, equals))[names], constant_text(b"\t", count), decimal_text(mate_position), constant_text(b"\t", count),
        decimal_text(template), constant_text(b"\t", count),
    ], [
        *tag_blocks(b"\tMC:Z:", cigar[mate], mate_mapped),
        *tag_blocks(b"\tMQ:i:", decimal_text(mapq[mate]), mate_mapped),
    ]


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


def format_chunk(chunk, alignments: ChunkAlignments, reference_text: ReferenceText, read_group_id: str | None, write_unaligned: bool, scoring=None) -> bytes:
    """SAM text (no header) of one chunk, lines in input order.

    ``chunk`` is the reader's ReadChunk; ``reference_text`` a :class:`ReferenceText` (contig
    names for RNAME, reference codes for NM/MD). MAPQ is ``alignments.mapq`` when given, else
    :func:`mapping_quality` under ``scoring``; secondary lines get MAPQ 0. Unmapped reads are
    written (FLAG 4) only when ``write_unaligned``. A CIGAR that disagrees with its read or runs
    past its contig raises ValueError (a bug upstream, not a user error).
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
    )
    # Bytes a line may take in its padded matrix: SEQ, QUAL, name, CIGAR (11 a op), MD, fixed.
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
        pieces.append(_format_rows(chunk, alignments, rows[start:end], context))
        lookahead = max(4096, 2 * (end - start))
        start = end
    return b"".join(pieces)
