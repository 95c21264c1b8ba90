"""The device owner's pool of the device buffers its clients dropped (:class:`BufferPool`), kept
for their next creations instead of freed (bowmap.runtime.owner.DeviceOwner)."""

from __future__ import annotations

# Bytes of dropped client buffers an owner keeps for reuse (BufferPool): at most this, and at
# most this share of the device's memory.
POOL_BYTES = 1 << 30
POOL_SHARE = 1 / 16


class BufferPool:
    """Device buffers the clients dropped, kept for their next creations of the same flags.

    Why: freeing device memory is slow on GPU drivers and stops the owner: NVIDIA's
    clReleaseMemObject waits for the device, and pyopencl calls it holding the GIL, so every
    serving thread stood still while it ran (py-spy, H200, chr20 1 M pairs: 14% of the owner's
    GIL samples were releases). A host worker's buffers grow (ReusedBuffer doubles them) and the
    ones they outgrow come here; a creation takes the smallest kept buffer of its flags that is
    at least as large and at most FIT times as large. At most ``limit`` bytes are kept; past
    that a dropped buffer is freed. Used under the owner's lock."""

    FIT = 4

    def __init__(self, limit: int):
        self.limit = limit
        self.bytes = 0
        self._kept: dict[int, list[tuple[int, object]]] = {}  # flags -> [(size, buffer)]

    def take(self, flags: int, size: int):
        """A kept buffer for a creation of ``size`` bytes and ``flags`` and its size, or None."""
        kept = self._kept.get(flags)
        if not kept:
            return None
        fits = [number for number, (held, _) in enumerate(kept) if size <= held <= self.FIT * max(size, 1)]
        if not fits:
            return None
        held, buffer = kept.pop(min(fits, key=lambda number: kept[number][0]))
        self.bytes -= held
        return held, buffer

    def keep(self, flags: int, size: int, buffer) -> bool:
        """Keep ``buffer`` (``size`` bytes, ``flags``) if there is room; whether it was kept."""
        if self.bytes + size > self.limit:
            return False
        self._kept.setdefault(flags, []).append((size, buffer))
        self.bytes += size
        return True
