/* find.cl -- `bowmap find`: every exact occurrence of patterns in one index block, forward
 * strand: a backward search per pattern, then a locate per suffix-array row. Owner:
 * bowmap/modules/find/kernels.py; NumPy twin: bowmap/modules/find/reference.py.
 *
 * Alphabet by build option: none for DNA (2-bit occurrence lines, fm/dna_rank.h, shared with
 * align/fm_search.cl), -DWAVELET for protein and text (wavelet matrix, fm/wavelet_rank.h, the
 * production path), or -DSAMPLED -DSAMPLED_STEP=L for protein and text (per-symbol counts every L
 * symbols, fm/sampled_rank.h: the measured alternative, built in memory by bench/find.py). The
 * sampled rows and the interval search are fm/locate.h's, shared with align/fm_search.cl too.
 *
 * Work-items: find_search one per pattern; find_locate one per row of the intervals it is given.
 * Both guard their count, so the global size may be rounded up to the work-group size.
 *
 * Buffers (layouts: bowmap/index/format.py, bowmap/index/alphabet.py):
 *   lines    DNA: uint[lines][16] occurrence lines; WAVELET: uint[levels][level_lines][16];
 *            SAMPLED: uint[lines][line_words] (fm/sampled_rank.h)
 *   meta     DNA: uint[4] first_rows (C of A, C, G, T); WAVELET: sigma, zeros[levels], lf_base[sigma];
 *            SAMPLED: sigma
 *   (levels, level_lines: WAVELET's; SAMPLED passes line_words and byte_words in their places)
 *   marks    uint4[groups]: x marked rows before the group, y,z,w the mark bits of its 96 rows
 *   samples  uint[]: block offset of each marked row's suffix, in row order
 *   codes    uchar[]: pattern symbol codes (DNA 0..3; WAVELET 0..sigma-1; any larger code is a
 *            symbol the index lacks and matches nothing); pattern i is
 *            codes[offsets[i] .. offsets[i] + lengths[i]), lengths[i] >= 1
 *   results  uint[2][count]: lo, then hi: the pattern's rows [lo, hi), lo = hi = 0 when absent
 *   starts   uint[2][intervals]: lo of each interval piece, then before (rows of the pieces
 *            before it; before[0] = 0); positions uint[count]: block offset of each row's suffix
 *
 * Invariants: n < 2^31 (uint arithmetic); located rows lie in 1..n; the suffix starting at 0 is
 * sampled, so LF never steps onto row `primary`.
 */

#ifdef WAVELET
#include "fm/wavelet_rank.h"
#define INDEX_PARAMS __global const uint *lines, const uint primary, __global const uint *meta, const uint levels, const uint level_lines
#define LF_RANK(row, code) wm_lf_rank(lines, primary, meta, levels, level_lines, row, code)
#define LF_STEP(row) wm_lf_step(lines, primary, meta, levels, level_lines, row)
#define SYMBOLS (meta[0])
#elif defined(SAMPLED)
#include "fm/sampled_rank.h"
#define INDEX_PARAMS __global const uint *lines, const uint primary, __global const uint *meta, const uint line_words, const uint byte_words
#define LF_RANK(row, code) sr_lf_rank(lines, primary, line_words, byte_words, row, code)
#define LF_STEP(row) sr_lf_step(lines, primary, line_words, byte_words, row)
#define SYMBOLS (meta[0])
#else
#include "fm/dna_rank.h"
#define INDEX_PARAMS __global const uint *lines, const uint primary, __global const uint *meta, const uint levels, const uint level_lines
#define LF_RANK(row, code) (meta[code] + rank(lines, primary, row, code))
#define LF_STEP(row) lf_step(lines, primary, vload4(0, meta), row)
#define SYMBOLS 4u
#endif
#include "fm/locate.h"

__kernel void find_search(INDEX_PARAMS, const uint n,
                          __global const uchar *codes, __global const uint *offsets,
                          __global const uint *lengths, const uint count, __global uint *results)
{
    uint gid = get_global_id(0);
    if (gid >= count)
        return;
    /* All n + 1 rows, the empty suffix's included: rank(c, 0) = 0 makes the first step exact. */
    uint lo = 0, hi = n + 1, start = offsets[gid];
    for (uint k = lengths[gid]; k > 0; --k) {
        uint code = codes[start + k - 1];
        if (code >= SYMBOLS) {
            lo = hi = 0;
            break;
        }
        uint new_lo = LF_RANK(lo, code);
        uint new_hi = LF_RANK(hi, code);
        if (new_lo >= new_hi) {
            lo = hi = 0;
            break;
        }
        lo = new_lo;
        hi = new_hi;
    }
    results[gid] = lo;
    results[count + gid] = hi;
}

__kernel void find_locate(INDEX_PARAMS, __global const uint4 *marks, __global const uint *samples,
                          __global const uint *starts, const uint intervals, const uint count,
                          __global uint *positions)
{
    uint gid = get_global_id(0);
    if (gid >= count)
        return;
    __global const uint *lo = starts, *before = starts + intervals;
    uint low = last_at_most(before, intervals, gid); /* the piece holding row gid */
    uint row = lo[low] + (gid - before[low]);
    uint steps = 0, offset;
    while (!sampled_offset(marks, samples, row, &offset)) {
        row = LF_STEP(row);
        ++steps;
    }
    positions[gid] = offset + steps;
}
