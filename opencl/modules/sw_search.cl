/* sw_search.cl -- Smith-Waterman local alignment scores of one query against many database
 * sequences (proteins or DNA), affine gaps in BLAST's convention: a gap of L residues costs
 * GAP_OPEN + L * GAP_EXTEND. Only the best score of each (query, target) pair is computed.
 *
 * Recurrences, query = rows i = 1..m, target = columns j = 1..n, s = substitution score,
 * OE = GAP_OPEN + GAP_EXTEND:
 *   E[i][j] = max(H[i][j-1] - OE, E[i][j-1] - GAP_EXTEND)     gap along the target
 *   F[i][j] = max(H[i-1][j] - OE, F[i-1][j] - GAP_EXTEND)     gap along the query
 *   H[i][j] = max(0, H[i-1][j-1] + s(query[i-1], target[j-1]), E[i][j], F[i][j])
 * with H = 0 on row and column 0 and E = F = -OE there (as good as minus infinity: H >= 0, so
 * H - OE >= -OE > -OE - GAP_EXTEND). Score = the largest H, 0 when none is positive.
 *
 * Residue codes: 0 .. CODES - 2 are the alphabet's (24 for proteins: ARNDCQEGHILKMFPSTWYVBZX*);
 * PAD_CODE pads targets past their end and rows past the query's end. Every score against
 * PAD_CODE is <= 0, and padding cells lie right of (or below) every real cell, so nothing that
 * flows out of them can exceed the best real cell: the kernels take the best over all cells,
 * padding included, with no per-cell test.
 *
 * Kernels:
 *   sw_intertask_packed  one work-item, two targets (lane A = low 16 bits of every value, lane
 *       B = high 16 bits; the lane operations padd, pmax, pmax_floor0 are sw/packed_lanes.h's,
 *       shared with align/smith_waterman.cl): the query is cut into tiles of TILE rows; a
 *       tile's H - OE and E of the previous column, and the running F, live in registers while
 *       the tile sweeps all of the work-item's columns; the tile's last row (H - OE, F) goes to
 *       `boundary`, which the next tile reads back (8 bytes a column per tile instead of per
 *       cell). No overflow test in the loop: a lane whose best reaches OVERFLOW_SCORE (host:
 *       32767 - largest score) may have wrapped, and the host runs that target again with
 *       sw_intertask_wide.
 *   sw_intertask_wide    the same sweep, one target a work-item, 32-bit values.
 *   sw_intratask         one work-group a target: work-item l owns INTRA_ROWS consecutive rows
 *       of a strip of (local size x INTRA_ROWS) query rows and, at step k, computes column
 *       j = k - l + 1 of its rows (anti-diagonals of row blocks in parallel); it hands its last
 *       row's (H, F) of column j to work-item l + 1 through local memory (double-buffered, one
 *       barrier a step). The strip's last row goes to `boundary` for the next strip.
 *
 * Buffers:
 *   codes (intertask)   work-group g's targets at codes[code_offsets[g] ...]: columns 4k..4k+3
 *       of local id l at [k * local size + l], one uint a lane (byte c = column 4k + c), so a
 *       wavefront's loads are consecutive (coalesced). Packed: uint2 (x = lane A, y = lane B);
 *       wide: uint. group_columns[g] (a multiple of 4) = the longest target of the group.
 *   boundary (intertask) column j (0-based) of local id l at boundary[boundary_offsets[g] -
 *       boundary_offsets[first_group] + j * local size + l]: uint2 (packed H - OE, F) or int2.
 *   profile             ushort[tiles][CODES][TILE]: s(query[tile * TILE + t], c) + OE, int16
 *       two's complement, PAD row scores past the query's end; a tile's CODES x TILE is copied to
 *       local memory (1 KiB for TILE 16) before its sweep.
 *   scores (intratask)  int[CODES][CODES], s(target code, query code), copied to local memory.
 *   targets (intratask) uchar codes; group g's target at target_codes[target_offsets[g]],
 *       target_lengths[g] residues; its strip boundary at boundary[boundary_offsets[g]] (n + 1
 *       int2, relative to boundary_offsets[first_group] likewise).
 *   best                packed: uint a work-item (two 16-bit lanes); wide: int a work-item,
 *       at group * local size + local id; intratask: int a group, at best[group]. A call may
 *       run the groups in several launches (first_group = the launch's first), all writing the
 *       same `best`.
 *
 * Invariants: TILE is 8, 16 or 32; |scores|, GAP_OPEN and GAP_EXTEND <= 1000 (the host
 * checks), so profile entries s + OE and every E, F >= -OE - GAP_EXTEND fit 16-bit lanes; every work-item of a group runs the same number of tiles (the query is common), so the
 * barriers around the profile copy are reached by all.
 */

#ifndef TILE
#define TILE 16
#endif
#ifndef INTRA_ROWS
#define INTRA_ROWS 8
#endif
#define CODES 32
#define PAD_CODE 31
#define OPEN_EXTEND (GAP_OPEN + GAP_EXTEND)
#define PROFILE_WORDS (TILE / 2)
#define PROFILE_VECTORS (TILE / 8)

/* Saturating portable adds: an overflowing lane sticks at 32767 >= OVERFLOW_SCORE, so the host's
 * re-run catches it. PTX's add.s16x2 wraps instead, but H grows by at most the largest score a
 * cell, so a lane wraps only after its best has passed OVERFLOW_SCORE: the same test catches it. */
#define PACKED_ADD_SATURATES 1
#include "sw/packed_lanes.h"

/* Copies tile `tile` of the profile into local memory; every work-item of the group calls it. */
inline void load_tile_profile(__global const uint4 *profile, uint tile, __local uint4 *tile_profile)
{
    barrier(CLK_LOCAL_MEM_FENCE); /* the previous tile's sweep has finished reading */
    const uint vectors = CODES * PROFILE_VECTORS;
    for (uint i = get_local_id(0); i < vectors; i += get_local_size(0))
        tile_profile[i] = profile[(size_t)tile * vectors + i];
    barrier(CLK_LOCAL_MEM_FENCE);
}

/* The TILE profile scores (s + OE, 16 bits each, two a uint) of one target code. */
#define LOAD_ROW(words, code)                                                        \
    _Pragma("unroll") for (uint v = 0; v < PROFILE_VECTORS; ++v) {                   \
        uint4 x = tile_profile[(code) * PROFILE_VECTORS + v];                        \
        words[4 * v] = x.s0;                                                         \
        words[4 * v + 1] = x.s1;                                                     \
        words[4 * v + 2] = x.s2;                                                     \
        words[4 * v + 3] = x.s3;                                                     \
    }

__kernel void sw_intertask_packed(__global const uint2 *codes, __global const ulong *code_offsets,
                                  __global const uint *group_columns, __global const uint4 *profile,
                                  const uint tiles, __global uint2 *boundary,
                                  __global const ulong *boundary_offsets, const uint first_group,
                                  __global uint *best, __local uint4 *tile_profile)
{
    const uint group = first_group + get_group_id(0), lid = get_local_id(0), size = get_local_size(0);
    const uint blocks = group_columns[group] / 4;
    __global const uint2 *my_codes = codes + code_offsets[group] + lid;
    __global uint2 *my_boundary = boundary + (boundary_offsets[group] - boundary_offsets[first_group]) + lid;
    const uint minus_oe = lanes(-OPEN_EXTEND, -OPEN_EXTEND), minus_extend = lanes(-GAP_EXTEND, -GAP_EXTEND);
    uint top_best = 0;
    for (uint tile = 0; tile < tiles; ++tile) {
        load_tile_profile(profile, tile, tile_profile);
        const bool first = tile == 0, last = tile + 1 == tiles;
        uint hoe[TILE], e[TILE];
#pragma unroll
        for (uint t = 0; t < TILE; ++t)
            hoe[t] = e[t] = minus_oe;
        uint diagonal_top = minus_oe, tile_best = 0;
        for (uint block = 0; block < blocks; ++block) {
            const uint2 four = my_codes[(size_t)block * size];
#pragma unroll
            for (uint k = 0; k < 4; ++k) {
                const size_t j = (size_t)block * 4 + k;
                uint up = minus_oe, f = minus_oe; /* row above the tile: H - OE and F */
                if (!first) {
                    const uint2 top = my_boundary[j * size];
                    up = top.x;
                    f = top.y;
                }
                uint diagonal = diagonal_top;
                diagonal_top = up;
                uint row_a[PROFILE_WORDS], row_b[PROFILE_WORDS];
                LOAD_ROW(row_a, (four.x >> (8 * k)) & 0xFFu)
                LOAD_ROW(row_b, (four.y >> (8 * k)) & 0xFFu)
#pragma unroll
                for (uint t = 0; t < TILE; ++t) {
                    const uint a = row_a[t / 2], b = row_b[t / 2];
                    const uint s = (t & 1) ? ((a >> 16) | (b & 0xFFFF0000u)) : ((a & 0xFFFFu) | (b << 16));
                    const uint e_new = pmax(hoe[t], padd(e[t], minus_extend));
                    const uint f_new = pmax(up, padd(f, minus_extend));
                    const uint h = pmax_floor0(padd(diagonal, s), pmax(e_new, f_new));
                    tile_best = pmax(tile_best, h);
                    diagonal = hoe[t];
                    hoe[t] = padd(h, minus_oe);
                    e[t] = e_new;
                    f = f_new;
                    up = hoe[t];
                }
                if (!last)
                    my_boundary[j * size] = (uint2)(hoe[TILE - 1], f);
            }
        }
        top_best = pmax(top_best, tile_best);
    }
    best[(size_t)group * size + lid] = top_best;
}

__kernel void sw_intertask_wide(__global const uint *codes, __global const ulong *code_offsets,
                                __global const uint *group_columns, __global const uint4 *profile,
                                const uint tiles, __global int2 *boundary,
                                __global const ulong *boundary_offsets, const uint first_group,
                                __global int *best, __local uint4 *tile_profile)
{
    const uint group = first_group + get_group_id(0), lid = get_local_id(0), size = get_local_size(0);
    const uint blocks = group_columns[group] / 4;
    __global const uint *my_codes = codes + code_offsets[group] + lid;
    __global int2 *my_boundary = boundary + (boundary_offsets[group] - boundary_offsets[first_group]) + lid;
    int top_best = 0;
    for (uint tile = 0; tile < tiles; ++tile) {
        load_tile_profile(profile, tile, tile_profile);
        const bool first = tile == 0, last = tile + 1 == tiles;
        int hoe[TILE], e[TILE];
#pragma unroll
        for (uint t = 0; t < TILE; ++t)
            hoe[t] = e[t] = -OPEN_EXTEND;
        int diagonal_top = -OPEN_EXTEND;
        for (uint block = 0; block < blocks; ++block) {
            const uint four = my_codes[(size_t)block * size];
#pragma unroll
            for (uint k = 0; k < 4; ++k) {
                const size_t j = (size_t)block * 4 + k;
                int up = -OPEN_EXTEND, f = -OPEN_EXTEND;
                if (!first) {
                    const int2 top = my_boundary[j * size];
                    up = top.x;
                    f = top.y;
                }
                int diagonal = diagonal_top;
                diagonal_top = up;
                uint row[PROFILE_WORDS];
                LOAD_ROW(row, (four >> (8 * k)) & 0xFFu)
#pragma unroll
                for (uint t = 0; t < TILE; ++t) {
                    const int s = (int)(short)((t & 1) ? (row[t / 2] >> 16) : (row[t / 2] & 0xFFFFu));
                    const int e_new = max(hoe[t], e[t] - GAP_EXTEND);
                    const int f_new = max(up, f - GAP_EXTEND);
                    const int h = max(max(diagonal + s, 0), max(e_new, f_new));
                    top_best = max(top_best, h);
                    diagonal = hoe[t];
                    hoe[t] = h - OPEN_EXTEND;
                    e[t] = e_new;
                    f = f_new;
                    up = hoe[t];
                }
                if (!last)
                    my_boundary[j * size] = (int2)(hoe[TILE - 1], f);
            }
        }
    }
    best[(size_t)group * size + lid] = top_best;
}

__kernel void sw_intratask(__global const uchar *query, const uint m, __global const uchar *target_codes,
                           __global const ulong *target_offsets, __global const uint *target_lengths,
                           __global const int *scores, __global int2 *boundary,
                           __global const ulong *boundary_offsets, const uint first_group,
                           __global int *best, __local int *local_scores, __local int2 *exchange)
{
    const uint group = first_group + get_group_id(0), lid = get_local_id(0), size = get_local_size(0);
    const uint n = target_lengths[group];
    __global const uchar *target = target_codes + target_offsets[group];
    __global int2 *strip_boundary = boundary + (boundary_offsets[group] - boundary_offsets[first_group]);
    for (uint i = lid; i < CODES * CODES; i += size)
        local_scores[i] = scores[i];
    barrier(CLK_LOCAL_MEM_FENCE);
    int my_best = 0;
    const uint strip_rows = size * INTRA_ROWS;
    for (uint row0 = 0; row0 < m; row0 += strip_rows) {
        const bool first = row0 == 0, last = row0 + strip_rows >= m;
        const uint mine = row0 + lid * INTRA_ROWS;
        uint rows[INTRA_ROWS];
        int h_left[INTRA_ROWS], e[INTRA_ROWS];
#pragma unroll
        for (uint t = 0; t < INTRA_ROWS; ++t) {
            rows[t] = mine + t < m ? (uint)query[mine + t] : PAD_CODE;
            h_left[t] = 0;
            e[t] = -OPEN_EXTEND;
        }
        int previous_up = 0; /* H of the row above at column j - 1 (column 0: 0) */
        const uint steps = n + size - 1;
        for (uint k = 0; k < steps; ++k) {
            const uint j = k + 1 - lid; /* 1-based; wraps past n when k < lid */
            if (k >= lid && j <= n) {
                int up = 0, f = -OPEN_EXTEND;
                if (lid > 0) {
                    const int2 above = exchange[(k & 1) * size + lid - 1];
                    up = above.x;
                    f = above.y;
                } else if (!first) {
                    const int2 above = strip_boundary[j];
                    up = above.x;
                    f = above.y;
                }
                int diagonal = previous_up;
                previous_up = up;
                __local const int *column_scores = local_scores + (uint)target[j - 1] * CODES;
#pragma unroll
                for (uint t = 0; t < INTRA_ROWS; ++t) {
                    const int e_new = max(h_left[t] - OPEN_EXTEND, e[t] - GAP_EXTEND);
                    const int f_new = max(up - OPEN_EXTEND, f - GAP_EXTEND);
                    const int h = max(max(diagonal + column_scores[rows[t]], 0), max(e_new, f_new));
                    my_best = max(my_best, h);
                    diagonal = h_left[t];
                    h_left[t] = h;
                    e[t] = e_new;
                    f = f_new;
                    up = h;
                }
                exchange[((k + 1) & 1) * size + lid] = (int2)(up, f);
                if (lid + 1 == size && !last)
                    strip_boundary[j] = (int2)(up, f);
            }
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE); /* the strip's last row is written */
    }
    exchange[lid] = (int2)(my_best, 0);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0) {
        int result = 0;
        for (uint i = 0; i < size; ++i)
            result = max(result, exchange[i].x);
        best[group] = result;
    }
}
