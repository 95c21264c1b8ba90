"""Host memory registered with an OpenCL driver, without holding Python's GIL: :func:`register`
makes a buffer over a host array (``CL_MEM_USE_HOST_PTR``).

Why: NVIDIA's driver pins the pages of such a buffer as it makes it (about 0.7 ms a MiB on an
H200), and pyopencl calls clCreateBuffer holding the GIL, so every other thread of the process
waits as long. A device owner registering its host workers' 32 MiB arenas (see
bowmap.runtime.owner.DeviceOwner._map) held its serving loop 8.4 ms a worker, one worker after
another, at every run's start (H200, chr20, 10,000 pairs: 42 ms of the loop's first 0.15 s).
Called through ctypes, which lets the GIL go for the length of a foreign call, the pinning runs
in a thread of its own while the loop serves the other workers; pyopencl then takes the buffer
over (``Buffer.from_int_ptr``) and releases it as any other. Where the OpenCL loader cannot be
called directly, pyopencl makes the buffer, holding the GIL as before."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os

_READ_WRITE_USE_HOST_PTR = (1 << 0) | (1 << 3)  # CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR


@functools.lru_cache(maxsize=1)
def _create_buffer():
    """clCreateBuffer of the OpenCL loader this process has loaded (pyopencl's own where its
    wheel brings one: a second loader dispatches a context's calls to the same driver anyway,
    but the one loaded costs nothing to open), else the system's; None where neither is found."""
    paths = []
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split(None, 5)[-1].strip() if "/" in line else ""
                if os.path.basename(path).startswith("libOpenCL") and path not in paths:
                    paths.append(path)
    except OSError:  # no /proc: not Linux
        pass
    system = ctypes.util.find_library("OpenCL")
    if system:
        paths.append(system)
    for path in paths:
        try:
            function = ctypes.CDLL(path).clCreateBuffer
        except (OSError, AttributeError):
            continue
        function.restype = ctypes.c_void_p
        function.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int32)]
        return function
    return None


def register(context, array):
    """A read-write buffer of ``context`` over ``array``'s memory (a contiguous NumPy array the
    caller keeps alive as long as the buffer: unlike pyopencl's own, this buffer holds no
    reference to it), made without holding the GIL where the loader can be called directly."""
    import pyopencl as cl

    create = _create_buffer()
    if create is not None and array.nbytes:
        status = ctypes.c_int32(0)
        memory = create(context.int_ptr, _READ_WRITE_USE_HOST_PTR, array.nbytes, array.ctypes.data, ctypes.byref(status))
        if status.value == 0 and memory:
            return cl.Buffer.from_int_ptr(memory, retain=False)
    # pyopencl raises the driver's error, if any, as usual
    return cl.Buffer(context, cl.mem_flags.READ_WRITE | cl.mem_flags.USE_HOST_PTR, hostbuf=array)
