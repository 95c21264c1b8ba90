"""Mapping quality (MAPQ) from the best and second-best alignment scores of each read.

The formula is BWA-MEM's current one (``mem_approx_mapq_se`` of bwa 0.7.17, its default ``-Q 50``
branch), with the read length in place of the alignment's span:

* ``a`` = match bonus, ``b`` = mismatch penalty (``scoring.match``, ``scoring.mismatch``, both > 0);
  ``L`` = read length; ``S1`` = best score; ``S2`` = second-best score (another alignment, not the
  best found again through an overlapping window); ``n`` = other alignments scoring within
  ``max(a + b, gap open + extend)`` of the best (bwa's ``sub_n``).
* ``sub`` = ``max(S2, T, MIN_SEED_BASES * a)``: a second hit is never assumed worse than a bare
  exact seed of 19 bases, as bwa; ``T`` is the read's tandem score (bwa's ``csub``: the best
  alignment slid by a microsatellite's unit, see bowmap.align.extend.tandem); ``MAPQ = 0`` when
  ``S1 <= 0`` or ``sub >= S1``.
* identity ``i = 1 - (L a - S1) / ((a + b) L)``; ``t = i^2`` for reads under 50 bases, else
  ``t = i^2 ln(50) / ln(L)``;
* ``q = int(6.02 (S1 - sub) / a * t^2 + 0.499)``, less ``int(4.343 ln(n + 1) + 0.499)`` when
  ``n > 0``; clipped to 0..60.

bwa then scales by ``1 - frac_rep`` (the share of the read covered by seeds occurring more than
500 times), last: ``q = int(q (1 - frac_rep) + 0.499)``. bowmap does the same with ``repetitive``
in its place (bowmap.align.extend.tandem's ``periodic_share``, to the power REPEAT_SHARE_POWER, for
reads whose alignment ends in a microsatellite, Extender.repeat_share): the share of the read in
microsatellites, where every seed is that repetitive; seeds of interspersed repeats are not
counted (their reads' MAPQ holds as it is, see the README). For single reads and mates left
unpaired; a pair's MAPQ is scaled by the mean of its mates' shares instead
(bowmap.align.extend.pairs.pair_quality). MAPQ 255 ("not available") is never produced.
"""

from __future__ import annotations

import numpy as np

# A second-best hit is assumed at least as good as an exact seed of this many bases (bwa's -k 19).
MIN_SEED_BASES = 19
MAXIMUM_MAPQ = 60
# Reads at least this long have their MAPQ scaled by ln(50) / ln(L) (bwa's mapQ_coef_len).
LENGTH_COEFFICIENT = 50
# Sentinel for "no second-best score" in the int32 score arrays.
NO_SCORE = np.iinfo(np.int32).min


def mapping_quality(score, second_score, read_lengths, scoring, suboptimal=None, tandem=None, repetitive=None) -> np.ndarray:
    """MAPQ (uint8[n], 0..60) of reads with best ``score`` and ``second_score`` (``NO_SCORE`` when
    none), ``read_lengths`` in bases, ``suboptimal`` other alignments near the best (None: 0),
    ``tandem`` scores (None or NO_SCORE: none) and ``repetitive`` shares (bwa's frac_rep, 0..1;
    None: 0), under ``scoring`` (integer attributes ``match`` and ``mismatch``, both positive)."""
    match = float(scoring.match)
    mismatch = float(scoring.mismatch)
    if match <= 0 or mismatch <= 0:
        raise ValueError(f"MAPQ needs a positive match bonus and mismatch penalty, not {match} and {mismatch}")
    best = np.asarray(score, dtype=np.int64).astype(np.float64)
    second = np.asarray(second_score, dtype=np.int64)
    lengths = np.maximum(np.asarray(read_lengths, dtype=np.int64), 1).astype(np.float64)
    sub = np.maximum(np.where(second == NO_SCORE, -np.inf, second.astype(np.float64)), MIN_SEED_BASES * match)
    if tandem is not None:
        tandem = np.asarray(tandem, dtype=np.int64)
        sub = np.maximum(sub, np.where(tandem == NO_SCORE, -np.inf, tandem.astype(np.float64)))
    usable = (best > 0) & (sub < best)
    identity = 1.0 - (lengths * match - best) / ((match + mismatch) * lengths)
    scale = np.where(lengths < LENGTH_COEFFICIENT, 1.0, np.log(LENGTH_COEFFICIENT) / np.log(np.maximum(lengths, 2.0))) * identity * identity
    quality = np.trunc(6.02 * (best - sub) / match * scale * scale + 0.499)
    if suboptimal is not None:
        quality -= suboptimal_penalty(suboptimal)
    quality = np.clip(np.where(usable, quality, 0.0), 0, MAXIMUM_MAPQ)
    if repetitive is not None:
        quality = repeat_scaled(quality, repetitive)
    return quality.astype(np.uint8)


def suboptimal_penalty(suboptimal) -> np.ndarray:
    """What ``n`` other alignments near the best take off a MAPQ (float64): ``int(4.343 ln(n +
    1) + 0.499)`` when n > 0, else 0 (bwa's, for single reads and pairs alike)."""
    others = np.asarray(suboptimal, dtype=np.float64)
    return np.where(others > 0, np.trunc(4.343 * np.log(others + 1.0) + 0.499), 0.0)


def repeat_scaled(quality, repetitive) -> np.ndarray:
    """MAPQs scaled by ``1 - repetitive`` (shares clipped to 0..1), bwa's last step with its
    frac_rep: ``int(q (1 - r) + 0.499)`` (float64)."""
    return np.trunc(np.asarray(quality) * (1.0 - np.clip(np.asarray(repetitive, dtype=np.float64), 0.0, 1.0)) + 0.499)
