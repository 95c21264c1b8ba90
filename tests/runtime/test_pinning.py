"""bowmap.runtime.pinning: a buffer registered over host memory without the GIL is that memory."""

from __future__ import annotations

import mmap
import sys
import threading

import numpy as np
import pytest


def test_a_registered_buffer_lies_over_the_arrays_memory_and_copies_it_exactly(device):
    import pyopencl as cl

    from bowmap.runtime import pinning

    rng = np.random.default_rng(30)
    arena = mmap.mmap(-1, 3 * 4096 + 17)  # an arena's kind of memory, an awkward size
    view = np.frombuffer(arena, dtype=np.uint8)
    view[:] = rng.integers(0, 256, size=len(view), dtype=np.uint8)
    buffer = pinning.register(device.context, view)
    assert buffer.size == len(view)
    assert buffer.get_info(cl.mem_info.FLAGS) & cl.mem_flags.USE_HOST_PTR
    queue = cl.CommandQueue(device.context)
    back = np.zeros_like(view)
    cl.enqueue_copy(queue, back, buffer, is_blocking=True)
    np.testing.assert_array_equal(back, view)
    # and the other way: what is copied into the buffer is in the array itself once mapped
    # (OpenCL: a USE_HOST_PTR buffer maps at its host pointer, holding the latest bits)
    written = rng.integers(0, 256, size=len(view), dtype=np.uint8)
    cl.enqueue_copy(queue, buffer, written, is_blocking=True)
    mapped, _ = cl.enqueue_map_buffer(queue, buffer, cl.map_flags.READ, 0, view.shape, view.dtype, is_blocking=True)
    assert mapped.ctypes.data == view.ctypes.data
    np.testing.assert_array_equal(view, written)
    mapped.base.release(queue)
    del mapped
    buffer.release()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the loader is found through /proc/self/maps")
def test_the_loader_is_called_directly_so_other_threads_run_meanwhile(device):
    import pyopencl  # noqa: F401 - its loader is the one found

    from bowmap.runtime import pinning

    assert pinning._create_buffer() is not None  # else register would hold the GIL (pyopencl's)
    views = [np.zeros(1 << 20, dtype=np.uint8) for _ in range(4)]
    buffers = [None] * len(views)

    def pin(n):
        buffers[n] = pinning.register(device.context, views[n])

    threads = [threading.Thread(target=pin, args=(n,)) for n in range(len(views))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [buffer.size for buffer in buffers] == [len(view) for view in views]
