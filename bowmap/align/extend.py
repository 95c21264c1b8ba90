"""The extend stage: Smith-Waterman (kernels of :mod:`bowmap.align.smith_waterman`) over every
candidate window of a chunk, the best and second best alignment of each read, the rescue of
poor reads by dense seeds, and the traceback of each read's best -> CIGAR, position, MAPQ.

Coordinates: text positions are 0-based over the concatenated contigs; a read's alignment
position is 0-based on its contig (SAM's POS is one more).
"""

from __future__ import annotations

import numpy as np

from bowmap.align.options import AlignOptions
from bowmap.align.windows import Windows
from bowmap.runtime.arrays import unique


def minimum_scores(read_lengths: np.ndarray, scoring, end_to_end: bool, min_score: int | None) -> np.ndarray:
    """The score a read's best alignment needs to be reported.

    Local mode: 30, BWA-MEM's -T with the same match score of 1, at most the score of a perfect
    match (short reads still map when they match well). End-to-end: half the perfect score, so
    about one mismatch in ten bases, as bowtie2's end-to-end default allows.
    """
    perfect = read_lengths.astype(np.int64) * scoring.match
    if min_score is not None:
        return np.full(len(read_lengths), min_score, dtype=np.int64)
    if end_to_end:
        return np.ceil(perfect * 0.5).astype(np.int64)
    return np.minimum(30, np.maximum(perfect, 1))


def _mix(values: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: uint64 -> well-spread uint64."""
    with np.errstate(over="ignore"):
        values = (values ^ (values >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        values = (values ^ (values >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return values ^ (values >> np.uint64(31))


def tie_breakers(codes: np.ndarray, offsets: np.ndarray, read: np.ndarray, start: np.ndarray, score: np.ndarray) -> np.ndarray:
    """A pseudo-random but reproducible order for a read's equally good windows, drawn from the
    read's bases and the window's position: repeats are spread over their copies (as bwa and
    bowtie2 do with their random choice) while the output stays the same for the same input,
    whatever the chunking or the threads. Windows sorted by read; only windows sharing their
    read's best score with another window get a non-zero key (hashing is not free)."""
    breakers = np.zeros(len(read), dtype=np.uint64)
    if len(read) == 0:
        return breakers
    first = np.flatnonzero(np.r_[True, read[1:] != read[:-1]])
    top = np.repeat(np.maximum.reduceat(score, first), np.diff(np.r_[first, len(read)]))
    at_top = score == top
    tops_per_read = np.bincount(read[at_top], minlength=int(read[-1]) + 1)
    tied = at_top & (tops_per_read[read] > 1)
    if not tied.any():
        return breakers
    reads = unique(read[tied])
    lengths = offsets[reads + 1] - offsets[reads]
    within = np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    bases = codes[np.repeat(offsets[reads], lengths) + within]
    with np.errstate(over="ignore"):
        terms = _mix(within.astype(np.uint64) * np.uint64(4) + bases.astype(np.uint64) + np.uint64(1))
        running = np.concatenate(([np.uint64(0)], np.cumsum(terms, dtype=np.uint64)))
        ends = np.cumsum(lengths)
        read_hash = running[ends] - running[ends - lengths]  # wraps modulo 2^64, as meant
    breakers[tied] = _mix(read_hash[np.searchsorted(reads, read[tied])] ^ start[tied].astype(np.uint64))
    return breakers


# Two windows' best alignments ending within this many bases of each other, on one strand, are
# one alignment found twice (windows of nearby diagonal clusters overlap): not a second best.
SAME_ALIGNMENT_BASES = 16


def best_two(
    read: np.ndarray, score: np.ndarray, count: int, tie_breaker: np.ndarray, reverse=None, end=None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each of ``count`` reads: the pair with the best score (ties: the smallest
    ``tie_breaker``, then the forward strand and the smaller ``end``, then the first), or -1;
    that score; and the best score among the read's other pairs (NO_SCORE when it has none).
    ``read`` is sorted. With ``reverse`` and ``end`` (each pair's
    strand and the text position where its alignment ends), pairs whose alignment ends within
    SAME_ALIGNMENT_BASES of the best's on its strand are the best alignment again, not others."""
    from bowmap.align.mapq import NO_SCORE

    reads = np.arange(count)
    starts = np.searchsorted(read, reads, side="left")
    has = np.searchsorted(read, reads, side="right") > starts
    best = np.full(count, -1, dtype=np.int64)
    best_score = np.full(count, NO_SCORE, dtype=np.int64)
    if len(read):
        # The best: among the pairs at their read's top score, the smallest tie-breaker, then
        # (equal tie-breakers: one start) the forward strand and the nearer alignment end, and
        # only then the first, so the pairs' order (which may depend on the rest of the chunk)
        # does not decide. Only those few pairs are sorted, not all of them.
        best_score[has] = np.maximum.reduceat(score.astype(np.int64), starts[has])
        top = np.flatnonzero(score == best_score[read])
        keys = [top] + ([] if end is None else [end[top], reverse[top]]) + [tie_breaker[top], read[top]]
        top = top[np.lexsort(keys)]
        first_of_read = np.r_[True, read[top][1:] != read[top][:-1]]
        best[read[top[first_of_read]]] = top[first_of_read]
    others = np.ones(len(read), dtype=bool)
    if len(read):
        chosen = best[read]
        others[chosen] = False
        if end is not None:
            others &= (reverse != reverse[chosen]) | (np.abs(end - end[chosen]) > SAME_ALIGNMENT_BASES)
    candidates = np.where(others, score.astype(np.int64), NO_SCORE)
    second_score = np.full(count, NO_SCORE, dtype=np.int64)
    if has.any():
        second_score[has] = np.maximum.reduceat(candidates, starts[has])
    return best, best_score, second_score


def extend_chunk(device_text, index, smith_waterman, chunk, windows: Windows, scoring, options: AlignOptions, rescuer=None):
    """Smith-Waterman over every candidate window, then the traceback of each read's best.

    With a ``rescuer`` (a SeedFilter on ``smith_waterman``'s queue: it reads the chunk's reads
    sent there), reads whose best alignment is poor (``rescue_mismatches`` or more below a
    perfect match, or none) get the windows of dense seeds too (:meth:`SeedFilter.rescue_windows`), scored and ranked with the others."""
    from bowmap.align.mapq import mapping_quality
    from bowmap.align.sam import NO_SCORE, ChunkAlignments
    from bowmap.align.smith_waterman import cigar_scores
    from bowmap.runtime.arrays import segment_ranges

    count = chunk.count
    lengths = np.diff(chunk.offsets)
    read_codes = smith_waterman.send_reads(chunk.both_codes)  # once for every call below
    read_offsets = np.concatenate((chunk.offsets[:-1], chunk.offsets[:-1] + len(chunk.codes)))
    read_lengths = np.concatenate((lengths, lengths))

    def sequences(windows: Windows):
        """The Smith-Waterman calls' read and window arguments. Windows are (text position,
        length): the kernels read their bases from the packed text on the device, so none are
        gathered here or copied in."""
        return read_codes, read_offsets, read_lengths, device_text, windows.start, windows.end - windows.start

    clip_bonus = scoring.clip_bonus

    def scored(windows: Windows):
        """Best score and window end of each of ``windows``. The score is the kernel's (the
        alignment's own plus the clip bonus of each read end it reaches) less both bonuses:
        an alignment's score less the clip penalty of each end it clips, as BWA-MEM weighs
        its candidates; a read's whole-length alignment keeps its own score."""
        pairs = (windows.read + count * windows.reverse, np.arange(len(windows)))
        score, _, window_end = smith_waterman.best(*sequences(windows), *pairs)
        return score - 2 * clip_bonus, window_end

    score, window_end = scored(windows)
    best, best_score, second_score = _ranked(chunk, windows, score, window_end, count)
    seed_options = options.seed
    if rescuer is not None and seed_options.rescue_interval:
        poor_below = lengths * scoring.match - seed_options.rescue_mismatches * (scoring.match + scoring.mismatch)
        poor = (best_score < poor_below) & (lengths >= seed_options.seed_length)
        extra = _new_windows(windows, rescuer.rescue_windows(chunk.codes, chunk.reverse_codes, chunk.offsets, poor, chunk.both_codes, read_codes), poor, index) if poor.any() else None
        if extra is not None and len(extra):
            extra_score, extra_end = scored(extra)
            # The new windows go after the others, and only the rescued reads are ranked again
            # (over their old and new windows, grouped by read): ranking the whole chunk again
            # took a tenth of a worker's host time.
            ranked_again = np.concatenate((np.flatnonzero(poor[windows.read]), len(windows) + np.arange(len(extra))))
            windows = Windows(*(np.concatenate((getattr(windows, name), getattr(extra, name))) for name in Windows.FIELDS))
            score, window_end = np.concatenate((score, extra_score)), np.concatenate((window_end, extra_end))
            ranked_again = ranked_again[np.argsort(windows.read[ranked_again], kind="stable")]
            subset = Windows(*(getattr(windows, name)[ranked_again] for name in Windows.FIELDS))
            again = _ranked(chunk, subset, score[ranked_again], window_end[ranked_again], count)
            best[poor] = np.where(again[0][poor] >= 0, ranked_again[np.maximum(again[0][poor], 0)], -1)
            best_score[poor], second_score[poor] = again[1][poor], again[2][poor]
    pair_reads = windows.read + count * windows.reverse
    minimum = minimum_scores(lengths, scoring, options.end_to_end, options.min_score)
    # Reported: the best alignment's own score (AS) reaches the minimum, as BWA-MEM's -T.
    # best_score + 2 clip bonuses bounds it from above; the traceback gives it exactly.
    mapped = (best >= 0) & (best_score + 2 * clip_bonus > 0) & (best_score + 2 * clip_bonus >= minimum)
    chosen = best[mapped]
    traced_score, read_start, read_end, window_start, _, cigar_ops, cigar_starts, traced_lengths = smith_waterman.traceback(
        *sequences(windows), pair_reads[chosen], chosen
    )
    traced_score = cigar_scores(scoring, traced_score, read_start, read_end, lengths[mapped])
    kept = (traced_score > 0) & (traced_score >= minimum[mapped])
    if not kept.all():  # a clipped alignment whose bonus carried it over the minimum: unmapped
        mapped[np.flatnonzero(mapped)[~kept]] = False
        chosen, traced_score, window_start = chosen[kept], traced_score[kept], window_start[kept]
        cigar_ops = cigar_ops[segment_ranges(cigar_starts[kept].astype(np.int64), traced_lengths[kept].astype(np.int64))]
        traced_lengths = traced_lengths[kept]
    position = np.zeros(count, dtype=np.int64)
    contig = np.zeros(count, dtype=np.int32)
    contig_of, offset = index.to_contig(windows.start[chosen] + window_start)
    contig[mapped] = contig_of
    position[mapped] = offset
    cigar_lengths = np.zeros(count, dtype=np.int64)
    cigar_lengths[mapped] = traced_lengths
    cigar_offsets = np.concatenate(([0], np.cumsum(cigar_lengths)))
    # The traceback's operations are in the order of the chosen reads, which is input order.
    score_out = np.zeros(count, dtype=np.int32)
    score_out[mapped] = traced_score
    second = np.where(mapped, second_score, NO_SCORE).astype(np.int32)
    # MAPQ weighs the best against the second best as they were compared: both less the clip
    # penalty of each end they clip (AS is the best's own score, XS the second's compared one).
    # With AS in place of the best, a clipped wrong hit over a clipped second (the read's true
    # place not found) got a higher MAPQ than the scores that chose it support.
    mapq = mapping_quality(np.where(mapped, best_score, 0), second, lengths, scoring)
    return ChunkAlignments(
        mapped=mapped,
        reverse=np.where(mapped, windows.reverse[np.maximum(best, 0)], False) if len(windows) else mapped.copy(),
        contig=contig,
        position=position,
        score=score_out,
        second_score=second,
        cigar_ops=cigar_ops,
        cigar_offsets=cigar_offsets,
        mapq=mapq,
    )


def _ranked(chunk, windows: Windows, score, window_end, count: int):
    """best_two over a chunk's scored windows (sorted by read), ties broken by tie_breakers."""
    tie_breaker = tie_breakers(chunk.codes, chunk.offsets, windows.read, windows.start, score)
    return best_two(windows.read, score, count, tie_breaker, windows.reverse, windows.start + window_end)


# Window lengths enter _new_windows's keys modulo this: windows are at most a read (up to 4096
# bases in practice) plus three margins long, so two windows of one start never collide.
WINDOW_LENGTH_KEY = 8192


def _new_windows(windows: Windows, extra: Windows, rescued: np.ndarray, index) -> Windows:
    """The windows of ``extra`` (windows of the reads in the mask ``rescued``) that ``windows``
    does not hold already (same read, strand, start and end): scoring them again would only cost
    time."""
    windows = Windows(*(getattr(windows, name)[rescued[windows.read]] for name in Windows.FIELDS))  # the few rescued reads'
    span = int(index.total_length) + 1
    reads = int(max(windows.read.max(initial=0), extra.read.max(initial=0))) + 1
    if 2 * reads * span * WINDOW_LENGTH_KEY >= 2**62:  # keys would overflow: score the repeats
        return extra

    def keys(w: Windows) -> np.ndarray:
        return ((w.read * 2 + w.reverse) * span + w.start) * WINDOW_LENGTH_KEY + (w.end - w.start) % WINDOW_LENGTH_KEY

    fresh = ~np.isin(keys(extra), keys(windows))
    return Windows(*(getattr(extra, name)[fresh] for name in Windows.FIELDS))
