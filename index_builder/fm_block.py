"""One index block: suffix array (pydivsufsort) -> BWT -> occurrence lines, marks, SA samples."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pydivsufsort

from bowmap.index.format import build_marks, build_occ_lines

_CHUNK = 1 << 20  # suffix-array entries per step: temporaries of ~10 MB


@dataclass
class BlockArrays:
    """Host arrays of one block, laid out as :mod:`bowmap.index.format` describes."""

    length: int  # n, bases in the block
    primary: int  # BWT row whose symbol is "$" (the row of the suffix starting at 0)
    symbol_counts: np.ndarray  # int64[4]: A, C, G, T in the block
    occ: np.ndarray  # uint32[lines, 16]
    marks: np.ndarray  # uint32[groups, 4]
    samples: np.ndarray  # uint32[marked rows]


def build_block(text: np.ndarray, sa_sample: int) -> BlockArrays:
    """Index ``text`` (codes 0..3, at least one base); every suffix starting at a multiple of
    ``sa_sample`` is sampled."""
    n = len(text)
    suffix_array = pydivsufsort.divsufsort(np.ascontiguousarray(text, dtype=np.uint8))
    # Row r >= 1 of the full suffix array is suffix_array[r - 1]; row 0 is the empty suffix,
    # preceded by the last base. Worked through in chunks to keep temporaries small.
    primary = int(np.argmin(suffix_array)) + 1
    bwt_rows = np.empty(n + 1, dtype=np.uint8)
    bwt_rows[0] = text[n - 1]
    sampled_parts = []
    for first in range(0, n, _CHUNK):
        chunk = suffix_array[first : first + _CHUNK]
        bwt_rows[1 + first : 1 + first + len(chunk)] = text[chunk - 1]  # suffix 0 wraps: dropped below
        sampled_parts.append(np.flatnonzero(chunk % sa_sample == 0) + first)
    bwt_rows[primary:n] = bwt_rows[primary + 1 :]  # drop "$": the stored BWT has n symbols
    sampled = np.concatenate(sampled_parts)
    samples = suffix_array[sampled].astype(np.uint32)
    del suffix_array, chunk  # the loop's view would keep the whole suffix array alive
    return BlockArrays(
        length=n,
        primary=primary,
        symbol_counts=np.bincount(text, minlength=4).astype(np.int64),
        occ=build_occ_lines(bwt_rows[:n]),
        marks=build_marks(sampled + 1, n),
        samples=samples,
    )
