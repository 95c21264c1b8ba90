/* locate.h -- from a suffix-array row of an index block to its suffix's block offset, for any
 * alphabet: the sampled rows and the interval search shared by the align pipeline's locate
 * (align/fm_search.cl) and `bowmap find` (modules/find.cl). The LF step differs by alphabet
 * (fm/dna_rank.h's lf_step, fm/wavelet_rank.h's wm_lf_step) and stays with the caller. Headers
 * include nothing (see runtime/devices.py).
 *
 * marks   uint4[groups]: group g covers rows 96g .. 96g + 95; x = marked rows before the group,
 *         y, z, w = its mark bits (row 96g + 32k + b is bit b of word k; layout:
 *         bowmap/index/format.py).
 * samples uint[]: the block offset of each marked row's suffix, in row order.
 */

#define ROWS_PER_GROUP 96u

/* Whether `row` is marked (sampled), from `group`, its group of marks; if so, *marked = its
 * place in the samples. */
inline bool marked_place(uint4 group, uint row, uint *marked)
{
    uint within = row % ROWS_PER_GROUP;
    uint word = within >> 5;
    uint bit = within & 31u;
    uint bits = word == 0 ? group.y : word == 1 ? group.z : group.w;
    if (!((bits >> bit) & 1u))
        return false;
    uint place = group.x + popcount(bits & ((1u << bit) - 1u));
    if (word > 0)
        place += popcount(group.y);
    if (word > 1)
        place += popcount(group.z);
    *marked = place;
    return true;
}

/* Whether `row` is marked (sampled); if so, *offset = the block offset of its suffix. */
inline bool sampled_offset(__global const uint4 *marks, __global const uint *samples, uint row, uint *offset)
{
    uint marked;
    if (!marked_place(marks[row / ROWS_PER_GROUP], row, &marked))
        return false;
    *offset = samples[marked];
    return true;
}

/* The last r (of count) with first[r] <= i: the run first[r] .. first[r + 1] - 1 holding i (a
 * read's seeds or hits, an interval's located rows); runs that are empty share their `first`
 * with the next one, never the last one. first[0] <= i; first[count] need not exist. */
inline uint last_at_most(__global const uint *first, uint count, uint i)
{
    uint low = 0, high = count;
    while (high - low > 1) {
        uint middle = low + (high - low) / 2;
        if (first[middle] <= i)
            low = middle;
        else
            high = middle;
    }
    return low;
}
