/* A base of the reference text as the index packs it on the device: 2 bits a base (base p in
 * bits 2 (p % 4) of byte p / 4), and with AMBIGUOUS_MASK (defined by the including kernel) a
 * bit a base marking the ambiguous ones (bit p % 8 of byte p / 8), whose code is then 4. Read
 * by smith_waterman.cl (windows given as text positions) and sam_fields.cl (NM and MD). */

inline uint packed_base(__global const uchar *text, __global const uchar *ambiguous, ulong p)
{
    uint code = (text[p >> 2] >> ((uint)(p & 3) << 1)) & 3u;
#if AMBIGUOUS_MASK
    if ((ambiguous[p >> 3] >> (uint)(p & 7)) & 1u)
        code = 4u;
#endif
    return code;
}
