"""Tandem sub-scores: how well a read's alignment holds when slid by a few bases along a
microsatellite (bwa's ``csub``, the "SW score of a tandem hit").

A read inside a short tandem repeat ((CA)n, a poly-T run) aligns about as well one unit to the
left or right as where it was placed: its place is not known, whatever its score. The windows
do not show this (the shifted alignments lie in the same window, and Smith-Waterman reports one
best), so it is measured here for each read's chosen alignment and weighed in its MAPQ as a
second-best score (``mapping_quality``'s ``tandem``, as bwa's ``sub = max(sub, csub)``).

For the alignment ending at read base ``read_end`` and text position ``text_end``, its diagonal
is ``text_end - read_end`` (the text position of the read's first base). Its tandem score is the
best ungapped local alignment score (match +a, mismatch or ambiguous base -b) of the whole
read on the diagonals 1..MAX_PERIOD bases either side, inside the alignment's contig. Only reads
whose last SAMPLE aligned bases repeat with a period of at most MAX_PERIOD (see :func:`periodic`)
are scored; the others get NO_SCORE: a read that does not repeat itself cannot align well
shifted by less than a seed. Cost: a few integer operations a read and period on its packed
sample (about 0.4 us a read here), then the rare candidates' 2 x MAX_PERIOD diagonals.

Limits: substitutions only along the shifted diagonals (an indel in the read makes its shifted
alignment look shorter than Smith-Waterman would find), and units of at most MAX_PERIOD bases
(longer minisatellite units are left to the windows).

:func:`tandem_scores` is the reference of ``opencl/align/tandem.cl`` (:class:`TandemKernel`),
which scores a chunk's reads on the device from the read codes and the packed text already there:
with 15 host workers the cores bind a run, and these scores took 6-8% of a worker's time on a
human-like genome (session 18 and 20 profiles).
"""

from __future__ import annotations

import numpy as np

from bowmap.align.extend.mapq import NO_SCORE
from bowmap.runtime.arrays import windows as row_windows

# Microsatellites: repeat units of 1 to 6 bases.
MAX_PERIOD = 6
# Bases at the end of each alignment tested for a period, and mismatches allowed among them
# (one sequencing error spoils two comparisons).
SAMPLE = 32
SAMPLE_MISMATCHES = 4
# A read's periodic share (periodic_share) is raised to this power before it scales the MAPQ as
# bwa's frac_rep does: a read wholly inside a microsatellite gets 0, one with a unique flank of
# a sample or two keeps most of its MAPQ (its flank's seeds found its place). On a human-like
# genome (bench/human_genome.py, 0.3 Gbp, 100,000 reads) the power 4 brought the wrong reads at
# MAPQ >= 20 from 55 to 14 (bwa mem: 11) and kept 97.45% of the reads at MAPQ >= 20 (bwa mem:
# 97.44%); the plain share (power 1) cost another 0.9% of them; E. coli, yeast and chr20 barely
# change (chr20, mason: 98.47% at MAPQ 60 rather than 98.53%, none wrong).
REPEAT_SHARE_POWER = 4


def pack_sample(rows: np.ndarray) -> np.ndarray:
    """Rows of SAMPLE (32) codes -> uint64, code j (taken modulo 4) in bits 2j, 2j + 1: each
    eight-byte word's 2-bit fields gathered by three shift-and-mask steps, not a loop over bases."""
    words = (np.ascontiguousarray(rows) & 3).view(np.uint64)  # byte k of a word at bits 8k
    words = (words | (words >> np.uint64(6))) & np.uint64(0x000F000F000F000F)
    words = (words | (words >> np.uint64(12))) & np.uint64(0x000000FF000000FF)
    words = (words | (words >> np.uint64(24))) & np.uint64(0xFFFF)
    return words[:, 0] | (words[:, 1] << np.uint64(16)) | (words[:, 2] << np.uint64(32)) | (words[:, 3] << np.uint64(48))


def periodic(codes: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Whether the SAMPLE bases before each of ``ends`` (indexes into ``codes``, each at least
    SAMPLE in) repeat with some period p of 1..MAX_PERIOD: all but SAMPLE_MISMATCHES of their
    bases after the first p equal to the base p before (codes modulo 4: an N compares as A).
    Mask. On packed samples, a few integer operations a read for each period."""
    packed = pack_sample(row_windows(codes, np.asarray(ends, dtype=np.int64) - SAMPLE, SAMPLE))
    found = np.zeros(len(packed), dtype=bool)
    for period in range(1, MAX_PERIOD + 1):
        differ = packed ^ (packed << np.uint64(2 * period))  # field j: base j against base j - period
        same = ~(differ | (differ >> np.uint64(1))) & np.uint64(0x5555555555555555) & ~np.uint64((1 << (2 * period)) - 1)
        found |= np.bitwise_count(same) >= SAMPLE - period - SAMPLE_MISMATCHES
    return found


def periodic_share(read_codes: np.ndarray, read_starts, read_lengths) -> np.ndarray:
    """Share (float64, 0..1) of each read's bases that lie in a SAMPLE-base window repeating
    with a period of 1..MAX_PERIOD (:func:`periodic`): windows end every SAMPLE bases and one
    ends at the read's last base. A read shorter than SAMPLE has 0. Reads are
    ``read_codes[read_starts[i] : + read_lengths[i]]``.

    Such a read's seeds all occur thousands of times in a large genome and its windows (at most
    ``windows_per_read``) hold a few of the genome's arrays of its unit, so its second best
    says little: bwa scales its MAPQ by 1 - frac_rep (the share of the read under seeds
    occurring over 500 times), this share's stand-in (see mapping_quality's ``repetitive``)."""
    read_starts = np.asarray(read_starts, dtype=np.int64)
    read_lengths = np.asarray(read_lengths, dtype=np.int64)
    share = np.zeros(len(read_starts), dtype=np.float64)
    full = read_lengths // SAMPLE  # whole windows [k SAMPLE, (k + 1) SAMPLE)
    tail = read_lengths % SAMPLE  # bases past them: one more window, ending at the read's end
    has = np.flatnonzero(full > 0)
    if len(has) == 0:
        return share
    windows = full[has] + (tail[has] > 0)
    owner = np.repeat(has, windows)
    rank = np.arange(len(owner)) - np.repeat(np.cumsum(windows) - windows, windows)
    ends = np.minimum((rank + 1) * SAMPLE, read_lengths[owner])
    repeating = periodic(read_codes, read_starts[owner] + ends)
    last_full = rank == full[owner] - 1
    is_tail = rank == full[owner]
    # The tail window overlaps the last whole one: it adds only its own bases where that one repeats.
    after_repeating_full = np.zeros(len(owner), dtype=bool)
    after_repeating_full[1:] = is_tail[1:] & repeating[:-1] & last_full[:-1]
    covered = np.where(repeating, np.where(is_tail, np.where(after_repeating_full, tail[owner], SAMPLE), SAMPLE), 0)
    share[has] = np.bincount(owner, weights=covered, minlength=len(share))[has] / read_lengths[has]
    return share


def best_local(step_scores: np.ndarray) -> np.ndarray:
    """Best sum of a run of consecutive columns in each row (0 for none): the best ungapped local
    alignment score of each row of +a/-b steps (int64)."""
    prefix = np.zeros((step_scores.shape[0], step_scores.shape[1] + 1), dtype=np.int64)
    np.cumsum(step_scores, axis=1, out=prefix[:, 1:])
    lowest = np.minimum.accumulate(prefix[:, :-1], axis=1)
    return np.maximum((prefix[:, 1:] - lowest).max(axis=1, initial=0), 0)


def tandem_scores(read_codes, read_starts, read_lengths, text_end, read_end, contig_start, contig_end, reference, scoring) -> np.ndarray:
    """Tandem score (int64, NO_SCORE when the read is not scored, see the module docstring) of
    alignments of reads ``read_codes[read_starts[i] : + read_lengths[i]]`` (on the aligned strand)
    ending at read base ``read_end`` and text position ``text_end``, in the contig
    [contig_start, contig_end) of the text that ``reference.spans(starts, lengths)`` reads."""
    read_starts, read_lengths, text_end, read_end, contig_start, contig_end = (
        np.asarray(values, dtype=np.int64) for values in (read_starts, read_lengths, text_end, read_end, contig_start, contig_end))
    scores = np.full(len(read_starts), NO_SCORE, dtype=np.int64)
    testable = np.flatnonzero(read_end >= SAMPLE)
    rows = testable[periodic(read_codes, read_starts[testable] + read_end[testable])]
    if len(rows) == 0:
        return scores
    width = int(read_lengths[rows].max())
    reads = row_windows(read_codes, read_starts[rows], width)
    columns = np.arange(width)
    in_read = columns < read_lengths[rows][:, None]
    # The text from MAX_PERIOD before the diagonal's first base to MAX_PERIOD past its last,
    # ambiguous (4) outside the contig.
    first = text_end[rows] - read_end[rows] - MAX_PERIOD
    span = width + 2 * MAX_PERIOD
    low = np.clip(first, contig_start[rows], contig_end[rows])
    high = np.clip(first + span, contig_start[rows], contig_end[rows])
    fetched = reference.spans(low, high - low)
    text = np.full((len(rows), span), 4, dtype=np.uint8)
    place = np.arange(span) + first[:, None]
    inside = (place >= low[:, None]) & (place < high[:, None])
    text[inside] = fetched
    best = np.zeros(len(rows), dtype=np.int64)
    for shift in (*range(-MAX_PERIOD, 0), *range(1, MAX_PERIOD + 1)):
        shifted = text[:, MAX_PERIOD + shift : MAX_PERIOD + shift + width]
        steps = np.where((reads == shifted) & (reads < 4), scoring.match, -scoring.mismatch)
        best = np.maximum(best, best_local(np.where(in_read, steps, -scoring.mismatch)))
    scores[rows] = best
    return scores


class TandemKernel:
    """``opencl/align/tandem.cl`` with its reused buffers and a queue (the extend stage's): the
    :func:`tandem_scores` of reads whose codes are on the device. Used by one thread."""

    SOURCE = "align/tandem.cl"

    def __init__(self, device, queue, text):
        import pyopencl as cl

        from bowmap.runtime.devices import ReusedBuffer, make_kernel, work_group_size

        options = (f"-DAMBIGUOUS_MASK={int(text.masked)}", f"-DMAX_PERIOD={MAX_PERIOD}", f"-DSAMPLE_MISMATCHES={SAMPLE_MISMATCHES}",
                   f"-DNO_SCORE=({NO_SCORE})")
        self._kernel = make_kernel(device.program(self.SOURCE, options), "tandem_scores")
        self._group = work_group_size(self._kernel, device)
        self.queue, self.text = queue, text
        self._inputs = [ReusedBuffer(device.context, cl.mem_flags.READ_ONLY) for _ in range(6)]
        self._scores = ReusedBuffer(device.context, cl.mem_flags.WRITE_ONLY)

    def scores(self, read_codes, read_starts, read_lengths, text_end, read_end, contig_start, contig_end, scoring) -> np.ndarray:
        """:func:`tandem_scores` of the reads at ``read_starts`` of ``read_codes`` (a
        :class:`bowmap.runtime.devices.DeviceArray` on this kernel's device), int64."""
        from bowmap.runtime.devices import read_back

        count = len(read_starts)
        if count == 0:
            return np.zeros(0, dtype=np.int64)
        arrays = [np.ascontiguousarray(values, dtype=np.uint32) for values in (read_starts, read_lengths, read_end)]
        arrays += [np.ascontiguousarray(values, dtype=np.uint64) for values in (text_end, contig_start, contig_end)]
        buffers = [staging.upload(self.queue, array) for staging, array in zip(self._inputs, arrays)]
        scores_buffer = self._scores.at_least(4 * count)
        self._kernel(self.queue, (-(-count // self._group) * self._group,), (self._group,), *buffers, read_codes.buffer, self.text.buffer,
                     self.text.ambiguous, np.uint32(count), np.int32(scoring.match), np.int32(scoring.mismatch), scores_buffer)
        scores = np.empty(count, dtype=np.int32)
        read_back(self.queue, scores, scores_buffer)
        return scores.astype(np.int64)
