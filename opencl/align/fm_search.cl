/* fm_search.cl -- exact FM-index search and locate over index blocks.
 *
 * Work-items: fm_search and seed_search run one work-item per pattern (a backward search of its
 * bases, last to first); fm_locate, fm_locate_intervals and locate_hits one per suffix-array row
 * (LF steps until a sampled row), given the rows, the SA intervals that hold them, or the seeds
 * choose_seeds (one work-item per read) took. Every kernel guards its count, so the global size
 * may be rounded up to the work-group size. seed_search, choose_seeds and locate_hits make a
 * round of seed hits for seed_windows.cl without the host (FMSearch.seed_hits); with several
 * blocks, add_block_occurrences and subtract_overlaps (one work-item per seed) first make each
 * seed's count in the whole text for choose_seeds, and block_rows (one per read) counts the hits
 * each block's locate_hits will write. seed_search, add_block_occurrences, block_rows and
 * locate_hits take up to two blocks a launch (both resident: one launch's chain of loads, not
 * two in a row).
 *
 * Buffers (layouts in bowmap/index/format.py):
 *   lines   uint[lines][16]  occurrence lines: 4 counts (A,C,G,T before the line), then 12 words
 *                            of 16 bases, 2 bits each, base j of a word in bits 2j..2j+1;
 *                            192 bases a line, 64 bytes: one rank query reads one cache line.
 *   marks   uint4[groups]    x: marked rows before the group, y,z,w: mark bits of its 96 rows.
 *   samples uint[]           block offset of each marked row's suffix, in row order.
 *   codes   uchar[]          pattern bases 0..3 (4 or more: ambiguous, never matches);
 *                            pattern i is codes[offsets[i] .. offsets[i] + lengths[i]).
 * first_rows (C): row of the first suffix starting with A, C, G, T; row 0 is the empty suffix.
 * Rows run 0..n; the stored BWT leaves out row `primary` (its symbol is "$"), so row r is stored
 * at r - (r > primary), and rank(c, r) = occurrences of c in stored BWT [0, r - (r > primary)).
 *
 * rank(), lf_step() and the line layout live in fm/dna_rank.h, the sampled rows (marks) and
 * last_at_most() in fm/locate.h, both shared with modules/find.cl.
 *
 * Invariants: n < 2^31 (all arithmetic in uint); fm_locate is given rows 1..n only; the suffix
 * starting at 0 is sampled, so LF never has to step over row `primary`.
 */

#include "fm/dna_rank.h"
#include "fm/locate.h"

/* Interval [lo, hi) of rows whose suffixes start with the pattern; lo = hi = 0 when it does not
 * occur. depth = length of the longest suffix of the pattern that occurs. The empty pattern
 * matches every real suffix: [1, n + 1). */
inline void search_pattern(__global const uint *lines, uint primary, uint n, uint4 first_rows,
                           __global const uchar *codes, uint start, uint length, uint count, uint gid,
                           __global uint *results)
{
    uint lo = 1, hi = n + 1, depth = 0;
    /* Each base is loaded a step ahead, while the step before waits for its lines: the test
     * for an ambiguous base then does not hold the step's rank loads back. */
    uint next_code = length > 0 ? codes[start + length - 1] : 0u;
    for (uint k = length; k > 0; --k) {
        uint code = next_code;
        next_code = k > 1 ? codes[start + k - 2] : 0u;
        if (code > 3) {
            lo = hi = 0;
            break;
        }
        /* Starting from [0, n + 1) or [1, n + 1) gives the same ranks except for the base
         * preceding the empty suffix, which belongs in the interval: so the first step uses 0. */
        uint c = first_row(first_rows, code);
        uint new_lo = c + rank(lines, primary, depth == 0 ? 0u : lo, code);
        uint new_hi = c + rank(lines, primary, hi, code);
        if (new_lo >= new_hi) {
            lo = hi = 0;
            break;
        }
        lo = new_lo;
        hi = new_hi;
        ++depth;
    }
    results[gid] = lo;
    results[count + gid] = hi;
    results[2 * count + gid] = depth;
}

__kernel void fm_search(__global const uint *lines, const uint primary, const uint n,
                        const uint4 first_rows,
                        __global const uchar *codes, __global const uint *offsets,
                        __global const uint *lengths, const uint count,
                        __global uint *results /* uint[3][count]: lo, hi, depth */)
{
    uint gid = get_global_id(0);
    if (gid < count)
        search_pattern(lines, primary, n, first_rows, codes, offsets[gid], lengths[gid], count, gid, results);
}

/* fm_search over a round of seeds of one length (FMSearch.seed_hits' layout, see choose_seeds),
 * each seed's place made here rather than sent: forward seed f of read r = last_at_most(seed_first, f)
 * starts at read_starts[r] + read_offset[f] of codes, its reverse twin (seed forward + f) as far
 * into the reverse codes, which follow the forward ones (`total` codes in). */
inline uint seed_start(__global const uint *read_starts, __global const uint *seed_first,
                       __global const uint *read_offset, uint reads, uint forward, uint total, uint gid)
{
    uint f = gid < forward ? gid : gid - forward;
    return read_starts[last_at_most(seed_first, reads, f)] + read_offset[f] + (gid < forward ? 0 : total);
}

/* Two blocks a launch where two are resident (FMSearch.seed_hits): work-items 0 .. 2 * forward - 1
 * search block a, the next 2 * forward block b (when blocks is 2; a's arguments repeated when 1).
 * One launch of twice the seeds rather than two in a row: a round's small launches last as long
 * as one seed's chain of loads, whatever their size. */
__kernel void seed_search(__global const uint *lines, const uint primary, const uint n, const uint4 first_rows,
                          __global const uint *lines_b, const uint primary_b, const uint n_b, const uint4 first_rows_b,
                          const uint blocks,
                          __global const uchar *codes, __global const uint *read_starts,
                          __global const uint *seed_first, __global const uint *read_offset, const uint reads,
                          const uint forward, const uint seed_length, const uint total,
                          __global uint *results, __global uint *results_b /* each uint[3][2 * forward] */)
{
    uint gid = get_global_id(0), seeds = 2 * forward;
    if (gid >= blocks * seeds)
        return;
    bool second = gid >= seeds;
    uint seed = second ? gid - seeds : gid;
    uint start = seed_start(read_starts, seed_first, read_offset, reads, forward, total, seed);
    search_pattern(second ? lines_b : lines, second ? primary_b : primary, second ? n_b : n, second ? first_rows_b : first_rows,
                   codes, start, seed_length, seeds, seed, second ? results_b : results);
}

/* Several blocks: each seed's occurrences in the text, in a results-like buffer `combined`
 * (uint[2][count]: lo = 0, hi = the count; choose_seeds reads only hi - lo). One launch for one
 * or two blocks (`blocks`; results_b is not read for one), in block order: the first sets, the
 * others add their intervals' sizes (a block's occurrences are fewer than its 2^31 bases, and a
 * 12-base or longer seed never sums past 2^32 over a 4 Gbp text). */
__kernel void add_block_occurrences(__global const uint *results, __global const uint *results_b /* seed_search's */,
                                    const uint blocks, const uint count, const uint first_block, __global uint *combined)
{
    uint gid = get_global_id(0);
    if (gid >= count)
        return;
    uint occurrences = results[count + gid] - results[gid];
    if (blocks > 1)
        occurrences += results_b[count + gid] - results_b[gid];
    if (first_block)
        combined[gid] = 0;
    combined[count + gid] = (first_block ? 0u : combined[count + gid]) + occurrences;
}

/* Then the occurrences lying wholly inside the overlap of two consecutive blocks, found in both,
 * are taken off once (SeedFilter._overlap_occurrences, the reference): keys[0 .. table_size) are
 * the sorted packed k-mers of the overlaps (2 bits a base, the seed's first base highest, as
 * bowmap.align.seed.seeds.pack_codes), key_counts their occurrences there. A seed with an ambiguous
 * base matches none. A count never goes below 0 (an index whose blocks disagreed with their
 * overlaps would make the host's negative, which chooses and crowds as 0 does). */
__kernel void subtract_overlaps(__global const uchar *codes, __global const uint *read_starts,
                                __global const uint *seed_first, __global const uint *read_offset, const uint reads,
                                const uint forward, const uint seed_length, const uint total,
                                __global const ulong *keys, __global const uint *key_counts, const uint table_size,
                                __global uint *combined)
{
    uint gid = get_global_id(0);
    if (gid >= 2 * forward)
        return;
    uint start = seed_start(read_starts, seed_first, read_offset, reads, forward, total, gid);
    ulong key = 0;
    for (uint k = 0; k < seed_length; ++k) {
        uint code = codes[start + k];
        if (code > 3)
            return;
        key = (key << 2) | code;
    }
    uint low = 0, high = table_size; /* the first key not below `key` */
    while (low < high) {
        uint middle = low + (high - low) / 2;
        if (keys[middle] < key)
            low = middle + 1;
        else
            high = middle;
    }
    if (low < table_size && keys[low] == key) {
        uint occurrences = combined[2 * forward + gid], in_overlaps = key_counts[low];
        combined[2 * forward + gid] = occurrences > in_overlaps ? occurrences - in_overlaps : 0u;
    }
}

/* Block offset of the suffix at `row` (1..n): LF steps until a sampled row. Each step loads the
 * row's marks and its occurrence line together and takes the LF step whether or not the row
 * turns out sampled (the select, not a branch, keeps both loads ahead of the test): one memory
 * latency a step rather than two in a row, for one line read in vain a locate. LF of any row
 * 1..n reads inside the block's lines (n / 192 + 1 of them); that of `primary` is nonsense and
 * never taken, the row being sampled (its suffix starts at 0). */
inline uint locate_row(__global const uint *lines, uint primary, uint4 first_rows,
                       __global const uint4 *marks, __global const uint *samples, uint row)
{
    uint steps = 0, marked = 0;
    bool found = false;
    while (!found) {
        uint4 group = marks[row / ROWS_PER_GROUP];
        uint next = lf_step(lines, primary, first_rows, row);
        found = marked_place(group, row, &marked);
        steps += found ? 0u : 1u;
        row = found ? row : next;
    }
    return samples[marked] + steps;
}

/* Block offset of the suffix at each given row. */
__kernel void fm_locate(__global const uint *lines, const uint primary, const uint4 first_rows,
                        __global const uint4 *marks, __global const uint *samples,
                        __global const uint *rows, const uint count, __global uint *positions)
{
    uint gid = get_global_id(0);
    if (gid < count)
        positions[gid] = locate_row(lines, primary, first_rows, marks, samples, rows[gid]);
}

/* Block offset of the suffix at every row of every interval [lo[i], lo[i] + size i), interval
 * after interval. starts holds lo[0 .. intervals) then before[0 .. intervals), before[i] the sum
 * of the sizes of the intervals before i (before[0] = 0); count is the sum of all (one buffer:
 * one upload). Work-item gid finds its interval, the last i with before[i] <= gid (an
 * empty interval shares its `before` with the next one, so it is never that last one), by a
 * binary search: the host sends the intervals, not one row for each occurrence. */
__kernel void fm_locate_intervals(__global const uint *lines, const uint primary, const uint4 first_rows,
                                  __global const uint4 *marks, __global const uint *samples,
                                  __global const uint *starts, const uint intervals, const uint count,
                                  __global uint *positions)
{
    uint gid = get_global_id(0);
    if (gid >= count)
        return;
    __global const uint *lo = starts, *before = starts + intervals;
    uint low = last_at_most(before, intervals, gid);  /* before[low] <= gid < before[low + 1] (or count) */
    positions[gid] = locate_row(lines, primary, first_rows, marks, samples, lo[low] + (gid - before[low]));
}

/* The seed choice of SeedFilter._hits (bowmap/align/seed/filter.py; reference: seeds.choose_seeds),
 * one work-item a read, on the SA intervals seed_search left in `results` (uint[3][count], count =
 * 2 * forward seeds: every read's forward seeds, then every read's reverse seeds in the same order;
 * with several blocks, subtract_overlaps' uint[2][count]: only hi - lo is read).
 * Read r's seeds are seed_first[r] .. seed_first[r + 1] - 1 and the same plus forward.
 * A seed is eligible when it occurs 1..max_occurrences times. Eligible seeds are taken in the
 * order (occurrences, seed number) while the occurrences of the eligible seeds before them sum
 * to less than budget: a read has a few tens of seeds, so each seed's sum is a plain loop
 * (quadratic in the read's seeds: a 4096-base read's rescue seeds, every 4 bases, take about
 * 4 M steps in one work-item; correct, and rare).
 * Out: taken[i] = the occurrences of seed i if taken, else 0; read_rows[r] = their sum;
 * crowded[r] = 1 when one of its seeds occurs but is not taken (too repetitive, or over budget). */
__kernel void choose_seeds(__global const uint *results, __global const uint *seed_first, const uint reads,
                           const uint forward, const uint max_occurrences, const uint budget,
                           __global uint *taken, __global uint *read_rows, __global uchar *crowded)
{
    uint r = get_global_id(0);
    if (r >= reads)
        return;
    __global const uint *lo = results, *hi = results + 2 * forward;
    uint first = seed_first[r], seeds = seed_first[r + 1] - first;
    uint rows = 0;
    uchar left_out = 0;
    for (uint a = 0; a < 2 * seeds; ++a) {
        uint i = a < seeds ? first + a : forward + first + (a - seeds);
        uint occurrences = hi[i] - lo[i], take = 0;
        if (occurrences > 0 && occurrences <= max_occurrences) {
            ulong before = 0;
            for (uint b = 0; b < 2 * seeds; ++b) {
                uint k = b < seeds ? first + b : forward + first + (b - seeds);
                uint other = hi[k] - lo[k];
                if (other > 0 && other <= max_occurrences && (other < occurrences || (other == occurrences && k < i)))
                    before += other;
            }
            if (before < budget)
                take = occurrences;
        }
        left_out |= occurrences > 0 && take == 0;
        taken[i] = take;
        rows += take;
    }
    read_rows[r] = rows;
    crowded[r] = left_out;
}

/* Seed i's rows in a block whose intervals are `results` (uint[3][2 * forward]), when choose_seeds
 * took it (on this block's counts, or on all blocks' counts: then its rows in this block). */
inline uint block_take(__global const uint *results, __global const uint *taken, uint forward, uint i)
{
    return taken[i] ? results[2 * forward + i] - results[i] : 0u;
}

/* Several blocks: read r's hits in one block (block_take over its seeds) into
 * rows[block * reads + r], and with blocks = 2 its hits in block + 1 (intervals results_b) into
 * the next row: the host lays out every block's hits of a read after the previous block's (see
 * locate_hits' out_first). */
__kernel void block_rows(__global const uint *results, __global const uint *results_b, const uint blocks,
                         __global const uint *taken, __global const uint *seed_first,
                         const uint reads, const uint forward, const uint block, __global uint *rows)
{
    uint r = get_global_id(0);
    if (r >= reads)
        return;
    uint first = seed_first[r], seeds = seed_first[r + 1] - first, sum = 0, sum_b = 0;
    for (uint a = 0; a < 2 * seeds; ++a) {
        uint i = a < seeds ? first + a : forward + first + (a - seeds);
        sum += block_take(results, taken, forward, i);
        if (blocks > 1)
            sum_b += block_take(results_b, taken, forward, i);
    }
    rows[(size_t)block * reads + r] = sum;
    if (blocks > 1)
        rows[(size_t)(block + 1) * reads + r] = sum_b;
}

/* Every occurrence in a block of every taken seed (choose_seeds), grouped by read: hits
 * hit_first[r] .. hit_first[r + 1] - 1 of the block are read r's (hit_first: the prefix sums of
 * its rows in this block, choose_seeds' read_rows with one block, block_rows' with several), its
 * seeds' rows in seed order (forward seeds, then reverse). Work-item gid finds its read by a binary
 * search (as fm_locate_intervals its interval), then its seed by a walk over the read's few.
 * Out, at slot out_first[r] + gid - hit_first[r] (out_first = hit_first with one block; with
 * several, each block's hits of a read follow the previous blocks' in one set of buffers):
 * positions = block_start + the block offset of its suffix; tags = seed's read offset << 7 |
 * seed_length << 1 | reverse (seed_windows.cl's hit_tag); read_offset[f] is forward seed f's
 * offset in its read (a reverse seed has its forward twin's). hit_first and out_first lie in
 * `firsts`, from hit_at and out_at. An occurrence inside two blocks' overlap is located in both:
 * seed_windows.cl makes the same windows from the two equal hits as from one (equal keys, and
 * a window's weight counts distinct read offsets).
 * Two blocks a launch, as seed_search: work-items 0 .. count - 1 locate block a's hits, the next
 * count_b block b's (count_b = 0: one block, a's arguments repeated). */
#define LOCATE_BLOCK_PARAMETERS(x)                                                                                    \
    __global const uint *lines##x, const uint primary##x, const uint4 first_rows##x, __global const uint4 *marks##x, \
    __global const uint *samples##x, __global const uint *results##x, const uint block_start##x,                    \
    const uint hit_at##x, const uint out_at##x, const uint count##x

__kernel void locate_hits(LOCATE_BLOCK_PARAMETERS(), LOCATE_BLOCK_PARAMETERS(_b),
                          __global const uint *taken, __global const uint *seed_first, __global const uint *read_offset,
                          const uint reads, const uint forward, const uint seed_length,
                          __global const uint *firsts, __global uint *positions, __global uint *tags)
{
    uint gid = get_global_id(0);
    if (gid >= count + count_b)
        return;
    bool second = gid >= count;
    __global const uint *results_of = second ? results_b : results;
    __global const uint *hit_first = firsts + (second ? hit_at_b : hit_at), *out_first = firsts + (second ? out_at_b : out_at);
    uint hit = second ? gid - count : gid;
    uint low = last_at_most(hit_first, reads, hit);
    uint first = seed_first[low], seeds = seed_first[low + 1] - first, within = hit - hit_first[low];
    uint slot = out_first[low] + within;
    uint i = first, reverse = 0;
    for (uint a = 0; a < 2 * seeds; ++a) {
        i = a < seeds ? first + a : forward + first + (a - seeds);
        uint take = block_take(results_of, taken, forward, i);
        if (within < take) {
            reverse = a >= seeds;
            break;
        }
        within -= take;
    }
    uint offset = locate_row(second ? lines_b : lines, second ? primary_b : primary, second ? first_rows_b : first_rows,
                             second ? marks_b : marks, second ? samples_b : samples, results_of[i] + within);
    positions[slot] = (second ? block_start_b : block_start) + offset;
    tags[slot] = (read_offset[i - reverse * forward] << 7) | (seed_length << 1) | reverse;
}

#undef LOCATE_BLOCK_PARAMETERS
