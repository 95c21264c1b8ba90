"""The progress bar of `bowmap align` (tqdm, on a terminal only).

For an uncompressed FASTQ file, handed to the workers as byte ranges, the bar counts the input's
bytes against the file's size, so it has a total and an ETA; a range's bytes count once its
SAM is written (results are written in input order, so the k-th written result is the k-th
range). Other inputs (gzipped, FASTA, stdin) have no byte position known here: the bar counts
reads, without a total. Either way the reads mapped so far show beside it. While the bar is
shown, log lines go through ``tqdm.write``, above the bar rather than into its line.
"""

from __future__ import annotations

import collections
import logging
import os


class Progress:
    def __init__(self, reads_path: str, enabled: bool):
        from tqdm import tqdm

        self._ends: collections.deque = collections.deque()
        self._reads = 0
        size = None
        if enabled and reads_path != "-":
            try:
                size = os.path.getsize(reads_path) if os.path.isfile(reads_path) else None
            except OSError:
                size = None
        self._size = size
        self._bytes = False  # set by the first byte range handed out
        self._bar = tqdm(desc="mapped", unit="B", unit_scale=True, unit_divisor=1024, total=size, disable=not enabled, leave=False)
        self._redirect = None
        if enabled:
            from tqdm.contrib.logging import logging_redirect_tqdm

            self._redirect = logging_redirect_tqdm(loggers=[logging.getLogger("bowmap")])
            self._redirect.__enter__()

    def handed_out(self, item) -> None:
        """A chunk, or a byte range of the file, went to the workers."""
        if getattr(item, "text", b"") is None:  # a range of the file itself: end is a file offset
            self._bytes = True
            self._ends.append(item.end)

    def written(self, reads: int) -> None:
        """The next chunk's SAM was written."""
        self._reads += reads
        if self._bar.disable:
            return
        if self._bytes and self._ends:
            self._bar.update(self._ends.popleft() - self._bar.n)
        elif not self._bytes:
            if self._bar.total is not None:  # not a byte count after all: reads, no total
                self._bar.total, self._bar.unit, self._bar.unit_divisor = None, " reads", 1000
            self._bar.update(reads)
        self._bar.set_postfix_str(f"{self._reads:,} reads", refresh=False)

    def close(self) -> None:
        self._bar.close()
        if self._redirect is not None:
            self._redirect.__exit__(None, None, None)
            self._redirect = None
