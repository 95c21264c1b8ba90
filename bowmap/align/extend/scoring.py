"""Alignment scores (:class:`Scoring`): the parameters of the Smith-Waterman kernels and of
their NumPy reference, with the bounds that choose the kernels' score widths."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SCORE_LIMIT = 1000  # each scoring parameter: keeps every sum far from int32 overflow
SHORT_SCORE_LIMIT = 30000  # |H|, |F| below this: the boundary row is stored as 16-bit pairs
PACKED_MARGIN = 2700  # gap and substitution costs below this keep packed lanes inside int16


@dataclass(frozen=True)
class Scoring:
    """Alignment scores, as positive magnitudes: a match adds ``match``, a mismatch subtracts
    ``mismatch``, a base against N (code 4, either side) subtracts ``ambiguous``, and a gap of
    k bases subtracts ``gap_open + k * gap_extend``.

    The defaults are BWA-MEM's (match 1, mismatch 4, gap open 6, gap extend 1, N -1): the scores
    the SAM consumers of short-read alignments (MAPQ calibration, variant callers' AS/XS use) are
    used to, and a sensible choice for reads with about 1% substitution errors and rarer indels:
    a mismatch costs 4 matches, so an alignment extends over a mismatch only when at least 4
    matching bases follow, and a 1-base indel (7) costs a little less than 2 mismatches, so
    two nearby mismatches are not preferred to one indel that explains them. N costs 1 as in
    BWA: uncertain, not evidence against the position.
    """

    match: int = 1
    mismatch: int = 4
    gap_open: int = 6
    gap_extend: int = 1
    ambiguous: int = 1
    end_to_end: bool = False  # False: local, soft clips at both ends; True: the whole read ("glocal")
    # Local mode: what soft clipping an end of the read costs when the alignment is chosen
    # (BWA-MEM's -L 5,5): an alignment reaching the read's first (last) base gains this much
    # over one that clips it. Reported scores (AS) stay the CIGAR's own score.
    clip_penalty: int = 5

    def __post_init__(self):
        for name in ("match", "mismatch", "gap_open", "gap_extend", "ambiguous", "clip_penalty"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or not 0 <= value <= SCORE_LIMIT:
                raise ValueError(f"scoring {name} must be an integer in 0..{SCORE_LIMIT}, not {value!r}")
        if self.match < 1:
            raise ValueError("scoring match must be at least 1")
        if self.gap_open + self.gap_extend < 1:
            raise ValueError("a 1-base gap must cost something: gap_open + gap_extend >= 1")

    def build_options(self) -> tuple[str, ...]:
        return (
            f"-DMATCH={self.match}", f"-DMISMATCH={self.mismatch}", f"-DAMBIGUOUS={self.ambiguous}",
            f"-DGAP_OPEN={self.gap_open}", f"-DGAP_EXTEND={self.gap_extend}", f"-DEND_TO_END={int(self.end_to_end)}",
            f"-DCLIP_BONUS={self.clip_bonus}",
        )

    @property
    def clip_bonus(self) -> int:
        """The start and end bonus of the local DP: ``clip_penalty`` in local mode, 0 end-to-end."""
        return 0 if self.end_to_end else self.clip_penalty

    def needs_wide_scores(self, longest_read: int, longest_window: int) -> bool:
        """Whether an H or F value of such pairs can leave (-SHORT_SCORE_LIMIT, SHORT_SCORE_LIMIT).

        Upper bound: match * min(m, n). Lower bound: local scores are >= 0 and F >= -(open +
        extend); end-to-end H[i][j] >= H[i][0] - (open + j * extend) = -(2 open + (i + j) extend),
        and F one gap opening below that."""
        high = self.match * min(longest_read, longest_window) + 2 * self.clip_bonus
        low = 3 * (self.gap_open + self.gap_extend) + (longest_read + longest_window) * self.gap_extend
        return max(high, low) >= SHORT_SCORE_LIMIT

    def fits_packed_lanes(self, longest_read: int, longest_window: int) -> bool:
        """Whether the two-pairs-a-work-item score kernel (``sw_score_twins``) may run such
        pairs: every H and F within SHORT_SCORE_LIMIT (so every intermediate sum, at most
        a gap cost or a substitution below or above them, stays inside a signed 16-bit lane),
        and each score plus the gap-opening cost fits the kernel's signed-byte look-up words."""
        open_extend = self.gap_open + self.gap_extend
        penalty = max(self.mismatch, self.ambiguous)
        return (
            not self.needs_wide_scores(longest_read, longest_window)
            and self.gap_open + 2 * self.gap_extend < PACKED_MARGIN
            and penalty < PACKED_MARGIN
            and -128 <= open_extend - penalty
            and self.match + open_extend <= 127
        )
