/* reductions.h -- work-group reductions shared by the kernel sources (no kernels of its own).
 * Sources take it in with `#include "reductions.h"`, which bowmap.devices.kernel_source
 * replaces by this text (a program is built from one string: no include path is needed).
 *
 * WORK_GROUP_MIN(name, T) defines `T name(__local T *scratch, T value)`: every work-item of the
 * group passes its value and gets the smallest of them all. scratch holds one T per work-item;
 * the local size must be a power of two; every work-item must call it (it has barriers).
 */
#ifndef BOWMAP_REDUCTIONS_H
#define BOWMAP_REDUCTIONS_H

#define WORK_GROUP_MIN(name, T)                                                   \
    inline T name(__local T *scratch, T value)                                    \
    {                                                                             \
        const uint lid = get_local_id(0);                                         \
        scratch[lid] = value;                                                     \
        barrier(CLK_LOCAL_MEM_FENCE);                                             \
        for (uint stride = get_local_size(0) / 2; stride > 0; stride /= 2) {      \
            if (lid < stride)                                                     \
                scratch[lid] = min(scratch[lid], scratch[lid + stride]);          \
            barrier(CLK_LOCAL_MEM_FENCE);                                         \
        }                                                                         \
        return scratch[0];                                                        \
    }

WORK_GROUP_MIN(work_group_min_uint, uint)
WORK_GROUP_MIN(work_group_min_ulong, ulong)

#endif
