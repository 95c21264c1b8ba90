"""Read-backs that wait together: :class:`DeferredReads` queues a kernel owner's copies from
device buffers into host arrays and waits for them once (a chunk's launches cost one
synchronisation, on a device owner's queue one round trip, rather than one each), and rows read
in two steps (a head with the results, the rest where a row is longer)."""

from __future__ import annotations

import numpy as np

from bowmap.runtime.devices import enqueue_copy, wait_idle


class DeferredReads:
    """Copies from device buffers into host arrays, queued as a kernel owner goes and waited for
    together (:meth:`wait`): a chunk's launches then cost one synchronisation, not one each (on a
    device owner's queue, one round trip). The host arrays hold their bytes only after
    :meth:`wait`; a buffer may be written again by commands queued after its copy (an in-order
    queue runs the copy first)."""

    def __init__(self, queue):
        self.queue = queue
        self._events = []  # local queues: pyopencl's events keep the host arrays alive until the wait
        self._pending = 0  # copies queued since the last wait

    def add(self, host: np.ndarray, buffer, **options) -> None:
        """Queue the copy of ``buffer`` into ``host`` (``options``: pyopencl.enqueue_copy's, such
        as a rectangle's origins, region and pitches)."""
        self._pending += 1
        event = enqueue_copy(self.queue, host, buffer, is_blocking=False, **options)
        if event is not None:  # a remote queue's copy is recorded, and filled at the wait
            self._events.append(event)

    def add_columns(self, host: np.ndarray, table, pitch: int, first: int = 0) -> None:
        """Queue the read of columns ``first ..`` (as many as ``host``, a matrix, has) of every
        row of ``table`` (rows of ``pitch`` elements of ``host``'s type) into ``host``: one
        rectangle, not the whole table."""
        rows, columns = host.shape
        size = host.itemsize
        if rows and columns:
            self.add(host, table, buffer_origin=(size * first, 0), host_origin=(0, 0), region=(size * columns, rows),
                     buffer_pitches=(size * pitch,), host_pitches=(size * columns,))

    def add_rest(self, head: np.ndarray, table, pitch: int, longest: int) -> np.ndarray:
        """Rows read in two steps: ``head`` holds (after a wait) their first columns
        (:meth:`add_columns`); queue the read of the columns after them up to ``longest`` into a
        new matrix, returned (no columns where no row is longer; :func:`joined_columns` then
        joins the two)."""
        rest = np.empty((head.shape[0], max(0, longest - head.shape[1])), dtype=head.dtype)
        self.add_columns(rest, table, pitch, head.shape[1])
        return rest

    def wait(self) -> None:
        """Wait, sleeping (:func:`wait_idle`), until every queued copy has landed (no wait when
        none was queued)."""
        if not self._pending:
            return
        self._pending = 0
        wait_idle(self.queue)  # a remote queue's wait is a round trip that fills the host arrays
        self._events.clear()  # complete: dropping them waits for nothing


def joined_columns(head: np.ndarray, rest: np.ndarray) -> np.ndarray:
    """The rows of :meth:`DeferredReads.add_rest`, whole: ``head`` itself when ``rest`` is empty."""
    return np.concatenate((head, rest), axis=1) if rest.shape[1] else head
