/* dna_rank.h -- rank over the 2-bit occurrence lines of a DNA index block, shared by the align
 * pipeline's FM search (align/fm_search.cl) and `bowmap find` (modules/find.cl).
 *
 * lines: uint[lines][16], 4 counts (A,C,G,T in the stored BWT before the line), then 12 words of
 * 16 bases, 2 bits each, base j of a word in bits 2j..2j+1 (layout: bowmap/index/format.py).
 * Rows run 0..n; the stored BWT leaves out row `primary` (its symbol is "$"), so
 * rank(c, r) = occurrences of c in stored BWT [0, r - (r > primary)). first_rows (C): row of the
 * first suffix starting with A, C, G, T. lf_step: one LF step (a locate's, see fm/locate.h).
 * Headers include nothing (see runtime/devices.py).
 */

#define BASES_PER_LINE 192u
#define LINE_WORDS 16u
#define EVEN_BITS 0x55555555u

/* One bit (the even bit of each 2-bit field) for every base of `word` equal to `code`. */
inline uint match_bits(uint word, uint code)
{
    uint x = word ^ (code * EVEN_BITS);
    return ~(x | (x >> 1)) & EVEN_BITS;
}

/* Bases of one word that lie before `within` (0..192) in the line, as a mask over match_bits. */
inline uint word_mask(uint within, uint word)
{
    int left = (int)within - (int)(16u * word);
    return left >= 16 ? 0xFFFFFFFFu : left <= 0 ? 0u : (1u << (2 * left)) - 1u;
}

inline uint rank(__global const uint *lines, uint primary, uint row, uint code)
{
    uint stored = row - (row > primary);
    uint line = stored / BASES_PER_LINE;
    uint within = stored - line * BASES_PER_LINE;
    /* The whole 64-byte line in four 16-byte loads, then a branch-free count: the same work for
     * every work-item of a wavefront, whatever its offset in the line. */
    __global const uint4 *base = (__global const uint4 *)(lines + (size_t)line * LINE_WORDS);
    uint4 counts = base[0];
    uint words[12];
    vstore4(base[1], 0, words);
    vstore4(base[2], 1, words);
    vstore4(base[3], 2, words);
    uint count = code == 0 ? counts.x : code == 1 ? counts.y : code == 2 ? counts.z : counts.w;
#pragma unroll
    for (uint w = 0; w < 12; ++w)
        count += popcount(match_bits(words[w], code) & word_mask(within, w));
    return count;
}

inline uint first_row(uint4 first_rows, uint code)
{
    return code == 0 ? first_rows.x : code == 1 ? first_rows.y : code == 2 ? first_rows.z : first_rows.w;
}

/* LF(row) for a row other than `primary`: its symbol read from the line, then ranked. */
inline uint lf_step(__global const uint *lines, uint primary, uint4 first_rows, uint row)
{
    uint stored = row - (row > primary);
    uint line = stored / BASES_PER_LINE;
    uint offset = stored - line * BASES_PER_LINE;
    uint code = (lines[(size_t)line * LINE_WORDS + 4 + (offset >> 4)] >> (2u * (offset & 15u))) & 3u;
    return first_row(first_rows, code) + rank(lines, primary, row, code);
}
