/* asm.cl -- approximate string matching: min over substrings Y' of the text of ED(X, Y').
 *
 * The DP is Sellers': D[0][j] = 0, D[i][0] = i, D[i][j] = min(D[i-1][j] + 1, D[i][j-1] + 1,
 * D[i-1][j-1] + (X[i] != Y[j])); D[m][e] is the best distance of a match ending at e.
 *
 * Pieces (after Man, Nakano and Ito): ends 1..n are split among `pieces` pieces; piece p owns
 * ends (start_p, start_{p+1}] with start_p = p * n / pieces, and runs the DP over the text from
 * column first = max(0, start_p - overlap), with overlap >= 2m - 1, as if the text began there
 * (column `first` gets D[i][first] = i). A match ending at an owned end e and starting before
 * `first` would be longer than 2m - 1 symbols, so cost at least m, which the match Y[e-1, e)
 * already achieves: the piece's last row equals the true one at every owned end.
 *
 * Rows and padding: a pattern of length m is placed at the bottom of `rows` DP rows (rows >= the
 * longest pattern of the batch); the rows above it are dummies whose symbol 0 matches every text
 * symbol and whose column `first` holds 0, so they stay 0 like row 0. The last row is then always
 * the pattern's row m, whatever its length. Text and patterns are dense codes: pattern symbols
 * are 1..symbols-1, text symbols absent from every pattern are 0.
 *
 * Work-items (both DP kernels): a pipeline over a strip of rows. Work-item k of a piece owns rows
 * [k*R, k*R + R) (R = ROWS_PER_ITEM cells in registers for asm_diagonal, 64 bits of a word for
 * asm_bitvector) and at step t handles column j = t - k + 1, so a step covers R cells on R
 * anti-diagonals. It takes the cell just above its strip (or the horizontal delta there) from
 * work-item k-1, which handled the same column one step earlier, through local memory,
 * double-buffered by step parity: one barrier a step. Work-item k keeps the value it read last
 * step as the next step's diagonal cell, so the paper's third anti-diagonal lives in registers.
 * Text symbols are read from global memory one step ahead (contiguous across a warp, cached);
 * the loads are in flight while the barrier waits.
 *
 * Buffers:
 *   text        uchar[n]                  dense codes
 *   patterns    uchar[count][rows]        asm_diagonal: padded codes, dummies 0 at the top
 *   peq         ulong[count][symbols][words] asm_bitvector: bit b of word w of peq[c] is set when
 *                                         row 64w + b matches code c (dummy rows match all)
 *   lengths     uint[count]               pattern lengths m
 *   distances   uint[count][n]            when write_distances: D[m][e] at [e - 1], every e
 *   piece_best  ulong[count][pieces]      min over owned ends of (distance << 32 | end)
 *   best        ulong[count]              asm_reduce: min over pieces of piece_best
 * The (distance, end) key makes the minimum the least distance at the smallest end.
 *
 * Invariants: 1 <= pieces <= n < 2^32; m <= rows < 2^24; the work-group size is a multiple of
 * `words` (asm_bitvector) and a power of two (asm_reduce); all work-items of a group run the same
 * number of steps (barriers).
 */

#include "reductions.h"

#ifndef ROWS_PER_ITEM
#define ROWS_PER_ITEM 1
#endif

#define HIGH_BIT 0x8000000000000000UL

/* First column and owned ends (owned_start, owned_end] of one piece. */
inline void piece_bounds(uint piece, uint pieces, uint n, uint overlap,
                         uint *first, uint *owned_start, uint *owned_end)
{
    *owned_start = (uint)(((ulong)piece * n) / pieces);
    *owned_end = (uint)(((ulong)(piece + 1) * n) / pieces);
    *first = *owned_start > overlap ? *owned_start - overlap : 0u;
}

/* Value of padded row q (1-based) in the piece's first column: dummies 0, row i of the pattern i. */
inline uint boundary(uint q, uint padding)
{
    return q > padding ? q - padding : 0u;
}

/* One work-group a (piece, pattern): global size (G * pieces, count), local size (G, 1), with
 * G * ROWS_PER_ITEM == rows. `exchange` holds 2 * G uints. */
__kernel void asm_diagonal(__global const uchar *text, const uint n,
                           __global const uchar *patterns, __global const uint *lengths,
                           const uint rows, const uint pieces, const uint overlap,
                           const uint write_distances, __global uint *distances,
                           __global ulong *piece_best, __local uint *exchange, const uint group_offset)
{
    const uint lid = get_local_id(0);
    const uint size = get_local_size(0);
    const uint piece = get_group_id(0) + group_offset; /* launched in slices of pieces */
    const uint pattern = get_group_id(1);
    uint first, owned_start, owned_end;
    piece_bounds(piece, pieces, n, overlap, &first, &owned_start, &owned_end);
    const uint length = owned_end - first;
    const uint padding = rows - lengths[pattern];
    __global const uchar *symbols_of_pattern = patterns + (size_t)pattern * rows;
    __global const uchar *piece_text = text + first;

    uint pattern_symbol[ROWS_PER_ITEM];
    uint column[ROWS_PER_ITEM]; /* this strip's cells in the previous column */
#pragma unroll
    for (uint r = 0; r < ROWS_PER_ITEM; ++r) {
        uint q = lid * ROWS_PER_ITEM + r + 1;
        pattern_symbol[r] = symbols_of_pattern[q - 1];
        column[r] = boundary(q, padding);
    }
    /* The cell above the strip in the previous column: row 0 (always 0) for the first strip. */
    uint above_left = lid == 0 ? 0u : boundary(lid * ROWS_PER_ITEM, padding);
    const bool last_strip = lid == size - 1;
    ulong best = ULONG_MAX;
    __global uint *pattern_distances = distances + (size_t)pattern * n;

    const uint steps = length + size - 1;
    uint next_symbol = lid == 0 && length > 0 ? piece_text[0] : 0u;
    for (uint t = 0; t < steps; ++t) {
        const int j = (int)t - (int)lid + 1; /* column 1..length, end first + j */
        const uint symbol = next_symbol;
        const int ahead = j; /* the next step's column j + 1 reads piece_text[j] */
        next_symbol = ahead >= 0 && ahead < (int)length ? piece_text[ahead] : 0u;
        if (j >= 1 && j <= (int)length) {
            uint up = lid == 0 ? 0u : exchange[((t + 1) & 1) * size + lid - 1];
            uint diagonal = above_left;
            above_left = up;
#pragma unroll
            for (uint r = 0; r < ROWS_PER_ITEM; ++r) {
                uint x = pattern_symbol[r];
                uint left = column[r];
                uint cost = (x != 0u) & (x != symbol);
                uint value = min(min(left, up) + 1u, diagonal + cost);
                diagonal = left;
                column[r] = value;
                up = value;
            }
            exchange[(t & 1) * size + lid] = up;
            uint end = first + (uint)j;
            if (last_strip && end > owned_start) {
                if (write_distances)
                    pattern_distances[end - 1] = up;
                best = min(best, ((ulong)up << 32) | end);
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (last_strip)
        piece_best[(size_t)pattern * pieces + piece] = best;
}

/* Myers' bit-vector algorithm, one 64-row word per work-item. A work-group holds
 * size / words pieces of one pattern, each a pipeline of `words` work-items; groups run over
 * (pattern, piece group): ceil(pieces / (size / words)) groups a pattern. `exchange` holds
 * 2 * size ints: the horizontal delta (-1, 0, +1) out of each word's last row. */
__kernel void asm_bitvector(__global const uchar *text, const uint n,
                            __global const ulong *peq, const uint symbols,
                            __global const uint *lengths, const uint words,
                            const uint pieces, const uint overlap,
                            const uint write_distances, __global uint *distances,
                            __global ulong *piece_best, __local int *exchange, const uint group_offset)
{
    const uint lid = get_local_id(0);
    const uint size = get_local_size(0);
    const uint per_group = size / words;
    const uint slot = lid / words;
    const uint word = lid - slot * words;
    const uint groups_per_pattern = (pieces + per_group - 1) / per_group;
    const uint group = get_group_id(0) + group_offset; /* launched in slices of groups */
    const uint pattern = group / groups_per_pattern;
    const uint piece = (group % groups_per_pattern) * per_group + slot;
    const bool real = piece < pieces;
    uint first = 0, owned_start = 0, owned_end = 0;
    if (real)
        piece_bounds(piece, pieces, n, overlap, &first, &owned_start, &owned_end);
    const uint length = owned_end - first;
    /* Every piece is at most ceil(n / pieces) + overlap long: the group's common step count. */
    const uint longest = (n + pieces - 1) / pieces + overlap;
    const uint m = lengths[pattern];
    const uint padding = 64u * words - m;
    const uint dummies = padding > 64u * word ? min(padding - 64u * word, 64u) : 0u;

    ulong positive = dummies >= 64u ? 0UL : ~0UL << dummies; /* vertical deltas +1 */
    ulong negative = 0UL;                                   /* vertical deltas -1 */
    uint score = m;
    const bool last_word = word == words - 1;
    ulong best = ULONG_MAX;
    __global const ulong *pattern_peq = peq + (size_t)pattern * symbols * words + word;
    __global const uchar *piece_text = text + first;
    __global uint *pattern_distances = distances + (size_t)pattern * n;

    const uint steps = longest + words - 1;
    ulong next_equal = length > 0 && word == 0 ? pattern_peq[(size_t)piece_text[0] * words] : 0UL;
    for (uint t = 0; t < steps; ++t) {
        const int j = (int)t - (int)word + 1;
        ulong equal = next_equal;
        if (j >= 0 && j < (int)length)
            next_equal = pattern_peq[(size_t)piece_text[j] * words];
        if (real && j >= 1 && j <= (int)length) {
            int delta_in = word == 0 ? 0 : exchange[((t + 1) & 1) * size + lid - 1];
            ulong vertical = equal | negative;
            if (delta_in < 0)
                equal |= 1UL;
            ulong horizontal = (((equal & positive) + positive) ^ positive) | equal;
            ulong plus = negative | ~(horizontal | positive);
            ulong minus = positive & horizontal;
            int delta_out = (plus & HIGH_BIT) ? 1 : (minus & HIGH_BIT) ? -1 : 0;
            plus <<= 1;
            minus <<= 1;
            if (delta_in < 0)
                minus |= 1UL;
            else if (delta_in > 0)
                plus |= 1UL;
            positive = minus | ~(vertical | plus);
            negative = plus & vertical;
            exchange[(t & 1) * size + lid] = delta_out;
            if (last_word) {
                score += delta_out;
                uint end = first + (uint)j;
                if (end > owned_start) {
                    if (write_distances)
                        pattern_distances[end - 1] = score;
                    best = min(best, ((ulong)score << 32) | end);
                }
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (real && last_word)
        piece_best[(size_t)pattern * pieces + piece] = best;
}

/* One work-group a pattern (global size (size * count), local size a power of two). */
__kernel void asm_reduce(__global const ulong *piece_best, const uint pieces,
                         __global ulong *best, __local ulong *scratch)
{
    const uint lid = get_local_id(0);
    const uint size = get_local_size(0);
    const uint pattern = get_group_id(0);
    __global const ulong *values = piece_best + (size_t)pattern * pieces;
    ulong value = ULONG_MAX;
    for (uint p = lid; p < pieces; p += size)
        value = min(value, values[p]);
    value = work_group_min_ulong(scratch, value);
    if (lid == 0)
        best[pattern] = value;
}
