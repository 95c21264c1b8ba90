/* smith_waterman.cl -- affine-gap Smith-Waterman of reads against reference windows.
 *
 * Work-items: one work-item per (read, window) pair ("intertask" parallelism). The host orders
 * the pairs by length so the work-items of a wavefront sweep similar matrices, and guards
 * `gid < count`, so the global size may be rounded up to the work-group size.
 *   sw_score      best score and its end cell;
 *   sw_traceback  the same sweep recording 4 direction bits a cell, then the traceback of the
 *                 best cell on the same work-item, giving the CIGAR.
 *   sw_score_twins  sw_score's results for two pairs of equal read length a work-item, in
 *                 packed 16-bit lanes (see its section below).
 *   sw_score_teams  sw_score_twins' results, a team of work-items a twin, one tile each (only
 *                 when the program is built with LAST_ROWS; see its section).
 *   sw_traceback_teams  sw_traceback's results, a team of work-items a pair, one tile each (with
 *                 sw_score_teams in the LAST_ROWS programs; see its section).
 *
 * The recurrences (Gotoh), read = rows i = 1..m, window = columns j = 1..n, s = substitution
 * score, OE = GAP_OPEN + GAP_EXTEND (a gap of k bases costs GAP_OPEN + k * GAP_EXTEND):
 *   E[i][j] = max(H[i][j-1] - OE, E[i][j-1] - GAP_EXTEND)     deletion  (window base, CIGAR D)
 *   F[i][j] = max(H[i-1][j] - OE, F[i-1][j] - GAP_EXTEND)     insertion (read base, CIGAR I)
 *   H[i][j] = max(H[i-1][j-1] + s(read[i-1], window[j-1]), E[i][j], F[i][j]  [, 0 if local])
 * Row 0: H = 0 (a free start anywhere in the window; CLIP_BONUS when local), F = -inf. Column 0:
 * E = -inf, H = 0 when local, H = F = -(GAP_OPEN + i * GAP_EXTEND) when END_TO_END (the read's
 * first i bases inserted). Best cell: local: the largest H over i, j >= 1, with CLIP_BONUS added
 * on row m, ties to the smallest j, then the smallest i; none positive gives score 0 at (0, 0).
 * So a local alignment is chosen by its score plus CLIP_BONUS for each read end it reaches
 * (BWA-MEM's clipping penalty), and that sum is the score the kernels report. END_TO_END: the largest H[m][j] over j = 0..n, ties to
 * the smallest j. Direction ties: H prefers diagonal, then E, then F (and a local H <= 0 is a
 * start, whatever else equals 0); E and F prefer opening over extending.
 *
 * Tiling: the read is swept in tiles of READ_TILE rows. A tile's H and E of the previous column,
 * its read codes and the running F live in private memory (registers once unrolled); the tile
 * walks every window column; only the tile's last row (H, F) goes to the global `boundary` row,
 * which the next tile reads back: 4 (or 8) bytes a column per tile instead of per cell.
 * Substitution scores come from a query profile of the tile in local memory: for each window
 * code w and each tile row t, s(read[t], w) + OPEN_EXTEND (see sweep_tile), two rows packed in
 * one short2, laid out
 * [w][t / 2][local id] so that the work-items of a wavefront hit distinct banks.
 *
 * Buffers:
 *   read_codes, window_codes  uchar[]: 0..3 = A,C,G,T; 4 or more = ambiguous (N), which scores
 *                    -AMBIGUOUS against anything. Read r is read_codes[read_offsets[r] + 0 ..
 *                    read_lengths[r]), window w likewise (window_offsets are ulong).
 *                    With PACKED_WINDOWS, window_codes is the reference text itself, 2 bits a
 *                    base (first base in the low bits), window w its bases window_offsets[w] ..
 *                    + window_lengths[w]: windows are read on the device, never copied in. With
 *                    AMBIGUOUS_MASK too, bit p of `ambiguous` (bit p % 8 of byte p / 8) marks an
 *                    ambiguous text base p, which reads as 4 whatever its 2-bit stand-in.
 *   pair_reads, pair_windows  uint[count]: pair gid aligns read pair_reads[gid] to window
 *                    pair_windows[gid].
 *   boundary         BOUNDARY_T[(max window length + 1) * stride]: column j of work-item gid at
 *                    j * stride + gid (stride = global size), so a wavefront's accesses coalesce.
 *   profile          local short2[5 * READ_TILE / 2 * local size].
 *   results          int[3][count] (sw_score): score, read end, window end (ends exclusive).
 *   directions       DIRECTION_T words (sw_traceback): one word a (tile, column) of a pair,
 *                    4 bits a row: bits 0-1 the H source (0 start, 1 diagonal, 2 E, 3 F),
 *                    bit 2 E extends, bit 3 F extends. Work-group g's words start at
 *                    direction_offsets[g]; its word for (tile, column j >= 1) of local id l is
 *                    at ((tile * direction_columns[g] + j - 1) * local size + l).
 *   cigar            uint[] (sw_traceback): pair gid's CIGAR at cigar_offsets[gid], room for
 *                    read length + window length + 2 operations; BAM encoding length << 4 | op,
 *                    M = 0, I = 1, D = 2, S = 4 (soft clips, local mode only).
 *   trace_results    int[6][count] (sw_traceback): score, read start, read end, window start,
 *                    window end, CIGAR operation count.
 *
 * Invariants: READ_TILE is 8 or 16. Scores fit BOUNDARY_T: the host picks short2 only when every
 * H and F value lies in (-30000, 30000), and NEG lies below all of them by more than OE.
 */

#ifndef READ_TILE
#define READ_TILE 16
#endif
#ifndef PACKED_WINDOWS
#define PACKED_WINDOWS 0
#endif
#ifndef AMBIGUOUS_MASK
#define AMBIGUOUS_MASK 0
#endif
#define PROFILE_WORDS (READ_TILE / 2)
#define OPEN_EXTEND (GAP_OPEN + GAP_EXTEND)

#if WIDE_BOUNDARY
typedef int2 BOUNDARY_T;
typedef int BOUNDARY_SCALAR;
#define NEG (-(1 << 29))
#else
typedef short2 BOUNDARY_T;
typedef short BOUNDARY_SCALAR;
#define NEG (-32000)
#endif

#if READ_TILE == 16
typedef ulong DIRECTION_T;
#elif READ_TILE == 8
typedef uint DIRECTION_T;
#else
#error READ_TILE must be 8 or 16
#endif

#define SOURCE_START 0u
#define SOURCE_DIAGONAL 1u
#define SOURCE_DELETION 2u
#define SOURCE_INSERTION 3u
#define E_EXTENDS 4u
#define F_EXTENDS 8u

#define OP_M 0u
#define OP_I 1u
#define OP_D 2u
#define OP_S 4u

inline int substitution(uint read_code, uint window_code)
{
    return (read_code > 3u || window_code > 3u) ? -AMBIGUOUS : read_code == window_code ? MATCH : -MISMATCH;
}

#include "packed_text.h"

/* The code (0..4) of base p of a window's sequence: a byte of window_codes, or 2 bits of the
 * packed text (and its ambiguity bit). */
inline uint window_base(__global const uchar *window_codes, __global const uchar *ambiguous, ulong p)
{
#if PACKED_WINDOWS
    return packed_base(window_codes, ambiguous, p);
#else
    return min((uint)window_codes[p], 4u);
#endif
}

#ifndef CLIP_BONUS
#define CLIP_BONUS 0
#endif

/* H[i][0] for i >= 1, and H[0][j] (row 0, every j) when i = 0. */
inline int first_column(uint i)
{
#if END_TO_END
    return i == 0 ? 0 : -(GAP_OPEN + (int)i * GAP_EXTEND);
#else
    return i == 0 ? CLIP_BONUS : 0;
#endif
}

/* Local mode: the end bonus of H = h on tile row t: CLIP_BONUS on the read's last row where an
 * alignment ends there (h > 0; a cell at 0 is no alignment and stays 0). */
#define END_BONUS(last, t, rows, h) (((last) && (t) == (rows) - 1u && (h) > 0) ? CLIP_BONUS : 0)

typedef struct {
    int score;
    uint read_end;
    uint window_end;
} Best;

/* The first parameters of every kernel here: the reads, the windows (see "Buffers" above) and
 * the `count` pairs. */
#define SW_PAIR_PARAMETERS                                                                            \
    __global const uchar *read_codes, __global const uint *read_offsets, __global const uint *read_lengths,  \
    __global const uchar *window_codes, __global const ulong *window_offsets, __global const uint *window_lengths, \
    __global const uchar *ambiguous, __global const uint *pair_reads, __global const uint *pair_windows, const uint count

/* Cell t of a tile's column: from `diagonal` (H[i - 1][j - 1] - OPEN_EXTEND), `up` (H[i - 1][j]
 * - OPEN_EXTEND), `f` (F[i - 1][j]), hoe[t] and e[t] (the cell's left), and the profile's
 * pair_scores. Sets h (H[i][j]) and moves diagonal, up and f down to row i; with `record`, ORs
 * the cell's 4 direction bits into `bits`. A macro over the caller's variables, not a function
 * taking pointers to its register arrays: sweep_tile's code stays as it was written inline. */
#if END_TO_END
#define SW_FLOOR(h)
#define SW_RECORDED_FLOOR(h, source)
#else
#define SW_FLOOR(h) h = max(h, 0);
#define SW_RECORDED_FLOOR(h, source) if (h <= 0) { h = 0; source = SOURCE_START; }
#endif
#define SW_CELL(t, record)                                                                      \
    {                                                                                           \
        int s = ((t) & 1u) ? pair_scores[(t) / 2].y : pair_scores[(t) / 2].x; /* + OPEN_EXTEND */ \
        int e_open = hoe[t], e_extend = e[t] - GAP_EXTEND;                                      \
        int f_open = up, f_extend = f - GAP_EXTEND;                                             \
        int e_new = max(e_open, e_extend);                                                      \
        int f_new = max(f_open, f_extend);                                                      \
        h = diagonal + s;                                                                       \
        if (record) {                                                                           \
            uint source = SOURCE_DIAGONAL;                                                      \
            if (e_new > h) { h = e_new; source = SOURCE_DELETION; }                             \
            if (f_new > h) { h = f_new; source = SOURCE_INSERTION; }                            \
            SW_RECORDED_FLOOR(h, source)                                                        \
            source |= (e_extend > e_open ? E_EXTENDS : 0u) | (f_extend > f_open ? F_EXTENDS : 0u); \
            bits |= (DIRECTION_T)source << (4 * (t));                                           \
        } else {                                                                                \
            h = max(h, max(e_new, f_new));                                                      \
            SW_FLOOR(h)                                                                         \
        }                                                                                       \
        diagonal = hoe[t];                                                                      \
        hoe[t] = h - OPEN_EXTEND;                                                               \
        e[t] = e_new;                                                                           \
        f = f_new;                                                                              \
        up = hoe[t];                                                                            \
    }

/* A tile's query profile (see the header) in `profile`, one work-item's, `stride` apart. */
inline void fill_profile(__local short2 *profile, uint stride, const uint *read_code)
{
    for (uint w = 0; w < 5u; ++w) {
#pragma unroll
        for (uint k = 0; k < PROFILE_WORDS; ++k)
            profile[(w * PROFILE_WORDS + k) * stride] =
                (short2)((short)(substitution(read_code[2 * k], w) + OPEN_EXTEND),
                         (short)(substitution(read_code[2 * k + 1], w) + OPEN_EXTEND));
    }
}

/* A column's scores (window code `code`) from a tile's query profile (fill_profile's, `stride`
 * apart); inlined with the array in registers. */
inline void column_scores(__local const short2 *profile, uint stride, uint code, short2 *pair_scores)
{
    __local const short2 *scores = profile + code * PROFILE_WORDS * stride;
#pragma unroll
    for (uint k = 0; k < PROFILE_WORDS; ++k)
        pair_scores[k] = scores[k * stride];
}

/* Whether best `a` goes before `b`: a larger score, or as large at a smaller column (the order
 * in which a tile's columns, then the tiles, are swept). */
inline bool better_best(Best a, Best b)
{
    return a.score > b.score || (a.score == b.score && a.window_end < b.window_end);
}

/* Local mode: column j's best (column_best, over the tile's `rows` rows, end bonus included)
 * becomes `best` where it is better, at its smallest row. The row search is rare: off the cell loop. */
inline void take_column(Best *best, int column_best, uint j, const int *hoe, const bool last, uint rows, uint i0)
{
    Best column = {column_best, 0u, j};
    if (!better_best(column, *best))
        return;
    uint row = 0;
#pragma unroll
    for (int t = READ_TILE - 1; t >= 0; --t)
        if (hoe[t] + END_BONUS(last, (uint)t, rows, hoe[t] + OPEN_EXTEND) == column_best - OPEN_EXTEND && (uint)t < rows) row = (uint)t;
    best->score = column_best;
    best->read_end = i0 + row + 1;
    best->window_end = j;
}

/* One tile: rows tile * READ_TILE + 1 .. + rows, across all n columns. `last` is the read's last
 * tile (rows may be short of READ_TILE; it writes no boundary). Inlined with literal `record`
 * and, for full tiles, literal rows, so the masks and the direction code fold away. */
inline void sweep_tile(uint tile, uint rows, const bool last, const bool record,
                       __global const uchar *read, __global const uchar *window_codes,
                       __global const uchar *ambiguous, ulong window_start, uint n,
                       __global BOUNDARY_T *boundary, uint stride, uint gid,
                       __local short2 *profile, uint local_size,
                       __global DIRECTION_T *directions, uint direction_columns,
                       Best *best)
{
    uint i0 = tile * READ_TILE;
    uint read_code[READ_TILE];
    /* H enters the recurrences only as H - OPEN_EXTEND (the cost of opening a gap after it) and
     * as diagonal + s: both come from one stored value, hoe = H - OPEN_EXTEND, with OPEN_EXTEND
     * added to the profile's scores. One subtraction a cell instead of two. */
    int hoe[READ_TILE], e[READ_TILE];  /* hoe[t]: H[i0 + t + 1][j - 1] - OPEN_EXTEND */
#pragma unroll
    for (uint t = 0; t < READ_TILE; ++t) {
        read_code[t] = t < rows ? min((uint)read[i0 + t], 4u) : 4u;
        hoe[t] = first_column(i0 + t + 1) - OPEN_EXTEND;
        e[t] = NEG;
    }
    fill_profile(profile, local_size, read_code);
    int diagonal_top = first_column(i0) - OPEN_EXTEND;  /* H[i0][j - 1] - OPEN_EXTEND */
    for (uint j = 1; j <= n; ++j) {
        uint window_code = window_base(window_codes, ambiguous, window_start + j - 1);
        int up, f;  /* up: H of the row above, minus OPEN_EXTEND; f: its F */
        if (tile == 0) {
            up = first_column(0) - OPEN_EXTEND;
            f = NEG;
        } else {
            BOUNDARY_T top = boundary[(size_t)j * stride + gid];
            up = top.x - OPEN_EXTEND;
            f = top.y;
        }
        int diagonal = diagonal_top;
        diagonal_top = up;
        short2 pair_scores[PROFILE_WORDS];
        column_scores(profile, local_size, window_code, pair_scores);
        DIRECTION_T bits = 0;
        int column_best = NEG;
        int last_row = NEG;
#pragma unroll
        for (uint t = 0; t < READ_TILE; ++t) {
            int h;
            SW_CELL(t, record)
#if END_TO_END
            if (last && t == rows - 1) last_row = h;
#else
            if (!last || t < rows) column_best = max(column_best, h);
            if (last && t == rows - 1) last_row = h;  /* its end bonus is added below, off the cell loop */
#endif
        }
#if !END_TO_END
        if (last)
            column_best = max(column_best, last_row + END_BONUS(true, 0u, 1u, last_row));
#endif
        if (!last)
            boundary[(size_t)j * stride + gid] =
                (BOUNDARY_T)((BOUNDARY_SCALAR)(hoe[READ_TILE - 1] + OPEN_EXTEND), (BOUNDARY_SCALAR)f);
        if (record)
            directions[((size_t)tile * direction_columns + j - 1) * local_size] = bits;
#if END_TO_END
        if (last && last_row > best->score) {
            best->score = last_row;
            best->window_end = j;
        }
#else
        /* Tiles run before columns, ties go to the smaller column then the smaller row: a
         * later tile takes an equal score only at a smaller column. Rare, so the row search
         * costs nothing in the steady state. */
        take_column(best, column_best, j, hoe, last, rows, i0);
#endif
    }
}

/* A read of m bases' best before any column: end-to-end, H[m][0] (the whole read inserted);
 * local, nothing (score 0 at (0, 0)). */
inline Best no_best(uint m)
{
    Best best;
#if END_TO_END
    best.score = first_column(m);
    best.read_end = m;
#else
    best.score = 0;
    best.read_end = 0;
#endif
    best.window_end = 0;
    return best;
}

inline Best sweep(const bool record, __global const uchar *read, uint m, __global const uchar *window_codes,
                  __global const uchar *ambiguous, ulong window_start, uint n,
                  __global BOUNDARY_T *boundary, uint stride, uint gid, __local short2 *profile, uint local_size,
                  __global DIRECTION_T *directions, uint direction_columns)
{
    Best best = no_best(m);
    uint tiles = (m + READ_TILE - 1) / READ_TILE;
    for (uint tile = 0; tile + 1 < tiles; ++tile)
        sweep_tile(tile, READ_TILE, false, record, read, window_codes, ambiguous, window_start, n, boundary, stride, gid,
                   profile, local_size,
                   directions, direction_columns, &best);
    if (tiles > 0)
        sweep_tile(tiles - 1, m - (tiles - 1) * READ_TILE, true, record, read, window_codes, ambiguous, window_start, n,
                   boundary, stride, gid,
                   profile, local_size, directions, direction_columns, &best);
    return best;
}

#ifndef LAST_ROWS  /* a teams program holds the teams' kernels alone */
__kernel void sw_score(SW_PAIR_PARAMETERS,
                       __global BOUNDARY_T *boundary, __local short2 *profile, __global int *results)
{
    uint gid = get_global_id(0);
    if (gid >= count)
        return;
    uint local_size = get_local_size(0);
    uint read = pair_reads[gid], window = pair_windows[gid];
    Best best = sweep(false, read_codes + read_offsets[read], read_lengths[read], window_codes, ambiguous,
                      window_offsets[window], window_lengths[window], boundary, get_global_size(0), gid, profile + get_local_id(0), local_size,
                      0, 0);
    results[gid] = best.score;
    results[count + gid] = (int)best.read_end;
    results[2 * count + gid] = (int)best.window_end;
}
#endif

/* ------------------------------------------------------------------------------------------
 * sw_score_twins: the score sweep of two pairs at once, in packed 16-bit lanes.
 *
 * Work-item g takes pairs 2g (lane A, the low 16 bits of every value) and 2g + 1 (lane B, the
 * high 16 bits). The host pairs up pairs of the same read length (it may pair a pair with
 * itself); the windows may differ in length: the twin sweeps max(n_A, n_B) columns, and a
 * lane's columns beyond its own window are read as code 0 and never enter its best cell (they
 * come after every column it uses, so nothing of theirs flows back). Each cell of a lane follows
 * exactly the recurrences and tie rules of `sweep_tile`, so the results equal sw_score's.
 *
 * Every H, E and F value, and every sum formed on the way, must fit a signed 16-bit lane: the
 * host runs this kernel only when |H|, |F| < SHORT_SCORE_LIMIT (30000) and the scoring leaves
 * the margins described at NEG16; each lane then computes with plain wrapping 16-bit adds
 * that never wrap.
 *
 * Substitution scores: for each tile row the twin keeps two 32-bit look-up words, byte w of the
 * first = s(read_A[row], w) + OPEN_EXTEND for window codes w = 0..3, likewise the second for
 * read B (the host checks these fit a signed byte). A column's packed scores for one row are
 * then one byte permutation: low half = sign-extended byte w_A of the first word, high half =
 * sign-extended byte w_B of the second. An ambiguous window base (code 4) in either lane
 * overrides that lane's scores for the column with OPEN_EXTEND - AMBIGUOUS.
 *
 * PACKED_ASM (NVIDIA, compute capability >= 9.0): the lane operations are single PTX
 * instructions (add.s16x2, max.s16x2, max.relu.s16x2 and prmt.b32). Otherwise they are
 * OpenCL short2 vector operations and shifts, which any device runs. The adds and maxima
 * (padd, pmax, pmax_floor0, with lanes, lane_a, lane_b) are sw/packed_lanes.h's, shared with
 * modules/sw_search.cl; row_scores is this kernel's own.
 * ------------------------------------------------------------------------------------------ */

#include "sw/packed_lanes.h"

/* "Minus infinity" of a 16-bit lane: below every real H - OPEN_EXTEND by more than GAP_EXTEND,
 * yet NEG16 - GAP_EXTEND stays above -32768 (the host checks GAP_OPEN + 2 GAP_EXTEND < 2700). */
#define NEG16 (-30001 - OPEN_EXTEND)
#define WINDOWS_MAY_HOLD_N (!PACKED_WINDOWS || AMBIGUOUS_MASK)

#if PACKED_ASM
/* Packed scores of one row: see above. `selector` is the column's prmt selector. */
inline uint row_scores(uint lookup_a, uint lookup_b, uint selector, uint shift_a, uint shift_b)
{
    uint d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(lookup_a), "r"(lookup_b), "r"(selector));
    return d;
}
#else
inline uint row_scores(uint lookup_a, uint lookup_b, uint selector, uint shift_a, uint shift_b)
{
    return lanes((char)(lookup_a >> shift_a), (char)(lookup_b >> shift_b));
}
#endif

/* Packed last-row H of both lanes with the end bonus where positive (see END_BONUS); once a
 * column, so portable short2 operations on every device. */
inline uint with_end_bonus(uint h)
{
    short2 v = as_short2(h);
    return as_uint(v + select((short2)(0, 0), (short2)(CLIP_BONUS, CLIP_BONUS), v > (short2)(0, 0)));
}

/* The look-up word of one read code: byte w = s(code, w) + OPEN_EXTEND, w = 0..3. */
inline uint score_bytes(uint read_code)
{
    uint word = 0;
    for (uint w = 0; w < 4u; ++w)
        word |= ((uint)(substitution(read_code, w) + OPEN_EXTEND) & 0xFFu) << (8 * w);
    return word;
}

/* One column of one tile for both lanes: READ_TILE rows (OVERRIDE: the column has an
 * ambiguous window base in a lane; `keep` and `over` replace that lane's scores). */
#define TWIN_ROWS(OVERRIDE)                                                                        \
    _Pragma("unroll") for (uint t = 0; t < READ_TILE; ++t) {                                        \
        uint s = row_scores(lookup_a[t], lookup_b[t], selector, shift_a, shift_b);                  \
        if (OVERRIDE)                                                                               \
            s = (s & keep) | over;                                                                  \
        uint e_new = pmax(hoe[t], padd(e[t], minus_extend));                                        \
        uint f_new = pmax(up, padd(f, minus_extend));                                               \
        uint h = padd(diagonal, s);                                                                 \
        h = LOCAL_FLOOR(h, pmax(e_new, f_new));                                                     \
        diagonal = hoe[t];                                                                          \
        hoe[t] = padd(h, minus_open_extend);                                                        \
        e[t] = e_new;                                                                               \
        f = f_new;                                                                                  \
        up = hoe[t];                                                                                \
        TRACK_BEST(t, h);                                                                           \
    }

#if END_TO_END
#define LOCAL_FLOOR(a, b) pmax(a, b)
#define TRACK_BEST(t, h) if (last && (t) == rows - 1) last_row = (h)
#else
#define LOCAL_FLOOR(a, b) pmax_floor0(a, b)
#define TRACK_BEST(t, h)                                      \
    {                                                         \
        if (!last || (t) < rows)                              \
            column_best = pmax(column_best, (h));             \
        if (last && (t) == rows - 1)                          \
            last_row = (h); /* its end bonus: after the rows */ \
    }
#endif

/* The prmt selector of a column's window codes (see row_scores) and the portable path's shifts. */
inline uint twin_selector(uint code_a, uint code_b, uint *shift_a, uint *shift_b)
{
    uint low = code_a & 3u, high = (code_b & 3u) + 4u;
    *shift_a = 8u * low;
    *shift_b = 8u * (code_b & 3u);
    return low | ((low | 8u) << 4) | (high << 8) | ((high | 8u) << 12);
}

/* A column with an ambiguous window base in a lane: the lanes' scores kept, and the overriding ones. */
inline void twin_override(uint code_a, uint code_b, uint *keep, uint *over)
{
    const uint ambiguous_score = (uint)(OPEN_EXTEND - AMBIGUOUS) & 0xFFFFu;
    *keep = (code_a > 3u ? 0xFFFF0000u : 0xFFFFFFFFu) & (code_b > 3u ? 0x0000FFFFu : 0xFFFFFFFFu);
    *over = (code_a > 3u ? ambiguous_score : 0u) | (code_b > 3u ? ambiguous_score << 16 : 0u);
}

/* One column's rows for both lanes, with the override where a window base is ambiguous. */
#if WINDOWS_MAY_HOLD_N
#define TWIN_COLUMN()                                  \
    if ((code_a | code_b) > 3u) {                      \
        twin_override(code_a, code_b, &keep, &over);   \
        TWIN_ROWS(1)                                   \
    } else {                                           \
        TWIN_ROWS(0)                                   \
    }
#else
#define TWIN_COLUMN() { TWIN_ROWS(0) }
#endif

/* A lane's best-cell update after a column (see sweep_tile); `score` is the lane's column best
 * (local) or last-row H (end-to-end), `shift` 0 for lane A, 16 for lane B. */
inline void twin_update(Best *best, int score, uint j, uint n, uint i0, uint rows, const bool last, uint shift, const uint *hoe)
{
    if (j > n)
        return;
#if END_TO_END
    if (score > best->score) {
        best->score = score;
        best->window_end = j;
    }
#else
    Best column = {score, 0u, j};
    if (better_best(column, *best)) {
        uint row = 0;
#pragma unroll
        for (int t = READ_TILE - 1; t >= 0; --t)
            if ((int)(short)(hoe[t] >> shift) + END_BONUS(last, (uint)t, rows, (int)(short)(hoe[t] >> shift) + OPEN_EXTEND) == score - OPEN_EXTEND && (uint)t < rows) row = (uint)t;
        best->score = score;
        best->read_end = i0 + row + 1;
        best->window_end = j;
    }
#endif
}

/* Twin g's results: score, read end, window end of pairs 2g and 2g + 1 (int[3][2 x count]). */
inline void twin_results(__global int *results, uint count, uint twin, Best a, Best b)
{
    uint slots = 2 * count, first = 2 * twin;
    results[first] = a.score;
    results[slots + first] = (int)a.read_end;
    results[2 * slots + first] = (int)a.window_end;
    results[first + 1] = b.score;
    results[slots + first + 1] = (int)b.read_end;
    results[2 * slots + first + 1] = (int)b.window_end;
}

inline void twin_tile(uint tile, uint rows, const bool last, __global const uchar *read_a, __global const uchar *read_b,
                      __global const uchar *window_codes, __global const uchar *ambiguous,
                      ulong start_a, uint n_a, ulong start_b, uint n_b, uint columns,
                      __global uint2 *boundary, uint stride, uint gid, Best *best_a, Best *best_b)
{
    uint i0 = tile * READ_TILE;
    uint lookup_a[READ_TILE], lookup_b[READ_TILE], hoe[READ_TILE], e[READ_TILE];
    const uint minus_extend = lanes(-GAP_EXTEND, -GAP_EXTEND);
    const uint minus_open_extend = lanes(-OPEN_EXTEND, -OPEN_EXTEND);
    const uint negative = lanes(NEG16, NEG16);
#pragma unroll
    for (uint t = 0; t < READ_TILE; ++t) {
        lookup_a[t] = score_bytes(t < rows ? min((uint)read_a[i0 + t], 4u) : 4u);
        lookup_b[t] = score_bytes(t < rows ? min((uint)read_b[i0 + t], 4u) : 4u);
        int first = first_column(i0 + t + 1) - OPEN_EXTEND;
        hoe[t] = lanes(first, first);
        e[t] = negative;
    }
    int top_first = first_column(i0) - OPEN_EXTEND;
    uint diagonal_top = lanes(top_first, top_first);
    for (uint j = 1; j <= columns; ++j) {
        uint code_a = j <= n_a ? window_base(window_codes, ambiguous, start_a + j - 1) : 0u;
        uint code_b = j <= n_b ? window_base(window_codes, ambiguous, start_b + j - 1) : 0u;
        uint up, f;  /* packed H of the row above minus OPEN_EXTEND, and its F */
        if (tile == 0) {
            up = lanes(first_column(0) - OPEN_EXTEND, first_column(0) - OPEN_EXTEND);
            f = negative;
        } else {
            uint2 top = boundary[(size_t)j * stride + gid];
            up = padd(top.x, minus_open_extend);
            f = top.y;
        }
        uint diagonal = diagonal_top;
        diagonal_top = up;
        uint shift_a, shift_b, selector = twin_selector(code_a, code_b, &shift_a, &shift_b);
        uint column_best = 0, last_row = 0;
        uint keep = 0xFFFFFFFFu, over = 0u;  /* the lanes' scores kept, and the overriding ones */
        TWIN_COLUMN()
        if (!last)
            boundary[(size_t)j * stride + gid] = (uint2)(padd(hoe[READ_TILE - 1], lanes(OPEN_EXTEND, OPEN_EXTEND)), f);
#if END_TO_END
        if (last) {
            twin_update(best_a, lane_a(last_row), j, n_a, i0, rows, last, 0, hoe);
            twin_update(best_b, lane_b(last_row), j, n_b, i0, rows, last, 16, hoe);
        }
#else
        if (last)  /* the last row's end bonus, once a column as in sweep_tile */
            column_best = pmax(column_best, with_end_bonus(last_row));
        /* Most columns improve neither lane's best: one packed test skips both updates (3% on
         * an H200). A lane whose column best is below its best minus one cannot improve. */
        uint below = lanes(best_a->score - 1, best_b->score - 1);
        if (pmax(column_best, below) != below) {
            twin_update(best_a, lane_a(column_best), j, n_a, i0, rows, last, 0, hoe);
            twin_update(best_b, lane_b(column_best), j, n_b, i0, rows, last, 16, hoe);
        }
#endif
    }
}

#ifndef LAST_ROWS
__kernel void sw_score_twins(SW_PAIR_PARAMETERS,
                             __global uint2 *boundary, __global int *results)
{
    uint gid = get_global_id(0);
    if (gid >= count)
        return;
    uint read_a = pair_reads[2 * gid], read_b = pair_reads[2 * gid + 1];
    uint window_a = pair_windows[2 * gid], window_b = pair_windows[2 * gid + 1];
    uint m = read_lengths[read_a];  /* the host pairs equal read lengths */
    uint n_a = window_lengths[window_a], n_b = window_lengths[window_b];
    Best best_a = no_best(m), best_b = best_a;
    __global const uchar *codes_a = read_codes + read_offsets[read_a], *codes_b = read_codes + read_offsets[read_b];
    ulong start_a = window_offsets[window_a], start_b = window_offsets[window_b];
    uint columns = max(n_a, n_b), stride = get_global_size(0);
    uint tiles = (m + READ_TILE - 1) / READ_TILE;
    for (uint tile = 0; tile + 1 < tiles; ++tile)
        twin_tile(tile, READ_TILE, false, codes_a, codes_b, window_codes, ambiguous, start_a, n_a, start_b, n_b, columns,
                  boundary, stride, gid, &best_a, &best_b);
    if (tiles > 0)
        twin_tile(tiles - 1, m - (tiles - 1) * READ_TILE, true, codes_a, codes_b, window_codes, ambiguous, start_a, n_a,
                  start_b, n_b, columns, boundary, stride, gid, &best_a, &best_b);
    twin_results(results, count, gid, best_a, best_b);
}
#endif

#ifdef LAST_ROWS
/* ------------------------------------------------------------------------------------------
 * sw_score_teams: sw_score_twins' results, a team of work-items a twin, one tile each.
 *
 * sw_score_twins sweeps a twin's tiles one after another on one work-item, a chain of
 * tiles x columns column steps, so a launch lasts as long as its longest twin takes alone. Here
 * member k of a team of `team` work-items (team >= the twin's tiles) holds tile k's rows and
 * registers, and the members sweep the columns a step apart: at step s member k computes column
 * j = s - k + 1 from the last row (H - OPEN_EXTEND and F) that member k - 1 computed for that
 * column at step s - 1 and left in local memory (two slots, alternating by step, so one barrier
 * a step). A twin takes columns + tiles - 1 steps; the work is the same, and nothing goes
 * through global memory between tiles. The teams of a work-group step together (the barrier):
 * the host orders twins by length, so a group's teams take about as many steps.
 *
 * Every member runs the same sweep (a wavefront holding first, middle and last tiles would
 * run each kind's own path in turn). For that the read's last row is a compile-time row,
 * LAST_ROWS - 1, of the last tile: the host launches each value of (m - 1) % READ_TILE + 1
 * apart. Rows past the read in the last tile (code 4, as in sw_score_twins) enter the column
 * best unmasked; they change nothing: no cell below row m scores more than a cell of row m at
 * the same or an earlier column (every step down or across costs AMBIGUOUS, GAP_OPEN or
 * GAP_EXTEND, all >= 0, and the floor is 0), those cells of row m are in the member's best
 * already, and a member's best moves only on a strictly larger score (its columns only grow).
 *
 * The members' bests are merged in tile order by score, then the smaller column, then the
 * smaller row: the order in which sw_score_twins' tiles take them.
 * ------------------------------------------------------------------------------------------ */

#if END_TO_END
#define TEAM_TRACK(t, h) if ((t) == LAST_ROWS - 1) last_row = (h)
#else
#define TEAM_TRACK(t, h)                          \
    {                                             \
        column_best = pmax(column_best, (h));     \
        if ((t) == LAST_ROWS - 1)                 \
            last_row = (h);                       \
    }
#endif

/* The steps of a work-group's teams: the most that any team's member 0 asks for (where `asks`). */
inline uint team_steps(__local uint *most_steps, bool asks, uint steps, uint lid)
{
    if (lid == 0)
        *most_steps = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (asks)
        atomic_max(most_steps, steps);
    barrier(CLK_LOCAL_MEM_FENCE);
    return *most_steps;
}

/* Local memory `scratch`: uint2[3 * local size + 1] (uint2: NVIDIA aligns a local argument
 * only to its own type's size). Twin g (pairs 2g and 2g + 1, as in
 * sw_score_twins) is team g % (local size / team) of work-group g / (local size / team). */
__kernel void sw_score_teams(SW_PAIR_PARAMETERS,
                             const uint team, __local uint2 *scratch, __global int *results)
{
    uint lid = get_local_id(0), group_size = get_local_size(0), teams = group_size / team;
    uint member = lid % team, twin = get_group_id(0) * teams + lid / team;
    __local uint2 *exchange = scratch;  /* [2][group size] */
    __local uint *most_steps = (__local uint *)(scratch + 3 * group_size);
    uint m = 0, n_a = 0, n_b = 0;
    ulong start_a = 0, start_b = 0;
    __global const uchar *codes_a = read_codes, *codes_b = read_codes;
    if (lid / team < teams && twin < count) {
        uint read_a = pair_reads[2 * twin], read_b = pair_reads[2 * twin + 1];
        uint window_a = pair_windows[2 * twin], window_b = pair_windows[2 * twin + 1];
        m = read_lengths[read_a];  /* the host pairs equal read lengths */
        n_a = window_lengths[window_a];
        n_b = window_lengths[window_b];
        start_a = window_offsets[window_a];
        start_b = window_offsets[window_b];
        codes_a = read_codes + read_offsets[read_a];
        codes_b = read_codes + read_offsets[read_b];
    }
    uint columns = max(n_a, n_b), tiles = (m + READ_TILE - 1) / READ_TILE;
    const bool working = member < tiles, last = member + 1 == tiles;
    uint steps = team_steps(most_steps, working && member == 0, columns + tiles - 1, lid);

    uint i0 = member * READ_TILE, rows = last ? LAST_ROWS : READ_TILE;
    uint lookup_a[READ_TILE], lookup_b[READ_TILE], hoe[READ_TILE], e[READ_TILE];
    const uint minus_extend = lanes(-GAP_EXTEND, -GAP_EXTEND);
    const uint minus_open_extend = lanes(-OPEN_EXTEND, -OPEN_EXTEND);
    const uint negative = lanes(NEG16, NEG16);
    const uint top_up = lanes(first_column(0) - OPEN_EXTEND, first_column(0) - OPEN_EXTEND);
#pragma unroll
    for (uint t = 0; t < READ_TILE; ++t) {
        bool inside = working && t < rows;
        lookup_a[t] = score_bytes(inside ? min((uint)codes_a[i0 + t], 4u) : 4u);
        lookup_b[t] = score_bytes(inside ? min((uint)codes_b[i0 + t], 4u) : 4u);
        int first = first_column(i0 + t + 1) - OPEN_EXTEND;
        hoe[t] = lanes(first, first);
        e[t] = negative;
    }
    Best best_a = no_best(m), best_b = best_a;
    int top_first = first_column(i0) - OPEN_EXTEND;
    uint diagonal_top = lanes(top_first, top_first);

#undef TRACK_BEST
#define TRACK_BEST(t, h) TEAM_TRACK(t, h)
    for (uint s = 0; s < steps; ++s) {
        uint j = s + 1 - member;  /* wraps below 1 before the member's first step */
        if (working && j - 1u < columns) {
            uint code_a = j <= n_a ? window_base(window_codes, ambiguous, start_a + j - 1) : 0u;
            uint code_b = j <= n_b ? window_base(window_codes, ambiguous, start_b + j - 1) : 0u;
            uint up = top_up, f = negative;  /* the row above: H - OPEN_EXTEND, and F */
            if (member > 0) {
                uint2 top = exchange[((s - 1) & 1) * group_size + lid - 1];
                up = top.x;
                f = top.y;
            }
            uint diagonal = diagonal_top;
            diagonal_top = up;
            uint shift_a, shift_b, selector = twin_selector(code_a, code_b, &shift_a, &shift_b);
            uint column_best = 0, last_row = 0;
            uint keep = 0xFFFFFFFFu, over = 0u;
            TWIN_COLUMN()
            exchange[(s & 1) * group_size + lid] = (uint2)(hoe[READ_TILE - 1], f);
#if END_TO_END
            if (last) {
                twin_update(&best_a, lane_a(last_row), j, n_a, i0, rows, true, 0, hoe);
                twin_update(&best_b, lane_b(last_row), j, n_b, i0, rows, true, 16, hoe);
            }
#else
            if (last)
                column_best = pmax(column_best, with_end_bonus(last_row));
            uint below = lanes(best_a.score - 1, best_b.score - 1);
            if (pmax(column_best, below) != below) {
                twin_update(&best_a, lane_a(column_best), j, n_a, i0, rows, last, 0, hoe);
                twin_update(&best_b, lane_b(column_best), j, n_b, i0, rows, last, 16, hoe);
            }
#endif
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
#undef TRACK_BEST

#if END_TO_END
    if (last) {  /* only the last row counts */
#else
    __local int *bests = (__local int *)scratch;  /* 6 a work-item; the exchange is done with */
    if (working) {
        __local int *mine = bests + 6 * lid;
        mine[0] = best_a.score; mine[1] = (int)best_a.read_end; mine[2] = (int)best_a.window_end;
        mine[3] = best_b.score; mine[4] = (int)best_b.read_end; mine[5] = (int)best_b.window_end;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (working && member == 0) {
        for (uint k = 1; k < tiles; ++k) {
            __local const int *theirs = bests + 6 * (lid + k);
            Best other_a = {theirs[0], (uint)theirs[1], (uint)theirs[2]}, other_b = {theirs[3], (uint)theirs[4], (uint)theirs[5]};
            if (better_best(other_a, best_a))
                best_a = other_a;
            if (better_best(other_b, best_b))
                best_b = other_b;
        }
#endif
        twin_results(results, count, twin, best_a, best_b);
    }
}
#endif

/* Appends one step of `op` to the run being built backwards; flushes the previous run. */
inline void push_op(__global uint *cigar, uint *used, uint *run_op, uint *run_length, uint op, uint length)
{
    if (length == 0)
        return;
    if (*run_length > 0 && *run_op != op) {
        cigar[(*used)++] = (*run_length << 4) | *run_op;
        *run_length = 0;
    }
    *run_op = op;
    *run_length += length;
}

/* The walk back from `best` over a pair's direction words, word (tile, column j >= 1) at
 * words[tile * tile_step + (j - 1) * column_step]; writes the CIGAR to `out` and the pair's
 * six trace_results (pair `slot` of `count`). */
inline void walk_back(__global const DIRECTION_T *words, size_t tile_step, size_t column_step, Best best, uint m,
                      __global uint *out, __global int *trace_results, uint count, uint slot)
{
    uint used = 0, run_op = 0, run_length = 0;
#if !END_TO_END
    push_op(out, &used, &run_op, &run_length, OP_S, m - best.read_end);
#endif
    uint i = best.read_end, j = best.window_end;
    uint state = SOURCE_DIAGONAL;  /* which matrix the walk is in: H (diagonal), E or F */
    for (;;) {
        if (state == SOURCE_DIAGONAL && (i == 0 || j == 0)) {
#if END_TO_END
            push_op(out, &used, &run_op, &run_length, OP_I, i);  /* column 0: the rest inserted */
            i = 0;
#endif
            break;
        }
        uint row = i - 1;
        uint cell = (uint)(words[(row / READ_TILE) * tile_step + (j - 1) * column_step] >> (4 * (row % READ_TILE))) & 15u;
        if (state == SOURCE_DIAGONAL) {
            uint source = cell & 3u;
            if (source == SOURCE_START)
                break;
            if (source == SOURCE_DIAGONAL) {
                push_op(out, &used, &run_op, &run_length, OP_M, 1);
                --i;
                --j;
            } else {
                state = source;
            }
        } else if (state == SOURCE_DELETION) {
            push_op(out, &used, &run_op, &run_length, OP_D, 1);
            if (!(cell & E_EXTENDS))
                state = SOURCE_DIAGONAL;
            --j;
        } else {
            push_op(out, &used, &run_op, &run_length, OP_I, 1);
            if (!(cell & F_EXTENDS))
                state = SOURCE_DIAGONAL;
            --i;
        }
    }
#if !END_TO_END
    push_op(out, &used, &run_op, &run_length, OP_S, i);
#endif
    if (run_length > 0)
        out[used++] = (run_length << 4) | run_op;
    for (uint a = 0, b = used; a + 1 < b; ++a, --b) {  /* built from the end: reverse */
        uint swap = out[a];
        out[a] = out[b - 1];
        out[b - 1] = swap;
    }
    trace_results[slot] = best.score;
    trace_results[count + slot] = (int)i;
    trace_results[2 * count + slot] = (int)best.read_end;
    trace_results[3 * count + slot] = (int)j;
    trace_results[4 * count + slot] = (int)best.window_end;
    trace_results[5 * count + slot] = (int)used;
}

#ifndef LAST_ROWS  /* a teams program holds the teams' kernels alone */
__kernel void sw_traceback(SW_PAIR_PARAMETERS,
                           __global BOUNDARY_T *boundary, __local short2 *profile,
                           __global DIRECTION_T *directions, __global const ulong *direction_offsets,
                           __global const uint *direction_columns,
                           __global uint *cigar, __global const uint *cigar_offsets, __global int *trace_results)
{
    uint gid = get_global_id(0);
    if (gid >= count)
        return;
    uint local_size = get_local_size(0), lid = get_local_id(0), group = get_group_id(0);
    uint read = pair_reads[gid], window = pair_windows[gid];
    uint m = read_lengths[read];
    __global DIRECTION_T *mine = directions + direction_offsets[group] + lid;
    uint columns = direction_columns[group];
    Best best = sweep(true, read_codes + read_offsets[read], m, window_codes, ambiguous, window_offsets[window],
                      window_lengths[window], boundary, get_global_size(0), gid, profile + lid, local_size,
                      mine, columns);
    walk_back(mine, (size_t)columns * local_size, local_size, best, m, cigar + cigar_offsets[gid], trace_results, count, gid);
}
#endif

#ifdef LAST_ROWS
/* ------------------------------------------------------------------------------------------
 * sw_traceback_teams: sw_traceback's results, a team of work-items a pair, one tile each.
 *
 * sw_traceback sweeps a pair's tiles one after another on one work-item: a launch of a chunk's
 * few tens of thousands of pairs holds few warps, and lasts as long as one pair's whole sweep.
 * Here, as in sw_score_teams (one pair in 32-bit scores rather than a twin in 16-bit lanes),
 * member k of a team holds tile k and the members sweep the columns a step apart, passing their
 * last row (H - OPEN_EXTEND, F) down through local memory. Each cell is sweep_tile's (SW_CELL),
 * rows past the read included (they change no best: see sw_score_teams), and a member's best
 * moves as sweep_tile's does; member 0 merges the bests in tile order and walks back.
 *
 * A pair's direction words lie by step: word (tile t, column j) at (j - 1 + t) * tiles + t from
 * direction_offsets[pair], so a step's members write side by side. Local memory: `profile`,
 * short2[5 * READ_TILE / 2 * local size] (sweep_tile's layout); `scratch`, int2[2 * local size
 * + 2]. Pair p is team p % (local size / team) of work-group p / (local size / team).
 * ------------------------------------------------------------------------------------------ */
__kernel void sw_traceback_teams(SW_PAIR_PARAMETERS,
                                 const uint team, __local short2 *profile, __local int2 *scratch,
                                 __global DIRECTION_T *directions, __global const ulong *direction_offsets,
                                 __global uint *cigar, __global const uint *cigar_offsets, __global int *trace_results)
{
    uint lid = get_local_id(0), group_size = get_local_size(0), teams = group_size / team;
    uint member = lid % team, pair = get_group_id(0) * teams + lid / team;
    __local int2 *exchange = scratch;  /* [2][group size] */
    __local uint *most_steps = (__local uint *)(scratch + 2 * group_size);
    uint m = 0, n = 0;
    ulong start = 0;
    __global const uchar *read = read_codes;
    __global DIRECTION_T *words = directions;
    if (lid / team < teams && pair < count) {
        m = read_lengths[pair_reads[pair]];
        n = window_lengths[pair_windows[pair]];
        start = window_offsets[pair_windows[pair]];
        read = read_codes + read_offsets[pair_reads[pair]];
        words = directions + direction_offsets[pair];
    }
    uint tiles = (m + READ_TILE - 1) / READ_TILE;
    const bool working = member < tiles, last = member + 1 == tiles;
    uint steps = team_steps(most_steps, working && member == 0, n + tiles - 1, lid);

    uint i0 = member * READ_TILE, rows = last ? LAST_ROWS : READ_TILE;
    int hoe[READ_TILE], e[READ_TILE];
    uint read_code[READ_TILE];
#pragma unroll
    for (uint t = 0; t < READ_TILE; ++t) {
        read_code[t] = working && t < rows ? min((uint)read[i0 + t], 4u) : 4u;
        hoe[t] = first_column(i0 + t + 1) - OPEN_EXTEND;
        e[t] = NEG;
    }
    __local short2 *mine = profile + lid;
    fill_profile(mine, group_size, read_code);
    Best best = no_best(m);
    int diagonal_top = first_column(i0) - OPEN_EXTEND;
    for (uint s = 0; s < steps; ++s) {
        uint j = s + 1 - member;  /* wraps below 1 before the member's first step */
        if (working && j - 1u < n) {
            uint window_code = window_base(window_codes, ambiguous, start + j - 1);
            int up = first_column(0) - OPEN_EXTEND, f = NEG;  /* the row above: H - OPEN_EXTEND, and F */
            if (member > 0) {
                int2 top = exchange[((s - 1) & 1) * group_size + lid - 1];
                up = top.x;
                f = top.y;
            }
            int diagonal = diagonal_top;
            diagonal_top = up;
            short2 pair_scores[PROFILE_WORDS];
            column_scores(mine, group_size, window_code, pair_scores);
            DIRECTION_T bits = 0;
            int column_best = NEG, last_row = NEG;
#pragma unroll
            for (uint t = 0; t < READ_TILE; ++t) {
                int h;
                SW_CELL(t, true)
                column_best = max(column_best, h);
                if (t == LAST_ROWS - 1)
                    last_row = h;
            }
            exchange[(s & 1) * group_size + lid] = (int2)(hoe[READ_TILE - 1], f);
            words[(size_t)(j - 1 + member) * tiles + member] = bits;
#if END_TO_END
            if (last && last_row > best.score) {
                best.score = last_row;
                best.window_end = j;
            }
#else
            if (last)
                column_best = max(column_best, last_row + END_BONUS(true, 0u, 1u, last_row));
            take_column(&best, column_best, j, hoe, last, rows, i0);
#endif
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    /* Every member's words written (global) and bests (local, over the exchange, done with). */
    barrier(CLK_GLOBAL_MEM_FENCE);
    __local int *bests = (__local int *)scratch;  /* 3 a work-item */
    if (working) {
        bests[3 * lid] = best.score;
        bests[3 * lid + 1] = (int)best.read_end;
        bests[3 * lid + 2] = (int)best.window_end;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid / team < teams && pair < count && member == 0) {
        for (uint k = 1; k < tiles; ++k) {
            __local const int *theirs = bests + 3 * (lid + k);
            Best other = {theirs[0], (uint)theirs[1], (uint)theirs[2]};
            if (better_best(other, best))
                best = other;
        }
        walk_back(words, tiles + 1, tiles, best, m, cigar + cigar_offsets[pair], trace_results, count, pair);
    }
}
#endif
