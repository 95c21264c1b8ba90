"""The reference text on a device, 2 bits a base with its ambiguity mask: the windows of
``opencl/align/smith_waterman.cl`` (and the tandem and SAM-field kernels) read their bases
there (``packed_text.h``), so no window is gathered on the host or copied in."""

from __future__ import annotations

import numpy as np

from bowmap.runtime.devices import DeviceContext, filled_buffer


class PackedText:
    """A reference text on one device, 2 bits a base (the index's packed form, first base in
    the low bits), with a bit a base marking the ambiguous ones when there are any. Given as
    ``window_codes``, windows are (text position, length) pairs read by the kernels on the
    device: no window bases are gathered on the host or copied in."""

    def __init__(self, device: DeviceContext, packed: np.ndarray, length: int, ambiguous_starts=(), ambiguous_lengths=()):
        packed = np.ascontiguousarray(packed, dtype=np.uint8)
        if len(packed) * 4 < length:
            raise ValueError("packed text shorter than its length")
        self.length = int(length)
        self.buffer = filled_buffer(device, packed if len(packed) else np.zeros(1, np.uint8))
        starts = np.asarray(ambiguous_starts, dtype=np.int64)
        self.masked = len(starts) > 0
        mask = np.zeros(1, dtype=np.uint8)
        if self.masked:
            mask = np.zeros(-(-self.length // 8), dtype=np.uint8)
            for start, run in zip(starts.tolist(), np.asarray(ambiguous_lengths, dtype=np.int64).tolist()):  # a few runs
                _set_bits(mask, start, start + run)
        self.ambiguous = filled_buffer(device, mask)

    @classmethod
    def from_index(cls, device: DeviceContext, index) -> PackedText:
        return cls(device, index.packed, index.total_length, index.ambiguous_starts, index.ambiguous_lengths)

    @classmethod
    def of_owner(cls, device, index) -> PackedText:
        """``index``'s text as its device owner uploaded it for every host worker (``device``
        a bowmap.runtime.remote.RemoteDevice; buffers named as :meth:`shared_buffers` names them)."""
        self = cls.__new__(cls)
        self.length = int(index.total_length)
        self.masked = len(index.ambiguous_starts) > 0
        self.buffer, self.ambiguous = device.shared_buffer("text"), device.shared_buffer("text.ambiguous")
        return self

    def shared_buffers(self) -> dict:
        return {"text": self.buffer, "text.ambiguous": self.ambiguous}


def _set_bits(mask: np.ndarray, start: int, end: int) -> None:
    """Set bits start .. end - 1 of a little-endian bit array (bit p: bit p % 8 of byte p // 8)."""
    if start >= end:
        return
    first, last = start // 8, (end - 1) // 8
    low = (0xFF << (start % 8)) & 0xFF
    high = 0xFF >> (7 - (end - 1) % 8)
    if first == last:
        mask[first] |= low & high
        return
    mask[first] |= low
    mask[first + 1 : last] = 0xFF
    mask[last] |= high
