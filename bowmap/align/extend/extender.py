"""The extend stage: Smith-Waterman (kernels of :mod:`bowmap.align.extend.smith_waterman`) over every
candidate window of a chunk, the best and second best alignment of each read, the rescue of
poor reads by dense seeds, and the traceback of each read's best -> CIGAR, position, MAPQ.

Coordinates: text positions are 0-based over the concatenated contigs; a read's alignment
position is 0-based on its contig (SAM's POS is one more).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from bowmap.align.extend.mapq import NO_SCORE
from bowmap.align.options import AlignOptions
from bowmap.align.extend.tandem import REPEAT_SHARE_POWER, periodic_share, tandem_scores
from bowmap.align.seed.filter import Windows
from bowmap.runtime.arrays import lexsort, segment_ranges, unique


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


def mix(values: np.ndarray) -> np.ndarray:
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
    read_hash = read_hashes(codes, offsets, reads)
    breakers[tied] = mix(read_hash[np.searchsorted(reads, read[tied])] ^ start[tied].astype(np.uint64))
    return breakers


def read_hashes(codes: np.ndarray, offsets: np.ndarray, reads: np.ndarray) -> np.ndarray:
    """A hash (uint64) of the bases of each of ``reads`` (read indexes, distinct), the same in
    any chunk: what tie-breakers are drawn from."""
    lengths = offsets[reads + 1] - offsets[reads]
    within = np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    bases = codes[np.repeat(offsets[reads], lengths) + within]
    with np.errstate(over="ignore"):
        terms = mix(within.astype(np.uint64) * np.uint64(4) + bases.astype(np.uint64) + np.uint64(1))
        running = np.concatenate(([np.uint64(0)], np.cumsum(terms, dtype=np.uint64)))
        ends = np.cumsum(lengths)
        return running[ends] - running[ends - lengths]  # wraps modulo 2^64, as meant


# Two alignments of a read at one place are one alignment found twice (overlapping seed windows,
# a rescue window over a seed window, a clipped and an unclipped copy), never its own rival: on
# one strand, their read intervals and their reference intervals each overlap by more than
# half of the shorter (issue 28; bwa keeps such copies out of XS and XA through its chains and
# mem_sort_dedup_patch). One more condition keeps copies of a read along a minisatellite apart:
# their starts, ends or diagonals lie within SAME_ALIGNMENT_BASES of each other. A copy found
# twice shares one of them (a clipped copy its unclipped end and diagonal), a shift by one unit
# of a microsatellite too (its cost is the tandem score's, bowmap.align.extend.tandem); a read shifted
# by a longer unit along a minisatellite aligns about as well there, a true rival.
SAME_ALIGNMENT_BASES = 16


def _shares_most(start, end, other_start, other_end) -> np.ndarray:
    """Whether intervals [start, end) and [other_start, other_end) share more than half of the
    shorter one (in integers: twice the shared length exceeds it)."""
    shared = np.minimum(end, other_end) - np.maximum(start, other_start)
    return 2 * shared > np.minimum(end - start, other_end - other_start)


@dataclass
class Places:
    """Alignments of reads (one row each): strand, interval [read_start, read_end) on the read
    (aligned strand) and [text_start, text_end) on the text (0-based, over the concatenated
    contigs)."""

    reverse: np.ndarray
    read_start: np.ndarray
    read_end: np.ndarray
    text_start: np.ndarray
    text_end: np.ndarray

    @staticmethod
    def estimated(reverse, score, read_end, text_end, match: int) -> Places:
        """Places of windows' best alignments before any traceback, from what the score kernel
        gives (their ends, exact, and their score): an alignment scoring s spans at least s /
        match bases of the read (no base scores more), so the starts are placed that far before
        the ends. Shorter than the truth at worst: overlaps are never overestimated, and two
        alignments are taken for one only when they surely overlap."""
        read_end = np.asarray(read_end, dtype=np.int64)
        span = np.clip(np.asarray(score, dtype=np.int64) // max(int(match), 1), 1, np.maximum(read_end, 1))
        text_end = np.asarray(text_end, dtype=np.int64)
        return Places(np.asarray(reverse, dtype=bool), read_end - span, read_end, text_end - span, text_end)

    def take(self, rows) -> Places:
        """The rows ``rows`` (indexes, a mask or a slice)."""
        return Places(self.reverse[rows], self.read_start[rows], self.read_end[rows], self.text_start[rows], self.text_end[rows])

    def same(self, a, b) -> np.ndarray:
        """Whether rows ``a`` and rows ``b`` (indexes, of one read each pair) are one alignment
        (see SAME_ALIGNMENT_BASES)."""
        return self.take(a).same_as(self.take(b))

    def same_as(self, other: Places) -> np.ndarray:
        """Row by row, whether this row and ``other``'s (as many rows) are one alignment. The
        overlaps are tested only where the strand and the shift allow (few rows: a read's
        copies of one place), each column gathered once: these tests took a sixth of a host
        worker's time when each gathered its own columns again for every row."""
        shift = np.minimum(np.abs(self.text_start - other.text_start), np.abs(self.text_end - other.text_end))
        np.minimum(shift, np.abs((self.text_end - self.read_end) - (other.text_end - other.read_end)), out=shift)
        same = (self.reverse == other.reverse) & (shift <= SAME_ALIGNMENT_BASES)
        rows = np.flatnonzero(same)
        if len(rows):
            mine, theirs = self.take(rows), other.take(rows)
            same[rows] = _shares_most(mine.read_start, mine.read_end, theirs.read_start, theirs.read_end) & _shares_most(
                mine.text_start, mine.text_end, theirs.text_start, theirs.text_end)
        return same

    def clusters(self, read: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``rows`` (indexes) sorted by read, strand and text end, and for each the number of its
        cluster: runs of rows each one alignment with the row before it (the copies of one place
        lie next to each other in that order: they share a strand and their ends lie close)."""
        rows = rows[lexsort((self.text_end[rows], self.reverse[rows], read[rows]))]
        new = np.ones(len(rows), dtype=bool)
        if len(rows) > 1:
            reads, sorted_places = read[rows], self.take(rows)
            new[1:] = (reads[1:] != reads[:-1]) | ~sorted_places.take(slice(1, None)).same_as(sorted_places.take(slice(None, -1)))
        return rows, np.cumsum(new) - 1


PLACE_FIELDS = tuple(Places.__dataclass_fields__)

# rival_scores' rounds of testing each read's top-scoring rows before it tests all the rest.
RIVAL_ROUNDS = 4


def rival_scores(read: np.ndarray, score: np.ndarray, count: int, places: Places, chosen: np.ndarray, reads: np.ndarray | None = None
                 ) -> np.ndarray:
    """For each of ``count`` reads, the best score among its rows (``read``: each row's read, in
    any order) that are not at the place of its row ``chosen`` (-1: none, then NO_SCORE): the
    second best at another place (XS). NO_SCORE where there is none; with the mask ``reads``,
    for those reads alone (the others NO_SCORE).

    Only the rows that can decide are tested for the place: a read's rows at its top remaining
    score, round after round. A round ends the reads with a row at another place there (their
    rival is that score); the others lose those rows, copies of the chosen alignment, and go on.
    After RIVAL_ROUNDS rounds every row left is tested. Testing every row took a twentieth of a
    host worker's time in paired runs."""
    rival = np.full(count, NO_SCORE, dtype=np.int64)
    if len(read) == 0:
        return rival
    score = np.asarray(score, dtype=np.int64)
    picked = chosen[read]
    wanted = (picked >= 0) & (picked != np.arange(len(read))) & (score > NO_SCORE)
    if reads is not None:
        wanted &= reads[read]
    rows = np.flatnonzero(wanted)
    for _ in range(RIVAL_ROUNDS):
        if len(rows) == 0:
            return rival
        row_read, row_score = read[rows], score[rows]
        top = np.full(count, NO_SCORE, dtype=np.int64)
        np.maximum.at(top, row_read, row_score)
        at_top = row_score == top[row_read]
        tested = rows[at_top]
        done = np.zeros(count, dtype=bool)
        done[read[tested[~places.same(tested, picked[tested])]]] = True
        rival[done] = top[done]
        rows = rows[~at_top & ~done[row_read]]
    elsewhere = ~places.same(rows, picked[rows])
    np.maximum.at(rival, read[rows[elsewhere]], score[rows[elsewhere]])
    return rival


def best_two(read: np.ndarray, score: np.ndarray, count: int, tie_breaker: np.ndarray, places: Places | None = None
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each of ``count`` reads: the pair with the best score (ties: the smallest
    ``tie_breaker``, then the forward strand and the smaller text end, then the first), or -1;
    that score; and the best score among the read's other pairs (NO_SCORE when it has none).
    ``read`` is sorted. With ``places`` (each pair's alignment, see :class:`Places`), pairs at
    the best's place are the best alignment again, not others (see SAME_ALIGNMENT_BASES)."""
    per_read = np.bincount(read, minlength=count)
    starts = np.cumsum(per_read) - per_read  # (read sorted: each read's first pair)
    has = per_read > 0
    best = np.full(count, -1, dtype=np.int64)
    best_score = np.full(count, NO_SCORE, dtype=np.int64)
    if len(read):
        # The best: among the pairs at their read's top score, the smallest tie-breaker, then
        # (equal tie-breakers: one start) the forward strand and the nearer alignment end, and
        # only then the first, so the pairs' order (which may depend on the rest of the chunk)
        # does not decide. Only those few pairs are sorted, not all of them.
        best_score[has] = np.maximum.reduceat(score.astype(np.int64), starts[has])
        top = np.flatnonzero(score == best_score[read])
        top_read = read[top]
        again = top_read[1:] == top_read[:-1]
        tied = np.r_[again, False] | np.r_[False, again]  # tops of reads with more than one
        alone = top[~tied]
        best[read[alone]] = alone
        if len(alone) < len(top):
            top = top[tied]
            keys = [top] + ([] if places is None else [places.text_end[top], places.reverse[top]]) + [tie_breaker[top], read[top]]
            top = top[lexsort(keys)]
            first_of_read = np.r_[True, read[top][1:] != read[top][:-1]]
            best[read[top[first_of_read]]] = top[first_of_read]
    if places is not None:
        return best, best_score, rival_scores(read, score, count, places, best)
    others = np.ones(len(read), dtype=bool)
    if len(read):
        others[best[read]] = False
    candidates = np.where(others, score.astype(np.int64), NO_SCORE)
    second_score = np.full(count, NO_SCORE, dtype=np.int64)
    if has.any():
        second_score[has] = np.maximum.reduceat(candidates, starts[has])
    return best, best_score, second_score


def suboptimal_counts(read, score, count, best_score, delta: int, places: Places) -> np.ndarray:
    """For each of ``count`` reads: how many alignments other than its best score within
    ``delta`` of it (bwa's sub_n), each counted once however many windows found it (clusters of
    one place, :meth:`Places.clusters`; the best's own are not counted)."""
    near = np.flatnonzero(score.astype(np.int64) >= best_score[read] - delta)
    near, cluster = places.clusters(read, near)
    new = np.r_[True, cluster[1:] != cluster[:-1]] if len(near) else np.zeros(0, dtype=bool)
    alignments = np.bincount(read[near][new], minlength=count) if len(near) else np.zeros(count, dtype=np.int64)
    return np.maximum(alignments - 1, 0)  # the best is one of them


@dataclass
class Scored:
    """A chunk's candidate windows with their Smith-Waterman results (sorted by read), and each
    read's best window (-1: none), its score and the best score among its other alignments."""

    windows: Windows
    score: np.ndarray  # int64: the kernel's score less both clip bonuses (see Extender.score)
    read_end: np.ndarray  # int32: exclusive end of the best alignment in the read (its strand)
    window_end: np.ndarray  # int32: exclusive end of the best alignment in the window
    best: np.ndarray
    best_score: np.ndarray
    second_score: np.ndarray
    suboptimal: np.ndarray  # other alignments scoring within Extender.delta of the best (bwa's sub_n)
    match: int = 1  # the match score, for the windows' places
    _places: Places | None = field(default=None, repr=False, compare=False)

    def text_end(self) -> np.ndarray:
        """Exclusive text position where each window's best alignment ends."""
        return self.windows.start + self.window_end

    def places(self) -> Places:
        """Each window's best alignment, estimated (:meth:`Places.estimated`); computed once
        (a Scored is never changed in place: Extender.add makes a new one)."""
        if self._places is None:
            self._places = Places.estimated(self.windows.reverse, self.score, self.read_end, self.text_end(), self.match)
        return self._places


class Extender:
    """The extend stage of one chunk: scores windows, ranks them, traces the chosen ones.

    Reads are sent to the device once (every call below reads them there); windows are (text
    position, length), and the kernels read their bases from the packed text on the device."""

    def __init__(self, device_text, index, smith_waterman, chunk, scoring, options: AlignOptions, kernels=None):
        self.device_text, self.index, self.smith_waterman = device_text, index, smith_waterman
        # kernels: the stage's ExtendKernels (bowmap.align.extend.stage), or None: all by NumPy
        self.tandem_kernel = None if kernels is None else kernels.tandem  # a TandemKernel, or None: tandem scores by NumPy
        rank_kernel = None if kernels is None else kernels.ranking  # a RankKernel, or None: ranking by NumPy (_ranked)
        self.chunk, self.scoring, self.options = chunk, scoring, options
        self.count = chunk.count
        self.lengths = np.diff(chunk.offsets)
        self.read_codes = smith_waterman.send_reads(chunk.both_codes)  # once for every call below
        self.ranking = None if rank_kernel is None else (rank_kernel, self.read_codes)
        self.read_offsets = np.concatenate((chunk.offsets[:-1], chunk.offsets[:-1] + len(chunk.codes)))
        self.read_lengths = np.concatenate((self.lengths, self.lengths))
        # Alignments this close to a read's best count against its MAPQ (bwa's sub_n: the cost
        # of one mismatch or one 1-base gap).
        self.delta = max(scoring.match + scoring.mismatch, scoring.gap_open + scoring.gap_extend)

    def _sequences(self, windows: Windows):
        return self.read_codes, self.read_offsets, self.read_lengths, self.device_text, windows.start, windows.end - windows.start

    def score(self, windows: Windows):
        """Best score, read end and window end of each of ``windows``. The score is the
        kernel's (the alignment's own plus the clip bonus of each read end it reaches) less both
        bonuses: an alignment's score less the clip penalty of each end it clips, as BWA-MEM
        weighs its candidates; a read's whole-length alignment keeps its own score."""
        pairs = (windows.read + self.count * windows.reverse, np.arange(len(windows)))
        score, read_end, window_end = self.smith_waterman.best(*self._sequences(windows), *pairs)
        return score - 2 * self.scoring.clip_bonus, read_end, window_end

    def scored(self, windows: Windows, rescuer=None) -> Scored:
        """Every window scored and ranked; with a ``rescuer``, poor reads' dense-seed windows too."""
        score, read_end, window_end = self.score(windows)
        ranked = _ranked(self.chunk, windows, score, read_end, window_end, self.count, self.delta, self.scoring.match, self.ranking)
        scored = Scored(windows, score, read_end, window_end, *ranked[:4], match=self.scoring.match, _places=ranked[4])
        seed_options = self.options.seed
        if rescuer is not None and seed_options.rescue_interval:
            scoring, lengths = self.scoring, self.lengths
            poor_below = lengths * scoring.match - seed_options.rescue_mismatches * (scoring.match + scoring.mismatch)
            poor = (scored.best_score < poor_below) & (lengths >= seed_options.seed_length)
            if poor.any():
                chunk = self.chunk
                found = rescuer.rescue_windows(chunk.codes, chunk.reverse_codes, chunk.offsets, poor, chunk.both_codes, self.read_codes)
                scored = self.add(scored, new_windows(windows, found, poor, self.index), poor)
        return scored

    def add(self, scored: Scored, extra: Windows, reads: np.ndarray) -> Scored:
        """``scored`` with the ``extra`` windows (of the reads in the mask ``reads``) scored and
        put after the others; only those reads are ranked again (over their old and new
        windows, grouped by read): ranking the whole chunk again took a tenth of a worker's
        host time."""
        if len(extra) == 0:
            return scored
        windows = scored.windows
        extra_score, extra_read_end, extra_end = self.score(extra)
        ranked_again = np.concatenate((np.flatnonzero(reads[windows.read]), len(windows) + np.arange(len(extra))))
        windows = Windows(*(np.concatenate((getattr(windows, name), getattr(extra, name))) for name in Windows.FIELDS))
        score = np.concatenate((scored.score, extra_score))
        read_end = np.concatenate((scored.read_end, extra_read_end))
        window_end = np.concatenate((scored.window_end, extra_end))
        ranked_again = ranked_again[np.argsort(windows.read[ranked_again], kind="stable")]
        subset = Windows(*(getattr(windows, name)[ranked_again] for name in Windows.FIELDS))
        again = _ranked(self.chunk, subset, score[ranked_again], read_end[ranked_again], window_end[ranked_again], self.count, self.delta,
                        self.scoring.match, self.ranking)
        best, best_score, second_score, suboptimal = (array.copy() for array in (scored.best, scored.best_score, scored.second_score, scored.suboptimal))
        best[reads] = np.where(again[0][reads] >= 0, ranked_again[np.maximum(again[0][reads], 0)], -1)
        best_score[reads], second_score[reads], suboptimal[reads] = again[1][reads], again[2][reads], again[3][reads]
        places = None  # made when first asked for, as for any Scored
        if scored._places is not None:
            # The old windows' places were made already (pair choice asks for them before its
            # rescue adds windows): only the new windows' are, a row's place being its own.
            extra_places = Places.estimated(extra.reverse, extra_score, extra_read_end, extra.start + extra_end, self.scoring.match)
            places = Places(*(np.concatenate((getattr(scored._places, name), getattr(extra_places, name))) for name in PLACE_FIELDS))
        return Scored(windows, score, read_end, window_end, best, best_score, second_score, suboptimal, self.scoring.match, places)

    def tandem(self, scored: Scored, chosen_window: np.ndarray) -> np.ndarray:
        """Each read's tandem score (bowmap.align.extend.tandem) for its window ``chosen_window`` (-1:
        none, NO_SCORE)."""
        windows, index = scored.windows, self.index
        chosen = np.flatnonzero(chosen_window >= 0)
        tandem = np.full(self.count, NO_SCORE, dtype=np.int64)
        if len(chosen) == 0:
            return tandem
        window = chosen_window[chosen]
        text_end = windows.start[window] + scored.window_end[window]
        contig, _ = index.to_contig(np.maximum(text_end - 1, 0))
        contig_start = index.contig_starts[contig]
        read_starts = self.read_offsets[chosen + self.count * windows.reverse[window]]
        contig_end = contig_start + index.contig_lengths[contig]
        if self.tandem_kernel is not None:
            tandem[chosen] = self.tandem_kernel.scores(self.read_codes, read_starts, self.lengths[chosen], text_end, scored.read_end[window],
                                                       contig_start, contig_end, self.scoring)
        else:
            tandem[chosen] = tandem_scores(self.chunk.both_codes, read_starts, self.lengths[chosen], text_end, scored.read_end[window],
                                           contig_start, contig_end, index, self.scoring)
        return tandem

    def repeat_share(self, scored: Scored, chosen_window: np.ndarray, tandem: np.ndarray) -> np.ndarray:
        """Each read's repetitive share for its MAPQ (mapping_quality's ``repetitive``): its
        periodic_share on the aligned strand to the power REPEAT_SHARE_POWER, for reads whose
        alignment ends in a microsatellite (a ``tandem`` score: its last 32 bases in the
        reference's orientation repeat); 0 for the others, which are not tested. The gate is
        one-sided: a read whose microsatellite lies only at its start keeps its MAPQ whole
        though up to (L - 32) / L of it repeats (s^4 up to 0.38 at 150 bases), where its mirror
        image is scaled. Testing the first 32 bases too would cost a periodicity test of every
        mapped read; not done (not measured)."""
        share = np.zeros(self.count, dtype=np.float64)
        reads = np.flatnonzero((chosen_window >= 0) & (tandem != NO_SCORE))
        if len(reads):
            reverse = scored.windows.reverse[chosen_window[reads]]
            share[reads] = periodic_share(self.chunk.both_codes, self.read_offsets[reads + self.count * reverse], self.lengths[reads])
        return share**REPEAT_SHARE_POWER

    def minimum(self) -> np.ndarray:
        return minimum_scores(self.lengths, self.scoring, self.options.end_to_end, self.options.min_score)

    def trace(self, scored: Scored, chosen: np.ndarray) -> Traced:
        """The best alignment of each of the windows ``chosen`` (indexes into ``scored``), traced
        back on the device: its own score (AS), read interval, place and CIGAR (see :class:`Traced`).
        A window is traced only up to the column its best alignment ends at (``scored.window_end``;
        the whole window where it is 0, no column): the columns past it change none of the
        cells before, and the traceback takes the same best cell (the largest score, ties to the
        smallest column), so the same alignment, without sweeping the window's margin past it."""
        windows = scored.windows
        chosen = np.asarray(chosen, dtype=np.int64)
        start, end = windows.start[chosen], scored.window_end[chosen].astype(np.int64)
        lengths = np.where(end > 0, end, windows.end[chosen] - start)
        score, read_start, read_end, window_start, _, cigar_ops, cigar_starts, cigar_lengths = self.smith_waterman.traceback(
            self.read_codes, self.read_offsets, self.read_lengths, self.device_text, start, lengths,
            (windows.read + self.count * windows.reverse)[chosen], np.arange(len(chosen)),
        )
        from bowmap.align.extend.smith_waterman import cigar_scores

        reads = windows.read[chosen]
        score = cigar_scores(self.scoring, score, read_start, read_end, self.lengths[reads])
        contig, position = self.index.to_contig(windows.start[chosen] + window_start)
        return Traced(np.asarray(chosen, dtype=np.int64), score, read_start.astype(np.int64), read_end.astype(np.int64),
                      contig.astype(np.int32), position, cigar_ops, cigar_starts.astype(np.int64), cigar_lengths.astype(np.int64))

    def may_report(self, scores, reads=None) -> np.ndarray:
        """Whether alignments of ``reads`` (None: every read, in order) chosen by ``scores`` may
        reach the reporting minimum: a score plus both clip bonuses bounds its AS from above."""
        bound = scores + 2 * self.scoring.clip_bonus
        minimum = self.minimum()
        return (bound > 0) & (bound >= (minimum if reads is None else minimum[reads]))

    def candidates_mask(self, chosen_window, compared_score) -> np.ndarray:
        """Reads whose chosen window may map (see :meth:`primaries`), before any traceback."""
        return (chosen_window >= 0) & self.may_report(compared_score)

    def primaries(self, scored: Scored, chosen_window, compared_score, extra=None):
        """Which reads map (a mask) and their chosen windows traced (in read order). A read maps
        when its alignment's own score (AS) reaches the minimum, as BWA-MEM's -T;
        ``compared_score`` (the score it was chosen by, see :meth:`score`) + 2 clip bonuses
        bounds AS from above, and the traceback gives it exactly. ``extra``: more windows
        (indexes) traced in the same launch, returned third (one traceback a chunk, not two)."""
        minimum = self.minimum()
        mapped = self.candidates_mask(chosen_window, compared_score)
        extra = np.zeros(0, dtype=np.int64) if extra is None else np.asarray(extra, dtype=np.int64)
        both = self.trace(scored, np.concatenate((chosen_window[mapped].astype(np.int64), extra)))
        primaries = int(mapped.sum())
        traced, traced_extra = both.subset(np.arange(primaries)), both.subset(np.arange(primaries, primaries + len(extra)))
        kept = (traced.score > 0) & (traced.score >= minimum[mapped])
        if not kept.all():  # a clipped alignment whose bonus carried it over the minimum: unmapped
            mapped[np.flatnonzero(mapped)[~kept]] = False
            traced = traced.subset(kept)
        return mapped, traced, traced_extra

    def alignments(self, scored: Scored, chosen_window, compared_score, second_score, suboptimal, mapq=None, proper=None,
                   primaries: tuple[np.ndarray, Traced] | None = None):
        """ChunkAlignments (one row a read) of the windows ``chosen_window`` (one a read, -1:
        none), traced back on the device (or given, ``primaries``: see :meth:`primaries`). MAPQ
        weighs ``compared_score`` against ``second_score`` (both less the clip penalty of each
        end they clip: with AS in place of the best, a clipped wrong hit over a clipped second
        got a higher MAPQ than the scores that chose it support), unless ``mapq`` is given."""
        from bowmap.align.extend.mapq import mapping_quality
        from bowmap.align.output.sam import NO_SCORE, ChunkAlignments

        count, lengths, windows = self.count, self.lengths, scored.windows
        mapped, traced = primaries if primaries is not None else self.primaries(scored, chosen_window, compared_score)[:2]
        position = np.zeros(count, dtype=np.int64)
        contig = np.zeros(count, dtype=np.int32)
        contig[mapped] = traced.contig
        position[mapped] = traced.position
        cigar_lengths = np.zeros(count, dtype=np.int64)
        cigar_lengths[mapped] = traced.cigar_lengths
        cigar_offsets = np.concatenate(([0], np.cumsum(cigar_lengths)))
        # The traceback's operations are in the order of the chosen reads, which is input order.
        score_out = np.zeros(count, dtype=np.int32)
        score_out[mapped] = traced.score
        second = np.where(mapped, second_score, NO_SCORE).astype(np.int32)
        if mapq is None:
            chosen = np.where(mapped, chosen_window, -1)
            tandem = self.tandem(scored, chosen)
            mapq = mapping_quality(np.where(mapped, compared_score, 0), second, lengths, self.scoring, suboptimal, tandem,
                                   self.repeat_share(scored, chosen, tandem))
        return ChunkAlignments(
            mapped=mapped,
            reverse=np.where(mapped, windows.reverse[np.maximum(chosen_window, 0)], False) if len(windows) else mapped.copy(),
            contig=contig,
            position=position,
            score=score_out,
            second_score=second,
            cigar_ops=traced.ops(),
            cigar_offsets=cigar_offsets,
            mapq=np.where(mapped, mapq, 0).astype(np.uint8),
            proper=None if proper is None else proper & mapped & mapped[np.arange(count) ^ 1],
        )


@dataclass
class Traced:
    """Tracebacks of some windows (:meth:`Extender.trace`), one row each: the window, the
    alignment's own score (AS), its read interval [read_start, read_end) on the aligned strand,
    its contig and 0-based position there, and its CIGAR, ``cigar_lengths`` operations from
    ``cigar_starts`` of ``cigar_ops`` (BAM encoding)."""

    window: np.ndarray
    score: np.ndarray
    read_start: np.ndarray
    read_end: np.ndarray
    contig: np.ndarray
    position: np.ndarray
    cigar_ops: np.ndarray
    cigar_starts: np.ndarray
    cigar_lengths: np.ndarray

    def subset(self, keep: np.ndarray) -> Traced:
        """The rows ``keep`` (a mask or indexes), CIGARs included."""
        return Traced(*(getattr(self, name)[keep] for name in ("window", "score", "read_start", "read_end", "contig", "position")),
                      self.cigar_ops, self.cigar_starts[keep], self.cigar_lengths[keep])

    def ops(self) -> np.ndarray:
        """The rows' CIGAR operations, row after row."""
        if len(self.cigar_ops) == int(self.cigar_lengths.sum()) and (self.cigar_starts == np.cumsum(self.cigar_lengths) - self.cigar_lengths).all():
            return self.cigar_ops  # the traceback's own rows, all of them
        return self.cigar_ops[segment_ranges(self.cigar_starts, self.cigar_lengths)]


def _ranked(chunk, windows: Windows, score, read_end, window_end, count: int, delta: int, match: int, on_device=None):
    """best_two over a chunk's scored windows (sorted by read), ties broken by tie_breakers, and
    each read's sub-optimal alignment count (suboptimal_counts within ``delta``); then the
    windows' places (Scored.places; None where ranked ``on_device``). ``on_device``: (a
    :class:`bowmap.align.extend.ranking.RankKernel`, the chunk's read codes on its device), which
    ranks there instead (this is its reference)."""
    if on_device is not None:
        kernel, read_codes = on_device
        ranked = kernel.ranked(read_codes, chunk.offsets, windows.read, windows.start, windows.reverse, score, read_end, window_end, count,
                               delta, match)
        return (*ranked, None)
    tie_breaker = tie_breakers(chunk.codes, chunk.offsets, windows.read, windows.start, score)
    places = Places.estimated(windows.reverse, score, read_end, windows.start + window_end, match)
    best, best_score, second_score = best_two(windows.read, score, count, tie_breaker, places)
    return best, best_score, second_score, suboptimal_counts(windows.read, score, count, best_score, delta, places), places


def new_windows(windows: Windows, extra: Windows, rescued: np.ndarray, index) -> Windows:
    """The windows of ``extra`` (windows of the reads in the mask ``rescued``) that ``windows``
    does not hold already (same read, strand, start and end): scoring them again would only cost
    time. Rows are matched by sorting both sets together (no packed keys, which overflowed on
    large chunks of a large genome and then let repeats through)."""
    old = Windows(*(getattr(windows, name)[rescued[windows.read]] for name in Windows.FIELDS))  # the few rescued reads'
    if len(extra) == 0 or len(old) == 0:
        return extra
    columns = [np.concatenate((getattr(old, name), getattr(extra, name))).astype(np.int64) for name in ("read", "reverse", "start", "end")]
    is_old = np.r_[np.ones(len(old), dtype=bool), np.zeros(len(extra), dtype=bool)]
    order = lexsort((~is_old, *columns[::-1]))  # by read, strand, start, end; old rows first
    same = np.ones(len(order) - 1, dtype=bool)
    for column in columns:
        same &= column[order][1:] == column[order][:-1]
    # A row equal to the one before it joins that run; a new row is fresh when its run has no old row.
    run = np.cumsum(np.r_[True, ~same]) - 1
    has_old = np.zeros(run[-1] + 1, dtype=bool)
    has_old[run[is_old[order]]] = True
    fresh = np.zeros(len(order), dtype=bool)
    fresh[order] = ~has_old[run]
    return Windows(*(getattr(extra, name)[fresh[len(old):]] for name in Windows.FIELDS))
