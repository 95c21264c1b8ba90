"""NumPy reference of ``opencl/modules/sw_search.cl``: local alignment scores with affine gaps
(BLAST's convention, see :mod:`bowmap.modules.sw_search.scoring`), no device involved.

:func:`scores` runs the recurrences of the kernel file's header row by row over a batch of
targets at once; within a row the gap along the target, E, is a running maximum:
E[j] = max over k < j of (H'[k] - OE - (j - 1 - k) * extend), with H' = max(0, diagonal, F)
(an E that came from E itself never wins: OE >= extend). :func:`naive_score` is the textbook
cell-by-cell DP the tests check :func:`scores` against.
"""

from __future__ import annotations

import numpy as np

from bowmap.modules.sw_search.scoring import Scoring

NEG = -(1 << 40)


def scores(query: np.ndarray, targets: list[np.ndarray], scoring: Scoring) -> np.ndarray:
    """int64[len(targets)]: the best local alignment score of ``query`` (codes) with each target
    (codes), 0 where nothing scores above 0 (an empty query or target included)."""
    count = len(targets)
    best = np.zeros(count, dtype=np.int64)
    lengths = np.array([len(target) for target in targets], dtype=np.int64)
    width = int(lengths.max()) if count else 0
    if count == 0 or width == 0 or len(query) == 0:
        return best
    padded = np.zeros((count, width), dtype=np.intp)
    valid = np.arange(width)[None, :] < lengths[:, None]
    padded[valid] = np.concatenate(targets)
    matrix = scoring.scores.astype(np.int64)
    oe, extend = scoring.open_extend, scoring.gap_extend
    ramp = np.arange(width + 1, dtype=np.int64) * extend
    previous = np.zeros((count, width + 1), dtype=np.int64)  # H of the row above, column 0 first
    f = np.full((count, width), NEG, dtype=np.int64)
    for residue in np.asarray(query, dtype=np.intp).tolist():
        f = np.maximum(previous[:, 1:] - oe, f - extend)
        before_e = np.zeros((count, width + 1), dtype=np.int64)
        before_e[:, 1:] = np.maximum(np.maximum(previous[:, :-1] + matrix[residue][padded], f), 0)
        e = np.maximum.accumulate(before_e + ramp, axis=1)[:, :-1] - oe - ramp[:-1]
        row = before_e
        row[:, 1:] = np.maximum(before_e[:, 1:], e)
        best = np.maximum(best, np.where(valid, row[:, 1:], 0).max(axis=1))
        previous = row
    return best


def naive_score(query, target, scoring: Scoring) -> int:
    """Gotoh's recurrences cell by cell in plain Python (tiny inputs only)."""
    matrix = scoring.scores
    oe, extend = scoring.open_extend, scoring.gap_extend
    m, n = len(query), len(target)
    h = [[0] * (n + 1) for _ in range(m + 1)]
    e = [[NEG] * (n + 1) for _ in range(m + 1)]
    f = [[NEG] * (n + 1) for _ in range(m + 1)]
    best = 0
    for i in range(1, m + 1):
        for j in range(1, n + 1):
            e[i][j] = max(h[i][j - 1] - oe, e[i][j - 1] - extend)
            f[i][j] = max(h[i - 1][j] - oe, f[i - 1][j] - extend)
            h[i][j] = max(0, h[i - 1][j - 1] + int(matrix[query[i - 1]][target[j - 1]]), e[i][j], f[i][j])
            best = max(best, h[i][j])
    return best


def top_hits(score_table: np.ndarray, top: int) -> tuple[np.ndarray, np.ndarray]:
    """(target indexes, scores) of the ``top`` best targets of one query's scores: by score,
    descending, then by database order."""
    order = np.lexsort((np.arange(len(score_table)), -score_table))[:top]
    return order, score_table[order]
