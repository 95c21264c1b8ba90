"""The progress bar of `bowmap align` (tqdm, on a terminal only).

One unit whatever the input: bytes of the input file read (compressed bytes for gzip, R1's for
pairs) against the file's size, so the bar has a total and an ETA from that rate; the reads
written by the same moment show beside it. Each item handed to the workers carries how far into
the file it reaches (a byte range's ``end``, a chunk's ``input_end``: see
:mod:`bowmap.align.reads`); that position counts once the item's SAM is written (results are
written in input order, so the k-th written result is the k-th item handed out). Standard input
and pipes have no size: the bar counts their bytes without a total. A run whose items were not
handed through :meth:`Progress.handed_out` counts reads, without a total, from its first write.
While the bar is shown, log lines go through ``tqdm.write``, above the bar rather than into it.
"""

from __future__ import annotations

import collections
import logging
import os


def input_position(item) -> int | None:
    """How far into the input file ``item`` (a chunk, a byte range of one file or of two)
    reaches: bytes of the file (compressed bytes for gzip, R1's for pairs); None if unknown."""
    position = getattr(item, "input_end", None)
    if position is not None:
        return int(position)
    if getattr(item, "text", b"") is None:  # a range of an uncompressed file: end is a file offset
        return int(item.end)
    first = getattr(item, "first", None)  # a range of each of two files
    return None if first is None else input_position(first)


class Progress:
    def __init__(self, reads_path: str, enabled: bool):
        self._positions: collections.deque = collections.deque()
        self._reads = 0
        self._handed = False  # set by the first item handed out
        self._bar = None  # no bar: tqdm is not even imported (15 ms of start-up on the H200)
        self._redirect = None
        if enabled:
            from tqdm import tqdm
            from tqdm.contrib.logging import logging_redirect_tqdm

            size = None
            if reads_path != "-":
                try:
                    size = os.path.getsize(reads_path) if os.path.isfile(reads_path) else None
                except OSError:
                    size = None
            self._bar = tqdm(desc="mapped", unit="B", unit_scale=True, unit_divisor=1024, total=size, leave=False)

            self._redirect = logging_redirect_tqdm(loggers=[logging.getLogger("bowmap")])
            self._redirect.__enter__()

    def handed_out(self, item) -> None:
        """A chunk, or a byte range of the file, went to the workers."""
        self._handed = True
        if self._bar is not None:
            self._positions.append(input_position(item))

    def written(self, reads: int) -> None:
        """The next chunk's SAM was written."""
        self._reads += reads
        if self._bar is None:
            return
        position = self._positions.popleft() if self._positions else None
        if not self._handed and self._bar.unit == "B":  # no positions come: reads, no total, from the start
            self._bar.total, self._bar.unit, self._bar.unit_scale = None, " reads", False
        if not self._handed:
            self._bar.update(reads)
            return
        # The reads beside the bar are set before it moves, so both show the same moment.
        self._bar.set_postfix_str(f"{self._reads:,} reads", refresh=False)
        if position is not None and position > self._bar.n:
            self._bar.update(position - self._bar.n)
        else:
            self._bar.refresh()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        if self._redirect is not None:
            self._redirect.__exit__(None, None, None)
            self._redirect = None
