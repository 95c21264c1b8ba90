/* packed_lanes.h -- two signed 16-bit lanes in one uint (lane A = the low 16 bits, lane B = the
 * high 16 bits), shared by the align pipeline's sw_score_twins (align/smith_waterman.cl) and
 * `bowmap sw-search`'s sw_intertask_packed (modules/sw_search.cl). Headers include nothing (see
 * runtime/devices.py).
 *
 * PACKED_ASM (NVIDIA, compute capability >= 9.0; the owners pass -DPACKED_ASM): padd, pmax and
 * pmax_floor0 are single PTX instructions (add.s16x2, max.s16x2, max.relu.s16x2; ptxas fuses an
 * add feeding a max into VIADDMNMX); add.s16x2 wraps. Otherwise they are OpenCL short2 vector
 * operations, which any device runs. There padd is
 *   - saturating when the including file defines PACKED_ADD_SATURATES to 1 before the include:
 *     for a kernel whose lanes may overflow (sw_search.cl: an overflowing lane sticks at 32767,
 *     which its host's overflow test catches, and no signed overflow, undefined in OpenCL C,
 *     ever happens);
 *   - plain short2 addition otherwise: for a kernel whose host guarantees that no lane ever
 *     overflows (smith_waterman.cl), where both forms give the same values and saturation would
 *     only cost instructions on devices without packed 16-bit adds.
 */

#ifndef PACKED_ASM
#define PACKED_ASM 0
#endif
#ifndef PACKED_ADD_SATURATES
#define PACKED_ADD_SATURATES 0
#endif

inline uint lanes(int low, int high)
{
    return ((uint)low & 0xFFFFu) | ((uint)high << 16);
}

inline int lane_a(uint x)
{
    return (int)(short)(x & 0xFFFFu);
}

inline int lane_b(uint x)
{
    return (int)(short)(x >> 16);
}

#if PACKED_ASM
inline uint padd(uint a, uint b)
{
    uint d;
    asm("add.s16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
}

inline uint pmax(uint a, uint b)
{
    uint d;
    asm("max.s16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
}

inline uint pmax_floor0(uint a, uint b)
{
    uint d;
    asm("max.relu.s16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
}
#else
inline uint padd(uint a, uint b)
{
#if PACKED_ADD_SATURATES
    return as_uint(add_sat(as_short2(a), as_short2(b)));
#else
    return as_uint(as_short2(a) + as_short2(b));
#endif
}

inline uint pmax(uint a, uint b)
{
    return as_uint(max(as_short2(a), as_short2(b)));
}

inline uint pmax_floor0(uint a, uint b)
{
    return as_uint(max(max(as_short2(a), as_short2(b)), (short2)(0, 0)));
}
#endif
