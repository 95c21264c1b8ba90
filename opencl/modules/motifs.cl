/* motifs.cl -- all-to-all comparison of multi-level k-mer hash tables (bowmap motifs).
 *
 * Scores: for regions i < j and distance class δ, S_δ(i, j) = Σ over the configurations c of
 * class δ, Σ over the keys present in both regions' sub-tables c of min(count_i, count_j).
 *
 * Buffers (built by bowmap/modules/motifs/kernels.py, `build_tables`) hold the configurations
 * [config_first, config_end) of all regions (all of them, or one batch of a pipelined run),
 * configuration-major; c below counts from config_first:
 *   keys     key_t[E + 4]  masked k-mers (KEY_BITS 64: 3 bits a base; 32: 2 bits a base),
 *                       sorted by (configuration, region, bucket, key), distinct in a segment;
 *                       4 unused keys at the end, so whole aligned vectors can be read.
 *   counts   uint[E]    occurrences of keys[e] in its region under its configuration.
 *   offsets  uint[C * regions * buckets + 1]  segment (c, r, b) is
 *                       [offsets[(c * regions + r) * buckets + b], next entry); the segments of
 *                       one (c, r) are consecutive, so (c, r) as a whole is one range too.
 *   scores   uint[LEVELS][pair_count]  S_δ of pair p at scores[δ * pair_count + p - pair_base],
 *                       added to (zeroed by the host before the first batch): a batch adds the
 *                       part of S_δ that its configurations hold; one work-item (work-group)
 *                       owns a pair, so the additions never race;
 *                       p = i * n - i * (i + 1) / 2 + (j - i - 1), the row-major upper triangle.
 * Build options: KEY_BITS (32 or 64), LEVELS (d + 1), LEVEL_CONFIG_ENDS (configurations of
 * classes 0..δ, for each δ, comma separated), SLICE (bucket_slices only), VECTOR_LOADS
 * (thread_to_pair: 1 reads j's keys 16 bytes at a time, 0 one key at a time).
 *
 * Kernels and work-item mapping:
 *   thread_to_pair  a work-item per pair. A work-group shares row i and takes up to
 *                   get_local_size(0) consecutive columns j of one column block (blocks aligned
 *                   to the work-group size, group g: group_rows[g], group_columns[g] = first j).
 *                   Row i's range of one configuration is cached in local memory in chunks of
 *                   cache_capacity keys; each work-item streams j's range from global memory
 *                   and merges it with the cache bucket by bucket (both sorted: linear time).
 *                   Loop bounds that reach a barrier depend on row i only: uniform. Only such
 *                   uniform values live across a barrier: each work-item's running sum is in
 *                   lane_totals[get_local_size(0)] (local), its place in j's bucket is made
 *                   again after each cache reload (a binary search when a bucket spans chunks).
 *   thread_to_pair_hash  as thread_to_pair, but row i's sub-table is cached as an open-addressing
 *                   hash table in local memory (table_bits: 2^table_bits slots of key and count,
 *                   filled at most half, in chunks of that many keys), and each work-item looks
 *                   up every key of j's sub-table in it: |T_j| probes a pair instead of a merge
 *                   of |T_i| + |T_j| steps, with no data-dependent branching between lanes.
 *   bucket_slices   a work-group per pair (pair_rows / pair_columns), split into slices of SLICE
 *                   work-items; slice s takes segments s, s + slices, ...; the work-items of a
 *                   slice take the elements of i's segment in turn and binary-search them in j's.
 *                   SLICE = 1: Thread to Bucket; SLICE = a warp: Warp to Bucket (a fixed slice
 *                   of the work-group: no sub-group function is needed); SLICE = the work-group:
 *                   Sequential Bucket (buckets in turn, work-items over the elements).
 * Invariants: E < 2^32; counts > 0; every key of a segment hashes to that segment's bucket,
 * so equal keys of i and j meet in the same segment; sums fit in uint.
 */

#if KEY_BITS == 64
typedef ulong key_t;
#else
typedef uint key_t;
#endif

#ifndef SLICE
#define SLICE 1 /* bucket_slices is built with its own SLICE; thread_to_pair needs none */
#endif

#if KEY_BITS == 64
#define VECTOR_KEYS 2
typedef ulong2 key_vector_t;
inline key_t pick(key_vector_t keys, uint index) { return index ? keys.y : keys.x; }
#else
#define VECTOR_KEYS 4
typedef uint4 key_vector_t;
inline key_t pick(key_vector_t keys, uint index)
{
    return index == 0 ? keys.x : index == 1 ? keys.y : index == 2 ? keys.z : keys.w;
}
#endif

#ifndef VECTOR_LOADS
#define VECTOR_LOADS 1
#endif

__constant uint level_config_ends[LEVELS] = {LEVEL_CONFIG_ENDS};

inline ulong pair_index(uint row, uint column, uint regions)
{
    return (ulong)row * regions - (ulong)row * (row + 1) / 2 + (column - row - 1);
}

/* Adds a work-item's sum of one distance class to its pair's score. An atomic add, though no
 * two work-items share a pair: a group's lanes score consecutive packed pairs, and its inactive
 * lanes' would-be pairs are the next row's, another group's. PoCL's CPU vectoriser turned the
 * masked `+=` into a vector load and store over all lanes, writing stale scores back over the
 * next group's (lost sums on Debian's PoCL 3.1 when more threads than cores ran groups). One
 * uncontended atomic a pair and class costs nothing next to the comparison. */
inline void add_score(__global uint *scores, const uint level, const ulong pair_count, const ulong pair,
                      const uint sum)
{
    atomic_add(&scores[(ulong)level * pair_count + pair], sum);
}

/* The pair a work-item of the thread-to-pair kernels scores: its group's row i and the column
 * j = first + lane, where the group's columns run from group_columns[group] to the end of its
 * width-aligned block (or the last region). Inactive work-items (past that end) still run every
 * loop (they reach the barriers) over row i's own table, with empty ranges of their own. */
typedef struct {
    uint row, column, own;
    bool active;
} PairItem;

inline PairItem pair_item(__global const uint *group_rows, __global const uint *group_columns,
                          const uint group_offset, const uint regions)
{
    const uint group = get_group_id(0) + group_offset;
    const uint width = get_local_size(0);
    const uint first = group_columns[group];
    PairItem item;
    item.row = group_rows[group];
    item.column = first + get_local_id(0);
    item.active = item.column < min(regions, (first / width + 1) * width);
    item.own = item.active ? item.column : item.row;
    return item;
}

__kernel void thread_to_pair(__global const key_t *keys, __global const uint *counts,
                             __global const uint *offsets, const uint regions, const uint buckets,
                             __global const uint *group_rows, __global const uint *group_columns,
                             const uint group_offset, __local key_t *cache, const uint cache_capacity,
                             __local uint *lane_totals,
                             __global uint *scores, const ulong pair_base, const ulong pair_count,
                             const uint config_first, const uint config_end)
{
    const uint lane = get_local_id(0);
    const uint width = get_local_size(0);
    const PairItem item = pair_item(group_rows, group_columns, group_offset, regions);
    const uint row = item.row, column = item.column, own = item.own;
    const bool active = item.active;
    /* j's keys are read VECTOR_KEYS at a time (an aligned 16-byte load) and then taken from
     * registers: a quarter (a half for 64-bit keys) of the load instructions of scalar reads,
     * each lane of a warp streaming its own table. */
    __global const key_vector_t *vector_keys = (__global const key_vector_t *)keys;
    uint config = config_first;
    for (uint level = 0; level < LEVELS; ++level) {
        const uint level_end = min(level_config_ends[level], config_end);
        if (config >= level_end)
            continue; /* no configuration of this class in the batch */
        lane_totals[lane] = 0;
        for (; config < level_end; ++config) {
            const size_t row_base = ((size_t)(config - config_first) * regions + row) * buckets;
            const size_t column_base = ((size_t)(config - config_first) * regions + own) * buckets;
            const uint row_last = offsets[row_base + buckets];
            uint chunk_start = offsets[row_base];
            uint chunk_end = chunk_start; /* nothing cached yet for this configuration */
            for (uint bucket = 0; bucket < buckets; ++bucket) {
                const uint a_first = offsets[row_base + bucket];
                uint a = a_first;
                const uint a_end = offsets[row_base + bucket + 1];
                while (a < a_end) {
                    if (a >= chunk_end) {
                        barrier(CLK_LOCAL_MEM_FENCE);
                        chunk_start = a;
                        chunk_end = min(a + cache_capacity, row_last);
                        for (uint t = lane; t < chunk_end - chunk_start; t += width)
                            cache[t] = keys[chunk_start + t];
                        barrier(CLK_LOCAL_MEM_FENCE);
                    }
                    const uint stop = min(a_end, chunk_end);
                    /* Only values equal in every work-item (a, the chunk, the loop counters)
                     * live across a barrier; each work-item's own state (its place in j's
                     * bucket, its sum) is made anew after it or kept in local memory. PoCL's
                     * CPU work-group compilers have lost private values carried across
                     * barriers in loops (a score of 0 for one pair on a 16-core Xeon, PoCL 5;
                     * a group size of 2 with POCL_WORK_GROUP_METHOD=loops on PoCL 3.1). */
                    uint b = offsets[column_base + bucket];
                    const uint b_end = active ? offsets[column_base + bucket + 1] : b;
                    if (a > a_first && b < b_end) {
                        /* A bucket continued from the chunk before: j's keys below i's next
                         * key were merged there already; skip them (binary search). */
                        const key_t next = cache[a - chunk_start];
                        uint high = b_end;
                        while (b < high) {
                            const uint middle = b + (high - b) / 2;
                            if (keys[middle] < next)
                                b = middle + 1;
                            else
                                high = middle;
                        }
                    }
                    uint found = 0;
                    if (b < b_end) {
                        /* Each side's key is loaded again only when that side advanced. */
                        uint x_index = a;
                        key_t x = cache[x_index - chunk_start];
#if VECTOR_LOADS
                        key_vector_t window = vector_keys[b / VECTOR_KEYS];
                        key_t y = pick(window, b % VECTOR_KEYS);
#else
                        key_t y = keys[b];
#endif
                        for (;;) {
                            if (x == y)
                                found += min(counts[x_index], counts[b]);
                            const bool step_x = x <= y, step_y = y <= x;
                            x_index += step_x;
                            b += step_y;
                            if (x_index >= stop || b >= b_end)
                                break;
                            if (step_x)
                                x = cache[x_index - chunk_start];
                            if (step_y) {
#if VECTOR_LOADS
                                if (b % VECTOR_KEYS == 0)
                                    window = vector_keys[b / VECTOR_KEYS];
                                y = pick(window, b % VECTOR_KEYS);
#else
                                y = keys[b];
#endif
                            }
                        }
                    }
                    lane_totals[lane] += found;
                    a = stop;
                }
            }
        }
        if (active)
            add_score(scores, level, pair_count, pair_index(row, column, regions) - pair_base, lane_totals[lane]);
    }
}

/* Slot of a key in a local hash table of 2^bits slots: Fibonacci hashing (the top bits of the
 * key times 2^w / golden ratio), cheap and well spread for packed k-mers. */
#if KEY_BITS == 64
inline uint slot_of(key_t key, uint bits) { return (uint)((key * 0x9E3779B97F4A7C15UL) >> (64 - bits)); }
#else
inline uint slot_of(key_t key, uint bits) { return (key * 0x9E3779B9u) >> (32 - bits); }
#endif

__kernel void thread_to_pair_hash(__global const key_t *keys, __global const uint *counts,
                                  __global const uint *offsets, const uint regions, const uint buckets,
                                  __global const uint *group_rows, __global const uint *group_columns,
                                  const uint group_offset, __local key_t *slot_keys,
                                  __local uint *slot_counts, const uint table_bits,
                                  __local uint *lane_totals,
                                  __global uint *scores, const ulong pair_base, const ulong pair_count,
                                  const uint config_first, const uint config_end)
{
    const uint lane = get_local_id(0);
    const uint width = get_local_size(0);
    const PairItem item = pair_item(group_rows, group_columns, group_offset, regions);
    const uint row = item.row, column = item.column, own = item.own;
    const bool active = item.active;
    const uint table_size = 1u << table_bits;
    const uint mask = table_size - 1;
    /* At most half the slots filled: an empty slot ends every probe, after ~1.5 slots. */
    const uint chunk_capacity = table_size / 2;
    __global const key_vector_t *vector_keys = (__global const key_vector_t *)keys;
    uint config = config_first;
    for (uint level = 0; level < LEVELS; ++level) {
        const uint level_end = min(level_config_ends[level], config_end);
        if (config >= level_end)
            continue;
        lane_totals[lane] = 0; /* a work-item's sum lives in local memory across barriers (see thread_to_pair) */
        for (; config < level_end; ++config) {
            const size_t row_base = ((size_t)(config - config_first) * regions + row) * buckets;
            const size_t column_base = ((size_t)(config - config_first) * regions + own) * buckets;
            const uint row_start = offsets[row_base];
            const uint row_end = offsets[row_base + buckets];
            /* Buckets play no part here: row i's whole sub-table goes into the hash table (in
             * chunks when it is larger than half of it), and j's whole sub-table is streamed
             * through it once per chunk. Keys are distinct in a sub-table, so a key of j
             * meets at most one key of i, in exactly one chunk. */
            for (uint chunk = row_start; chunk < row_end; chunk += chunk_capacity) {
                const uint chunk_end = min(row_end, chunk + chunk_capacity);
                barrier(CLK_LOCAL_MEM_FENCE);
                for (uint slot = lane; slot < table_size; slot += width)
                    slot_counts[slot] = 0u; /* counts are never 0: 0 marks an empty slot */
                barrier(CLK_LOCAL_MEM_FENCE);
                for (uint e = chunk + lane; e < chunk_end; e += width) {
                    const key_t key = keys[e];
                    uint slot = slot_of(key, table_bits);
                    while (atomic_cmpxchg(&slot_counts[slot], 0u, counts[e]) != 0u)
                        slot = (slot + 1) & mask;
                    slot_keys[slot] = key;
                }
                barrier(CLK_LOCAL_MEM_FENCE);
                const uint column_start = offsets[column_base]; /* read after the barrier: see above */
                const uint column_end = active ? offsets[column_base + buckets] : column_start;
                uint found = 0;
                key_vector_t window = vector_keys[column_start / VECTOR_KEYS];
                for (uint e = column_start; e < column_end; ++e) {
                    if (e % VECTOR_KEYS == 0)
                        window = vector_keys[e / VECTOR_KEYS];
                    const key_t key = pick(window, e % VECTOR_KEYS);
                    uint slot = slot_of(key, table_bits);
                    for (;;) {
                        const uint count = slot_counts[slot];
                        if (count == 0u)
                            break;
                        if (slot_keys[slot] == key) {
                            found += min(count, counts[e]);
                            break;
                        }
                        slot = (slot + 1) & mask;
                    }
                }
                lane_totals[lane] += found;
            }
        }
        if (active)
            add_score(scores, level, pair_count, pair_index(row, column, regions) - pair_base, lane_totals[lane]);
    }
}

__kernel void bucket_slices(__global const key_t *keys, __global const uint *counts,
                            __global const uint *offsets, const uint regions, const uint buckets,
                            __global const uint *pair_rows, __global const uint *pair_columns,
                            const uint pair_offset,
                            __global uint *scores, const ulong pair_base, const ulong pair_count,
                            const uint config_first, const uint config_end)
{
    __local uint sums[LEVELS];
    const uint lane = get_local_id(0);
    const uint slices = get_local_size(0) / SLICE;
    const uint slice = lane / SLICE;
    const uint within = lane % SLICE;
    const uint row = pair_rows[get_group_id(0) + pair_offset];
    const uint column = pair_columns[get_group_id(0) + pair_offset];
    /* One work-item for all classes: there may be more classes than work-items. */
    if (lane == 0)
        for (uint level = 0; level < LEVELS; ++level)
            sums[level] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    const uint segments = (config_end - config_first) * buckets;
    /* Work-items past the last whole slice (none when SLICE divides the work-group) idle. */
    for (uint segment = slice; slice < slices && segment < segments; segment += slices) {
        const uint batch_config = segment / buckets;
        const uint bucket = segment - batch_config * buckets;
        const uint config = config_first + batch_config;
        const size_t row_index = ((size_t)batch_config * regions + row) * buckets + bucket;
        const size_t column_index = ((size_t)batch_config * regions + column) * buckets + bucket;
        const uint a_end = offsets[row_index + 1];
        const uint b_start = offsets[column_index];
        const uint b_end = offsets[column_index + 1];
        uint found = 0;
        for (uint a = offsets[row_index] + within; a < a_end && b_start < b_end; a += SLICE) {
            const key_t x = keys[a];
            uint low = b_start, high = b_end;
            while (low < high) {
                const uint middle = low + (high - low) / 2;
                if (keys[middle] < x)
                    low = middle + 1;
                else
                    high = middle;
            }
            if (low < b_end && keys[low] == x)
                found += min(counts[a], counts[low]);
        }
        if (found) {
            uint level = 0;
            while (level + 1 < LEVELS && config >= level_config_ends[level])
                ++level;
            atomic_add(&sums[level], found);
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lane == 0)
        for (uint level = 0; level < LEVELS; ++level)
            if (sums[level])
                scores[(ulong)level * pair_count + pair_index(row, column, regions) - pair_base] += sums[level];
}
