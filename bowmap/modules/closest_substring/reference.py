"""Sequential CPU reference of ``opencl/modules/closest_substring.cl`` and a brute-force checker.

* :func:`chord_keys` / :func:`best_pitch`: the pitch/chord method of Calhoun, Graham and Jiang,
  one pitch after another (the "sequential" method of ``bowmap closest-substring`` and the CPU
  baseline of bench/closest_substring.py). Distances are symbol comparisons on the codes, without
  the kernels' packed words; each pitch is vectorised over strings and windows.
* :func:`closest_windows`: each string's closest window to a centre (leftmost on ties).
* :func:`majority_root`: column-wise majority, written apart from the API's version.
* :func:`brute_force_optimum`: every centre of a small alphabet^L, for checking the exact search.
* :func:`naive_closest_window` / :func:`check_report`: plain Python loops that check a reported
  centre's distances and positions symbol by symbol.

Positions are 0-based window starts. Strings are uint8 code arrays (see
:func:`bowmap.modules.closest_substring.kernels.encode`).
"""

from __future__ import annotations

import itertools

import numpy as np

# Chord keys (see the .cl header): excess << 54 | total << 24 | pitch; the kernels share the layout.
KEY_EXCESS_SHIFT = 54
KEY_TOTAL_SHIFT = 24


def padded(codes: list[np.ndarray], length: int) -> tuple[np.ndarray, np.ndarray]:
    """Strings as one uint8 matrix (n x longest, padded with code 0) and each string's window
    count |s_i| - L + 1 (int64)."""
    lengths = np.array([len(c) for c in codes], dtype=np.int64)
    matrix = np.zeros((len(codes), int(lengths.max())), dtype=np.uint8)
    matrix[np.arange(matrix.shape[1]) < lengths[:, None]] = np.concatenate(codes)
    return matrix, lengths - length + 1


def window_distances(matrix: np.ndarray, window_counts: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """Hamming distance from ``centre`` to every window: int64[n, W]; windows past a string's end
    get L + 1, more than any real distance."""
    length = len(centre)
    window_count = matrix.shape[1] - length + 1
    distances = np.zeros((matrix.shape[0], window_count), dtype=np.uint16)
    for k in range(length):
        distances += matrix[:, k : k + window_count] != centre[k]
    distances[np.arange(window_count) >= window_counts[:, None]] = length + 1
    return distances.astype(np.int64)


def closest_windows(codes: list[np.ndarray], centre) -> tuple[np.ndarray, np.ndarray]:
    """(distances, 0-based positions) of each string's closest window to ``centre``, int64[n];
    the leftmost window on ties."""
    centre = np.asarray(centre, dtype=np.uint8)
    matrix, counts = padded(codes, len(centre))
    distances = window_distances(matrix, counts, centre)
    positions = np.argmin(distances, axis=1)  # the first minimum: leftmost
    return distances[np.arange(len(codes)), positions], positions.astype(np.int64)


def chord_keys(codes: list[np.ndarray], length: int, max_distance: int, pitches: range | None = None) -> tuple[np.ndarray, np.ndarray]:
    """For each pitch (window j of string 0; all by default, or the given range): (excess, total)
    as int64 arrays. total: sum over strings 1..n-1 of the distance to the closest window;
    excess: max(0, largest such distance - max_distance)."""
    matrix, counts = padded(codes, length)
    pitches = range(int(counts[0])) if pitches is None else pitches
    excess = np.zeros(len(pitches), dtype=np.int64)
    total = np.zeros(len(pitches), dtype=np.int64)
    for slot, pitch in enumerate(pitches):
        notes = window_distances(matrix[1:], counts[1:], matrix[0, pitch : pitch + length]).min(axis=1)
        total[slot] = notes.sum()
        excess[slot] = max(0, int(notes.max()) - max_distance)
    return excess, total


def pack_keys(excess: np.ndarray, total: np.ndarray, first_pitch: int = 0) -> np.ndarray:
    """The kernels' uint64 chord keys: excess << 54 | total << 24 | pitch."""
    pitch = np.arange(first_pitch, first_pitch + len(total), dtype=np.uint64)
    return (excess.astype(np.uint64) << np.uint64(KEY_EXCESS_SHIFT)) | (total.astype(np.uint64) << np.uint64(KEY_TOTAL_SHIFT)) | pitch


def best_pitch(codes: list[np.ndarray], length: int, max_distance: int) -> int:
    """The best chord's pitch: least excess (0 = valid), then least total, then leftmost."""
    excess, total = chord_keys(codes, length, max_distance)
    order = np.lexsort((np.arange(len(total)), total, excess))
    return int(order[0])


def majority_root(windows: np.ndarray, alphabet_size: int) -> np.ndarray:
    """Column-wise majority of ``windows`` (rows x L codes), ties to the smallest code."""
    root = np.zeros(windows.shape[1], dtype=np.uint8)
    for column in range(windows.shape[1]):
        counts = np.bincount(windows[:, column], minlength=alphabet_size)
        root[column] = int(np.flatnonzero(counts == counts.max())[0])
    return root


def pitch_chord(codes: list[np.ndarray], length: int, max_distance: int, alphabet_size: int) -> dict:
    """The whole method: best pitch, its notes (string 0: the pitch itself), the root and the
    root's closest windows. A dict of plain values and int64 arrays."""
    pitch_position = best_pitch(codes, length, max_distance)
    pitch = codes[0][pitch_position : pitch_position + length]
    note_distances, note_positions = closest_windows(codes, pitch)
    note_distances[0], note_positions[0] = 0, pitch_position
    windows = np.stack([string[p : p + length] for string, p in zip(codes, note_positions)])
    root = majority_root(windows, alphabet_size)
    root_distances, root_positions = closest_windows(codes, root)
    return {
        "pitch_position": pitch_position,
        "pitch": pitch,
        "note_distances": note_distances,
        "note_positions": note_positions,
        "root": root,
        "root_distances": root_distances,
        "root_positions": root_positions,
    }


def brute_force_optimum(codes: list[np.ndarray], length: int, alphabet_size: int = 4) -> tuple[np.ndarray, int, int]:
    """Over every centre of alphabet_size^length (keep it small): (centre, max, total) with the
    least maximum distance, then the least total, then the lexicographically smallest centre."""
    centres = np.array(list(itertools.product(range(alphabet_size), repeat=length)), dtype=np.uint8)
    worst = np.zeros(len(centres), dtype=np.int64)
    total = np.zeros(len(centres), dtype=np.int64)
    for string in codes:
        windows = np.lib.stride_tricks.sliding_window_view(string, length)
        best = (centres[:, None, :] != windows[None, :, :]).sum(axis=2).min(axis=1)
        worst = np.maximum(worst, best)
        total += best
    chosen = np.lexsort((np.arange(len(centres)), total, worst))[0]  # product order is lexicographic
    return centres[chosen], int(worst[chosen]), int(total[chosen])


def naive_closest_window(string, centre) -> tuple[int, int]:
    """(distance, leftmost position) by plain loops over windows and symbols."""
    best, best_position = len(centre) + 1, -1
    for start in range(len(string) - len(centre) + 1):
        distance = sum(1 for k in range(len(centre)) if string[start + k] != centre[k])
        if distance < best:
            best, best_position = distance, start
    return best, best_position


def check_report(codes: list[np.ndarray], centre, distances, positions) -> None:
    """AssertionError unless every distance and position matches :func:`naive_closest_window`."""
    for number, string in enumerate(codes):
        expected = naive_closest_window([int(x) for x in string], [int(x) for x in centre])
        got = (int(distances[number]), int(positions[number]))
        assert got == expected, f"string {number}: reported {got}, naive {expected}"
