"""References of ``opencl/modules/asm.cl``: approximate string matching (ASM) by Sellers' O(mn) DP.

ASM(X, Y) is the least edit distance (insertion, deletion, replacement: cost 1 each) between the
pattern X (length m >= 1) and any substring of the text Y (length n >= 1).

Coordinates, 0-based half-open as everywhere inside bowmap: a match is ``Y[start:end]``. The end
``end`` is therefore also the 1-based inclusive position of the match's last symbol, which is
what the CLI prints.

Which best match is reported (the rule the kernels and the CLI share):
* ``end``: the smallest end in 1..n whose column of the DP's last row holds the least distance.
  (The empty match ending at 0 always costs m and some end >= 1 costs at most m, so no distance
  is lost by leaving end 0 out.)
* ``start``: the smallest start, i.e. the longest substring ``Y[start:end]`` whose edit distance
  to X equals that least distance. It is never ``end`` itself: ``Y[end-1:end]`` costs at most m.

Every function takes byte strings or ``uint8`` arrays; any byte alphabet is fine.
"""

from __future__ import annotations

import numpy as np

from bowmap.modules.edit_distance import edit_distance


def _codes(sequence) -> np.ndarray:
    if isinstance(sequence, (bytes, bytearray)):
        return np.frombuffer(bytes(sequence), dtype=np.uint8)
    return np.ascontiguousarray(sequence, dtype=np.uint8)


def _next_row(previous: np.ndarray, symbol: int, text: np.ndarray, first: int) -> np.ndarray:
    """Row i of a DP from row i-1 (``previous``, length len(text) + 1), whose column 0 is ``first``.

    Vertical and diagonal moves are vectorised directly; the horizontal chain
    ``D[i][j] = min(T[j], D[i][j-1] + 1)`` is a running minimum of ``T[j] - j``, shifted back."""
    candidates = np.empty_like(previous)
    candidates[0] = first
    np.minimum(previous[1:] + 1, previous[:-1] + (text != symbol), out=candidates[1:])
    steps = np.arange(len(previous), dtype=previous.dtype)
    return np.minimum.accumulate(candidates - steps) + steps


def last_row(pattern, text) -> np.ndarray:
    """Sellers' DP: ``int32[n + 1]``, entry e = min over starts s <= e of ED(pattern, text[s:e]).

    Row 0 is all zeros (a match may start anywhere), column 0 of row i is i. One NumPy pass of
    length n + 1 a pattern symbol: O(mn) time, O(n) memory."""
    pattern, text = _codes(pattern), _codes(text)
    row = np.zeros(len(text) + 1, dtype=np.int32)
    for i, symbol in enumerate(pattern.tolist(), start=1):
        row = _next_row(row, symbol, text, i)
    return row


def best_end(row: np.ndarray) -> tuple[int, int]:
    """(distance, end) by the rule in the module docstring, from :func:`last_row`'s output."""
    ends = row[1:]
    end = int(np.argmin(ends)) + 1  # argmin returns the first, i.e. the smallest end
    return int(row[end]), end


def match_start(pattern, text, end: int, distance: int) -> int:
    """The reverse pass: the smallest start s with ED(pattern, text[s:end]) == distance.

    ``distance`` must be ASM(pattern, text) and ``end`` an end achieving it. A substring of
    length k costs at least |k - m|, so only k <= m + distance can qualify: the DP runs over the
    reversed pattern against the reversed text[end - (m + distance) : end], rows anchored at
    ``end`` (global edit distance), O(m (m + distance)) cells."""
    pattern, text = _codes(pattern), _codes(text)
    window = min(end, len(pattern) + distance)
    reversed_text = text[end - window : end][::-1]
    row = np.arange(window + 1, dtype=np.int32)  # ED(empty, k symbols) = k
    for i, symbol in enumerate(pattern[::-1].tolist(), start=1):
        row = _next_row(row, symbol, reversed_text, i)
    lengths = np.flatnonzero(row == distance)
    if len(lengths) == 0:
        raise ValueError(f"no substring ending at {end} has edit distance {distance}")
    return end - int(lengths[-1])


def best_match(pattern, text) -> tuple[int, int, int]:
    """(distance, start, end) of the reported best match, by the module's rule."""
    distance, end = best_end(last_row(pattern, text))
    return distance, match_start(pattern, text, end, distance), end


def matches_within(pattern, text, max_distance: int) -> tuple[np.ndarray, np.ndarray]:
    """Every end e in 1..n with min_s ED(pattern, text[s:e]) <= max_distance, ascending, and
    that distance: (int64 ends, int64 distances)."""
    row = last_row(pattern, text)[1:]
    ends = np.flatnonzero(row <= max_distance)
    return ends + 1, row[ends].astype(np.int64)


# ---------------------------------------------------------------- brute force, tiny inputs only

def brute_force(pattern: bytes, text: bytes) -> tuple[int, int, int, list[int]]:
    """Every substring tried: (distance, start, end, per-end distances for ends 1..n).

    O(n^2) edit distances; for inputs of a few dozen symbols."""
    pattern, text = bytes(pattern), bytes(text)
    table = {(s, e): edit_distance(pattern, text[s:e]) for e in range(1, len(text) + 1) for s in range(e + 1)}
    per_end = [min(table[s, e] for s in range(e + 1)) for e in range(1, len(text) + 1)]
    distance = min(per_end)
    end = per_end.index(distance) + 1
    start = min(s for s in range(end + 1) if table[s, end] == distance)
    return distance, start, end, per_end
