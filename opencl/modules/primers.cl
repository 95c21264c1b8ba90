/* primers.cl -- k-difference primers by Landau-Vishkin diagonals, tiled (coarse-grained) form.
 *
 * For one start r of alpha, the pattern is alpha's suffix P = alpha[r .. m) of length M = m - r,
 * matched anywhere in beta (length n). Rows i = 0..M are prefix lengths of P, columns j = 0..n
 * prefix lengths of beta, diagonal d = j - i. L[d][e] = the furthest row on diagonal d whose
 * approximate-match DP entry is <= e, levels e = 0..levels-1, diagonals -min(k-1, M) <= d <= n:
 *   L[d][e] = slide(min(max(L[d][e-1] + 1, L[d-1][e-1], L[d+1][e-1] + 1), M, n - d)),
 *   L[d][-1] = -1 for 0 <= d <= n; a diagonal d < 0 is valid from level -d on (UNREACHED before).
 * The answer for r is c = max_d L[d][levels-1]; c == M means P occurs with < k differences.
 *
 * Work-items (coarse-grained over starts and diagonal tiles): one work-group per (start, tile).
 * Tile t owns TILE diagonals [a, a + TILE), a = -HALO + t * TILE, HALO = k - 1. As L[.][e]
 * depends on diagonals d-1..d+1 of level e-1 only, the group recomputes HALO diagonals on each
 * side instead of talking to its neighbours: at level e it computes local diagonals
 * [e, SPAN - e) of the span [a - HALO, a + TILE + HALO), which shrinks by one per side a level
 * and always covers its own TILE. So groups never communicate; halo cells are not counted.
 * Within a group the work-items share each level's column of L across the span (strided), in
 * local memory, one barrier a level.
 *
 * Local memory: two columns of L (ping-pong, int[SPAN + 2] each, one UNREACHED pad a side),
 * alpha_local = P[0 .. ALPHA_CACHE) and beta_local = beta[a - HALO .. a - HALO + SPAN +
 * ALPHA_CACHE), so a slide reads local memory while its row is < ALPHA_CACHE (the common case:
 * unrelated diagonals stop after a few rows), global memory beyond. The caches are held as uint
 * words (plus 8 bytes of slack) so that a slide compares four symbols at once on little-endian
 * devices: almost every slide on unrelated diagonals ends in its first step, so the lanes of a
 * wavefront rarely wait for one another.
 *
 * Buffers: alpha uchar[m], beta uchar[n] (any byte values, compared for equality);
 * per-group result slots (group g = (start - first_start) * tiles + tile):
 *   slot_rows  int[]   max over own diagonals of L[d][levels-1]
 *   slot_hits  int[]   first level at which an own diagonal reaches row M, or `levels`
 *   slot_counts ulong[] symbol comparisons on own diagonals: per slide, matches passed plus one
 *                       for the mismatch that stops it (none when P's or beta's end stops it).
 * lv_reduce (one work-group per start) reduces a start's `tiles` slots in parallel: max, min, sum.
 *
 * Constants (-D): GROUP work-group size, TILE, HALO = k - 1, ALPHA_CACHE.
 * Invariants: first_start + starts <= m; levels <= HALO + 1; m, n + HALO < 2^30.
 */

#define SPAN (TILE + 2 * HALO)
#define BETA_CACHE (SPAN + ALPHA_CACHE)
#define UNREACHED (-(1 << 30))
/* The caches are uint arrays read 4 symbols at a time, with 2 words of slack past their end. */
#define ALPHA_WORDS (ALPHA_CACHE / 4 + 2)
#define BETA_WORDS (BETA_CACHE / 4 + 2)

/* Symbols bytes[i .. i + 4) of a byte string stored in uint words, symbol i in the low byte
 * (little-endian devices). */
inline uint four_symbols(__local const uint *words, int i)
{
    const int word = i >> 2;
    return (uint)(upsample(words[word + 1], words[word]) >> ((i & 3) * 8));
}

/* Combine per-work-item (rows max, hits min, counts sum) across the group; result in slot 0. */
inline void reduce_group(__local int *rows, __local int *hits, __local ulong *counts, int lid)
{
    for (int stride = 1; stride < GROUP; stride <<= 1) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if ((lid & (2 * stride - 1)) == 0 && lid + stride < GROUP) {
            rows[lid] = max(rows[lid], rows[lid + stride]);
            hits[lid] = min(hits[lid], hits[lid + stride]);
            counts[lid] += counts[lid + stride];
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}

__kernel __attribute__((reqd_work_group_size(GROUP, 1, 1)))
void lv_tiles(__global const uchar *alpha, const int m, __global const uchar *beta, const int n,
              const int first_start, const int levels, const int tiles,
              __global int *slot_rows, __global int *slot_hits, __global ulong *slot_counts)
{
    __local int column_a[SPAN + 2], column_b[SPAN + 2];
    __local uint alpha_words[ALPHA_WORDS];
    __local uint beta_words[BETA_WORDS];
    __local uchar *alpha_local = (__local uchar *)alpha_words;
    __local uchar *beta_local = (__local uchar *)beta_words;
    __local int reduce_rows[GROUP], reduce_hits[GROUP];
    __local ulong reduce_counts[GROUP];

    const int group = get_group_id(0);
    const int lid = get_local_id(0);
    const int start = first_start + group / tiles;
    const int tile = group % tiles;
    const int M = m - start;
    const int base = tile * TILE - 2 * HALO;  /* diagonal of local index 0 */
    const int low = -min(HALO, M);

    for (int x = lid; x < 4 * ALPHA_WORDS; x += GROUP)
        alpha_local[x] = x < M ? alpha[start + x] : 0;
    for (int x = lid; x < 4 * BETA_WORDS; x += GROUP) {
        const int column = base + x;
        beta_local[x] = column >= 0 && column < n ? beta[column] : 0;
    }
    for (int x = lid; x < SPAN + 2; x += GROUP) {
        const int d = base + x - 1;
        column_a[x] = d >= 0 && d <= n ? -1 : UNREACHED;  /* level -1 */
        column_b[x] = UNREACHED;
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    __local int *previous = column_a;
    __local int *current = column_b;
    __global const uchar *pattern = alpha + start;
    ulong count = 0;
    int hit = levels;
    int best = UNREACHED;
    for (int e = 0; e < levels; ++e) {
        const int lowest = max(low, -e);
        uint level_count = 0;
        for (int x = e + lid; x < SPAN - e; x += GROUP) {
            const int d = base + x;
            int row = UNREACHED;
            if (d >= lowest && d <= n) {
                row = max(max(previous[x + 1] + 1, previous[x]), previous[x + 2] + 1);
                row = min(row, min(M, n - d));
                const int limit = min(M, n - d) - row;
                /* Slide: local memory while the row is inside the alpha cache (unrelated
                 * diagonals stop there after a few symbols), then global memory. */
                const int cached = max(0, min(limit, ALPHA_CACHE - row));
                int t = 0;
                bool mismatch = false;
#ifdef __ENDIAN_LITTLE__
                /* Four symbols a step: the first differing byte ends the slide. */
                while (t < cached) {
                    const uint differ = four_symbols(alpha_words, row + t) ^ four_symbols(beta_words, row + x + t);
                    if (differ != 0) {
                        const int same = (31 - clz(differ & (0u - differ))) >> 3;
                        mismatch = t + same < cached;
                        t = min(t + same, cached);
                        break;
                    }
                    t += 4;
                }
                t = min(t, cached);
#else
                while (t < cached && alpha_local[row + t] == beta_local[row + x + t])
                    ++t;
                mismatch = t < cached;
#endif
                if (!mismatch)
                    while (t < limit && pattern[row + t] == beta[row + d + t])
                        ++t;
                if (x >= HALO && x < HALO + TILE) {
                    level_count += (uint)t + (t < limit);
                    if (row + t == M)
                        hit = min(hit, e);
                }
                row += t;
            }
            current[x + 1] = row;
            if (e == levels - 1 && x >= HALO && x < HALO + TILE)
                best = max(best, row);
        }
        count += level_count;
        barrier(CLK_LOCAL_MEM_FENCE);
        __local int *swap = previous;
        previous = current;
        current = swap;
    }

    reduce_rows[lid] = best;
    reduce_hits[lid] = hit;
    reduce_counts[lid] = count;
    reduce_group(reduce_rows, reduce_hits, reduce_counts, lid);
    if (lid == 0) {
        slot_rows[group] = reduce_rows[0];
        slot_hits[group] = reduce_hits[0];
        slot_counts[group] = reduce_counts[0];
    }
}

/* One work-group per start: reduce its `tiles` slots to reach (max), hit level (min), count. */
__kernel __attribute__((reqd_work_group_size(GROUP, 1, 1)))
void lv_reduce(__global const int *slot_rows, __global const int *slot_hits,
               __global const ulong *slot_counts, const int tiles, const int levels,
               __global int *reach, __global int *hit_levels, __global ulong *comparisons)
{
    __local int reduce_rows[GROUP], reduce_hits[GROUP];
    __local ulong reduce_counts[GROUP];
    const int group = get_group_id(0);
    const int lid = get_local_id(0);
    int best = UNREACHED, hit = levels;
    ulong count = 0;
    for (int tile = lid; tile < tiles; tile += GROUP) {
        const size_t slot = (size_t)group * tiles + tile;
        best = max(best, slot_rows[slot]);
        hit = min(hit, slot_hits[slot]);
        count += slot_counts[slot];
    }
    reduce_rows[lid] = best;
    reduce_hits[lid] = hit;
    reduce_counts[lid] = count;
    reduce_group(reduce_rows, reduce_hits, reduce_counts, lid);
    if (lid == 0) {
        reach[group] = reduce_rows[0];
        hit_levels[group] = reduce_hits[0];
        comparisons[group] = reduce_counts[0];
    }
}
