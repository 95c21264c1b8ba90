/* Tandem scores: how well each read's alignment holds slid by 1..MAX_PERIOD bases along the
 * text (bwa's csub), one work-item a read. The device twin of
 * bowmap.align.extend.tandem.tandem_scores, its reference (the tests compare the two exactly);
 * see that module for what the score means and why.
 *
 * Read i (of `count`):
 *   read_start   uint[]: where its codes (the aligned strand, 0..4) start in `read_codes` (a
 *                chunk's forward codes then its reverse complements), read_length its bases
 *   read_end     uint[]: the read base (exclusive) where its alignment ends
 *   text_end     ulong[]: the text position (exclusive) where its alignment ends
 *   contig_start, contig_end  ulong[]: its contig in the text; bases outside read as ambiguous
 *   text         the packed reference, 2 bits a base; with AMBIGUOUS_MASK, bit p of
 *                `ambiguous` marks an ambiguous base p (code 4)
 * Out: scores[i], the best ungapped local score (match +match, else -mismatch; an ambiguous base
 * never matches) of the whole read on the diagonals 1..MAX_PERIOD either side of its
 * alignment's, or NO_SCORE when read_end < SAMPLE or its SAMPLE bases before read_end do not
 * repeat with a period of 1..MAX_PERIOD (codes taken modulo 4; at most SAMPLE_MISMATCHES
 * bases after the first p differ from the base p before).
 */

#ifndef AMBIGUOUS_MASK
#define AMBIGUOUS_MASK 0
#endif
#define SAMPLE 32u
/* MAX_PERIOD, SAMPLE_MISMATCHES and NO_SCORE come from the host (-D), as bowmap.align.extend.tandem has them. */

#include "packed_text.h"

/* Whether the SAMPLE codes before `end` repeat with a period of 1..MAX_PERIOD. */
inline int periodic(__global const uchar *read, uint end)
{
    ulong packed = 0;
    for (uint j = 0; j < SAMPLE; ++j)
        packed |= (ulong)(read[end - SAMPLE + j] & 3u) << (2u * j);
    for (uint period = 1; period <= MAX_PERIOD; ++period) {
        ulong differ = packed ^ (packed << (2u * period));
        ulong same = ~(differ | (differ >> 1)) & 0x5555555555555555UL & ~((1UL << (2u * period)) - 1UL);
        if (popcount(same) >= (long)(SAMPLE - period - SAMPLE_MISMATCHES))
            return 1;
    }
    return 0;
}

__kernel void tandem_scores(__global const uint *read_start, __global const uint *read_length, __global const uint *read_end,
                            __global const ulong *text_end, __global const ulong *contig_start, __global const ulong *contig_end,
                            __global const uchar *read_codes, __global const uchar *text, __global const uchar *ambiguous,
                            const uint count, const int match, const int mismatch, __global int *scores)
{
    uint i = get_global_id(0);
    if (i >= count)
        return;
    __global const uchar *read = read_codes + read_start[i];
    uint end = read_end[i], length = read_length[i];
    if (end < SAMPLE || !periodic(read, end)) {
        scores[i] = NO_SCORE;
        return;
    }
    long diagonal = (long)text_end[i] - (long)end;  /* the text position of the read's first base */
    long low = (long)contig_start[i], high = (long)contig_end[i];
    int best = 0;
    for (int shift = -MAX_PERIOD; shift <= MAX_PERIOD; ++shift) {
        if (shift == 0)
            continue;
        int run = 0;
        for (uint j = 0; j < length; ++j) {
            long p = diagonal + shift + (long)j;
            uint r = read[j];
            uint g = (p >= low && p < high) ? packed_base(text, ambiguous, (ulong)p) : 4u;
            int step = (r == g && r < 4u) ? match : -mismatch;
            run = max(run, 0) + step;
            best = max(best, run);
        }
    }
    scores[i] = best;
}
