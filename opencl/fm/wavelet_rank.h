/* wavelet_rank.h -- rank and LF over the wavelet matrix of a protein or text index block (layout:
 * bowmap/index/alphabet.py), used by modules/find.cl.
 *
 * lines: uint[levels][level_lines][16]: per level, 64-byte lines of word 0 = 1 bits before the
 *        line, words 1..15 = its 480 bits (element 480 * line + 32 * w + j is bit j of word 1 + w).
 * meta:  uint[1 + levels + sigma]: sigma, zeros[levels] (0 bits of each level), lf_base[sigma]
 *        (C[c] - start of c's run in the last level, mod 2^32: LF = lf_base[c] + final p).
 * Rows run 0..n; the stored BWT leaves out row `primary` ("$"), so row r is stored at
 * r - (r > primary). One rank reads one line a level, levels = ceil(log2 sigma) (at most 8).
 */

#define WM_BITS_PER_LINE 480u
#define WM_LINE_WORDS 16u

/* 1 bits of one level before element p (p <= n); *bit = element p's bit (p < n). */
inline uint wm_rank1(__global const uint *level, uint p, uint *bit)
{
    uint line = p / WM_BITS_PER_LINE;
    uint within = p - line * WM_BITS_PER_LINE;
    __global const uint4 *base = (__global const uint4 *)(level + (size_t)line * WM_LINE_WORDS);
    uint words[16];
    vstore4(base[0], 0, words);
    vstore4(base[1], 1, words);
    vstore4(base[2], 2, words);
    vstore4(base[3], 3, words);
    uint count = words[0];
#pragma unroll
    for (uint w = 0; w < 15; ++w) {
        int left = (int)within - (int)(32u * w);
        uint mask = left >= 32 ? 0xFFFFFFFFu : left <= 0 ? 0u : (1u << left) - 1u;
        count += popcount(words[1 + w] & mask);
    }
    *bit = (words[1 + (within >> 5)] >> (within & 31u)) & 1u;
    return count;
}

/* C[code] + occurrences of code in stored BWT [0, row - (row > primary)): one backward-search step. */
inline uint wm_lf_rank(__global const uint *lines, uint primary, __global const uint *meta, uint levels,
                       uint level_lines, uint row, uint code)
{
    uint p = row - (row > primary);
    uint bit;
    for (uint l = 0; l < levels; ++l) {
        uint ones = wm_rank1(lines + (size_t)l * level_lines * WM_LINE_WORDS, p, &bit);
        p = ((code >> (levels - 1u - l)) & 1u) ? meta[1 + l] + ones : p - ones;
    }
    return meta[1 + levels + code] + p;
}

/* LF(row) for a row other than `primary`: its symbol read and ranked in the same pass. */
inline uint wm_lf_step(__global const uint *lines, uint primary, __global const uint *meta, uint levels,
                       uint level_lines, uint row)
{
    uint p = row - (row > primary);
    uint code = 0, bit;
    for (uint l = 0; l < levels; ++l) {
        uint ones = wm_rank1(lines + (size_t)l * level_lines * WM_LINE_WORDS, p, &bit);
        code = (code << 1) | bit;
        p = bit ? meta[1 + l] + ones : p - ones;
    }
    return meta[1 + levels + code] + p;
}
