/* primers_conventional.cl -- k-difference primers by the conventional DP, coarse-grained form.
 *
 * For one start r the pattern is alpha's suffix P = alpha[r .. m), M = m - r. D[i][j] = edit
 * distance of P[0 .. i) to the best substring of beta ending at column j: D[0][j] = 0,
 * D[i][0] = i, D[i][j] = min(D[i-1][j-1] + (P[i-1] != beta[j-1]), D[i-1][j] + 1, D[i][j-1] + 1).
 * Rows are computed in order; the first row whose every entry is >= k stops the start
 * ("optimization 1"): c = that row - 1; when row M is reached without stopping, c = M.
 * Entries are stored capped at k (min(D, k)): the recurrence is monotone, so capped inputs give
 * the capped output, and the stop test only asks ">= k". CELL (ushort, or uint for k >= 65535)
 * is the stored type.
 *
 * Work-items (coarse-grained): one work-item per start, starts first_start + s for s < starts.
 * Each item sweeps beta column by column holding ROWS consecutive rows of the current column in
 * registers (a strip of ROWS rows a pass), so global memory sees one read and one write a
 * column per ROWS rows: the row above the strip is read from, and the strip's last row written
 * back to, `rows`. Items of a group run their column loops in step, so beta[j] is one broadcast
 * load and `rows` is interleaved by start (rows[j * starts + s]) for coalesced accesses. Rows of
 * the last strip past M are computed but never used.
 *
 * Buffers: alpha uchar[m], beta uchar[n]; rows CELL[(n + 1) * starts] (scratch); per start s:
 * reach int (c), comparisons ulong (one a cell of every counted row: rows computed x n).
 * Constants (-D): GROUP, ROWS, CELL.
 */

__kernel __attribute__((reqd_work_group_size(GROUP, 1, 1)))
void conventional_starts(__global const uchar *alpha, const int m, __global const uchar *beta,
                         const int n, const int k, const int first_start, const int starts,
                         __global CELL *rows, __global int *reach, __global ulong *comparisons)
{
    const int s = get_global_id(0);
    if (s >= starts)
        return;
    const int start = first_start + s;
    const int M = m - start;
    __global const uchar *pattern = alpha + start;

    for (int j = 0; j <= n; ++j)
        rows[(size_t)j * starts + s] = 0;  /* row 0 */

    int stop_row = -1;  /* the first row whose every entry is >= k */
    for (int top = 0; top < M && stop_row < 0; top += ROWS) {
        uchar symbols[ROWS];
        int column[ROWS], smallest[ROWS];
#pragma unroll
        for (int q = 0; q < ROWS; ++q) {
            const int i = top + 1 + q;
            symbols[q] = i <= M ? pattern[i - 1] : 0;
            column[q] = min(i, k);  /* D[i][0] */
            smallest[q] = column[q];
        }
        int corner = min(top, k);  /* D[top][j - 1]: column 0 first */
        /* Software pipelining: the next column's loads are issued before this column's
         * arithmetic, since few work-items per compute unit leave memory latency exposed. */
        int next_above = n > 0 ? rows[(size_t)starts + s] : 0;
        uchar next_symbol = n > 0 ? beta[0] : 0;
        for (int j = 1; j <= n; ++j) {
            const int above_strip = next_above;  /* D[top][j] */
            const uchar symbol = next_symbol;
            if (j < n) {
                next_above = rows[(size_t)(j + 1) * starts + s];
                next_symbol = beta[j];
            }
            int diagonal = corner, above = above_strip;
#pragma unroll
            for (int q = 0; q < ROWS; ++q) {
                const int value = min(min(diagonal + (symbols[q] != symbol), above + 1), min(column[q] + 1, k));
                diagonal = column[q];
                column[q] = value;
                above = value;
                smallest[q] = min(smallest[q], value);
            }
            rows[(size_t)j * starts + s] = (CELL)column[ROWS - 1];
            corner = above_strip;
        }
#pragma unroll
        for (int q = ROWS - 1; q >= 0; --q)
            if (smallest[q] >= k && top + 1 + q <= M)
                stop_row = top + 1 + q;
    }
    const int computed = stop_row < 0 ? M : stop_row;
    reach[s] = stop_row < 0 ? M : stop_row - 1;
    comparisons[s] = (ulong)computed * (ulong)n;
}

/* Fine-grained form: one work-group per start, one DP row per work-item, the group's rows a
 * strip of GROUP rows that sweeps beta as an anti-diagonal wavefront: at step t work-item q
 * computes column j = t - q of row top + 1 + q, so the cells of one anti-diagonal of the strip
 * are computed together, one barrier a step. Work-item q takes D[i-1][j] from work-item q - 1's
 * previous step through `exchange` (double-buffered by step parity); work-item 0 reads row top
 * from the start's row in global memory, work-item GROUP - 1 writes row top + GROUP back there.
 * After each strip the first row whose every entry is >= k (if any, and <= M) stops the start.
 *
 * Buffers: rows CELL[starts][n + 1] (scratch, one row a start, contiguous); reach int[starts],
 * comparisons ulong[starts] as conventional_starts. Group g is start first_start + g.
 */
__kernel __attribute__((reqd_work_group_size(GROUP, 1, 1)))
void conventional_fine(__global const uchar *alpha, const int m, __global const uchar *beta,
                       const int n, const int k, const int first_start,
                       __global CELL *rows, __global int *reach, __global ulong *comparisons)
{
    __local int exchange[2][GROUP];
    __local int stop_shared;
    const int group = get_group_id(0);
    const int q = get_local_id(0);
    const int start = first_start + group;
    const int M = m - start;
    __global const uchar *pattern = alpha + start;
    __global CELL *row_buffer = rows + (size_t)group * (n + 1);

    for (int j = q; j <= n; j += GROUP)
        row_buffer[j] = 0;  /* row 0 */
    if (q == 0)
        stop_shared = M + 1;
    barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);

    int stop_row = M + 1;  /* none yet */
    for (int top = 0; top < M; top += GROUP) {
        const int i = top + 1 + q;
        const uchar symbol = i <= M ? pattern[i - 1] : 0;
        int left = min(i, k);  /* D[i][0] */
        int smallest = left;
        int diagonal = min(i - 1, k);  /* D[i-1][0] */
        for (int t = 1; t < n + GROUP; ++t) {
            const int j = t - q;
            if (j >= 1 && j <= n) {
                const int above = q == 0 ? (int)row_buffer[j] : exchange[(t - 1) & 1][q - 1];
                const int value = min(min(diagonal + (symbol != beta[j - 1]), above + 1), min(left + 1, k));
                diagonal = above;
                left = value;
                smallest = min(smallest, value);
                exchange[t & 1][q] = value;
                if (q == GROUP - 1)
                    row_buffer[j] = (CELL)value;
            }
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        if (smallest >= k && i <= M)
            atomic_min(&stop_shared, i);
        barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
        stop_row = stop_shared;  /* the same for every work-item: nothing changes it until the next strip */
        if (stop_row <= M)
            break;
    }
    if (q == 0) {
        const int computed = stop_row <= M ? stop_row : M;
        reach[group] = stop_row <= M ? stop_row - 1 : M;
        comparisons[group] = (ulong)computed * (ulong)n;
    }
}
