"""Owner of ``opencl/align/rank.cl``: the ranking of a chunk's scored windows (each read's best
window, its score, the best score at another place, the sub-optimal count) made on the device,
one work-item a read, in place of the host's sorts and reductions
(:func:`bowmap.align.extend.extender._ranked`, the reference; the tests compare them exactly).
Why: the ranking took a tenth of a host worker's thread time (H200, chr20, 15 workers: 0.8 s of
7.9 s per million reads); taken off, the runs were no faster (see :func:`on_device_by_default`)."""

from __future__ import annotations

import os

import numpy as np

from bowmap.align.extend.extender import SAME_ALIGNMENT_BASES
from bowmap.align.extend.mapq import NO_SCORE

SOURCE = "align/rank.cl"


def on_device_by_default() -> bool:
    """Whether the align command's workers rank on the device: only with BOWMAP_RANK_ON_DEVICE=1
    (developers). Why not by default: it took 8% of the host workers' CPU off (chr20, 6 M reads,
    15 workers, bench/host_waits.py), yet the whole commands did not speed up (single-end +3%,
    paired -3%, within a call's spread): the runs are not bound by the workers' CPU (see
    bench/RESULTS.md, session 21), and the ranking costs each chunk one more synchronisation
    (two with rescues). Folded into the Smith-Waterman read-back it would cost none."""
    return os.environ.get("BOWMAP_RANK_ON_DEVICE") == "1"


class RankKernel:
    """The kernel, its reused buffers and a queue (the extend stage's): used by one thread."""

    def __init__(self, device, queue):
        import pyopencl as cl

        from bowmap.runtime.devices import ReusedBuffer, make_kernel, work_group_size

        options = (f"-DSAME_ALIGNMENT_BASES={SAME_ALIGNMENT_BASES}", f"-DNO_SCORE=({NO_SCORE})")
        self._kernel = make_kernel(device.program(SOURCE, options), "rank_windows")
        self._group = work_group_size(self._kernel, device)
        self.queue = queue
        self._inputs = [ReusedBuffer(device.context, cl.mem_flags.READ_ONLY) for _ in range(4)]
        self._out = ReusedBuffer(device.context, cl.mem_flags.WRITE_ONLY)

    def ranked(self, read_codes, read_offsets, read: np.ndarray, start: np.ndarray, reverse: np.ndarray, score: np.ndarray,
               read_end: np.ndarray, window_end: np.ndarray, count: int, delta: int, match: int):
        """For each of ``count`` reads, whose forward codes start at ``read_offsets[i]`` of
        ``read_codes`` (a :class:`bowmap.runtime.devices.DeviceArray` on this kernel's device;
        ``read_offsets`` has ``count + 1`` entries), over its windows (``read`` sorted): the best
        window (-1: none), its score, the best score at another place and the sub-optimal count,
        int64 arrays (as _ranked's first four)."""
        from bowmap.runtime.devices import read_back

        if count == 0:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty.copy(), empty.copy(), empty.copy()
        n = len(read)
        window_first = np.zeros(count + 1, dtype=np.uint32)
        np.cumsum(np.bincount(read, minlength=count), out=window_first[1:])
        values = np.empty((4, max(n, 1)), dtype=np.int32)
        values[0, :n], values[1, :n], values[2, :n], values[3, :n] = score, read_end, window_end, reverse
        arrays = (window_first, values, np.ascontiguousarray(start if n else np.zeros(1), dtype=np.uint64),
                  np.ascontiguousarray(read_offsets, dtype=np.uint32))
        buffers = [staging.upload(self.queue, array) for staging, array in zip(self._inputs, arrays)]
        out_buffer = self._out.at_least(16 * count)
        self._kernel(self.queue, (-(-count // self._group) * self._group,), (self._group,), buffers[0], buffers[1], buffers[2], buffers[3],
                     read_codes.buffer, np.uint32(count), np.uint32(n), np.int32(match), np.int32(delta), out_buffer)
        out = np.empty((4, count), dtype=np.int32)
        read_back(self.queue, out, out_buffer)
        best, best_score, second, suboptimal = out.astype(np.int64)
        return best, best_score, second, suboptimal
