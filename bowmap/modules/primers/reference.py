"""Sequential references of the k-difference primer problem, and a brute-force checker.

The problem: for sequences alpha (length m) and beta (length n) and k >= 1, for each start r of
alpha (0-based) find the shortest substring alpha[r : r + length] whose edit distance
(substitutions, insertions, deletions) to every substring of beta is at least k.

Every function here returns ``(lengths, comparisons)``: ``lengths`` is int64[m], the solution's
length for each start r, 0 where r has none; ``comparisons`` is the number of symbol comparisons
of alpha against beta that the method performed (the brute force reports 0).

Both methods use what Feuser & Moreano use: with B(l) the best-match distance of alpha[r : r + l]
against beta (B(0) = 0, B never decreases and grows by at most one a symbol), let c be the largest
l with B(l) <= k - 1; if r + c < m the solution has length c + 1, else r has none and neither has
any later start (a later start's suffix is a substring of this one). So both loop r = 0, 1, ...
and stop at the first start without a solution ("optimization 2" at the level of starts).

How comparisons are counted (the kernels count the same way, so the figures are exact):
* conventional: one comparison a DP cell, alpha[r + i - 1] against beta[j - 1], for every cell
  (i, j), 1 <= i, 1 <= j <= n, of every row computed.
* Landau-Vishkin: in the extension ("slide") along a diagonal, one comparison for each matching
  pair passed plus one for the mismatch that stops it; an extension stopped by the end of alpha's
  suffix or of beta costs no extra comparison.
"""

from __future__ import annotations

import numpy as np

from bowmap.modules.edit_distance import edit_distance  # the textbook Levenshtein DP

# Below any reachable row, and safe to add 1 to: marks a diagonal not yet valid at a level.
UNREACHED = -(1 << 30)


def _codes(sequence) -> np.ndarray:
    if isinstance(sequence, (bytes, bytearray, str)):
        sequence = sequence.encode() if isinstance(sequence, str) else bytes(sequence)
        return np.frombuffer(sequence, dtype=np.uint8).astype(np.int64)
    return np.asarray(sequence).astype(np.int64)


def _check_k(k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")


# ---------------------------------------------------------------- brute force



def brute_force(alpha, beta, k: int) -> tuple[np.ndarray, int]:
    """The definition, literally: every substring of alpha starting at r, shortest first, against
    every substring of beta (the empty one included). For small inputs only (tests)."""
    _check_k(k)
    alpha, beta = bytes(_codes(alpha).astype(np.uint8)), bytes(_codes(beta).astype(np.uint8))
    substrings = {beta[s:t] for s in range(len(beta) + 1) for t in range(s, len(beta) + 1)}
    lengths = np.zeros(len(alpha), dtype=np.int64)
    for r in range(len(alpha)):
        for length in range(1, len(alpha) - r + 1):
            candidate = alpha[r : r + length]
            if min(edit_distance(candidate, other) for other in substrings) >= k:
                lengths[r] = length
                break
    return lengths, 0


# ---------------------------------------------------------------- conventional

def conventional_start(alpha_suffix: np.ndarray, beta: np.ndarray, k: int) -> tuple[int, int]:
    """(c, comparisons) for one start: D by rows, D[0][j] = 0, D[i][0] = i, stopping at the first
    row whose every entry is >= k ("optimization 1"). c = len(alpha_suffix) when no row stops it."""
    n = len(beta)
    row = np.zeros(n + 1, dtype=np.int64)
    comparisons = 0
    for i in range(1, len(alpha_suffix) + 1):
        mismatch = (beta != alpha_suffix[i - 1]).astype(np.int64)
        comparisons += n
        # Without the left neighbour: substitution/match from the diagonal, deletion from above.
        partial = np.minimum(row[:-1] + mismatch, row[1:] + 1)
        # The left neighbour (insertion) chain D[i][j] = min(partial, D[i][j-1] + 1) is a running
        # minimum of partial[j] - j, shifted back by j; D[i][0] = i starts it.
        new = np.empty(n + 1, dtype=np.int64)
        new[0] = i
        positions = np.arange(1, n + 1)
        new[1:] = np.minimum.accumulate(np.concatenate(([i], partial - positions)))[1:] + positions
        row = new
        if row.min() >= k:
            return i - 1, comparisons
    return len(alpha_suffix), comparisons


# ---------------------------------------------------------------- Landau-Vishkin

def landau_vishkin_start(alpha_suffix: np.ndarray, beta: np.ndarray, k: int, levels: int | None = None) -> tuple[int, int, int]:
    """(c, comparisons, hit level) for one start, by Landau-Vishkin diagonals.

    Row i is a prefix length of ``alpha_suffix`` (0..M), column j one of beta (0..n), diagonal
    d = j - i, -min(k-1, M) <= d <= n. L[d][e] is the furthest row on diagonal d whose D entry is
    <= e, for e = 0..levels-1 (levels = k unless given). Stops after the first level in which some
    diagonal reaches row M ("optimization 2": the suffix occurs with fewer than k differences);
    the hit level is that level, or ``levels`` when none. c = max over d of the last level computed.
    """
    levels = k if levels is None else levels
    M, n = len(alpha_suffix), len(beta)
    low = -min(k - 1, M)
    diagonals = np.arange(low - 1, n + 2)  # one padding diagonal on each side
    previous = np.where((diagonals >= 0) & (diagonals <= n), -1, UNREACHED)  # level -1
    comparisons = 0
    for e in range(levels):
        valid = (diagonals >= max(low, -e)) & (diagonals <= n)
        candidate = np.maximum(np.maximum(previous[1:-1] + 1, previous[:-2]), previous[2:] + 1)
        rows = np.minimum(candidate, np.minimum(M, n - diagonals[1:-1]))
        inner = valid[1:-1]
        rows = np.where(inner, rows, UNREACHED)
        # Slide every valid diagonal along its matches, all diagonals at once.
        active = np.flatnonzero(inner)
        while len(active):
            i = rows[active]
            j = i + diagonals[1:-1][active]
            room = (i < M) & (j < n)
            active, i, j = active[room], i[room], j[room]
            comparisons += len(active)
            equal = alpha_suffix[i] == beta[j]
            active = active[equal]
            rows[active] += 1
        current = np.full_like(previous, UNREACHED)
        current[1:-1] = rows
        previous = current
        if rows.max() == M:
            return M, comparisons, e
    return int(previous.max()), comparisons, levels


# ---------------------------------------------------------------- driver

def solve_starts(alpha, beta, k: int, method: str = "landau-vishkin", starts: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Lengths of the shortest solutions (int64[m], 0: none) and each start's comparisons
    (int64[m], 0 for starts not reached), by one sequential method.

    ``starts`` limits the run to starts 0..starts-1 (a timed slice for benchmarks); the lengths of
    later starts are left 0 then.
    """
    _check_k(k)
    alpha, beta = _codes(alpha), _codes(beta)
    m = len(alpha)
    lengths = np.zeros(m, dtype=np.int64)
    counts = np.zeros(m, dtype=np.int64)
    for r in range(m if starts is None else min(starts, m)):
        if method == "conventional":
            c, counts[r] = conventional_start(alpha[r:], beta, k)
        elif method == "landau-vishkin":
            c, counts[r], _ = landau_vishkin_start(alpha[r:], beta, k)
        else:
            raise ValueError(f"unknown method {method!r}")
        if r + c >= m:
            break
        lengths[r] = c + 1
    return lengths, counts


def solve(alpha, beta, k: int, method: str = "landau-vishkin", starts: int | None = None) -> tuple[np.ndarray, int]:
    """(lengths, total comparisons): :func:`solve_starts` summed over starts."""
    lengths, counts = solve_starts(alpha, beta, k, method, starts)
    return lengths, int(counts.sum())
