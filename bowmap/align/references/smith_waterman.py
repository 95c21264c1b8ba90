"""Reference of ``opencl/align/smith_waterman.cl``: affine-gap Smith-Waterman (local) or glocal DP with
traceback, following the kernels' tie rules exactly (see :mod:`bowmap.align.extend.smith_waterman`).

Two versions of the same function:

* :func:`align_naive` -- plain Python, cell by cell, straight from the recurrences. It is the
  definition; tests check the NumPy version against it on small pairs.
* :func:`best` and :func:`traceback` -- NumPy over many pairs at once: rows in a Python loop,
  pairs and columns vectorised. The deletion matrix E is a running maximum along the row:
  E[i][j] = max over k < j of (H'[i][k] - GAP_OPEN - (j - k) * GAP_EXTEND), where H' is H without
  its E term (an E that came from E is always beaten by extending the earlier gap when
  GAP_OPEN >= 0). The direction bits are then read off the finished rows with the kernels' rules.

Coordinates: 0-based, ends exclusive; H[i][j] is the best alignment ending with read base i - 1
and window base j - 1 (row 0 and column 0 are the empty prefixes).
"""

from __future__ import annotations

import numpy as np

NEG = -(1 << 40)  # minus infinity: far below any score, never chosen
OP_M, OP_I, OP_D, OP_S = 0, 1, 2, 4
SOURCE_START, SOURCE_DIAGONAL, SOURCE_DELETION, SOURCE_INSERTION = 0, 1, 2, 3
E_EXTENDS, F_EXTENDS = 4, 8
CELLS_PER_BATCH = 1 << 22  # bounds the reference's memory: one byte of directions a cell


def substitution(scoring, read_code: int, window_code: int) -> int:
    if read_code > 3 or window_code > 3:
        return -scoring.ambiguous
    return scoring.match if read_code == window_code else -scoring.mismatch


def first_column(scoring, i: int) -> int:
    """H[i][0]: 0 when local; the first i read bases inserted when end-to-end. Row 0 (i = 0,
    every column) is the clip bonus when local: an alignment starting at the read's first
    base is worth that much more than one clipping it."""
    if i == 0:
        return scoring.clip_bonus
    return -(scoring.gap_open + i * scoring.gap_extend) if scoring.end_to_end else 0


# ---------------------------------------------------------------- the definition, cell by cell

def _cigar_runs(backwards: list[int], local: bool, clipped_before: int, clipped_after: int) -> list[tuple[int, int]]:
    """(length, op) runs of a traceback's operations, collected end to start; local alignments
    get soft clips for the read bases left out on either side."""
    operations = backwards[::-1]
    if local:
        operations = [OP_S] * clipped_before + operations + [OP_S] * clipped_after
    cigar: list[list[int]] = []
    for op in operations:
        if cigar and cigar[-1][1] == op:
            cigar[-1][0] += 1
        else:
            cigar.append([1, op])
    return [tuple(run) for run in cigar]


def align_naive(scoring, read, window):
    """(score, read_start, read_end, window_start, window_end, cigar as [(length, op)])."""
    read = [int(code) for code in read]
    window = [int(code) for code in window]
    m, n = len(read), len(window)
    open_extend, extend = scoring.gap_open + scoring.gap_extend, scoring.gap_extend
    local = not scoring.end_to_end
    H = [[0] * (n + 1) for _ in range(m + 1)]
    H[0] = [first_column(scoring, 0)] * (n + 1)
    E = [[NEG] * (n + 1) for _ in range(m + 1)]
    F = [[NEG] * (n + 1) for _ in range(m + 1)]
    for i in range(1, m + 1):
        H[i][0] = F[i][0] = first_column(scoring, i)
        if local:
            F[i][0] = NEG
    for i in range(1, m + 1):
        for j in range(1, n + 1):
            E[i][j] = max(H[i][j - 1] - open_extend, E[i][j - 1] - extend)
            F[i][j] = max(H[i - 1][j] - open_extend, F[i - 1][j] - extend)
            H[i][j] = max(H[i - 1][j - 1] + substitution(scoring, read[i - 1], window[j - 1]), E[i][j], F[i][j])
            if local:
                H[i][j] = max(H[i][j], 0)
    if local:
        score, end_i, end_j = 0, 0, 0
        for j in range(1, n + 1):  # smallest column first, then smallest row: strict > keeps the first
            for i in range(1, m + 1):
                chosen = H[i][j] + (scoring.clip_bonus if i == m and H[i][j] > 0 else 0)
                if chosen > score:
                    score, end_i, end_j = chosen, i, j
    else:
        end_i = m
        end_j = max(range(n + 1), key=lambda j: (H[m][j], -j))
        score = H[m][end_j]

    operations = []  # backwards, one entry a base
    i, j, state = end_i, end_j, "H"
    while True:
        if state == "H":
            if i == 0 or j == 0:
                if not local:
                    operations += [OP_I] * i
                    i = 0
                break
            diagonal = H[i - 1][j - 1] + substitution(scoring, read[i - 1], window[j - 1])
            if local and H[i][j] <= 0:
                break
            if diagonal == H[i][j]:
                operations.append(OP_M)
                i, j = i - 1, j - 1
            elif E[i][j] == H[i][j]:
                state = "E"
            else:
                state = "F"
        elif state == "E":
            operations.append(OP_D)
            if not E[i][j - 1] - extend > H[i][j - 1] - open_extend:
                state = "H"
            j -= 1
        else:
            operations.append(OP_I)
            if not F[i - 1][j] - extend > H[i - 1][j] - open_extend:
                state = "H"
            i -= 1
    return score, i, end_i, j, end_j, _cigar_runs(operations, local, i, m - end_i)


# ---------------------------------------------------------------- NumPy, many pairs at once

def _pair_arrays(read_codes, read_offsets, read_lengths, window_codes, window_offsets, window_lengths, pair_reads, pair_windows):
    read_codes = np.asarray(read_codes, dtype=np.int64)
    window_codes = np.asarray(window_codes, dtype=np.int64)
    pair_reads = np.asarray(pair_reads, dtype=np.int64)
    pair_windows = np.asarray(pair_windows, dtype=np.int64)
    starts_r = np.asarray(read_offsets, dtype=np.int64)[pair_reads]
    lengths_r = np.asarray(read_lengths, dtype=np.int64)[pair_reads]
    starts_w = np.asarray(window_offsets, dtype=np.int64)[pair_windows]
    lengths_w = np.asarray(window_lengths, dtype=np.int64)[pair_windows]
    return read_codes, starts_r, lengths_r, window_codes, starts_w, lengths_w


def _padded(codes, starts, lengths, width):
    """Codes of each sequence in a row, padded with 4 to ``width``: int64[len(starts), width]."""
    positions = np.arange(width)
    inside = positions < lengths[:, None]
    gathered = codes[np.where(inside, starts[:, None] + positions, 0)] if len(codes) else np.zeros(inside.shape, np.int64)
    return np.where(inside, np.minimum(gathered, 4), 4)


def _batch_dp(scoring, reads, m, windows, n, keep_directions: bool):
    """DP of a batch of pairs padded to reads [B, M], windows [B, N]. Returns the best cells
    (score, read_end, window_end) and, when asked, the direction bits uint8[B, M, N]."""
    batch, rows = reads.shape
    columns = windows.shape[1]
    open_extend, extend = scoring.gap_open + scoring.gap_extend, scoring.gap_extend
    local = not scoring.end_to_end
    ramp = np.arange(columns + 1) * extend
    h_row = np.full((batch, columns + 1), first_column(scoring, 0), dtype=np.int64)  # row 0
    f_row = np.full((batch, columns + 1), NEG, dtype=np.int64)
    directions = np.zeros((batch, rows, columns), dtype=np.uint8) if keep_directions else None
    column_index = np.arange(1, columns + 1)
    valid_column = column_index <= n[:, None]  # [B, N]
    if local:
        best_score = np.zeros(batch, np.int64)
        best_i = np.zeros(batch, np.int64)
        best_j = np.zeros(batch, np.int64)
    else:
        best_score = np.array([first_column(scoring, int(length)) for length in m], dtype=np.int64)
        best_i, best_j = m.copy(), np.zeros(batch, np.int64)
    ambiguous = windows > 3
    for i in range(1, rows + 1):
        code = reads[:, i - 1 : i]
        scores = np.where((code > 3) | ambiguous, -scoring.ambiguous, np.where(code == windows, scoring.match, -scoring.mismatch))
        diagonal = h_row[:, :-1] + scores
        f_open, f_extend = h_row[:, 1:] - open_extend, f_row[:, 1:] - extend
        f = np.maximum(f_open, f_extend)
        h0 = first_column(scoring, i)
        without_e = np.maximum(diagonal, f)
        if local:
            without_e = np.maximum(without_e, 0)
        lifted = np.concatenate([np.full((batch, 1), h0, np.int64), without_e[:, :-1]], axis=1) + ramp[:-1]
        e = np.maximum.accumulate(lifted, axis=1) - scoring.gap_open - ramp[1:]
        h = np.maximum(without_e, e)
        if keep_directions:
            source = np.where(diagonal >= np.maximum(e, f), SOURCE_DIAGONAL, np.where(e >= f, SOURCE_DELETION, SOURCE_INSERTION))
            if local:
                source = np.where(h <= 0, SOURCE_START, source)
            h_left = np.concatenate([np.full((batch, 1), h0, np.int64), h[:, :-1]], axis=1)
            e_left = np.concatenate([np.full((batch, 1), NEG, np.int64), e[:, :-1]], axis=1)
            bits = source | np.where(e_left - extend > h_left - open_extend, E_EXTENDS, 0)
            bits |= np.where(f_extend > f_open, F_EXTENDS, 0)
            directions[:, i - 1, :] = bits
        h_row = np.concatenate([np.full((batch, 1), h0, np.int64), h], axis=1)
        f_row = np.concatenate([np.full((batch, 1), NEG, np.int64), f], axis=1)
        if local:
            masked = np.where(valid_column, h + np.where((i == m)[:, None] & (h > 0), scoring.clip_bonus, 0), NEG)
            column = np.argmax(masked, axis=1)  # the first (smallest) column of the row's maximum
            value = masked[np.arange(batch), column]
            better = (i <= m) & ((value > best_score) | ((value == best_score) & (column + 1 < best_j)))
            best_score = np.where(better, value, best_score)
            best_i = np.where(better, i, best_i)
            best_j = np.where(better, column + 1, best_j)
        else:
            last = i == m
            if last.any():
                masked = np.where(np.arange(columns + 1) <= n[:, None], h_row, NEG)
                column = np.argmax(masked, axis=1)
                best_score = np.where(last, masked[np.arange(batch), column], best_score)
                best_j = np.where(last, column, best_j)
    return best_score, best_i, best_j, directions


def _trace(scoring, bits: np.ndarray, m: int, end_i: int, end_j: int):
    """CIGAR [(length, op)] and start (i, j) of the walk back from (end_i, end_j)."""
    local = not scoring.end_to_end
    operations = []
    i, j, state = end_i, end_j, SOURCE_DIAGONAL
    while True:
        if state == SOURCE_DIAGONAL and (i == 0 or j == 0):
            if not local:
                operations += [OP_I] * i
                i = 0
            break
        cell = int(bits[i - 1, j - 1])
        if state == SOURCE_DIAGONAL:
            source = cell & 3
            if source == SOURCE_START:
                break
            if source == SOURCE_DIAGONAL:
                operations.append(OP_M)
                i, j = i - 1, j - 1
            else:
                state = source
        elif state == SOURCE_DELETION:
            operations.append(OP_D)
            state = SOURCE_DELETION if cell & E_EXTENDS else SOURCE_DIAGONAL
            j -= 1
        else:
            operations.append(OP_I)
            state = SOURCE_INSERTION if cell & F_EXTENDS else SOURCE_DIAGONAL
            i -= 1
    return _cigar_runs(operations, local, i, m - end_i), i, j


def _batches(m, n):
    """Pair indexes in batches of similar size whose padded matrices stay under CELLS_PER_BATCH."""
    order = np.lexsort((n, m))
    start = 0
    while start < len(order):
        stop = start + 1
        while stop < len(order):
            size = (stop + 1 - start) * (int(m[order[stop]]) + 1) * (int(n[order[start:stop + 1]].max()) + 1)
            if size > CELLS_PER_BATCH:
                break
            stop += 1
        yield order[start:stop]
        start = stop


def _run(scoring, with_traceback, *arrays):
    read_codes, starts_r, m, window_codes, starts_w, n = _pair_arrays(*arrays)
    count = len(m)
    score, read_end, window_end = (np.zeros(count, np.int64) for _ in range(3))
    read_start, window_start = np.zeros(count, np.int64), np.zeros(count, np.int64)
    cigars = [None] * count
    for batch in _batches(m, n):
        rows, columns = int(m[batch].max()), int(n[batch].max())
        reads = _padded(read_codes, starts_r[batch], m[batch], rows)
        windows = _padded(window_codes, starts_w[batch], n[batch], columns)
        best, best_i, best_j, directions = _batch_dp(scoring, reads, m[batch], windows, n[batch], with_traceback)
        score[batch], read_end[batch], window_end[batch] = best, best_i, best_j
        if with_traceback:
            for slot, pair in enumerate(batch):
                cigar, i, j = _trace(scoring, directions[slot], int(m[pair]), int(best_i[slot]), int(best_j[slot]))
                cigars[pair], read_start[pair], window_start[pair] = cigar, i, j
    return score, read_start, read_end, window_start, window_end, cigars


def best(scoring, read_codes, read_offsets, read_lengths, window_codes, window_offsets, window_lengths, pair_reads, pair_windows):
    """Same contract as :meth:`bowmap.align.extend.smith_waterman.SmithWaterman.best`."""
    score, _, read_end, _, window_end, _ = _run(
        scoring, False, read_codes, read_offsets, read_lengths, window_codes, window_offsets, window_lengths, pair_reads, pair_windows
    )
    return score.astype(np.int32), read_end.astype(np.int32), window_end.astype(np.int32)


def traceback(scoring, read_codes, read_offsets, read_lengths, window_codes, window_offsets, window_lengths, pair_reads, pair_windows):
    """Same contract as :meth:`bowmap.align.extend.smith_waterman.SmithWaterman.traceback`."""
    score, read_start, read_end, window_start, window_end, cigars = _run(
        scoring, True, read_codes, read_offsets, read_lengths, window_codes, window_offsets, window_lengths, pair_reads, pair_windows
    )
    lengths = np.array([len(cigar) for cigar in cigars], dtype=np.uint32)
    ops = np.array([(length << 4) | op for cigar in cigars for length, op in cigar], dtype=np.uint32)
    offsets = (np.cumsum(lengths, dtype=np.uint64) - lengths).astype(np.uint32)
    return (
        score.astype(np.int32), read_start.astype(np.int32), read_end.astype(np.int32),
        window_start.astype(np.int32), window_end.astype(np.int32), ops, offsets, lengths,
    )


def cigar_score(scoring, read, window, window_start: int, cigar) -> tuple[int, int, int]:
    """Re-score a CIGAR [(length, op)] placed at ``window_start``: (score, read bases used,
    window bases used). Soft clips cost nothing; a gap run of k costs open + k * extend."""
    score, i, j = 0, 0, window_start
    for length, op in cigar:
        if op == OP_M:
            score += sum(substitution(scoring, int(read[i + k]), int(window[j + k])) for k in range(length))
            i, j = i + length, j + length
        elif op == OP_I:
            score -= scoring.gap_open + length * scoring.gap_extend
            i += length
        elif op == OP_D:
            score -= scoring.gap_open + length * scoring.gap_extend
            j += length
        elif op == OP_S:
            i += length
        else:
            raise ValueError(f"unexpected CIGAR operation {op}")
    return score, i, j - window_start
