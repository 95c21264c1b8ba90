/* SAM fields of aligned reads that compare a read with the reference: the CIGAR's text, NM and
 * MD, one work-item a line. The device twin of bowmap.align.output.sam._alignment_fields, its
 * reference (tests compare the two byte for byte); NM and MD follow samtools calmd: a base
 * matches only where read and reference hold the same unambiguous base (codes 0..3).
 *
 * Line i (of `lines`):
 *   ops            uint[]: BAM-encoded CIGAR operations (length << 4 | code); line i's are
 *                  op_first[i] .. op_first[i] + op_count[i] - 1
 *   read_start     uint[]: where its read's codes (the aligned strand) start in `read_codes`
 *                  (a chunk's forward codes then its reverse complements), read_length its bases
 *   text_start     ulong[]: where the alignment starts in the text (contig start + position),
 *                  text_end the end of its contig: an alignment past it is an error
 *   text           the packed reference, 2 bits a base (first base in the low bits); with
 *                  AMBIGUOUS_MASK, bit p of `ambiguous` marks an ambiguous base p (code 4)
 * Out, in rows of `cigar_pitch` and `md_pitch` bytes (host-given bounds that the text never
 * exceeds): the CIGAR text ("5S140M") and MD ("70A69"); and `values` (int[5][lines]): the two
 * texts' lengths, NM, the reference bases the alignment covers, and an error (0: none; 1: an
 * operation other than M I D S = X or of length 0; 2: a soft clip between other operations;
 * 3: the operations cover other than the read's bases, or no reference base; 4: past the contig's
 * end), for which the host raises the reference's message.
 */

#ifndef AMBIGUOUS_MASK
#define AMBIGUOUS_MASK 0
#endif

#define OP_M 0u
#define OP_I 1u
#define OP_D 2u
#define OP_S 4u
#define OP_EQUAL 7u
#define OP_DIFF 8u

#include "packed_text.h"

/* `value` in decimal at out[at..]; where the text goes on. */
inline uint put_decimal(__global uchar *out, uint at, uint value)
{
    uchar digits[10];
    uint count = 0;
    do {
        digits[count++] = (uchar)('0' + value % 10u);
        value /= 10u;
    } while (value);
    while (count)
        out[at++] = digits[--count];
    return at;
}

inline uchar base_letter(uint code)
{
    return code == 0u ? 'A' : code == 1u ? 'C' : code == 2u ? 'G' : code == 3u ? 'T' : 'N';
}

inline uchar op_letter(uint code)
{
    return code == OP_M ? 'M' : code == OP_I ? 'I' : code == OP_D ? 'D' : code == OP_S ? 'S' : code == OP_EQUAL ? '=' : 'X';
}

inline int consumes_query(uint code)
{
    return code == OP_M || code == OP_I || code == OP_S || code == OP_EQUAL || code == OP_DIFF;
}

inline int consumes_reference(uint code)
{
    return code == OP_M || code == OP_D || code == OP_EQUAL || code == OP_DIFF;
}

__kernel void sam_fields(__global const uint *ops, __global const uint *op_first, __global const uint *op_count,
                         __global const uint *read_start, __global const uint *read_length,
                         __global const ulong *text_start, __global const ulong *text_end,
                         __global const uchar *read_codes, __global const uchar *text, __global const uchar *ambiguous,
                         const uint lines, const uint cigar_pitch, const uint md_pitch,
                         __global uchar *cigar, __global uchar *md, __global int *values)
{
    uint i = get_global_id(0);
    if (i >= lines)
        return;
    uint first = op_first[i], count = op_count[i];
    /* The checks first: nothing is read outside the read or the contig. */
    uint query = 0, error = 0;
    ulong span = 0;
    for (uint k = 0; k < count && !error; ++k) {
        uint op = ops[first + k], code = op & 15u, length = op >> 4;
        if (length == 0u || !(code == OP_M || code == OP_I || code == OP_D || code == OP_S || code == OP_EQUAL || code == OP_DIFF))
            error = 1u;
        else if (code == OP_S && k != 0u && k != count - 1u)
            error = 2u;
        query += consumes_query(code) ? length : 0u;
        span += consumes_reference(code) ? length : 0u;
    }
    if (!error && (query != read_length[i] || span == 0))
        error = 3u;
    ulong start = text_start[i];
    if (!error && start + span > text_end[i])
        error = 4u;
    values[4 * lines + i] = (int)error;
    if (error) {
        values[i] = values[lines + i] = values[2 * lines + i] = values[3 * lines + i] = 0;
        return;
    }
    __global uchar *cigar_row = cigar + (size_t)i * cigar_pitch;
    __global uchar *md_row = md + (size_t)i * md_pitch;
    __global const uchar *read = read_codes + read_start[i];
    uint cigar_at = 0, md_at = 0, matching = 0, edits = 0, q = 0;
    ulong t = start;
    for (uint k = 0; k < count; ++k) {
        uint op = ops[first + k], code = op & 15u, length = op >> 4;
        cigar_at = put_decimal(cigar_row, cigar_at, length);
        cigar_row[cigar_at++] = op_letter(code);
        if (code == OP_M || code == OP_EQUAL || code == OP_DIFF) {
            for (uint j = 0; j < length; ++j) {
                uint r = read[q + j], g = packed_base(text, ambiguous, t + j);
                if (r != g || r > 3u || g > 3u) {
                    md_at = put_decimal(md_row, md_at, matching);
                    md_row[md_at++] = base_letter(g);
                    matching = 0;
                    ++edits;
                } else {
                    ++matching;
                }
            }
            q += length;
            t += length;
        } else if (code == OP_D) {
            md_at = put_decimal(md_row, md_at, matching);
            md_row[md_at++] = '^';
            for (uint j = 0; j < length; ++j)
                md_row[md_at++] = base_letter(packed_base(text, ambiguous, t + j));
            matching = 0;
            edits += length;
            t += length;
        } else {  /* I, S: read bases only */
            edits += code == OP_I ? length : 0u;
            q += length;
        }
    }
    md_at = put_decimal(md_row, md_at, matching);
    values[i] = (int)cigar_at;
    values[lines + i] = (int)md_at;
    values[2 * lines + i] = (int)edits;
    values[3 * lines + i] = (int)span;
}
