/* sampled_rank.h -- rank and LF over per-symbol sampled counts of a protein or text index block
 * (layout and NumPy twin: bowmap/modules/find/sampled.py), the alternative to fm/wavelet_rank.h
 * that modules/find.cl builds with -DSAMPLED (bench/find.py measures the two side by side).
 *
 * lines: uint[lines][line_words], a line per SAMPLED_STEP stored BWT symbols (n / step + 1 lines):
 *        words 0..sigma-1 = C[c] + occurrences of code c before the line (so LF needs no second
 *        table), up to byte_words (sigma rounded up to 4: 16-byte aligned bytes), then the line's
 *        step codes, one byte each, little-endian in step / 4 words.
 * Rows run 0..n; the stored BWT leaves out row `primary`, so row r is stored at r - (r > primary).
 *
 * Why this layout on a GPU: a backward-search step's two loads (the count word and the line's
 * bytes) both follow from (row, code), so they issue together: one memory latency a rank, where
 * the wavelet matrix has ceil(log2 sigma) dependent ones. The bytes are read in 16-byte loads up
 * to the row's place only, and compared four at a time (SWAR, exact zero-byte test + popcount).
 * The price is memory: (4 * byte_words + step) / step bytes a symbol.
 */

#ifndef SAMPLED_STEP
#define SAMPLED_STEP 128u
#endif

/* Occurrences of `code` among a line's first `before` bytes (before <= SAMPLED_STEP). */
inline uint sr_count_before(__global const uint *bytes, uint before, uint code)
{
    __global const uint4 *chunks = (__global const uint4 *)bytes;
    uint pattern = code * 0x01010101u, count = 0;
    for (uint c = 0; 16u * c < before; ++c) {
        uint words[4];
        vstore4(chunks[c], 0, words);
#pragma unroll
        for (uint w = 0; w < 4; ++w) {
            int left = (int)before - (int)(16u * c + 4u * w);
            uint keep = left >= 4 ? 0x80808080u : left <= 0 ? 0u : 0x80808080u & ((1u << (8 * left)) - 1u);
            uint y = words[w] ^ pattern;                    /* 0 bytes where the code is */
            uint high = ((y & 0x7F7F7F7Fu) + 0x7F7F7F7Fu) | y; /* high bit set in each nonzero byte */
            count += popcount(~high & keep);
        }
    }
    return count;
}

/* C[code] + occurrences of code in stored BWT [0, row - (row > primary)): one backward-search step. */
inline uint sr_lf_rank(__global const uint *lines, uint primary, uint line_words, uint byte_words, uint row, uint code)
{
    uint p = row - (row > primary);
    uint line = p / SAMPLED_STEP;
    __global const uint *base = lines + (size_t)line * line_words;
    return base[code] + sr_count_before(base + byte_words, p - line * SAMPLED_STEP, code);
}

/* LF(row) for a row other than `primary`: its symbol read from the line, then ranked there. */
inline uint sr_lf_step(__global const uint *lines, uint primary, uint line_words, uint byte_words, uint row)
{
    uint p = row - (row > primary);
    uint line = p / SAMPLED_STEP, within = p - line * SAMPLED_STEP;
    __global const uint *base = lines + (size_t)line * line_words;
    uint code = ((__global const uchar *)(base + byte_words))[within];
    return base[code] + sr_count_before(base + byte_words, within, code);
}
