/* primers_fine.cl -- k-difference primers by Landau-Vishkin diagonals, fine-grained form.
 *
 * The same L[d][e] recurrence as primers.cl (see there: rows, columns, diagonals, UNREACHED,
 * how comparisons are counted). Work-items (fine-grained): one work-group per start r; at each
 * level e the group's work-items share the cells of L's column e (diagonals -HALO..n, strided),
 * then a barrier; so many starts are in flight (one per group) but each start's column is spread
 * over a whole group. The column is too long for local memory (n + k entries), so each group
 * keeps two columns (ping-pong) in its own slice of `columns` in global memory; a barrier with
 * CLK_GLOBAL_MEM_FENCE orders one group's global accesses, which is all a level needs. Since one
 * group sees the whole column, it stops after the first level at which a diagonal reaches row M
 * (the suffix occurs with < k differences), as the sequential reference does: the count it
 * reports is the reference's count, with no recount.
 *
 * Buffers: alpha uchar[m], beta uchar[n]; columns int[starts][2][n + HALO + 3] (scratch: one
 * UNREACHED pad a side, local index x <-> diagonal x - 1 - HALO); per start (group g is start
 * first_start + g): reach int (max_d L[d][last level]), hit_levels int (level of the first row-M
 * diagonal, or `levels`), comparisons ulong.
 * Constants (-D): GROUP work-group size. Invariants: levels <= k; m, n + k < 2^30.
 */

#define UNREACHED (-(1 << 30))

__kernel __attribute__((reqd_work_group_size(GROUP, 1, 1)))
void lv_fine(__global const uchar *alpha, const int m, __global const uchar *beta, const int n,
             const int first_start, const int levels, const int k, __global int *columns,
             __global int *reach, __global int *hit_levels, __global ulong *comparisons)
{
    __local int reduce_rows[GROUP];
    __local ulong reduce_counts[GROUP];
    __local int hit_shared;

    const int group = get_group_id(0);
    const int lid = get_local_id(0);
    const int start = first_start + group;
    const int M = m - start;
    const int halo = k - 1;
    const int low = -min(halo, M);
    const int stride = n + halo + 3;
    __global int *previous = columns + (size_t)group * 2 * stride;
    __global int *current = previous + stride;
    __global const uchar *pattern = alpha + start;

    for (int x = lid; x < stride; x += GROUP) {
        const int d = x - 1 - halo;
        previous[x] = d >= 0 && d <= n ? -1 : UNREACHED;  /* level -1 */
        current[x] = UNREACHED;
    }
    if (lid == 0)
        hit_shared = levels;
    barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);

    ulong count = 0;
    int last = levels - 1;
    for (int e = 0; e < levels; ++e) {
        const int lowest = max(low, -e);
        uint level_count = 0;
        for (int d = lowest + lid; d <= n; d += GROUP) {
            const int x = d + 1 + halo;
            int row = max(max(previous[x] + 1, previous[x - 1]), previous[x + 1] + 1);
            row = min(row, min(M, n - d));
            const int limit = min(M, n - d) - row;
            int t = 0;
            while (t < limit && pattern[row + t] == beta[row + d + t])
                ++t;
            level_count += (uint)t + (t < limit);
            row += t;
            if (row == M)
                atomic_min(&hit_shared, e);
            current[x] = row;
        }
        count += level_count;
        barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
        __global int *swap = previous;
        previous = current;
        current = swap;
        /* Every work-item sees the same answer: hits of this level were stored before the
         * barrier, and a faster work-item already in the next level can only store e + 1. */
        if (hit_shared <= e) {
            last = e;
            break;
        }
    }

    int best = UNREACHED;
    for (int d = max(low, -last) + lid; d <= n; d += GROUP)
        best = max(best, previous[d + 1 + halo]);
    reduce_rows[lid] = best;
    reduce_counts[lid] = count;
    for (int step = 1; step < GROUP; step <<= 1) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if ((lid & (2 * step - 1)) == 0 && lid + step < GROUP) {
            reduce_rows[lid] = max(reduce_rows[lid], reduce_rows[lid + step]);
            reduce_counts[lid] += reduce_counts[lid + step];
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0) {
        reach[group] = reduce_rows[0];
        hit_levels[group] = hit_shared;
        comparisons[group] = reduce_counts[0];
    }
}
