"""How an OpenCL driver waits: CPU time of the calling thread while a ~50 ms kernel runs, for each
way bowmap could wait. NVIDIA's driver spins a core through blocking calls (its CPU time equals
the wall time); polling a marker with short sleeps (``bowmap.runtime.devices.wait_idle``) does not. A
non-blocking copy from host memory waits as well when its event is dropped: pyopencl's event
waits for the copy as it goes. One table.

Command (GPU machine):  python bench/device_waits.py --devices gpu
Here (PoCL, a smoke run):  python bench/device_waits.py --devices cpu
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pyopencl as cl

from bowmap.runtime.devices import open_devices, wait_idle

SOURCE = """
__kernel void spin(__global uint *out, uint rounds) {
    uint x = get_global_id(0);
    for (uint i = 0; i < rounds; ++i) x = x * 1664525u + 1013904223u;
    out[get_global_id(0)] = x;
}"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", default="gpu", help="a bowmap --devices spec; its first device is used")
    parser.add_argument("--kernel-ms", type=float, default=50.0, help="the kernel's length (default 50 ms)")
    args = parser.parse_args()

    device = open_devices(args.devices)[0]
    context = device.context
    queue, idle_queue = device.queue(), device.queue()
    program = cl.Program(context, SOURCE).build()
    spin = cl.Kernel(program, "spin")
    out = cl.Buffer(context, cl.mem_flags.READ_WRITE, size=4 << 20)
    target = cl.Buffer(context, cl.mem_flags.READ_WRITE, size=8 << 20)
    host, small = np.ones(8 << 20, dtype=np.uint8), np.zeros(16, dtype=np.uint8)
    kept = []  # the events of copies whose wait is not timed

    def kernel(rounds: int):
        return spin(queue, (1 << 20,), None, out, np.uint32(rounds))

    kernel(1000)
    queue.finish()
    started = time.perf_counter()
    kernel(100_000)
    queue.finish()
    rounds = max(1, int(100_000 * args.kernel_ms / 1e3 / (time.perf_counter() - started)))

    held = {}  # what a release case drops, made before its kernel is queued

    def used_buffer():
        buffer = cl.Buffer(context, cl.mem_flags.READ_WRITE, size=host.nbytes)
        cl.enqueue_copy(idle_queue, buffer, host, is_blocking=True)
        held["buffer"] = buffer

    def done_marker():
        marker = cl.enqueue_marker(idle_queue)
        wait_idle(idle_queue)
        held["marker"] = marker

    def made_buffer(event):
        buffer = cl.Buffer(context, cl.mem_flags.READ_WRITE, size=host.nbytes)
        kept.append(cl.enqueue_copy(idle_queue, buffer, host, is_blocking=False))
        wait_idle(idle_queue)

    # Pinned host memory (a buffer of host memory, mapped): copies from it need no staging.
    pinned = cl.Buffer(context, cl.mem_flags.READ_WRITE | cl.mem_flags.ALLOC_HOST_PTR, size=host.nbytes)
    pinned_host, _ = cl.enqueue_map_buffer(idle_queue, pinned, cl.map_flags.READ | cl.map_flags.WRITE, 0, host.shape, host.dtype)
    pinned_host[:] = host

    waits = {
        "blocking read of 16 bytes": lambda event: cl.enqueue_copy(queue, small, out, is_blocking=True),
        "event.wait()": lambda event: event.wait(),
        "queue.finish()": lambda event: queue.finish(),
        "non-blocking 8 MB copy, event dropped": lambda event: cl.enqueue_copy(queue, target, host, is_blocking=False),
        "non-blocking 8 MB copy, event kept": lambda event: kept.append(cl.enqueue_copy(queue, target, host, is_blocking=False)),
        "non-blocking 8 MB copy, an idle queue": lambda event: cl.enqueue_copy(idle_queue, target, host, is_blocking=False),
        "wait_idle (marker polled, sleeps)": lambda event: wait_idle(queue),
        # What a device owner does beside its waits, timed while another queue's kernel runs.
        "non-blocking 8 MB copy from pinned memory, an idle queue, event kept":
            lambda event: kept.append(cl.enqueue_copy(idle_queue, target, pinned_host, is_blocking=False)),
        "8 MB buffer-to-buffer copy from the pinned buffer, an idle queue":
            lambda event: kept.append(cl.enqueue_copy(idle_queue, target, pinned)),
        "an 8 MB buffer made and filled, an idle queue": made_buffer,
        "a used 8 MB buffer released": lambda event: held.pop("buffer"),
        "a completed marker released": lambda event: held.pop("marker"),
    }
    before = {"a used 8 MB buffer released": used_buffer, "a completed marker released": done_marker}
    print(f"# {device.info.name}; a kernel of about {args.kernel_ms:.0f} ms queued before each wait")
    print("| wait | returned after | CPU of the waiting thread |")
    print("|---|---|---|")
    for label, wait in waits.items():
        queue.finish()
        idle_queue.finish()
        if label in before:
            before[label]()
        event = kernel(rounds)
        queue.flush()
        wall, cpu = time.perf_counter(), time.thread_time()
        wait(event)
        wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
        held.clear()
        print(f"| {label} | {1e3 * wall:.1f} ms | {1e3 * cpu:.1f} ms |")
        queue.finish()
        kept.clear()


if __name__ == "__main__":
    main()
