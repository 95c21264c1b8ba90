/* seed_windows.cl -- a chunk's seed hits -> each read's candidate windows, on the device.
 *
 * The device twin of SeedFilter._merge_on_host followed by SeedFilter._keep_best
 * (bowmap/align/seed/filter.py, the reference the tests compare with).
 *
 * Work-items: one per read (gid < reads guarded, so the global size may be rounded up). The hits
 * come from `sources` (1..3) rounds of seeds, each grouped by read: read r owns hits
 * first_k[r] .. first_k[r + 1] - 1 of round k, and as scratch the slots from first_0[r] + first_1[r]
 * + first_2[r] on of `keys`, `window_start`, `window_end` and `window_meta` (sized for all
 * rounds' hits; a read never has more windows than hits). A round's hits may stay on the device
 * from the kernels that located them (fm_search.cl's locate_hits): the host never joins them.
 * With `filtered`, only reads r with only[r] != 0 are done: the others' outputs are left as an
 * earlier launch wrote them (the weak reads' windows made again, the rest kept).
 *
 * Per read:
 *  1. Hits whose seed meets an ambiguous base (its indexed stand-in is random) or runs past its
 *     contig are dropped. A 64-bit key per other hit: strand, contig, diagonal + SHIFT, read
 *     offset (most to least significant; 1 bit, CONTIGS and DIAGONAL_SPAN values, OFFSET_BITS
 *     bits, as the host checked), then a heap sort of the keys: hits in (strand, contig, diagonal) order, as the reference sorts.
 *  2. One pass makes the windows: a hit opens one when strand or contig changes, when its
 *     diagonal is more than MARGIN past the previous hit's, or when it falls in another bin of
 *     MARGIN + 1 diagonals counted from its chain's first hit (tandem repeats: see _merge_on_host).
 *     A window runs from its first diagonal - MARGIN to its last + read length + MARGIN, clipped
 *     to the contig; its weight is the number of distinct read offsets among its hits (a bit
 *     set over the read's bases).
 *  3. More than LIMIT windows: the best LIMIT / 2 of each strand (most weight; ties: first in
 *     order), then the best of the rest up to LIMIT; chosen windows keep their order.
 *
 * Inputs, each round: position uint text position of the seed's first base; tag uint read offset
 * << 7 | seed length << 1 | reverse; read_lengths uint; contig_starts / contig_ends uint (CONTIGS
 * of them, sorted); hole_starts / hole_ends uint: the ambiguous runs (HOLES, sorted, apart).
 * Outputs: counts[r] windows, then window k of read r at r * LIMIT + k: out_start, out_end
 * (uint text positions, half-open) and out_meta (weight | reverse << 31).
 *
 * Compile-time constants: MARGIN, LIMIT, SHIFT (the index's longest read), CONTIGS, HOLES,
 * OFFSET_BITS, DIAGONAL_SPAN (text length + SHIFT + 1), MASK_WORDS
 * (32-bit words of the offset bit set: read offsets < 32 * MASK_WORDS), GROUP_KEYS (keys a work-group
 * of seed_windows_grouped sorts in local memory).
 *
 * Two kernels, one result. seed_windows: a work-item a read, its keys heap-sorted in global
 * memory (where a CPU's caches serve it). seed_windows_grouped: a work-group a read, for GPUs,
 * whose work-items heap-sorting each its own keys in global memory wait on scattered loads: the
 * group makes the read's keys side by side in local memory (a filtered hit's key is a sentinel,
 * above every key, that sorts last), bitonic-sorts them there and writes them back in order; the
 * group then makes the windows together (group_windows). A read with more hits than GROUP_KEYS
 * has its keys sorted by the group in global memory (group_sort_global). Why: a repetitive
 * read's 1,000-2,000 keys took one work-item ~20,000 dependent loads to heap-sort and as many
 * steps to pass over, and a launch lasted as long as its longest read (H200, 1 Gbp human-like
 * genome, bench/kernel_times.py: the longest launch 4.2 ms, 2.8 ms with the sort shared). A key
 * never equals the sentinel ULONG_MAX: DeviceWindows.fits keeps keys under 2^64 and a read offset
 * under 2^OFFSET_BITS - 1.
 */

#define REVERSE_BIT 0x80000000u
#define PICKED_BIT 0x40000000u
#define WEIGHT_MASK 0x3FFFFFFFu

inline uint contig_of(__global const uint *contig_starts, uint position)
{
#if CONTIGS == 1
    return 0;
#else
    /* The last contig starting at or before position. */
    uint low = 0, high = CONTIGS;
    while (high - low > 1) {
        uint middle = (low + high) / 2;
        if (contig_starts[middle] <= position)
            low = middle;
        else
            high = middle;
    }
    return low;
#endif
}

/* Whether text [position, end) lies in one contig and meets no ambiguous run. */
inline bool span_is_clean(__global const uint *contig_ends, uint contig, __global const uint *hole_starts,
                          __global const uint *hole_ends, uint position, ulong end)
{
    if (end > contig_ends[contig])
        return false;
#if HOLES > 0
    /* The first run ending after position must start at or after end. */
    uint low = 0, high = HOLES;
    while (low < high) {
        uint middle = (low + high) / 2;
        if (hole_ends[middle] <= position)
            low = middle + 1;
        else
            high = middle;
    }
    if (low < HOLES && hole_starts[low] < end)
        return false;
#endif
    return true;
}

inline void sift_down(__global ulong *keys, uint root, uint size)
{
    ulong value = keys[root];
    for (;;) {
        uint child = 2 * root + 1;
        if (child >= size)
            break;
        ulong larger = keys[child];
        if (child + 1 < size && keys[child + 1] > larger)
            larger = keys[++child];
        if (larger <= value)
            break;
        keys[root] = larger;
        root = child;
    }
    keys[root] = value;
}

inline void heap_sort(__global ulong *keys, uint size)
{
    for (uint i = size / 2; i-- > 0;)
        sift_down(keys, i, size);
    for (uint end = size; end-- > 1;) {
        ulong top = keys[0];
        keys[0] = keys[end];
        keys[end] = top;
        sift_down(keys, 0, end);
    }
}

/* The `n` keys at `keys` sorted ascending by a work-group, as a bitonic sort of them padded with
 * ULONG_MAX to a power of two: every exchange puts the smaller key first (a merge's first step
 * compares mirrored places), so the padding would never move and is neither stored nor compared. */
inline void group_sort_global(__global ulong *keys, uint n, uint lid, uint size)
{
    uint padded = 1;
    while (padded < n)
        padded <<= 1;
    for (uint run = 2; run <= padded; run <<= 1) {
        for (uint step = run >> 1; step > 0; step >>= 1) {
            for (uint p = lid; p < padded / 2; p += size) {
                uint offset = p & (step - 1);
                uint i = (p - offset) * 2 + offset;
                uint j = step == run >> 1 ? i + run - 1 - 2 * offset : i + step;
                if (j < n) {
                    ulong a = keys[i], b = keys[j];
                    if (a > b) {
                        keys[i] = b;
                        keys[j] = a;
                    }
                }
            }
            barrier(CLK_GLOBAL_MEM_FENCE);
        }
    }
}

/* The best window not yet picked (most weight, then first), of `strand` (2: either); -1: none. */
inline int best_unpicked(__global const uint *meta, uint windows, uint strand)
{
    int best = -1;
    uint best_weight = 0;
    for (uint w = 0; w < windows; ++w) {
        uint m = meta[w];
        if ((m & PICKED_BIT) || (strand < 2 && (m >> 31) != strand))
            continue;
        uint weight = m & WEIGHT_MASK;
        if (best < 0 || weight > best_weight) {
            best = (int)w;
            best_weight = weight;
        }
    }
    return best;
}

/* The key of hit h of a round (ULONG_MAX when the hit is dropped: see round_keys). */
inline ulong hit_key(__global const uint *hit_position, __global const uint *hit_tag, uint h, __global const uint *contig_starts,
                     __global const uint *contig_ends, __global const uint *hole_starts, __global const uint *hole_ends)
{
    uint position = hit_position[h], tag = hit_tag[h];
    uint offset = tag >> 7, contig = contig_of(contig_starts, position);
    if (!span_is_clean(contig_ends, contig, hole_starts, hole_ends, position, (ulong)position + ((tag >> 1) & 63u)))
        return ULONG_MAX;
    ulong group = (ulong)(tag & 1u) * CONTIGS + contig;
    ulong diagonal = (ulong)position + SHIFT - offset; /* diagonal + SHIFT >= 0 */
    return ((group * DIAGONAL_SPAN + diagonal) << OFFSET_BITS) | offset;
}

/* Keys of read r's hits of one round, from key[hits] on; returns the new count of keys. */
inline uint round_keys(__global const uint *first, __global const uint *hit_position, __global const uint *hit_tag,
                       uint r, __global const uint *contig_starts, __global const uint *contig_ends,
                       __global const uint *hole_starts, __global const uint *hole_ends, __global ulong *key, uint hits)
{
    uint from = first[r], to = first[r + 1];
    for (uint h = from; h < to; ++h) {
        ulong k = hit_key(hit_position, hit_tag, h, contig_starts, contig_ends, hole_starts, hole_ends);
        if (k != ULONG_MAX)
            key[hits++] = k;
    }
    return hits;
}

/* A key's parts: group (strand x CONTIGS + contig), diagonal and read offset. */
inline ulong key_group(ulong k)
{
    return (k >> OFFSET_BITS) / DIAGONAL_SPAN;
}

inline long key_diagonal(ulong k)
{
    return (long)((k >> OFFSET_BITS) % DIAGONAL_SPAN) - SHIFT;
}

inline uint key_offset(ulong k)
{
    return (uint)(k & ((1ul << OFFSET_BITS) - 1));
}

/* The windows kept (all, or those picked where there are more than LIMIT) of windows from ..
 * to - 1, written from out place `place` of read r on; returns the place after them. */
inline uint write_kept(__global const uint *w_start, __global const uint *w_end, __global const uint *w_meta, uint windows,
                       uint from, uint to, uint r, uint place, __global uint *out_start, __global uint *out_end, __global uint *out_meta)
{
    for (uint w = from; w < to; ++w) {
        uint m = w_meta[w];
        if (windows > LIMIT && !(m & PICKED_BIT))
            continue;
        out_start[r * LIMIT + place] = w_start[w];
        out_end[r * LIMIT + place] = w_end[w];
        out_meta[r * LIMIT + place] = m & ~PICKED_BIT;
        ++place;
    }
    return place;
}

/* Read r's windows from its `hits` keys, sorted, at `key` (its slots from `first` on in the
 * scratch arrays): steps 2 and 3 above, and the outputs. */
inline void make_windows(__global const ulong *key, uint hits, uint r, uint first, __global const uint *read_lengths,
                         __global const uint *contig_starts, __global const uint *contig_ends,
                         __global uint *window_start, __global uint *window_end, __global uint *window_meta,
                         __global uint *counts, __global uint *out_start, __global uint *out_end, __global uint *out_meta)
{
    long length = read_lengths[r];
    __global uint *w_start = window_start + first, *w_end = window_end + first, *w_meta = window_meta + first;
    uint windows = 0;
    uint seen[MASK_WORDS]; /* the open window's read offsets; cleared word by word as it closes */
    for (uint i = 0; i < MASK_WORDS; ++i)
        seen[i] = 0;
    ulong previous_group = 0;
    long previous_diagonal = 0, chain_diagonal = 0, previous_bin = 0, last_diagonal = 0;
    uint weight = 0, contig = 0, meta = 0, opened = 0; /* the open window's meta and first hit */
    for (uint h = 0; h <= hits; ++h) {
        bool opens = h == hits;
        ulong k = 0, group = 0;
        long diagonal = 0, bin = 0;
        if (h < hits) {
            k = key[h];
            group = key_group(k);
            diagonal = key_diagonal(k);
            bool new_chain = h == 0 || group != previous_group || diagonal - previous_diagonal > MARGIN;
            if (new_chain)
                chain_diagonal = diagonal;
            bin = (diagonal - chain_diagonal) / (MARGIN + 1);
            opens = new_chain || bin != previous_bin;
        }
        if (opens && h > 0) { /* close the window that ends at hit h - 1 */
            long contig_end = contig_ends[contig];
            long end = last_diagonal + length + MARGIN;
            w_end[windows - 1] = (uint)(end < contig_end ? end : contig_end);
            w_meta[windows - 1] = meta | weight;
            for (uint i = opened; i < h; ++i) /* its hits' words: fewer than MASK_WORDS, mostly */
                seen[key_offset(key[i]) >> 5] = 0;
        }
        if (h == hits)
            break;
        if (opens) {
            contig = (uint)(group % CONTIGS);
            long start = diagonal - MARGIN, contig_start = contig_starts[contig];
            w_start[windows] = (uint)(start > contig_start ? start : contig_start);
            meta = (uint)(group / CONTIGS) << 31;
            ++windows;
            weight = 0;
            opened = h;
        }
        uint offset = key_offset(k);
        uint bit = 1u << (offset & 31);
        weight += (seen[offset >> 5] & bit) == 0;
        seen[offset >> 5] |= bit;
        previous_group = group;
        previous_diagonal = diagonal;
        previous_bin = bin;
        last_diagonal = diagonal;
    }

    if (windows > LIMIT) {
        uint picked = 0;
        for (uint strand = 0; strand < 2; ++strand)
            for (uint n = 0; n < LIMIT / 2; ++n) {
                int w = best_unpicked(w_meta, windows, strand);
                if (w < 0)
                    break;
                w_meta[w] |= PICKED_BIT;
                ++picked;
            }
        for (; picked < LIMIT; ++picked)
            w_meta[best_unpicked(w_meta, windows, 2)] |= PICKED_BIT; /* windows > LIMIT: one is left */
    }
    counts[r] = write_kept(w_start, w_end, w_meta, windows, 0, windows, r, 0, out_start, out_end, out_meta);
}

/* Read r's windows, one work-item: its keys made and heap-sorted in global memory. */
inline void windows_of_read(
    __global const uint *first_0, __global const uint *position_0, __global const uint *tag_0,
    __global const uint *first_1, __global const uint *position_1, __global const uint *tag_1,
    __global const uint *first_2, __global const uint *position_2, __global const uint *tag_2, uint sources,
    __global const uint *read_lengths, __global const uint *contig_starts, __global const uint *contig_ends,
    __global const uint *hole_starts, __global const uint *hole_ends, uint r, uint first,
    __global ulong *keys, __global uint *window_start, __global uint *window_end, __global uint *window_meta,
    __global uint *counts, __global uint *out_start, __global uint *out_end, __global uint *out_meta)
{
    __global ulong *key = keys + first;
    uint hits = round_keys(first_0, position_0, tag_0, r, contig_starts, contig_ends, hole_starts, hole_ends, key, 0);
    if (sources > 1)
        hits = round_keys(first_1, position_1, tag_1, r, contig_starts, contig_ends, hole_starts, hole_ends, key, hits);
    if (sources > 2)
        hits = round_keys(first_2, position_2, tag_2, r, contig_starts, contig_ends, hole_starts, hole_ends, key, hits);
    heap_sort(key, hits);
    make_windows(key, hits, r, first, read_lengths, contig_starts, contig_ends, window_start, window_end, window_meta, counts,
                 out_start, out_end, out_meta);
}

/* The parameters of both kernels (the grouped one adds its local memory). */
#define SEED_WINDOWS_PARAMETERS \
    __global const uint *first_0, __global const uint *position_0, __global const uint *tag_0, \
    __global const uint *first_1, __global const uint *position_1, __global const uint *tag_1, \
    __global const uint *first_2, __global const uint *position_2, __global const uint *tag_2, uint sources, \
    __global const uchar *only, uint filtered, __global const uint *read_lengths, __global const uint *contig_starts, __global const uint *contig_ends, \
    __global const uint *hole_starts, __global const uint *hole_ends, uint reads, \
    __global ulong *keys, __global uint *window_start, __global uint *window_end, __global uint *window_meta, \
    __global uint *counts, __global uint *out_start, __global uint *out_end, __global uint *out_meta

__kernel void seed_windows(SEED_WINDOWS_PARAMETERS)
{
    uint r = get_global_id(0);
    if (r >= reads || (filtered && !only[r]))
        return;
    uint first = first_0[r] + (sources > 1 ? first_1[r] : 0) + (sources > 2 ? first_2[r] : 0);
    windows_of_read(first_0, position_0, tag_0, first_1, position_1, tag_1, first_2, position_2, tag_2, sources, read_lengths,
                    contig_starts, contig_ends, hole_starts, hole_ends, r, first, keys, window_start, window_end, window_meta, counts,
                    out_start, out_end, out_meta);
}

/* ---- seed_windows_grouped's window pass: the work-group's work-items share it ----
 * The keys are split into one run of consecutive hits a work-item. Whether hit h opens a window
 * depends on hits h - 1 and its chain's first hit only, so (1) each work-item finds the last
 * chain start in its run, and a run's incoming chain start is the latest of the earlier runs';
 * (2) each counts the windows opening in its run, and a run's first window's number is the sum of
 * the earlier runs' counts; (3) each makes the windows opening in its run, walking a window past
 * its run's end where it goes on. The best windows are then picked one at a time, each the best
 * of the work-items' bests; the chosen are written in order, each run's from its place. */

/* Whether hit h (> 0) starts a chain: another strand or contig, or a diagonal more than MARGIN
 * past hit h - 1's. */
inline bool starts_chain(__global const ulong *key, uint h)
{
    ulong a = key[h - 1], b = key[h];
    return key_group(a) != key_group(b) || key_diagonal(b) - key_diagonal(a) > MARGIN;
}

/* Whether hit h opens a window, given the diagonal of the first hit of hit h - 1's chain
 * (*chain_diagonal: h's where h starts a chain). */
inline bool opens_window(__global const ulong *key, uint h, long *chain_diagonal)
{
    if (h == 0 || starts_chain(key, h)) {
        *chain_diagonal = key_diagonal(key[h]);
        return true;
    }
    return (key_diagonal(key[h]) - *chain_diagonal) / (MARGIN + 1) != (key_diagonal(key[h - 1]) - *chain_diagonal) / (MARGIN + 1);
}

/* The run of hits of work-item lid: [*from, *to). */
inline void lane_run(uint count, uint lid, uint size, uint *from, uint *to)
{
    uint each = (count + size - 1) / size;
    *from = min(count, lid * each);
    *to = min(count, *from + each);
}

/* The best unpicked window (most weight, then first) of `strand` (2: either) among the group's
 * `windows`, marked picked; returns whether there was one. `lanes`: 2 x size values. */
inline bool pick_best(__global uint *meta, uint windows, uint strand, __local uint *lanes, uint lid, uint size)
{
    uint best = UINT_MAX, best_weight = 0;
    for (uint w = lid; w < windows; w += size) {
        uint m = meta[w];
        if ((m & PICKED_BIT) || (strand < 2 && (m >> 31) != strand))
            continue;
        if (best == UINT_MAX || (m & WEIGHT_MASK) > best_weight) { /* w rises: the first of a weight stays */
            best = w;
            best_weight = m & WEIGHT_MASK;
        }
    }
    lanes[lid] = best;
    lanes[size + lid] = best_weight;
    barrier(CLK_LOCAL_MEM_FENCE);
    best = UINT_MAX;
    for (uint l = 0; l < size; ++l) {
        uint w = lanes[l], weight = lanes[size + l];
        if (w != UINT_MAX && (best == UINT_MAX || weight > best_weight || (weight == best_weight && w < best))) {
            best = w;
            best_weight = weight;
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE); /* lanes is read by all before it is written again */
    if (best != UINT_MAX && lid == 0)
        meta[best] |= PICKED_BIT;
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    return best != UINT_MAX;
}

/* make_windows by the work-group (see above); `lanes`: 2 x size + 1 values of local memory. */
inline void group_windows(__global const ulong *key, uint raw, uint r, uint first, __global const uint *read_lengths,
                          __global const uint *contig_starts, __global const uint *contig_ends,
                          __global uint *window_start, __global uint *window_end, __global uint *window_meta,
                          __global uint *counts, __global uint *out_start, __global uint *out_end, __global uint *out_meta,
                          __local uint *lanes, uint lid, uint size)
{
    if (lid == 0) { /* the dropped hits' keys sort last */
        uint hits = raw;
        while (hits > 0 && key[hits - 1] == ULONG_MAX)
            --hits;
        lanes[2 * size] = hits;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    uint hits = lanes[2 * size], from, to;
    lane_run(hits, lid, size, &from, &to);
    /* 1. The last chain start of each run (UINT_MAX: none), and the latest before this one. */
    uint last = UINT_MAX;
    for (uint h = from; h < to; ++h)
        if (h == 0 || starts_chain(key, h))
            last = h;
    lanes[lid] = last;
    barrier(CLK_LOCAL_MEM_FENCE);
    uint chain = 0;
    for (uint l = 0; l < lid; ++l)
        if (lanes[l] != UINT_MAX)
            chain = lanes[l];
    long chain_diagonal = hits > 0 ? key_diagonal(key[chain]) : 0;
    /* 2. The windows opening in each run; this run's first window's number. */
    uint opening = 0;
    long diagonal = chain_diagonal;
    for (uint h = from; h < to; ++h)
        opening += opens_window(key, h, &diagonal);
    lanes[size + lid] = opening;
    barrier(CLK_LOCAL_MEM_FENCE);
    uint window = 0, windows = 0;
    for (uint l = 0; l < size; ++l) {
        window += l < lid ? lanes[size + l] : 0;
        windows += lanes[size + l];
    }
    /* 3. The windows opening in this run, each walked to its end. */
    long length = read_lengths[r];
    __global uint *w_start = window_start + first, *w_end = window_end + first, *w_meta = window_meta + first;
    uint seen[MASK_WORDS];
    for (uint i = 0; i < MASK_WORDS; ++i)
        seen[i] = 0;
    uint h = from;
    while (h < to) {
        if (!opens_window(key, h, &chain_diagonal)) {
            ++h; /* in the window of an earlier run */
            continue;
        }
        ulong group = key_group(key[h]);
        uint contig = (uint)(group % CONTIGS);
        long start = key_diagonal(key[h]) - MARGIN, contig_start = contig_starts[contig];
        uint weight = 0, end = h;
        do {
            uint offset = key_offset(key[end]), bit = 1u << (offset & 31);
            weight += (seen[offset >> 5] & bit) == 0;
            seen[offset >> 5] |= bit;
            ++end;
        } while (end < hits && !opens_window(key, end, &chain_diagonal));
        long contig_end = contig_ends[contig], stop = key_diagonal(key[end - 1]) + length + MARGIN;
        w_start[window] = (uint)(start > contig_start ? start : contig_start);
        w_end[window] = (uint)(stop < contig_end ? stop : contig_end);
        w_meta[window] = (uint)(group / CONTIGS) << 31 | weight;
        ++window;
        for (uint i = h; i < end; ++i)
            seen[key_offset(key[i]) >> 5] = 0;
        h = end; /* opens a window (tested again, with the same answer), or is past the run */
    }
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    /* 4. More than LIMIT: the best LIMIT / 2 of each strand, then the best of the rest. */
    if (windows > LIMIT) {
        uint picked = 0;
        for (uint strand = 0; strand < 2; ++strand)
            for (uint n = 0; n < LIMIT / 2 && pick_best(w_meta, windows, strand, lanes, lid, size); ++n)
                ++picked;
        for (; picked < LIMIT; ++picked)
            pick_best(w_meta, windows, 2, lanes, lid, size);
    }
    /* 5. The kept windows in order, each run of windows written from its place. */
    lane_run(windows, lid, size, &from, &to);
    uint kept = 0;
    for (uint w = from; w < to; ++w)
        kept += windows <= LIMIT || (w_meta[w] & PICKED_BIT);
    barrier(CLK_LOCAL_MEM_FENCE);
    lanes[lid] = kept;
    barrier(CLK_LOCAL_MEM_FENCE);
    uint place = 0;
    for (uint l = 0; l < lid; ++l)
        place += lanes[l];
    place = write_kept(w_start, w_end, w_meta, windows, from, to, r, place, out_start, out_end, out_meta);
    if (lid == size - 1)
        counts[r] = place;
}

/* seed_windows with a work-group a read (see the header): global size reads x local size;
 * `lanes`: 2 x local size + 1 uints. */
__kernel void seed_windows_grouped(SEED_WINDOWS_PARAMETERS, __local ulong *sorted, __local uint *lanes)
{
    uint r = get_group_id(0), lid = get_local_id(0), size = get_local_size(0);
    if (r >= reads || (filtered && !only[r]))
        return; /* the whole group: no barrier is left waiting */
    uint from_0 = first_0[r], from_1 = sources > 1 ? first_1[r] : 0, from_2 = sources > 2 ? first_2[r] : 0;
    uint first = from_0 + from_1 + from_2;
    uint count_0 = first_0[r + 1] - from_0;
    uint count_1 = sources > 1 ? first_1[r + 1] - from_1 : 0;
    uint count_2 = sources > 2 ? first_2[r + 1] - from_2 : 0;
    uint raw = count_0 + count_1 + count_2;
    __global ulong *key = keys + first;
    bool in_local = raw <= GROUP_KEYS; /* else the keys are sorted where they are, in global memory */
    uint padded = 1;
    while (padded < raw)
        padded <<= 1;
    for (uint i = lid; i < (in_local ? padded : raw); i += size) {
        ulong k = ULONG_MAX;
        if (i < count_0)
            k = hit_key(position_0, tag_0, from_0 + i, contig_starts, contig_ends, hole_starts, hole_ends);
        else if (i < count_0 + count_1)
            k = hit_key(position_1, tag_1, from_1 + i - count_0, contig_starts, contig_ends, hole_starts, hole_ends);
        else if (i < raw)
            k = hit_key(position_2, tag_2, from_2 + i - count_0 - count_1, contig_starts, contig_ends, hole_starts, hole_ends);
        if (in_local)
            sorted[i] = k;
        else
            key[i] = k;
    }
    if (in_local) {
        barrier(CLK_LOCAL_MEM_FENCE);
        /* Bitonic sort, ascending: the sentinels (dropped hits, padding) last. */
        for (uint run = 2; run <= padded; run <<= 1) {
            for (uint step = run >> 1; step > 0; step >>= 1) {
                for (uint i = lid; i < padded; i += size) {
                    uint partner = i ^ step;
                    if (partner > i) {
                        ulong a = sorted[i], b = sorted[partner];
                        if ((a > b) == ((i & run) == 0)) {
                            sorted[i] = b;
                            sorted[partner] = a;
                        }
                    }
                }
                barrier(CLK_LOCAL_MEM_FENCE);
            }
        }
        for (uint i = lid; i < raw; i += size)
            key[i] = sorted[i];
    }
    barrier(CLK_GLOBAL_MEM_FENCE);
    if (!in_local)
        group_sort_global(key, raw, lid, size);
    group_windows(key, raw, r, first, read_lengths, contig_starts, contig_ends, window_start, window_end, window_meta, counts,
                  out_start, out_end, out_meta, lanes, lid, size);
}
