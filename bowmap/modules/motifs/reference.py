"""Dictionary reference of the motif scores (``bowmap.modules.motifs.kernels`` and ``opencl/modules/motifs.cl``).

Written straight from the definition, with none of the device layout: no encoding, no hash, no
buckets. For each region, each distance class δ = 0..d and each wildcard configuration (a set of
δ positions of the k-mer, in ``itertools.combinations`` order) a :class:`collections.Counter`
counts the region's k-mers with those positions replaced by ``*``. Windows holding an ambiguous
base (code 4 or more) are skipped. Then

    S_δ(i, j) = Σ over configurations of Σ over keys present in both counters of min(count_i, count_j).

Slow (pure Python); meant for tests on small inputs and for a slice check in the benchmark.
"""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np

_LETTERS = "ACGT"


def region_tables(codes, k: int, distance: int) -> list[list[Counter]]:
    """tables[δ][c] = Counter of masked k-mer strings for configuration c of distance class δ.

    ``codes``: one region as base codes (0..3 = A, C, G, T; 4 or more = ambiguous).
    """
    codes = [int(code) for code in np.asarray(codes).tolist()]
    words = []
    for start in range(len(codes) - k + 1):
        window = codes[start : start + k]
        if all(code < 4 for code in window):
            words.append("".join(_LETTERS[code] for code in window))
    tables = []
    for delta in range(distance + 1):
        level = []
        for configuration in itertools.combinations(range(k), delta):
            counter: Counter = Counter()
            for word in words:
                letters = list(word)
                for position in configuration:
                    letters[position] = "*"
                counter["".join(letters)] += 1
            level.append(counter)
        tables.append(level)
    return tables


def pair_scores(first: list[list[Counter]], second: list[list[Counter]]) -> list[int]:
    """[S_0, ..., S_d] of two regions' tables."""
    scores = []
    for level_first, level_second in zip(first, second):
        total = 0
        for counter_first, counter_second in zip(level_first, level_second):
            for key, count in counter_first.items():
                other = counter_second.get(key)
                if other:
                    total += min(count, other)
        scores.append(total)
    return scores


def all_pair_scores(regions, k: int, distance: int) -> np.ndarray:
    """Scores of every pair i < j of ``regions`` (a list of code arrays).

    Returns uint32[d + 1, n (n - 1) / 2]: pairs in row-major upper-triangle order
    ((0,1), (0,2), ..., (0,n-1), (1,2), ...), as :func:`bowmap.modules.motifs.kernels.pair_indexes` lists them.
    """
    tables = [region_tables(codes, k, distance) for codes in regions]
    columns = [
        pair_scores(tables[i], tables[j]) for i in range(len(tables)) for j in range(i + 1, len(tables))
    ]
    return np.array(columns, dtype=np.uint32).reshape(-1, distance + 1).T.copy()
