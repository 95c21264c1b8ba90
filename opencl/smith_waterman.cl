/* smith_waterman.cl -- affine-gap Smith-Waterman of reads against reference windows.
 *
 * Work-items: one work-item per (read, window) pair ("intertask" parallelism). The host orders
 * the pairs by length so the work-items of a wavefront sweep similar matrices, and guards
 * `gid < count`, so the global size may be rounded up to the work-group size.
 *   sw_score      best score and its end cell;
 *   sw_traceback  the same sweep recording 4 direction bits a cell, then the traceback of the
 *                 best cell on the same work-item, giving the CIGAR.
 *
 * The recurrences (Gotoh), read = rows i = 1..m, window = columns j = 1..n, s = substitution
 * score, OE = GAP_OPEN + GAP_EXTEND (a gap of k bases costs GAP_OPEN + k * GAP_EXTEND):
 *   E[i][j] = max(H[i][j-1] - OE, E[i][j-1] - GAP_EXTEND)     deletion  (window base, CIGAR D)
 *   F[i][j] = max(H[i-1][j] - OE, F[i-1][j] - GAP_EXTEND)     insertion (read base, CIGAR I)
 *   H[i][j] = max(H[i-1][j-1] + s(read[i-1], window[j-1]), E[i][j], F[i][j]  [, 0 if local])
 * Row 0: H = 0 (a free start anywhere in the window), F = -inf. Column 0: E = -inf, H = 0 when
 * local, H = F = -(GAP_OPEN + i * GAP_EXTEND) when END_TO_END (the read's first i bases inserted).
 * Best cell: local: the largest H over i, j >= 1, ties to the smallest j, then the smallest i;
 * none positive gives score 0 at (0, 0). END_TO_END: the largest H[m][j] over j = 0..n, ties to
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

/* The code (0..4) of base p of a window's sequence: a byte of window_codes, or 2 bits of the
 * packed text (and its ambiguity bit). */
inline uint window_base(__global const uchar *window_codes, __global const uchar *ambiguous, ulong p)
{
#if PACKED_WINDOWS
    uint code = (window_codes[p >> 2] >> ((uint)(p & 3) << 1)) & 3u;
#if AMBIGUOUS_MASK
    if ((ambiguous[p >> 3] >> (uint)(p & 7)) & 1u)
        code = 4u;
#endif
    return code;
#else
    return min((uint)window_codes[p], 4u);
#endif
}

/* H[i][0] for i >= 1 (and row 0 when i = 0). */
inline int first_column(uint i)
{
#if END_TO_END
    return i == 0 ? 0 : -(GAP_OPEN + (int)i * GAP_EXTEND);
#else
    return 0;
#endif
}

typedef struct {
    int score;
    uint read_end;
    uint window_end;
} Best;

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
    for (uint w = 0; w < 5u; ++w) {
#pragma unroll
        for (uint k = 0; k < PROFILE_WORDS; ++k)
            profile[(w * PROFILE_WORDS + k) * local_size] =
                (short2)((short)(substitution(read_code[2 * k], w) + OPEN_EXTEND),
                         (short)(substitution(read_code[2 * k + 1], w) + OPEN_EXTEND));
    }
    int diagonal_top = first_column(i0) - OPEN_EXTEND;  /* H[i0][j - 1] - OPEN_EXTEND */
    for (uint j = 1; j <= n; ++j) {
        uint window_code = window_base(window_codes, ambiguous, window_start + j - 1);
        int up, f;  /* up: H of the row above, minus OPEN_EXTEND; f: its F */
        if (tile == 0) {
            up = -OPEN_EXTEND;
            f = NEG;
        } else {
            BOUNDARY_T top = boundary[(size_t)j * stride + gid];
            up = top.x - OPEN_EXTEND;
            f = top.y;
        }
        int diagonal = diagonal_top;
        diagonal_top = up;
        __local short2 *scores = profile + window_code * PROFILE_WORDS * local_size;
        short2 pair_scores[PROFILE_WORDS];
#pragma unroll
        for (uint k = 0; k < PROFILE_WORDS; ++k)
            pair_scores[k] = scores[k * local_size];
        DIRECTION_T bits = 0;
        int column_best = NEG;
        int last_row = NEG;
#pragma unroll
        for (uint t = 0; t < READ_TILE; ++t) {
            int s = (t & 1u) ? pair_scores[t / 2].y : pair_scores[t / 2].x;  /* s + OPEN_EXTEND */
            int e_open = hoe[t], e_extend = e[t] - GAP_EXTEND;
            int f_open = up, f_extend = f - GAP_EXTEND;
            int e_new = max(e_open, e_extend);
            int f_new = max(f_open, f_extend);
            int h = diagonal + s;
            if (record) {
                uint source = SOURCE_DIAGONAL;
                if (e_new > h) { h = e_new; source = SOURCE_DELETION; }
                if (f_new > h) { h = f_new; source = SOURCE_INSERTION; }
#if !END_TO_END
                if (h <= 0) { h = 0; source = SOURCE_START; }
#endif
                source |= (e_extend > e_open ? E_EXTENDS : 0u) | (f_extend > f_open ? F_EXTENDS : 0u);
                bits |= (DIRECTION_T)source << (4 * t);
            } else {
                h = max(h, max(e_new, f_new));
#if !END_TO_END
                h = max(h, 0);
#endif
            }
            diagonal = hoe[t];
            hoe[t] = h - OPEN_EXTEND;
            e[t] = e_new;
            f = f_new;
            up = hoe[t];
#if END_TO_END
            if (last && t == rows - 1) last_row = h;
#else
            if (!last || t < rows) column_best = max(column_best, h);
#endif
        }
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
        if (column_best > best->score || (column_best == best->score && j < best->window_end)) {
            uint row = 0;
#pragma unroll
            for (int t = READ_TILE - 1; t >= 0; --t)
                if (hoe[t] == column_best - OPEN_EXTEND && (uint)t < rows) row = (uint)t;
            best->score = column_best;
            best->read_end = i0 + row + 1;
            best->window_end = j;
        }
#endif
    }
}

inline Best sweep(const bool record, __global const uchar *read, uint m, __global const uchar *window_codes,
                  __global const uchar *ambiguous, ulong window_start, uint n,
                  __global BOUNDARY_T *boundary, uint stride, uint gid, __local short2 *profile, uint local_size,
                  __global DIRECTION_T *directions, uint direction_columns)
{
    Best best;
#if END_TO_END
    best.score = first_column(m);  /* H[m][0]: the whole read inserted */
    best.read_end = m;
#else
    best.score = 0;
    best.read_end = 0;
#endif
    best.window_end = 0;
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

__kernel void sw_score(__global const uchar *read_codes, __global const uint *read_offsets,
                       __global const uint *read_lengths, __global const uchar *window_codes,
                       __global const ulong *window_offsets, __global const uint *window_lengths,
                       __global const uchar *ambiguous,
                       __global const uint *pair_reads, __global const uint *pair_windows, const uint count,
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

__kernel void sw_traceback(__global const uchar *read_codes, __global const uint *read_offsets,
                           __global const uint *read_lengths, __global const uchar *window_codes,
                           __global const ulong *window_offsets, __global const uint *window_lengths,
                           __global const uchar *ambiguous,
                           __global const uint *pair_reads, __global const uint *pair_windows, const uint count,
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

    __global uint *out = cigar + cigar_offsets[gid];
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
        uint cell = (uint)(mine[((size_t)(row / READ_TILE) * columns + j - 1) * local_size] >> (4 * (row % READ_TILE))) & 15u;
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
    trace_results[gid] = best.score;
    trace_results[count + gid] = (int)i;
    trace_results[2 * count + gid] = (int)best.read_end;
    trace_results[3 * count + gid] = (int)j;
    trace_results[4 * count + gid] = (int)best.window_end;
    trace_results[5 * count + gid] = (int)used;
}
