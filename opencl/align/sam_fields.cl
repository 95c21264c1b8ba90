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

/* `value` in decimal at out[at..]; where the text goes on. 64-bit divisions only while the
 * value needs them (a position past 4 Gbp), 32-bit ones for the rest. */
inline uint put_decimal(__global uchar *out, uint at, ulong value)
{
    uchar digits[20];
    uint count = 0;
    while (value > 0xFFFFFFFFul) {
        digits[count++] = (uchar)('0' + value % 10ul);
        value /= 10ul;
    }
    uint rest = (uint)value;
    do {
        digits[count++] = (uchar)('0' + rest % 10u);
        rest /= 10u;
    } while (rest);
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

/* ------------------------------------------------------------------------------- whole lines
 *
 * sam_lines: each SAM line of a chunk written at its offset in `out`, one work-item a line, from
 * the values the host computed (bowmap.align.output.sam_lines: FLAG, positions, MAPQ, tags) and
 * the texts already on the device: read names and qualities (uploaded), SEQ from the read codes,
 * CIGAR and MD from sam_fields' rows. The host's formatter (bowmap.align.output.sam, its
 * reference) and this kernel write the same bytes; the host also computed each line's length
 * from the same values, so the lines meet exactly.
 *
 * `u` holds LINE_VALUES rows of `lines` uints (the L_* rows below), `l` three rows of longs
 * (POS, PNEXT, TLEN). Strings (RNAME and RNEXT with their tab, "\t*", "\t=") are
 * strings[string_offsets[k] .. string_offsets[k + 1]). Line bits (L_KIND): */
#define K_MAPPED 1u       /* NM, MD and AS */
#define K_XS 2u
#define K_MATE_TAGS 4u    /* MC and MQ */
#define K_HARD 8u         /* clips written as H */
#define K_STARRED 16u     /* SEQ and QUAL '*' */
#define K_QUAL_REVERSE 32u
#define K_PAIRED 64u      /* RNEXT, PNEXT, TLEN from the values, else "\t*\t0\t0" */
#define K_NO_QUAL 128u    /* QUAL '*' (FASTA input) */
#define K_READ_GROUP 256u

enum { L_OUT, L_NAME, L_NAME_LENGTH, L_FLAG, L_RNAME, L_MAPQ, L_CIGAR_ROW, L_RNEXT, L_SEQ, L_SHOWN, L_QUAL, L_NM, L_AS, L_XS,
       L_MATE_ROW, L_MQ, L_TAIL, L_TAIL_LENGTH, L_KIND, LINE_VALUES };

#define NO_ROW 0xFFFFFFFFu

inline uint put_long(__global uchar *out, uint at, long value)
{
    if (value < 0)
        out[at++] = '-';
    return put_decimal(out, at, value < 0 ? 0ul - (ulong)value : (ulong)value);  /* unsigned: no overflow at the least long */
}

inline uint put_bytes(__global uchar *out, uint at, __global const uchar *from, uint length)
{
    for (uint k = 0; k < length; ++k)
        out[at + k] = from[k];
    return at + length;
}

inline uint put_text(__global uchar *out, uint at, __constant const char *text)
{
    while (*text)
        out[at++] = (uchar)*text++;
    return at;
}

__kernel void sam_lines(__global const uint *u, __global const long *l, __global const uchar *names, __global const uchar *qualities,
                        __global const uchar *read_codes, __global const uchar *strings, __global const uint *string_offsets,
                        __global const uchar *cigar, const uint cigar_pitch, __global const uchar *md, const uint md_pitch,
                        __global const int *values, const uint value_lines, __global const uchar *tail,
                        __global const uchar *read_group, const uint read_group_length, const uint lines, __global uchar *out)
{
    uint i = get_global_id(0);
    if (i >= lines)
        return;
#define U(row) u[(size_t)(row) * lines + i]
    uint kind = U(L_KIND), at = U(L_OUT);
    uint name_length = U(L_NAME_LENGTH);
    if (name_length)
        at = put_bytes(out, at, names + U(L_NAME), name_length);
    else
        out[at++] = '*';
    out[at++] = '\t';
    at = put_long(out, at, (long)U(L_FLAG));
    uint s = U(L_RNAME);
    at = put_bytes(out, at, strings + string_offsets[s], string_offsets[s + 1] - string_offsets[s]);
    out[at++] = '\t';
    at = put_long(out, at, l[i]);
    out[at++] = '\t';
    at = put_long(out, at, (long)U(L_MAPQ));
    out[at++] = '\t';
    uint row = U(L_CIGAR_ROW);
    if (row == NO_ROW) {
        out[at++] = '*';
    } else {
        __global const uchar *from = cigar + (size_t)row * cigar_pitch;
        uint length = (uint)values[row], hard = kind & K_HARD;
        for (uint k = 0; k < length; ++k)
            out[at + k] = (hard && from[k] == 'S') ? 'H' : from[k];
        at += length;
    }
    if (kind & K_PAIRED) {
        s = U(L_RNEXT);
        at = put_bytes(out, at, strings + string_offsets[s], string_offsets[s + 1] - string_offsets[s]);
        out[at++] = '\t';
        at = put_long(out, at, l[lines + i]);
        out[at++] = '\t';
        at = put_long(out, at, l[2 * (size_t)lines + i]);
    } else {
        at = put_text(out, at, "\t*\t0\t0");
    }
    out[at++] = '\t';
    uint shown = U(L_SHOWN);
    if (kind & K_STARRED) {
        out[at++] = '*';
    } else {
        __global const uchar *codes = read_codes + U(L_SEQ);
        for (uint k = 0; k < shown; ++k)
            out[at + k] = base_letter(codes[k]);
        at += shown;
    }
    out[at++] = '\t';
    if (kind & (K_STARRED | K_NO_QUAL)) {
        out[at++] = '*';
    } else if (kind & K_QUAL_REVERSE) {  /* from the last base shown backwards */
        __global const uchar *from = qualities + U(L_QUAL);
        for (uint k = 0; k < shown; ++k)
            out[at + k] = *(from - k);
        at += shown;
    } else {
        at = put_bytes(out, at, qualities + U(L_QUAL), shown);
    }
    if (kind & K_MAPPED) {
        at = put_text(out, at, "\tNM:i:");
        at = put_long(out, at, (long)U(L_NM));
        at = put_text(out, at, "\tMD:Z:");
        at = put_bytes(out, at, md + (size_t)row * md_pitch, (uint)values[value_lines + row]);
        at = put_text(out, at, "\tAS:i:");
        at = put_long(out, at, (long)(int)U(L_AS));
    }
    if (kind & K_XS) {
        at = put_text(out, at, "\tXS:i:");
        at = put_long(out, at, (long)(int)U(L_XS));
    }
    if (kind & K_MATE_TAGS) {
        uint mate = U(L_MATE_ROW);
        at = put_text(out, at, "\tMC:Z:");
        at = put_bytes(out, at, cigar + (size_t)mate * cigar_pitch, (uint)values[mate]);
        at = put_text(out, at, "\tMQ:i:");
        at = put_long(out, at, (long)U(L_MQ));
    }
    if (kind & K_READ_GROUP)
        at = put_bytes(out, at, read_group, read_group_length);
    at = put_bytes(out, at, tail + U(L_TAIL), U(L_TAIL_LENGTH));
    out[at] = '\n';
#undef U
}
