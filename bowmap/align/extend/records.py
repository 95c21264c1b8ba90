"""Records beyond each read's primary alignment, as bwa mem writes them: alternative hits (the XA
tag, or secondary records with ``--secondary N``) and split reads (a supplementary record, SA on
both parts). Everything is chosen from the windows the extend stage scored, with one more
seeding for the clipped parts of reads whose primary leaves a long part clipped
(:func:`with_part_windows`), and one batch of tracebacks for the few windows that can matter.

A read's *other alignments* are its scored windows less its primary, one per distinct alignment
(windows at one place are one, the primary's own included: extend's SAME_ALIGNMENT_BASES and
Places), that reach the reporting minimum. Once traced, an alternative found at the primary's
place after all (their exact intervals, which the windows' estimates bound from below) is
dropped, and its read's second best taken again without it: XS is the best score at another
place, and XA entries and secondary records never name the primary's. Traced, each is classed against
the primary by its interval on the read (forward-strand coordinates), as bwa's
``mem_mark_primary_se``: it *overlaps* the primary when the two share at least MASK_LEVEL of the
shorter interval.

* Alternatives: overlapping, scoring at least XA_RATIO of the primary. XA lists them all
  (``chr,±pos,CIGAR,NM;`` by score) when there are at most ``max_alternatives`` (bwa's ``-h``:
  all or none; a read with more is a repeat, and a partial list would mislead). With
  ``--secondary N`` the first N become secondary records (FLAG 0x100, MAPQ 0, SEQ/QUAL ``*``, no
  XS) in place of XA, as bwa ``-a`` does.
* Split reads: when the primary leaves at least the minimum score's worth of bases clipped, the
  best other alignment that does not overlap it becomes a supplementary record (FLAG 0x800, or
  0x100 with ``--split-as-secondary``, bwa's ``-M``); both records carry SA naming the other. Its
  MAPQ weighs it against the other alignments overlapping it, capped at the primary's (bwa).
  One supplementary a read: chimeras of two parts, the common case.
* The primary's second-best score, and so its XS and MAPQ, come from alignments overlapping it
  only (bwa's ``sub``): the other part of a chimeric read is not a rival placement.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bowmap.align.extend.extender import Extender, Places, Scored, Traced, new_windows, rival_scores
from bowmap.align.extend.mapq import NO_SCORE, mapping_quality
from bowmap.align.options import RecordOptions
from bowmap.align.seed.filter import Windows
from bowmap.runtime.arrays import lexsort, run_ranks, segment_ranges

XA_RATIO = 0.8  # bwa's XA_drop_ratio: alternatives scoring at least this share of the primary
MASK_LEVEL = 0.5  # bwa's mask_level: two alignments share this much of the shorter on the read
SPLIT_CANDIDATES = 4  # other alignments traced a read whose primary leaves a part clipped


@dataclass
class Others:
    """A chunk's other alignments (:func:`other_alignments`), traced, one row each, sorted by
    read then rank (score, best first): ``role`` ALTERNATIVE, SECONDARY or SUPPLEMENTARY."""

    read: np.ndarray
    role: np.ndarray
    reverse: np.ndarray
    traced: Traced
    mapq: np.ndarray  # uint8: supplementary rows' MAPQ (0 elsewhere)
    second: np.ndarray  # int64: each read's second-best score among overlapping alignments


ALTERNATIVE, SECONDARY, SUPPLEMENTARY = 0, 1, 2


def chunk_alignments(extender: Extender, scored: Scored, chosen, compared, second, suboptimal, mapq=None, proper=None, rescuer=None):
    """:meth:`Extender.alignments` of the windows ``chosen`` with the records the options ask
    for beyond them: XA, supplementary and secondary rows (for pairs, each mate's own, carrying
    the pair's fields from the mate's primary: see sam._mate_fields)."""
    records = extender.options.records
    if not (records.max_alternatives or records.secondary or records.supplementary):
        return extender.alignments(scored, chosen, compared, second, suboptimal, mapq, proper)
    mapped, traced, alternatives = extender.primaries(scored, chosen, compared, alternative_windows(extender, scored, chosen, compared, records))
    if records.supplementary and rescuer is not None:
        scored = with_part_windows(extender, rescuer, scored, mapped, traced)
    others = other_alignments(extender, scored, chosen, second, traced, mapped, records, alternatives)
    alignments = extender.alignments(scored, chosen, compared, others.second, suboptimal, mapq, proper, (mapped, traced))
    return with_other_records(alignments, others, records)


def with_part_windows(extender: Extender, seed_filter, scored: Scored, mapped: np.ndarray, primary: Traced) -> Scored:
    """``scored`` with windows found for the longer clipped part of each mapped read whose primary
    leaves at least the minimum score's worth of bases (and a seed) clipped: the part is seeded
    as a read of its own by ``seed_filter`` (all its rounds, on the device) and its windows,
    moved back onto the whole read's diagonals, are scored for the whole read. Without this a
    split read whose longer part lies in a repeat keeps only that part's copies among its
    windows (``windows_per_read``), and the other part's place is never scored."""
    chunk, lengths, scoring = extender.chunk, extender.lengths, extender.scoring
    start = np.zeros(extender.count, dtype=np.int64)
    end = np.zeros(extender.count, dtype=np.int64)
    primary_reverse = scored.windows.reverse[primary.window] if len(scored.windows) else np.zeros(0, bool)
    start[mapped], end[mapped] = forward_interval(primary.read_start, primary.read_end, primary_reverse, lengths[mapped])
    left = start >= lengths - end
    part_start = np.where(left, 0, end)
    part_length = np.where(left, start, lengths - end)
    enough = np.maximum(extender.minimum() / scoring.match, extender.options.seed.seed_length)
    reads = np.flatnonzero(mapped & (part_length >= enough))
    if len(reads) == 0:
        return scored
    part_start, part_length, whole = part_start[reads], part_length[reads], lengths[reads]
    offsets = np.zeros(len(reads) + 1, dtype=np.int64)
    np.cumsum(part_length, out=offsets[1:])
    read_starts = chunk.offsets[reads]
    # The reverse codes hold each read's reverse complement at the read's offset: the part
    # [o, o + l) of the forward read is [L - o - l, L - o) there.
    forward = chunk.codes[segment_ranges(read_starts + part_start, part_length)]
    reverse = chunk.reverse_codes[segment_ranges(read_starts + whole - part_start - part_length, part_length)]
    found = seed_filter.windows(forward, reverse, offsets)
    if len(found) == 0:
        return scored
    index = extender.index
    shift = np.where(found.reverse, (whole - part_start - part_length)[found.read], part_start[found.read])
    contig, _ = index.to_contig(found.start)  # a window lies in one contig, and stays there
    contig_start = index.contig_starts[contig]
    moved = Windows(
        read=reads[found.read], reverse=found.reverse,
        start=np.maximum(found.start - shift, contig_start),
        end=np.minimum(found.end - shift + (whole - part_length)[found.read], contig_start + index.contig_lengths[contig]),
        hits=found.hits,
    )
    wanted = np.zeros(extender.count, dtype=bool)
    wanted[reads] = True
    return extender.add(scored, new_windows(scored.windows, moved, wanted, index), wanted)


def forward_interval(read_start, read_end, reverse, lengths):
    """[start, end) on the read's forward strand of alignments given on their aligned strand."""
    return np.where(reverse, lengths - read_end, read_start), np.where(reverse, lengths - read_start, read_end)


def overlapping(start_a, end_a, start_b, end_b) -> np.ndarray:
    """Whether two read intervals share at least MASK_LEVEL of the shorter (bwa's test)."""
    shared = np.minimum(end_a, end_b) - np.maximum(start_a, start_b)
    return shared >= MASK_LEVEL * np.minimum(end_a - start_a, end_b - start_b)


def candidates(scored: Scored, chosen: np.ndarray, reportable: np.ndarray) -> np.ndarray:
    """The windows of each read's other alignments, one a distinct alignment (the best-scoring
    window of each cluster of ends; the primary's own cluster left out), sorted by read, then
    score (best first), start and strand. ``chosen``: each read's primary window (-1: none);
    ``reportable``: a mask of the windows that may be reported (reaching the minimum, and near
    enough the primary or of a read with a part clipped: see other_alignments)."""
    windows = scored.windows
    read, reverse = windows.read, windows.reverse
    if len(read) == 0:
        return np.zeros(0, dtype=np.int64)
    places = scored.places()
    primary = chosen[read]
    safe = np.maximum(primary, 0)
    other = (primary >= 0) & (np.arange(len(read)) != primary) & reportable
    rows = np.flatnonzero(other)  # tested against their primary's place: these rows alone (few: most windows are not reportable)
    kept, cluster = places.clusters(read, rows[~places.take(rows).same_as(places.take(safe[rows]))])
    order = lexsort((reverse[kept], windows.start[kept], -scored.score[kept].astype(np.int64), cluster))
    leaders = kept[order[np.r_[True, cluster[order][1:] != cluster[order][:-1]]]] if len(kept) else kept
    return leaders[lexsort((reverse[leaders], windows.start[leaders], -scored.score[leaders].astype(np.int64), read[leaders]))]


def alternative_windows(extender: Extender, scored: Scored, chosen: np.ndarray, compared: np.ndarray, options: RecordOptions) -> np.ndarray:
    """The windows to trace for XA or secondary records, chosen before any traceback (so they are
    traced in the primaries' launch): each read's other alignments scoring at least XA_RATIO of
    the score its primary was chosen by, all of them when there are at most
    ``max_alternatives`` (else none), or the first ``secondary``."""
    if not (options.max_alternatives or options.secondary) or len(scored.windows) == 0:
        return np.zeros(0, dtype=np.int64)
    near = extender.may_report(scored.score, scored.windows.read) & (scored.score >= XA_RATIO * compared[scored.windows.read])
    found = candidates(scored, np.where(extender.candidates_mask(chosen, compared), chosen, -1), near)
    read = scored.windows.read[found]
    if options.secondary:
        return found[run_ranks(read) < options.secondary]
    return found[np.bincount(read, minlength=extender.count)[read] <= options.max_alternatives]


def other_alignments(extender, scored: Scored, chosen: np.ndarray, second: np.ndarray, primary: Traced, mapped: np.ndarray,
                     options: RecordOptions, alternatives: Traced) -> Others:
    """The alternatives and split parts of a chunk's mapped reads (see the module docstring).
    ``chosen``/``second``: each read's primary window and its second-best score; ``primary``:
    the mapped reads' primaries traced (in read order); ``alternatives``: the windows of
    :func:`alternative_windows`, traced. Split candidates, for reads whose primary leaves a
    part clipped (few), are traced here."""
    count, lengths, scoring = extender.count, extender.lengths, extender.scoring
    windows = scored.windows
    minimum = extender.minimum()
    start = np.zeros(count, dtype=np.int64)
    end = np.zeros(count, dtype=np.int64)
    primary_reverse = windows.reverse[primary.window] if len(windows) else np.zeros(0, bool)
    start[mapped], end[mapped] = forward_interval(primary.read_start, primary.read_end, primary_reverse, lengths[mapped])
    alternatives = alternatives.subset(mapped[windows.read[alternatives.window]]) if len(alternatives.window) else alternatives
    clipped = options.supplementary & ((lengths - (end - start)) * scoring.match >= minimum)
    reportable = extender.may_report(scored.score, windows.read)
    primary_window = np.where(mapped, chosen, -1)
    split_candidates = np.zeros(0, dtype=np.int64)
    if clipped.any():
        # The other alignments of the reads whose primary leaves a part clipped. Where each lies
        # on the read, before tracing: it ends at its window's
        # read end and spans at least score / match bases. Those clear of the primary there,
        # best first, are traced for the split (a part in a repeat has many copies that
        # overlap the primary: ranking all of them would crowd the other part out).
        found = candidates(scored, primary_window, reportable & clipped[windows.read])
        read = windows.read[found]
        found_end = scored.read_end[found].astype(np.int64)
        found_start = found_end - np.maximum(scored.score[found].astype(np.int64) + 2 * scoring.clip_bonus, 1) // scoring.match
        near_start, near_end = forward_interval(found_start, found_end, windows.reverse[found], lengths[read])
        clear = ~overlapping(near_start, near_end, start[read], end[read])
        clear_rank = np.zeros(len(found), dtype=np.int64)
        clear_rank[clear] = run_ranks(read[clear])
        alternative_window = np.zeros(len(windows), dtype=bool)  # (a mask: np.isin sorted both)
        alternative_window[alternatives.window] = True
        split_candidates = found[clear & (clear_rank < SPLIT_CANDIDATES) & ~alternative_window[found]]
    traced = join_traced(alternatives, extender.trace(scored, split_candidates))
    alternative = np.arange(len(traced.window)) < len(alternatives.window)
    window = traced.window
    order = lexsort((windows.reverse[window], windows.start[window], -scored.score[window].astype(np.int64), windows.read[window]))
    traced, alternative = traced.subset(order), alternative[order]
    read = windows.read[traced.window]
    reverse = windows.reverse[traced.window]
    good = (traced.score > 0) & (traced.score >= minimum[read])
    traced, read, reverse, alternative = traced.subset(good), read[good], reverse[good], alternative[good]
    # The traced rows' exact places: one at its primary's (the estimate missed it) is dropped,
    # and of the copies of one other place the best (the first: rows are ranked) is kept.
    primary_row = np.full(count, -1, dtype=np.int64)
    primary_row[np.flatnonzero(mapped)] = np.arange(int(mapped.sum()))
    both = join_traced(primary, traced)
    places = exact_places(extender.index, both, np.concatenate((primary_reverse, reverse)))
    rows = len(primary.window) + np.arange(len(read))
    at_primary = places.same(rows, primary_row[read])
    copies = np.zeros(len(read), dtype=bool)
    sorted_rows, cluster = places.clusters(np.concatenate((np.flatnonzero(mapped), read)), rows[~at_primary])
    if len(sorted_rows):
        first_row = np.full(int(cluster[-1]) + 1, len(both.window), dtype=np.int64)
        np.minimum.at(first_row, cluster, sorted_rows)
        copies[sorted_rows[sorted_rows != first_row[cluster]] - len(primary.window)] = True
    excluded = np.zeros(len(scored.score), dtype=bool)  # windows at their primary's place after all
    excluded[traced.window[at_primary]] = True
    keep = ~at_primary & ~copies
    traced, read, reverse, alternative = traced.subset(keep), read[keep], reverse[keep], alternative[keep]
    other_start, other_end = forward_interval(traced.read_start, traced.read_end, reverse, lengths[read])
    with_primary = overlapping(other_start, other_end, start[read], end[read])
    role = np.full(len(read), -1, dtype=np.int64)
    role[with_primary & alternative] = SECONDARY if options.secondary else ALTERNATIVE
    # The primary's rival is the best alignment overlapping it: a part of the read aligned
    # elsewhere (found clear of it here) is not one.
    apart = np.zeros(len(scored.score), dtype=bool)
    apart[traced.window[~with_primary]] = True
    fixed_second = np.asarray(second, dtype=np.int64).copy()
    if excluded.any():  # XS anew without them, as best_two's: every other window of the read
        again = np.zeros(count, dtype=bool)
        again[windows.read[excluded]] = True
        masked = np.where(excluded, NO_SCORE, scored.score.astype(np.int64))
        fixed_second[again] = rival_scores(windows.read, masked, count, scored.places(), primary_window, again)[again]
    moved = np.zeros(count, dtype=bool)
    moved[read[~with_primary]] = True
    if moved.any():  # a moved read's rivals: its other alignments but the split parts
        rivals = candidates(scored, primary_window, reportable & moved[windows.read])
        rivals = rivals[~apart[rivals] & ~excluded[rivals]]
        fixed_second[moved] = NO_SCORE
        np.maximum.at(fixed_second, windows.read[rivals], scored.score[rivals].astype(np.int64))
    mapq = np.zeros(len(read), dtype=np.uint8)
    if options.supplementary:
        split = np.flatnonzero(~with_primary)
        split = split[np.r_[True, read[split][1:] != read[split][:-1]]] if len(split) else split  # the best a read
        role[split] = SUPPLEMENTARY
        mapq[split] = _split_mapq(scored, traced, read, split, other_start, other_end, lengths, scoring)
    kept = role >= 0
    return Others(read[kept], role[kept], reverse[kept], traced.subset(kept), mapq[kept], fixed_second)


def exact_places(index, traced: Traced, reverse: np.ndarray) -> Places:
    """The places (extend's Places, text coordinates) of traced alignments, from their CIGARs."""
    operations = traced.ops() & 0xF
    consumes = np.isin(operations, (0, 2, 3, 7, 8))  # M, D, N, =, X: reference bases
    lengths = np.where(consumes, traced.ops() >> 4, 0).astype(np.int64)
    running = np.concatenate(([0], np.cumsum(lengths)))
    ends = np.cumsum(traced.cigar_lengths)
    spans = running[ends] - running[ends - traced.cigar_lengths]
    text_start = index.contig_starts[traced.contig] + traced.position
    return Places(np.asarray(reverse, dtype=bool), traced.read_start, traced.read_end, text_start, text_start + spans)


def join_traced(first: Traced, second: Traced) -> Traced:
    """The rows of ``first`` then those of ``second``."""
    def joined(name):
        return np.concatenate((getattr(first, name), getattr(second, name)))

    return Traced(*(joined(name) for name in ("window", "score", "read_start", "read_end", "contig", "position", "cigar_ops")),
                  np.concatenate((first.cigar_starts, second.cigar_starts + len(first.cigar_ops))), joined("cigar_lengths"))


def _split_mapq(scored: Scored, traced: Traced, read, split, start, end, lengths, scoring) -> np.ndarray:
    """MAPQ of the supplementary parts ``split`` (rows of ``traced``): their score against the
    best other traced alignment of the read overlapping them on the read."""
    score = scored.score[traced.window].astype(np.int64)
    rival = np.full(len(split), NO_SCORE, dtype=np.int64)
    first = np.searchsorted(read, read[split], side="left")
    last = np.searchsorted(read, read[split], side="right")
    for offset in range(int((last - first).max(initial=0))):  # a few traced alignments a read
        other = first + offset
        valid = (other < last) & (other != split)
        other = np.minimum(other, len(read) - 1)
        clash = valid & overlapping(start[other], end[other], start[split], end[split])
        rival = np.where(clash, np.maximum(rival, score[other]), rival)
    return mapping_quality(score[split], rival, lengths[read[split]], scoring)


def with_other_records(primary, others: Others, options: RecordOptions):
    """``primary`` (ChunkAlignments, one row a read) with the supplementary and secondary
    records of ``others`` as rows of their own after each read's primary (supplementary first,
    then secondaries by rank), SA partners linked, and the alternatives for XA."""
    from bowmap.align.output.sam import ChunkAlignments

    count = len(primary.mapped)
    written = others.role != ALTERNATIVE
    extra_read = others.read[written]
    extra_role = others.role[written]
    traced = others.traced.subset(written)
    read_index = np.concatenate((np.arange(count, dtype=np.int64), extra_read))
    within = np.concatenate((np.zeros(count, dtype=np.int64), np.where(extra_role == SUPPLEMENTARY, 1, 2 + run_ranks(extra_read))))
    order = lexsort((within, read_index))
    primary_lengths = np.diff(primary.cigar_offsets)
    lengths = np.concatenate((primary_lengths, traced.cigar_lengths))
    starts = np.concatenate((primary.cigar_offsets[:-1], len(primary.cigar_ops) + traced.cigar_starts))
    pool = np.concatenate((primary.cigar_ops, traced.cigar_ops)).astype(np.uint32)
    split = extra_role == SUPPLEMENTARY
    supplementary_mapq = np.minimum(others.mapq[written], primary.mapq[extra_read])
    rows = ChunkAlignments(
        mapped=np.concatenate((primary.mapped, np.ones(len(extra_read), dtype=bool)))[order],
        reverse=np.concatenate((primary.reverse, others.reverse[written]))[order],
        contig=np.concatenate((primary.contig, traced.contig)).astype(np.int32)[order],
        position=np.concatenate((primary.position, traced.position))[order],
        score=np.concatenate((primary.score, traced.score)).astype(np.int32)[order],
        second_score=np.concatenate((primary.second_score, np.full(len(extra_read), NO_SCORE))).astype(np.int32)[order],
        cigar_ops=pool[segment_ranges(starts[order], lengths[order])],
        cigar_offsets=np.concatenate(([0], np.cumsum(lengths[order]))),
        mapq=np.concatenate((primary.mapq, np.where(split, supplementary_mapq, 0))).astype(np.uint8)[order],
        secondary=np.concatenate((np.zeros(count, dtype=bool), (extra_role == SECONDARY) | (split & options.split_as_secondary)))[order],
        supplementary=np.concatenate((np.zeros(count, dtype=bool), split & (not options.split_as_secondary)))[order],
        hard_clipped=np.concatenate((np.zeros(count, dtype=bool), split & options.hard_clip_supplementary))[order],
        read_index=read_index[order],
        proper=None if primary.proper is None else primary.proper[read_index[order]],  # a row's read's
    )
    # SA partners: a read's primary and its supplementary, rows next to each other.
    position_of = np.empty(len(order), dtype=np.int64)
    position_of[order] = np.arange(len(order))
    partner = np.full(len(order), -1, dtype=np.int64)
    split_rows = position_of[count + np.flatnonzero(split)]
    primary_rows = position_of[extra_read[split]]
    partner[split_rows], partner[primary_rows] = primary_rows, split_rows
    rows.partner = partner
    rows.alternatives = alternatives_of(others)
    return rows


def alternatives_of(others: Others):
    """The XA entries of ``others`` as ChunkAlignments rows (read_index: their reads)."""
    from bowmap.align.output.sam import ChunkAlignments

    listed = others.role == ALTERNATIVE
    traced = others.traced.subset(listed)
    return ChunkAlignments(
        mapped=np.ones(int(listed.sum()), dtype=bool),
        reverse=others.reverse[listed],
        contig=traced.contig.astype(np.int32),
        position=traced.position,
        score=traced.score.astype(np.int32),
        second_score=np.full(len(traced.score), NO_SCORE, dtype=np.int32),
        cigar_ops=traced.ops(),
        cigar_offsets=np.concatenate(([0], np.cumsum(traced.cigar_lengths))),
        read_index=others.read[listed],
    )
