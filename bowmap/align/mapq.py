"""Mapping quality (MAPQ) from the best and second-best alignment scores of each read.

The formula follows BWA-MEM's ``mem_approx_mapq_se`` with the read length standing in for the
seed coverage (bowmap keeps no per-hit seed coverage), for local alignment scores:

* ``a`` = match bonus, ``b`` = mismatch penalty (``scoring.match``, ``scoring.mismatch``, both > 0);
  ``L`` = read length in bases; ``S1`` = best score; ``S2`` = second-best score.
* ``sub`` = ``max(S2, SUBOPTIMAL_FLOOR_BASES * a)``: a second hit is never assumed to be worse than
  a bare exact seed of 20 bases (BWA uses its minimum seed length, 19), so a read with no
  second-best hit still gets a finite MAPQ that grows with its length.
* ``MAPQ = 0`` when ``S1 <= 0`` or ``sub >= S1`` (ties, and best hits no better than a seed).
* Otherwise ``q = floor(30 * (1 - sub / S1) * ln(L) + 0.499)``; with the identity
  ``i = 1 - (L * a - S1) / ((a + b) * L)`` (fraction of bases not lost to mismatches), a hit below
  95 % identity is scaled: ``q = floor(q * i * i + 0.499)``; the result is clipped to 0..60.

MAPQ 255 ("not available") is never produced.
"""

from __future__ import annotations

import numpy as np

# A second-best hit is assumed at least as good as an exact seed of this many bases.
SUBOPTIMAL_FLOOR_BASES = 20
MAXIMUM_MAPQ = 60
# Sentinel for "no second-best score" in the int32 score arrays.
NO_SCORE = np.iinfo(np.int32).min


def mapping_quality(score, second_score, read_lengths, scoring) -> np.ndarray:
    """MAPQ (uint8[n], 0..60) of reads with best ``score`` and ``second_score`` (``NO_SCORE`` when
    none), ``read_lengths`` in bases, under ``scoring`` (any object with integer attributes
    ``match`` and ``mismatch``, the match bonus and the mismatch penalty, both positive)."""
    match = float(scoring.match)
    mismatch = float(scoring.mismatch)
    if match <= 0 or mismatch <= 0:
        raise ValueError(f"MAPQ needs a positive match bonus and mismatch penalty, not {match} and {mismatch}")
    best = np.asarray(score, dtype=np.int64).astype(np.float64)
    second = np.asarray(second_score, dtype=np.int64)
    lengths = np.maximum(np.asarray(read_lengths, dtype=np.int64), 1).astype(np.float64)
    suboptimal = np.maximum(np.where(second == NO_SCORE, -np.inf, second.astype(np.float64)), SUBOPTIMAL_FLOOR_BASES * match)
    usable = (best > 0) & (suboptimal < best)
    safe_best = np.where(usable, best, 1.0)
    quality = np.floor(30.0 * (1.0 - suboptimal / safe_best) * np.log(lengths) + 0.499)
    identity = 1.0 - (lengths * match - best) / ((match + mismatch) * lengths)
    quality = np.where(identity < 0.95, np.floor(quality * identity * identity + 0.499), quality)
    quality = np.clip(np.where(usable, quality, 0.0), 0, MAXIMUM_MAPQ)
    return quality.astype(np.uint8)
