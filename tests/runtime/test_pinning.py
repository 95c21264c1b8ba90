"""bowmap.runtime.pinning: a buffer registered over an arena without the GIL is that arena's memory,
released before it; registrations in threads of their own, skipped where no longer wanted."""

from __future__ import annotations

import mmap
import threading

import numpy as np


def test_a_registered_buffer_lies_over_the_arenas_memory_and_copies_it_exactly(device):
    import pyopencl as cl

    from bowmap.runtime import pinning

    rng = np.random.default_rng(30)
    arena = mmap.mmap(-1, 3 * 4096 + 17)  # an arena's kind of memory, an awkward size
    view = np.frombuffer(arena, dtype=np.uint8)
    view[:] = rng.integers(0, 256, size=len(view), dtype=np.uint8)
    registered = pinning.register(device.context, arena)
    buffer = registered.buffer
    assert buffer.hostbuf is None  # made through ctypes (pyopencl's own would hold its host array)
    assert buffer.size == len(view)
    assert buffer.get_info(cl.mem_info.FLAGS) == cl.mem_flags.READ_WRITE | cl.mem_flags.USE_HOST_PTR
    queue = cl.CommandQueue(device.context)
    back = np.zeros_like(view)
    cl.enqueue_copy(queue, back, buffer, is_blocking=True)
    np.testing.assert_array_equal(back, view)
    # and the other way: what is copied into the buffer is in the arena itself once mapped
    # (OpenCL: a USE_HOST_PTR buffer maps at its host pointer, holding the latest bits)
    written = rng.integers(0, 256, size=len(view), dtype=np.uint8)
    cl.enqueue_copy(queue, buffer, written, is_blocking=True)
    mapped, _ = cl.enqueue_map_buffer(queue, buffer, cl.map_flags.READ, 0, view.shape, view.dtype, is_blocking=True)
    assert mapped.ctypes.data == view.ctypes.data
    np.testing.assert_array_equal(view, written)
    mapped.base.release(queue)


def test_a_registered_buffer_is_released_before_its_arena_is_unmapped():
    from bowmap.runtime.pinning import Registered

    arena = mmap.mmap(-1, 4096)
    seen = []

    class Buffer:
        def release(self):
            seen.append(arena.closed)

    registered = Registered(Buffer(), np.frombuffer(arena, dtype=np.uint8), arena)
    del registered
    assert seen == [False]


def test_registrations_run_in_threads_of_their_own_and_not_for_arenas_no_longer_wanted(device):
    from bowmap.runtime.pinning import Pinning

    pinning = Pinning()
    arenas = [mmap.mmap(-1, (1 << 20) + 4096 * n) for n in range(4)]
    done: dict = {}
    lock = threading.Lock()

    def deliver(n, registered):
        with lock:
            done[n] = registered

    for n, arena in enumerate(arenas):
        pinning.start(device.context, arena, lambda n=n: n != 2, lambda registered, n=n: deliver(n, registered))
    pinning.wait()
    assert sorted(done) == [0, 1, 3]  # the third no longer wanted: not registered
    assert all(done[n].buffer.size == len(arenas[n]) and done[n].arena is arenas[n] for n in done)
