"""Host memory registered with an OpenCL driver, without holding Python's GIL: :func:`register`
makes a buffer over a host worker's arena (``CL_MEM_USE_HOST_PTR``), :class:`Pinning` does it
in threads of their own for a device owner (bowmap.runtime.owner.DeviceOwner._map says why an
owner registers its clients' arenas).

Why without the GIL: NVIDIA's driver pins the pages of such a buffer as it makes it (H200: 4-15
ms for 32 MiB, bench/RESULTS.md session 30), and pyopencl calls clCreateBuffer holding the GIL,
so every other thread of the process waits as long: a device owner registering five host
workers' arenas in its serving loop held it 8.4 ms a worker, one after another, at a small
run's start. Called through ctypes, which lets the GIL go for the length of a foreign call, the
pinning runs beside the loop; pyopencl then takes the buffer over (``Buffer.from_int_ptr``).
Where the OpenCL loader cannot be called directly, pyopencl makes the buffer, GIL held."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import threading

import numpy as np

log = logging.getLogger("bowmap.runtime.pinning")

_READ_WRITE_USE_HOST_PTR = (1 << 0) | (1 << 3)  # CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR


def _loaders():
    """The OpenCL loader pyopencl is linked with (reached through its extension module), then
    the system's where there is one."""
    import pyopencl._cl

    yield pyopencl._cl.__file__
    system = ctypes.util.find_library("OpenCL")  # (runs ldconfig: only where the first fails)
    if system:
        yield system


@functools.lru_cache(maxsize=1)
def _create_buffer():
    """clCreateBuffer of the first of :func:`_loaders` that has it; None where none has."""
    for path in _loaders():
        try:
            function = ctypes.CDLL(path).clCreateBuffer
        except (OSError, AttributeError):
            continue
        function.restype = ctypes.c_void_p
        function.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int32)]
        return function
    return None


class Registered:
    """A buffer registered over an arena's pages, holding the arena (an mmap) and a view of it,
    so that its pages stay mapped as long as it: it releases the buffer first (a buffer made
    through ctypes holds no reference to its memory; pyopencl's own would hold the view)."""

    __slots__ = ("buffer", "view", "arena")

    def __init__(self, buffer, view, arena):
        self.buffer, self.view, self.arena = buffer, view, arena

    def __del__(self):
        try:
            self.buffer.release()
        except Exception:  # noqa: BLE001 - released already, or the context is gone
            pass


def register(context, arena) -> Registered:
    """``arena``'s pages (an mmap, or any writable buffer of bytes) registered with ``context``
    as a read-write buffer over them, made without holding the GIL where the loader can be
    called directly."""
    import pyopencl as cl

    view = np.frombuffer(arena, dtype=np.uint8)
    create = _create_buffer()
    if create is not None and view.nbytes:
        status = ctypes.c_int32(0)
        memory = create(context.int_ptr, _READ_WRITE_USE_HOST_PTR, view.nbytes, view.ctypes.data, ctypes.byref(status))
        if status.value == 0 and memory:
            return Registered(cl.Buffer.from_int_ptr(memory, retain=False), view, arena)
    # pyopencl raises the driver's error, if any, as usual
    return Registered(cl.Buffer(context, cl.mem_flags.READ_WRITE | cl.mem_flags.USE_HOST_PTR, hostbuf=view), view, arena)


class Pinning:
    """A device owner's registrations, each in a thread of its own (:meth:`start`), and a wait
    for them all (:meth:`wait`: for tests, which would otherwise run a batch registered only
    when the timing allows)."""

    def __init__(self):
        self._threads: list[threading.Thread] = []

    def start(self, context, arena, wanted, done) -> None:
        """Register ``arena`` (see :func:`register`) in a thread, unless ``wanted()`` is false by
        the time it starts (an arena replaced or forgotten meanwhile is not pinned for nothing);
        then ``done(registered)``. A driver that cannot register leaves the arena as it is."""

        def body():
            if not wanted():
                return
            try:
                registered = register(context, arena)
            except Exception as error:  # noqa: BLE001 - the arena serves unregistered
                log.debug("an arena of %d bytes stays unregistered: %s", len(arena), error)
                return
            done(registered)

        thread = threading.Thread(target=body, daemon=True, name="bowmap-owner-pin")
        self._threads = [alive for alive in self._threads if alive.is_alive()] + [thread]
        thread.start()

    def wait(self, timeout: float = 30.0) -> None:
        for thread in list(self._threads):
            thread.join(timeout)
