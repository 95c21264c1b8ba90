"""The tags after a SAM line's read group, as both formatters write them (bowmap.align.output.sam
on the host; on the device, bowmap.align.output.sam_lines copies this text): SA on the parts of
split reads, XA on the primary lines of reads with alternative hits."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bowmap.align.output.sam_text import assemble, constant_rows, decimal_rows, rows_of, segment_sum, table_rows
from bowmap.runtime.arrays import exclusive_cumsum


def tail_tags(alignments, rows, values, cigar, cigar_lengths, context) -> list:
    """SA and XA, the fields after RG (rows of some lines: either formatter writes them as text)."""
    tags = []
    if (values.partner >= 0).any():  # SA names the partner with its soft clips, whatever its own line shows
        tags += split_tag(values.partner, values.rname, values.position, values.reverse, cigar, cigar_lengths, values.mapq,
                           values.edit_distance, context)
    if context.alternatives is not None:
        tags += alternatives_tag(alignments, rows, values.reads, context.alternatives)
    return tags


def split_tag(partner, rname, position, reverse, cigar, cigar_lengths, mapq, edit_distance, context) -> list:
    """SA:Z on the rows with a partner (the other part of a split read, a row of the batch):
    ``rname,pos,strand,CIGAR,mapQ,NM;`` of the partner, POS 1-based."""
    present = np.flatnonzero(partner >= 0)
    other = partner[present]
    names, name_lengths = context.split_names
    strands, strand_lengths = table_rows([b",+,", b",-,"])
    strand = reverse[other].astype(np.intp)
    return [
        (names[rname[other]], name_lengths[rname[other]], present),
        (*decimal_rows(position[other], b","), present),
        (strands[strand], strand_lengths[strand], present),
        (cigar[other], cigar_lengths[other], present),
        (*decimal_rows(mapq[other], b","), present),
        (*decimal_rows(edit_distance[other], b","), present),
        (*constant_rows(b";", len(present)), present),
    ]


@dataclass
class Alternatives:
    """The XA text of a chunk's reads: read ``reads[k]``'s is ``text[starts[k]:][:lengths[k]]``."""

    reads: np.ndarray  # sorted
    starts: np.ndarray
    lengths: np.ndarray
    text: np.ndarray


def alternative_entries(alignments, rows, context) -> np.ndarray | None:
    """The rows of ``alignments.alternatives`` listed in XA: those of reads with a primary line
    among ``rows`` (None: none)."""
    others = alignments.alternatives
    if others is None or not len(others.mapped):
        return None
    primary = alignments.primary_rows()[rows] & alignments.mapped[rows]
    entries = np.flatnonzero(np.isin(others.read_index, context.read_index[rows[primary]]))
    return entries if len(entries) else None


def alternatives_text(alignments, entries, fields, context) -> Alternatives:
    """``rname,±pos,CIGAR,NM;`` of each alternative ``entries`` (POS 1-based, the sign the
    strand's) whose CIGAR and NM are ``fields``, joined by read: once a chunk, not once a batch."""
    others = alignments.alternatives
    entry_reads = others.read_index[entries]
    n = len(entries)
    names, name_lengths = context.alternative_names
    contig = others.contig[entries]
    signs, sign_lengths = table_rows([b",+", b",-"])
    sign = others.reverse[entries].astype(np.intp)
    text, entry_lengths = assemble(n, [
        (names[contig], name_lengths[contig], None),
        (signs[sign], sign_lengths[sign], None),
        (*decimal_rows(others.position[entries] + 1), None),
        (*constant_rows(b",", n), None),
        (fields.cigar, fields.cigar_lengths, None),
        (*decimal_rows(fields.edit_distance, b","), None),
        (*constant_rows(b";", n), None),
    ])  # fmt: skip
    # A read's entries are consecutive (alternatives are sorted by read): its text is one span.
    listed_reads, first_entry = np.unique(entry_reads, return_index=True)
    lengths = segment_sum(entry_lengths, np.diff(np.append(first_entry, n)))
    return Alternatives(listed_reads, exclusive_cumsum(entry_lengths)[first_entry], lengths, text)


def alternatives_tag(alignments, rows, reads, alternatives: Alternatives) -> list:
    """XA:Z on the primary rows of reads with alternatives."""
    primary = alignments.primary_rows()[rows] & alignments.mapped[rows]
    present = np.flatnonzero(primary & np.isin(reads, alternatives.reads))
    if len(present) == 0:
        return []
    listed = np.searchsorted(alternatives.reads, reads[present])
    lengths = alternatives.lengths[listed]
    return [
        (*constant_rows(b"\tXA:Z:", len(present)), present),
        (rows_of(alternatives.text, alternatives.starts[listed], max(int(lengths.max()), 1)), lengths, present),
    ]
