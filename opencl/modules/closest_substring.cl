/* closest_substring.cl -- the closest substring problem: pitch/chord search (S-GPU, PP-GPU*),
 * closest windows of given centres, a min-reduction of 64-bit keys, and the exact search of
 * every DNA centre.
 *
 * Build options (-D): LENGTH (L, the window length), BITS (bits a symbol: 2 for DNA, 5 for
 * protein), WORDS (uints a packed window: ceil(L / SYMBOLS_PER_WORD)).
 *
 * Packed windows: symbol k of a window lies in word k / SYMBOLS_PER_WORD at bit
 * BITS * (k % SYMBOLS_PER_WORD); unused fields and bits are 0 in every packed window and centre,
 * so XOR-ing two packed windows and folding each field to its lowest bit counts mismatches
 * (Hamming distance) with one popcount a word.
 *
 * Buffers (n strings, string i has window_counts[i] = |s_i| - L + 1 >= 1 windows, at most
 * W = window_stride; window w starts at base w, 0-based):
 *   windows     uint[W][WORDS][n]  window-major: word k of window w of string i at
 *                                  (w * WORDS + k) * n + i, so a work-item per string reads
 *                                  consecutive addresses across a wavefront (coalesced).
 *   by_string   uint[n][WORDS][W]  string-major: word k of window w of string i at
 *                                  (i * WORDS + k) * W + w, for work-items per window.
 *   keys        ulong[pitches]     chord key of pitch p (window p of string 0):
 *                                  excess << 54 | total << 24 | p, where total = sum over
 *                                  strings 1..n-1 of the note distance (distance from the pitch
 *                                  to the string's closest window), excess = max(0, largest note
 *                                  distance - max_distance). The smallest key is the best chord:
 *                                  a valid chord (excess 0) with the least total, leftmost pitch
 *                                  on ties; if none is valid, the least excess first.
 *   centres     uint[c][WORDS]     packed centres for closest_windows.
 *
 * Work-items:
 *   s_gpu_chords     a work-group per pitch; work-item t takes strings 1 + t, 1 + t + size, ...,
 *                    scans all their windows for the note distance; sums and maxima are combined
 *                    in local memory and work-item 0 writes the pitch's key. One launch.
 *   pp_gpu_notes     a work-group per (string 1..n-1, pitch): the string's windows are split
 *                    across the work-items, each computing whole-window Hamming distances; a
 *                    local min-reduction gives the note distance, written to
 *                    note_distances[pitch - first_pitch][string - 1].
 *   pp_gpu_chords    a work-group per pitch combines its note distances into the key.
 *   closest_windows  a work-item per (string, centre): distance and leftmost position of the
 *                    string's closest window to the centre.
 *   min_key          one work-group: the minimum of `count` ulong keys, into result[0].
 *   exact_centres    (BITS == 2, WORDS == 1 only) a work-item per DNA centre index c; the centre
 *                    string has symbol k = (c >> 2 (L - 1 - k)) & 3, so index order is
 *                    lexicographic order over A < C < G < T. Strings are visited in order; each
 *                    string's windows are staged through local memory in tiles shared by the
 *                    work-group. A centre's key is max << 24 | total (max and total of its
 *                    closest-window distances over all strings); a centre is dropped as soon as
 *                    the key of the strings seen so far (a lower bound of its final key) exceeds
 *                    *bound, which work-groups lower with atomic_min as they finish, so only
 *                    centres strictly worse than some centre are dropped. Each work-group
 *                    writes the smallest (key << 32 | c) of its centres (all ones when none
 *                    remain) to group_keys[first_group + group].
 *
 * Invariants: local sizes are powers of two (the tree reductions rely on it); every string has
 * at least one window; totals fit their fields (checked on the host); global sizes may be
 * rounded up, so every kernel guards its range.
 */

#include "reductions.h"

#define SYMBOLS_PER_WORD (32 / BITS)
#define KEY_EXCESS_SHIFT 54
#define KEY_TOTAL_SHIFT 24
#define NO_KEY (~(ulong)0)

#if BITS == 2
#define LOW_BITS 0x55555555u
inline uint mismatches(uint x)
{
    return popcount((x | (x >> 1)) & LOW_BITS);
}
#elif BITS == 5
#define LOW_BITS 0x02108421u /* bits 0, 5, 10, 15, 20, 25 */
inline uint mismatches(uint x)
{
    uint folded = x | (x >> 1);
    folded |= folded >> 2;
    return popcount((folded | (x >> 4)) & LOW_BITS);
}
#else
#error "BITS must be 2 or 5"
#endif

/* Distance from `centre` to the closest window of string `string` (window-major layout). */
inline uint closest_distance(__global const uint *windows, uint string, uint string_count, uint count, const uint *centre)
{
    uint best = LENGTH + 1;
    for (uint w = 0; w < count; ++w) {
        __global const uint *window = windows + (size_t)w * WORDS * string_count + string;
        uint distance = 0;
        for (uint k = 0; k < WORDS; ++k)
            distance += mismatches(centre[k] ^ window[(size_t)k * string_count]);
        best = min(best, distance);
        if (best == 0)
            break;
    }
    return best;
}

inline ulong chord_key(uint total, uint worst, uint max_distance, uint pitch)
{
    uint excess = worst > max_distance ? worst - max_distance : 0;
    return ((ulong)excess << KEY_EXCESS_SHIFT) | ((ulong)total << KEY_TOTAL_SHIFT) | pitch;
}

/* Sum of totals[] and maximum of maxima[] into element 0; every work-item must call it. */
inline void sum_and_max(__local uint *totals, __local uint *maxima, uint lid, uint size)
{
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint stride = size / 2; stride > 0; stride /= 2) {
        if (lid < stride) {
            totals[lid] += totals[lid + stride];
            maxima[lid] = max(maxima[lid], maxima[lid + stride]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

__kernel void s_gpu_chords(__global const uint *windows, __global const uint *window_counts, uint string_count,
                           uint first_pitch, uint max_distance, __global ulong *keys,
                           __local uint *totals, __local uint *maxima)
{
    uint lid = get_local_id(0), size = get_local_size(0);
    uint pitch = first_pitch + get_group_id(0);
    uint pitch_words[WORDS];
    for (uint k = 0; k < WORDS; ++k)
        pitch_words[k] = windows[((size_t)pitch * WORDS + k) * string_count];
    uint total = 0, worst = 0;
    for (uint string = 1 + lid; string < string_count; string += size) {
        uint note = closest_distance(windows, string, string_count, window_counts[string], pitch_words);
        total += note;
        worst = max(worst, note);
    }
    totals[lid] = total;
    maxima[lid] = worst;
    sum_and_max(totals, maxima, lid, size);
    if (lid == 0)
        keys[pitch] = chord_key(totals[0], maxima[0], max_distance, pitch);
}

__kernel void pp_gpu_notes(__global const uint *by_string, __global const uint *window_counts, uint window_stride,
                           uint string_count, uint first_pitch, __global uint *note_distances,
                           __local uint *minima)
{
    uint lid = get_local_id(0), size = get_local_size(0);
    uint string = 1 + get_group_id(0);
    uint pitch_in_chunk = get_group_id(1);
    uint pitch = first_pitch + pitch_in_chunk;
    uint pitch_words[WORDS];
    for (uint k = 0; k < WORDS; ++k)
        pitch_words[k] = by_string[(size_t)k * window_stride + pitch];
    __global const uint *row = by_string + (size_t)string * WORDS * window_stride;
    uint count = window_counts[string];
    uint best = LENGTH + 1;
    for (uint w = lid; w < count; w += size) {
        uint distance = 0;
        for (uint k = 0; k < WORDS; ++k)
            distance += mismatches(pitch_words[k] ^ row[(size_t)k * window_stride + w]);
        best = min(best, distance);
    }
    best = work_group_min_uint(minima, best);
    if (lid == 0)
        note_distances[(size_t)pitch_in_chunk * (string_count - 1) + string - 1] = best;
}

__kernel void pp_gpu_chords(__global const uint *note_distances, uint string_count, uint first_pitch,
                            uint max_distance, __global ulong *keys, __local uint *totals, __local uint *maxima)
{
    uint lid = get_local_id(0), size = get_local_size(0);
    uint pitch_in_chunk = get_group_id(0);
    __global const uint *notes = note_distances + (size_t)pitch_in_chunk * (string_count - 1);
    uint total = 0, worst = 0;
    for (uint s = lid; s + 1 < string_count; s += size) {
        total += notes[s];
        worst = max(worst, notes[s]);
    }
    totals[lid] = total;
    maxima[lid] = worst;
    sum_and_max(totals, maxima, lid, size);
    if (lid == 0)
        keys[first_pitch + pitch_in_chunk] = chord_key(totals[0], maxima[0], max_distance, first_pitch + pitch_in_chunk);
}

__kernel void closest_windows(__global const uint *windows, __global const uint *window_counts, uint string_count,
                              __global const uint *centres, __global uint *distances, __global uint *positions)
{
    uint string = get_global_id(0), centre = get_global_id(1);
    if (string >= string_count)
        return;
    uint centre_words[WORDS];
    for (uint k = 0; k < WORDS; ++k)
        centre_words[k] = centres[(size_t)centre * WORDS + k];
    uint count = window_counts[string];
    uint best = LENGTH + 1, best_position = 0;
    for (uint w = 0; w < count; ++w) {
        __global const uint *window = windows + (size_t)w * WORDS * string_count + string;
        uint distance = 0;
        for (uint k = 0; k < WORDS; ++k)
            distance += mismatches(centre_words[k] ^ window[(size_t)k * string_count]);
        if (distance < best) { /* strictly less: the leftmost window wins ties */
            best = distance;
            best_position = w;
        }
    }
    distances[(size_t)centre * string_count + string] = best;
    positions[(size_t)centre * string_count + string] = best_position;
}

__kernel void min_key(__global const ulong *keys, uint count, __global ulong *result, __local ulong *scratch)
{
    uint lid = get_local_id(0), size = get_local_size(0);
    ulong best = NO_KEY;
    for (uint i = lid; i < count; i += size)
        best = min(best, keys[i]);
    best = work_group_min_ulong(scratch, best);
    if (lid == 0)
        result[0] = best;
}

#if BITS == 2 && WORDS == 1
#define EXACT_TOTAL_BITS 24

__kernel void exact_centres(__global const uint *by_string, __global const uint *window_counts, uint window_stride,
                            uint string_count, uint first_centre, uint centre_count, uint tile_size,
                            volatile __global uint *bound, __global ulong *group_keys, uint first_group,
                            __local uint *tile, __local ulong *group_best, __local uint *anyone_alive)
{
    uint lid = get_local_id(0), size = get_local_size(0);
    uint offset = get_global_id(0);
    uint index = first_centre + offset;
    uint centre = 0;
    for (uint k = 0; k < LENGTH; ++k)
        centre |= ((index >> (2 * (LENGTH - 1 - k))) & 3u) << (2 * k);
    bool alive = offset < centre_count;
    uint worst = 0, total = 0;
    for (uint string = 0; string < string_count; ++string) {
        /* The loop holds barriers, so the whole work-group runs it until no centre is left. */
        if (lid == 0)
            *anyone_alive = 0;
        barrier(CLK_LOCAL_MEM_FENCE);
        if (alive)
            *anyone_alive = 1;
        barrier(CLK_LOCAL_MEM_FENCE);
        uint any = *anyone_alive;
        barrier(CLK_LOCAL_MEM_FENCE);
        if (!any)
            break;
        uint count = window_counts[string];
        __global const uint *row = by_string + (size_t)string * window_stride;
        uint best = LENGTH + 1;
        for (uint start = 0; start < count; start += tile_size) {
            uint filled = min(tile_size, count - start);
            for (uint t = lid; t < filled; t += size)
                tile[t] = row[start + t];
            barrier(CLK_LOCAL_MEM_FENCE);
            if (alive)
                for (uint t = 0; t < filled; ++t)
                    best = min(best, mismatches(centre ^ tile[t]));
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        if (alive) {
            worst = max(worst, best);
            total += best;
            if (((worst << EXACT_TOTAL_BITS) | total) > *bound)
                alive = false;
        }
    }
    group_best[lid] = alive ? ((ulong)((worst << EXACT_TOTAL_BITS) | total) << 32) | index : NO_KEY;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint stride = size / 2; stride > 0; stride /= 2) {
        if (lid < stride)
            group_best[lid] = min(group_best[lid], group_best[lid + stride]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) {
        ulong best_key = group_best[0];
        group_keys[first_group + get_group_id(0)] = best_key;
        if (best_key != NO_KEY)
            atomic_min(bound, (uint)(best_key >> 32));
    }
}
#endif
