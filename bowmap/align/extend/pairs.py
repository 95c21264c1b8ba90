"""The pairs stage: the insert-size model, the choice of each pair's alignments, mate rescue and
pair-aware MAPQ, for a whole paired chunk at once (reads 2k and 2k + 1 are the mates of pair k).

What it takes from its peers (see the README, "Paired-end reads"):

* bwa mem (``bwamem_pair.c``): the insert-size model from confidently and uniquely placed pairs
  (quartiles, moments over the 2-IQR fences, proper-pair bounds the union of the 3-IQR fences and
  4 sigma, at least 10 pairs), the pair score ``S1 + S2 + round(a * log4(2 P(|Z| > |z|)))``
  against the best unpaired combination less ``--unpaired-penalty`` (17), mate rescue by
  Smith-Waterman over the window the model implies, and the pair MAPQ that lifts a mate in a
  repeat by at most 40 when its pair is unique.
* strobealign: one model for the whole run, made so that the output never depends on threads or
  chunking. bowmap estimates it once, from the first ``SAMPLE_PAIRS`` pairs of the input mapped
  as single reads (a sample item that goes through the pipeline before any chunk), then freezes
  it: bwa's per-batch estimate changes its output with the thread count, strobealign resets its
  estimate every chunk.
* bowtie2 (``pe.cpp``) and minimap2 (``pe.c``): mates that overlap or contain each other are
  concordant; minimap2's fixed fragment bound is what ``--insert-size`` gives when estimation
  is not wanted.

Coordinates: text positions (0-based over the concatenated contigs). An alignment's *projected*
span is where its whole read would lie, soft clips included: ``text_end - read_end`` to that
plus the read length. For a pair whose forward mate projects to ``[s, ...)`` and reverse mate to
``[..., e)``, the insert size is ``e - s`` (SAM's TLEN for unclipped mates).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from bowmap.align.extend.extender import Extender, Scored, mix, read_hashes, rival_scores
from bowmap.align.options import AlignOptions
from bowmap.align.extend.mapq import MAXIMUM_MAPQ, NO_SCORE, mapping_quality, repeat_scaled, suboptimal_penalty
from bowmap.align.seed.filter import Windows
from bowmap.runtime.arrays import lexsort, run_ranks, segment_ranges, unique
from bowmap.runtime.errors import UsageError

SAMPLE_PAIRS = 25_000  # the first pairs of the input the model is estimated from
MIN_MODEL_PAIRS = 10  # bwa's MIN_DIR_CNT
MAX_INSERT = 10_000  # pairs farther apart do not enter the model (bwa's max_ins)
UNIQUE_RATIO = 0.8  # a mate is unique when its second best scores at most this share of its best
SUBOPTIMAL_PAIR_DELTA = 7  # pair scores this close to the best count as sub-optimal (bwa: a + b)
RESCUE_MARGIN = 32  # bases added on each side of a rescue window: room for indels
MAX_ANCHORS = 50  # alignments of a read that mate rescue starts from, at most (bwa's -m)
# A mate with at least this many other alignments within a mismatch of its best (its sub_n), and
# its window list cut, lies in a family whose copies outnumber its windows (choose_pairs' ambiguous).
CROWDED = 3
ORIENTATIONS = ("FF", "FR", "RF", "RR")
FR = 1


@dataclass(frozen=True)
class InsertModel:
    """Fragment length (TLEN of forward-reverse pairs) as a normal distribution, and the bounds
    of proper pairs. ``pairs`` is how many pairs it was estimated from (0: given by the user);
    ``counts``: confident pairs seen in each orientation (FF, FR, RF, RR). A failed model (too
    few FR pairs) makes no pair proper and rescues no mate."""

    mean: float
    std: float
    low: int
    high: int
    pairs: int = 0
    counts: tuple[int, int, int, int] = (0, 0, 0, 0)
    failed: bool = False

    def describe(self) -> str:
        if self.failed:
            return f"insert size: no model ({self.counts[FR]} FR pairs of {sum(self.counts)} confident ones; at least {MIN_MODEL_PAIRS} needed): no proper pairs, no mate rescue"
        source = "given" if self.pairs == 0 else f"from {self.pairs} of the first pairs"
        seen = "" if self.pairs == 0 else " (" + ", ".join(f"{name} {count}" for name, count in zip(ORIENTATIONS, self.counts)) + ")"
        return f"insert size {source}: FR mean {self.mean:.2f}, sd {self.std:.2f}, proper pairs {self.low}..{self.high}{seen}"

    def penalties(self, match: int) -> np.ndarray:
        """The insert term of the pair score for each insert size low..high: bwa's
        ``round(a * ln(2 erfc(|z| / sqrt 2)) / ln 4)``, the log-likelihood of the insert in units of
        a match (+0.5 a at the mean, -1.7 a at 2 sd, -6.5 a at 4 sd); computed once a model."""
        sizes = np.arange(self.low, self.high + 1, dtype=np.float64)
        z = np.abs(sizes - self.mean) / max(self.std, 1e-9)
        tail = np.array([math.erfc(value / math.sqrt(2.0)) for value in z])
        return np.trunc(0.721 * np.log(np.maximum(2.0 * tail, 1e-300)) * match + 0.499).astype(np.int64)  # C's int()


def parse_insert_size(text: str) -> InsertModel:
    """``--insert-size MEAN,SD[,MAX[,MIN]]`` (bwa's -I): SD 10% of MEAN when left out; bounds
    MEAN -/+ 4 SD (MIN at least 1) unless given."""
    parts = text.split(",")
    try:
        values = [float(part) for part in parts]
    except ValueError:
        values = []
    if not 1 <= len(values) <= 4 or not all(math.isfinite(value) for value in values):
        raise UsageError(f"--insert-size {text}: expected MEAN[,SD[,MAX[,MIN]]], numbers (e.g. 400,50)")
    mean = values[0]
    std = values[1] if len(values) > 1 else 0.1 * mean
    high = int(values[2]) if len(values) > 2 else int(mean + 4 * std + 0.499)
    low = int(values[3]) if len(values) > 3 else max(1, int(mean - 4 * std + 0.499))
    if mean <= 0 or std <= 0 or low < 1 or high < low or high > 1_000_000:
        raise UsageError(f"--insert-size {text}: MEAN and SD must be positive and 1 <= MIN <= MAX <= 1000000")
    return InsertModel(mean=mean, std=std, low=low, high=high)


def estimate_model(orientation: np.ndarray, distance: np.ndarray, pairs: int) -> InsertModel:
    """bwa's estimate (``mem_pestat``) for FR pairs, from the orientation codes (0..3: FF FR RF
    RR) and insert sizes of the confidently and uniquely placed sample pairs, in integer
    arithmetic where the order of the pairs could matter: the same sample gives the same model
    on any machine."""
    counts = tuple(int(count) for count in np.bincount(orientation, minlength=4)[:4])
    sizes = np.sort(distance[orientation == FR].astype(np.int64))
    count = len(sizes)
    if count < MIN_MODEL_PAIRS:
        return InsertModel(mean=0.0, std=0.0, low=1, high=0, pairs=pairs, counts=counts, failed=True)

    def quantile(fraction):
        return int(sizes[min(count - 1, int(fraction * count + 0.499))])

    low_quartile, high_quartile = quantile(0.25), quantile(0.75)
    spread = high_quartile - low_quartile
    inside = sizes[(sizes >= max(1, int(low_quartile - 2 * spread + 0.499))) & (sizes <= int(high_quartile + 2 * spread + 0.499))]
    total, squares, kept = int(inside.sum()), int((inside * inside).sum()), len(inside)
    mean = total / kept
    std = math.sqrt(max(kept * squares - total * total, 0)) / kept
    low = min(int(low_quartile - 3 * spread + 0.499), int(mean - 4 * std + 0.499))
    high = max(int(high_quartile + 3 * spread + 0.499), int(mean + 4 * std + 0.499))
    return InsertModel(mean=mean, std=max(std, 1.0), low=max(low, 1), high=high, pairs=pairs, counts=counts)


@dataclass
class Placed:
    """Candidate alignments (windows) of a chunk's reads, with their projected spans."""

    window: np.ndarray  # index into the Scored windows
    read: np.ndarray
    reverse: np.ndarray
    start: np.ndarray  # projected text start
    end: np.ndarray  # projected text end (exclusive)
    contig: np.ndarray
    score: np.ndarray


def _placed(scored: Scored, extender: Extender, rows: np.ndarray) -> Placed:
    windows = scored.windows
    read = windows.read[rows]
    start = scored.text_end()[rows] - scored.read_end[rows]
    contig, _ = extender.index.to_contig(windows.start[rows])
    return Placed(rows, read, windows.reverse[rows], start, start + extender.lengths[read], contig, scored.score[rows])


def _insert(first: Placed, second: Placed, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Orientation code (0..3: FF FR RF RR, as bwa names them from the first mate's view) and
    insert size (TLEN of the 5' ends) of candidates ``first[a]`` with ``second[b]``.

    Selections by strand are arithmetic (``x + flag * (y - x)``), not np.where: strands are as
    good as random, and np.where's branches on them are mispredicted (3.5 ns an element against
    0.8 for the arithmetic)."""
    reverse_a, reverse_b = first.reverse[a], second.reverse[b]
    start_a, start_b = first.start[a], second.start[b]
    five_a = start_a + reverse_a * (first.end[a] - 1 - start_a)
    five_b = start_b + reverse_b * (second.end[b] - 1 - start_b)
    forward_five = five_a + reverse_a * (five_b - five_a)  # the forward-strand mate's 5' end (a's when both are)
    reverse_five = five_a + five_b - forward_five
    opposite = reverse_a != reverse_b
    # Opposite strands: FR (1) when the forward mate's 5' end lies first, else RF (2). Same strand:
    # FF (0) when the second mate lies downstream of the first in the first's direction, else RR (3).
    downstream = (five_b != five_a) & ((five_b < five_a) == reverse_a)
    orientation = np.where(opposite, 2 - (forward_five < reverse_five), 3 - 3 * downstream)
    return orientation, np.abs(reverse_five - forward_five) + 1


def sample_observations(scored: Scored, extender: Extender) -> tuple[np.ndarray, np.ndarray]:
    """Orientation codes and insert sizes of the sample chunk's pairs whose mates are both
    placed, uniquely (second best at most UNIQUE_RATIO of the best) and on one contig."""
    count = extender.count
    best = scored.best
    reported = (best >= 0) & (scored.best_score + 2 * extender.scoring.clip_bonus >= extender.minimum())
    second = np.where(scored.second_score == NO_SCORE, -np.inf, scored.second_score)
    placed_uniquely = reported & (second <= UNIQUE_RATIO * scored.best_score)
    pairs = np.flatnonzero(placed_uniquely[0::2] & placed_uniquely[1::2])
    if len(pairs) == 0:
        return np.zeros(0, dtype=np.int8), np.zeros(0, dtype=np.int64)
    placed = _placed(scored, extender, np.maximum(best[:count], 0))  # rows of unplaced reads: not used
    first, second_mate = 2 * pairs, 2 * pairs + 1
    orientation, distance = _insert(placed, placed, first, second_mate)
    same = (placed.contig[first] == placed.contig[second_mate]) & (distance <= MAX_INSERT)
    return orientation[same].astype(np.int8), distance[same].astype(np.int64)


@dataclass
class PairChoice:
    """Each read's chosen window (-1: none), the score it was chosen by, the best score among its
    other alignments, its MAPQ, and whether its pair is proper."""

    window: np.ndarray
    score: np.ndarray
    second: np.ndarray
    mapq: np.ndarray
    proper: np.ndarray


def _subset(placed: Placed, rows: np.ndarray) -> Placed:
    return Placed(*(getattr(placed, name)[rows] for name in ("window", "read", "reverse", "start", "end", "contig", "score")))


def _candidates(scored: Scored, extender: Extender, penalty: int, reads: np.ndarray | None = None) -> Placed:
    """Windows that could take part in a pair beating the unpaired choice or counting as its
    sub-optimal: within penalty + SUBOPTIMAL_PAIR_DELTA + 1 of their read's best (only those of
    the reads in the mask ``reads``, if given)."""
    windows = scored.windows
    best = scored.best_score[windows.read]
    wanted = (scored.best[windows.read] >= 0) & (scored.score >= best - (penalty + SUBOPTIMAL_PAIR_DELTA + 1))
    if reads is not None:
        wanted &= reads[windows.read]
    return _placed(scored, extender, one_a_place(scored, np.flatnonzero(wanted)))


def one_a_place(scored: Scored, rows: np.ndarray) -> np.ndarray:
    """``rows`` (window indexes, ascending) less the copies of one place (extend's
    Places.clusters: overlapping seed windows, a rescue window over a seed window, a clipped and
    an unclipped copy): of each place, the read's best window when it is there, else the best
    scoring (ties: the first). A place found twice would otherwise pair twice with its mate's,
    and the copy would be the pair's own second best."""
    if len(rows) < 2:
        return rows
    read = scored.windows.read
    ordered, cluster = scored.places().clusters(read, rows)
    ranked = lexsort((ordered, -scored.score[ordered].astype(np.int64), ordered != scored.best[read[ordered]], cluster))
    ordered, cluster = ordered[ranked], cluster[ranked]
    return np.sort(ordered[np.r_[True, cluster[1:] != cluster[:-1]]])


def _joined(placed: Placed, found: tuple, again: Placed, found_again: tuple, redo: np.ndarray) -> tuple[Placed, tuple]:
    """best_pairs' results for every pair, from ``found`` (over the candidates ``placed``) and,
    for the pairs in the mask ``redo``, ``found_again`` (over ``again``): one candidate list
    (``placed`` then ``again``) and the columns of each. A pair's choice depends on its own
    candidates alone, so this is what a search over every pair's candidates would give."""
    a, b, best, best_score, second_score, suboptimal = found
    a_again, b_again, best_again, *rest_again = found_again
    joined = Placed(*(np.concatenate((getattr(placed, name), getattr(again, name))) for name in Placed.__dataclass_fields__))
    shift = len(placed.read)
    columns = (np.concatenate((a, a_again + shift)), np.concatenate((b, b_again + shift)))
    best = np.where(redo, np.where(best_again >= 0, best_again + len(a), -1), best)
    return joined, (*columns, best, *(np.where(redo, new, old) for old, new in zip((best_score, second_score, suboptimal), rest_again)))


def _combinations(placed: Placed) -> tuple[np.ndarray, np.ndarray]:
    """Every (R1 candidate, R2 candidate) of each pair, as indexes into ``placed``."""
    pair = placed.read // 2
    order = np.argsort(placed.read, kind="stable")
    ones, twos = order[placed.read[order] % 2 == 0], order[placed.read[order] % 2 == 1]
    pairs = int(pair.max(initial=-1)) + 1
    twos_per_pair = np.bincount(pair[twos], minlength=pairs)
    twos_start = np.concatenate(([0], np.cumsum(twos_per_pair)))[:-1]
    repeats = twos_per_pair[pair[ones]]
    a = np.repeat(ones, repeats)
    b = twos[segment_ranges(twos_start[pair[ones]], repeats)]
    return a, b


def _keys(extender: Extender, placed: Placed):
    """A tie-breaker for equally scored pairs: a hash of the two windows' places and the pair's
    first read's bases, so repeats spread over their copies as bwa's hashed pair index does,
    while the same input gives the same choice whatever the chunking."""
    return lambda a, b: _pair_keys(extender, placed, a, b)


def _pair_keys(extender: Extender, placed: Placed, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        starts = (placed.start[a].astype(np.uint64) << np.uint64(1)) ^ (placed.start[b].astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))
    reads = placed.read[a]
    return mix(starts ^ _read_hashes(extender.chunk, reads))


def _read_hashes(chunk, reads: np.ndarray) -> np.ndarray:
    """:func:`read_hashes` of each of ``reads`` (repeats allowed)."""
    if len(reads) == 0:
        return np.zeros(0, dtype=np.uint64)
    distinct = unique(reads)
    return read_hashes(chunk.codes, chunk.offsets, distinct)[np.searchsorted(distinct, reads)]


def best_pairs(placed: Placed, model: InsertModel, penalties: np.ndarray, count_pairs: int, keys):
    """For each of ``count_pairs`` pairs, from the candidates ``placed`` (reads 2k and 2k + 1):
    the best concordant pair of candidates (forward-reverse on one contig, insert size within
    the model's bounds), as an index into the returned candidate columns ``a`` and ``b`` (-1:
    none); its score ``S1 + S2 + penalties[size - low]`` (at least 0); the second best pair
    score (0: none); and the number of pairs other than the best within SUBOPTIMAL_PAIR_DELTA
    of that second best (bwa's n_sub). Equal scores are ordered by ``keys(a, b)`` (uint64, the
    largest wins), computed only for pairs tied at the top."""
    a, b = _combinations(placed)
    orientation, distance = _insert(placed, placed, a, b)
    fits = (placed.contig[a] == placed.contig[b]) & (orientation == FR) & (distance >= model.low) & (distance <= model.high)
    a, b, distance = a[fits], b[fits], distance[fits]
    score = np.maximum(placed.score[a] + placed.score[b] + penalties[distance - model.low], 0)
    pair = placed.read[a] // 2
    top = np.zeros(count_pairs, dtype=np.int64)
    np.maximum.at(top, pair, score)
    at_top = score == top[pair]
    tied = at_top & (np.bincount(pair[at_top], minlength=count_pairs)[pair] > 1)
    key = np.zeros(len(pair), dtype=np.uint64)
    key[tied] = keys(a[tied], b[tied])
    order = lexsort((key, score, pair))  # by pair, then score, then key: the best last
    a, b, score, pair = a[order], b[order], score[order], pair[order]
    best = np.full(count_pairs, -1, dtype=np.int64)
    best_score = np.zeros(count_pairs, dtype=np.int64)
    second_score = np.zeros(count_pairs, dtype=np.int64)
    suboptimal = np.zeros(count_pairs, dtype=np.int64)
    if len(pair):
        last = np.flatnonzero(np.r_[pair[1:] != pair[:-1], True])
        best[pair[last]] = last
        best_score[pair[last]] = score[last]
        has_second = np.r_[False, pair[1:] == pair[:-1]][last]
        second_score[pair[last[has_second]]] = score[last[has_second] - 1]
        others = np.ones(len(pair), dtype=bool)
        others[last] = False
        near = others & (score >= second_score[pair] - SUBOPTIMAL_PAIR_DELTA)
        suboptimal = np.bincount(pair[near], minlength=count_pairs)
    return a, b, best, best_score, second_score, suboptimal


def rescue_anchors(placed: Placed, concordant: np.ndarray, best_score: np.ndarray, reportable: np.ndarray, penalty: int,
                   most: int = MAX_ANCHORS) -> np.ndarray:
    """The candidates (indexes into ``placed``) that mate rescue starts from, as bwa's
    mem_matesw: each read's candidates scoring at least its best (``best_score``, by read) less
    ``penalty``, that reach the reporting minimum (the mask ``reportable``, by candidate) and
    have no concordant partner among their mate's candidates (the mask ``concordant``, by
    candidate); at most ``most`` a read, best first (ties: leftmost, then forward). One a
    projected place: windows of one alignment found twice would only ask for the same rescue
    window twice. Sorted by read, then that rank."""
    rows = np.flatnonzero(~concordant & reportable & (placed.score >= best_score[placed.read] - penalty))
    rows = rows[lexsort((placed.reverse[rows], placed.start[rows], -placed.score[rows], placed.read[rows]))]
    read, reverse, start = placed.read[rows], placed.reverse[rows], placed.start[rows]
    # Two windows of one place lie anywhere in their read's run (sorted by score first, and
    # two windows may score one place a little differently): the first of each place is kept.
    by_place = lexsort((np.arange(len(rows)), start, reverse, read))
    read, reverse, start = read[by_place], reverse[by_place], start[by_place]
    again = np.zeros(len(rows), dtype=bool)
    again[1:] = (read[1:] == read[:-1]) & (reverse[1:] == reverse[:-1]) & (start[1:] == start[:-1])
    distinct = np.ones(len(rows), dtype=bool)
    distinct[by_place[again]] = False
    rows = rows[distinct]
    return rows[run_ranks(placed.read[rows]) < most]


def _rescue_windows(extender: Extender, model: InsertModel, anchor: Placed) -> tuple[Windows, np.ndarray]:
    """Windows where the mates of the ``anchor`` alignments must lie if those are right: for a
    forward anchor projecting to start s, its mate on the reverse strand ending in s + low ..
    s + high; for a reverse anchor ending at e, its mate forward starting in e - high ..
    e - low; with RESCUE_MARGIN bases each side, inside the anchor's contig (one window an
    anchor, the same window asked for twice made once). Also the mask of reads given windows."""
    count, index = extender.count, extender.index
    mate = anchor.read ^ 1
    mate_length = extender.lengths[mate]
    forward = ~anchor.reverse
    start = np.where(forward, anchor.start + model.low - mate_length, anchor.end - model.high) - RESCUE_MARGIN
    end = np.where(forward, anchor.start + model.high, anchor.end - model.low + mate_length) + RESCUE_MARGIN
    contig_start = index.contig_starts[anchor.contig]
    contig_end = contig_start + index.contig_lengths[anchor.contig]
    start, end = np.maximum(start, contig_start), np.minimum(end, contig_end)
    usable = (end - start >= np.maximum(mate_length // 2, 1)) & (mate_length > 0)
    mate, forward, start, end = mate[usable], forward[usable], start[usable], end[usable]
    order = lexsort((end, start, forward, mate))
    mate, forward, start, end = mate[order], forward[order], start[order], end[order]
    fresh = np.ones(len(mate), dtype=bool)
    fresh[1:] = (mate[1:] != mate[:-1]) | (forward[1:] != forward[:-1]) | (start[1:] != start[:-1]) | (end[1:] != end[:-1])
    windows = Windows(read=mate[fresh], reverse=forward[fresh], start=start[fresh], end=end[fresh], hits=np.zeros(int(fresh.sum()), dtype=np.int64))
    rescued = np.zeros(count, dtype=bool)
    rescued[windows.read] = True
    return windows, rescued


def pair_quality(pair_score, against, suboptimal, repetitive_first, repetitive_second, match: int) -> np.ndarray:
    """bwa's pair MAPQ (``mem_sam_pe``), int64 0..60, of pairs scoring ``pair_score`` against
    ``against`` (the better of the second best pair and the unpaired choice), with
    ``suboptimal`` other pairs near the second best: ``int(6.02 (o - against) / a + 0.499)``
    less ``int(4.343 ln(n + 1) + 0.499)`` when n > 0, clipped to 0..60, then scaled by
    ``1 - (r1 + r2) / 2``, the mean of the mates' repetitive shares (mapping_quality's
    ``repetitive``, bwa's frac_rep). A pair half in a microsatellite lifts its mate there by
    at most 30 (a pair of a microsatellite mate and a unique one pins the array, not the
    read's place along it). On 50,000 pairs of bench/human_genome.py's 0.3 Gbp genome (2 x 150,
    fragments 400 +/- 40) mates wrong at MAPQ >= 40 went from 26 to 10 and at MAPQ >= 20 from
    31 to 27 (bwa mem: 71, 84), mates at MAPQ 60 from 97.60% to 97.24% (bwa mem 97.17%);
    yeast and chr20 mason pairs unchanged."""
    quality = np.floor(6.02 * (np.asarray(pair_score) - np.asarray(against)) / match + 0.499).astype(np.int64)
    quality -= suboptimal_penalty(suboptimal).astype(np.int64)
    quality = np.clip(quality, 0, MAXIMUM_MAPQ)
    share = 0.5 * (np.clip(np.asarray(repetitive_first, dtype=np.float64), 0, 1) + np.clip(np.asarray(repetitive_second, dtype=np.float64), 0, 1))
    return repeat_scaled(quality, share).astype(np.int64)


def choose_pairs(scored: Scored, extender: Extender, model: InsertModel, penalty: int = AlignOptions.unpaired_penalty) -> tuple[Scored, PairChoice]:
    """Rescue lonely mates, then choose each pair's alignments and their MAPQ (see the module
    docstring). Returns the scored windows (with the rescue windows) and the choice."""
    count, scoring = extender.count, extender.scoring
    pairs = count // 2
    penalties = model.penalties(scoring.match) if not model.failed else np.zeros(0, dtype=np.int64)
    if not model.failed:
        placed = _candidates(scored, extender, penalty)
        found = best_pairs(placed, model, penalties, pairs, _keys(extender, placed))
        a, b = found[:2]
        # As bwa's mem_matesw: every alignment of a read within the unpaired penalty of its
        # best whose mate has no candidate concordant with it is an anchor, even where other
        # candidates of the pair are concordant. In a repeat the mate's true place may have
        # lost its window to the family's other copies, and the read's own true place may tie
        # with (or trail by a mismatch) a copy whose mate window was kept: rescuing from the
        # best alone missed those pairs.
        concordant = np.zeros(len(placed.read), dtype=bool)
        concordant[a] = True
        concordant[b] = True
        reportable = placed.score + 2 * scoring.clip_bonus >= extender.minimum()[placed.read]
        anchors = rescue_anchors(placed, concordant, scored.best_score, reportable, penalty)
        extra, rescued = _rescue_windows(extender, model, _subset(placed, anchors))
        if len(extra):  # the rescued pairs' candidates change: those pairs searched again
            scored = extender.add(scored, extra, rescued)
            redo = rescued[0::2] | rescued[1::2]
            again = _candidates(scored, extender, penalty, np.repeat(redo, 2))
            found_again = best_pairs(again, model, penalties, pairs, _keys(extender, again))
            placed, found = _joined(placed, found, again, found_again, redo)
    window, chosen_score = scored.best.copy(), scored.best_score.copy()
    second = scored.second_score.copy()
    tandem = extender.tandem(scored, window)
    repetitive = extender.repeat_share(scored, window, tandem)
    mapq = mapping_quality(np.where(window >= 0, chosen_score, 0), second, extender.lengths, scoring, scored.suboptimal, tandem, repetitive)
    proper = np.zeros(count, dtype=bool)
    if model.failed:
        return scored, PairChoice(window, chosen_score, second, mapq, proper)
    a, b, best, pair_score, second_pair, suboptimal = found
    both = (scored.best[0::2] >= 0) & (scored.best[1::2] >= 0)
    unpaired = np.where(both, scored.best_score[0::2] + scored.best_score[1::2] - penalty, np.iinfo(np.int64).min // 4)
    wins = np.flatnonzero((best >= 0) & (pair_score > unpaired))
    if len(wins):
        for mate, rows in ((0, a), (1, b)):
            reads = 2 * wins + mate
            chosen = placed.window[rows[best[wins]]]
            window[reads] = chosen
            chosen_score[reads] = scored.score[chosen]
        # The best among the read's alignments at other places than the chosen (its own best
        # when another place was chosen; not a copy of the chosen one, which may be the best).
        paired = np.zeros(count, dtype=bool)
        paired[2 * wins], paired[2 * wins + 1] = True, True
        second[paired] = rival_scores(scored.windows.read, scored.score, count, scored.places(), window, paired)[paired]
        moved = window != scored.best  # the pair chose another window: its tandem score and share anew
        if moved.any():
            moved_window = np.where(moved, window, -1)
            moved_tandem = extender.tandem(scored, moved_window)
            repetitive = np.where(moved, extender.repeat_share(scored, moved_window, moved_tandem), repetitive)
            tandem = np.where(moved, moved_tandem, tandem)
        # The mate's own MAPQ is not scaled by its repetitive share here (bwa's is): the share
        # stands in for a single read whose own array is missing from its windows, and a pair's
        # rescue window holds the mate's array; the pair MAPQ is, since the pair pins the array,
        # not the mate's place along it. Scaling both (bwa's full model) took 2.3% of the mates
        # of a human-like genome from MAPQ 60, to below bwa's share (see pair_quality).
        single = mapping_quality(chosen_score, second, extender.lengths, scoring, scored.suboptimal, tandem).astype(np.int64)
        against = np.maximum(second_pair[wins], unpaired[wins])
        pair_mapq = pair_quality(pair_score[wins], against, suboptimal[wins], repetitive[2 * wins], repetitive[2 * wins + 1], scoring.match)
        # A pair is as unique as its candidates are complete. When each mate alone has another
        # place about as good as its best (within a mismatch), CROWDED or more such places, and
        # as many seed windows as a read keeps (windows_per_read: the list was cut), both lie in
        # a family of more copies than were kept, and the one pair found may be one of several
        # whose other copies fell out: no lift. Other mates with near rivals have them all
        # among their windows, and those pairs weigh in the pair MAPQ as bwa's do. (The rule
        # before issue 28, no lift for every pair of mates with near rivals, left two-copy
        # segmental duplications unlifted where bwa mem lifts them: on 100,000 mason pairs, 2 x
        # 150, fragments 400 +/- 60, mates at MAPQ >= 20 went from 95.445% to 96.176% on yeast
        # (bwa mem 96.281%), wrong among them 0 -> 2 (bwa 4), and from 99.500% to 99.615% on
        # chr20 (bwa 99.672%), wrong 1 -> 1 (bwa 1). CROWDED alone: yeast 96.081% (2 wrong);
        # the cut window list alone: 96.053% (0), chr20 99.549% (1); no rule at all: 96.336%
        # (4) and 99.683% (1).)
        seeded = np.bincount(scored.windows.read[scored.windows.hits > 0], minlength=count)  # pair rescue's have no hits
        crowded = (scored.suboptimal >= CROWDED) & (seeded >= extender.options.seed.windows_per_read)
        ambiguous = (scored.second_score >= scored.best_score - extender.delta) & crowded
        pair_mapq = np.where(ambiguous[2 * wins] & ambiguous[2 * wins + 1], 0, pair_mapq)
        for mate in (0, 1):
            reads = 2 * wins + mate
            own = single[reads]
            lifted = np.where(own < pair_mapq, np.minimum(pair_mapq, own + 40), own)
            # bwa's tandem cap: a mate that aligns about as well one repeat unit away stays
            # unsure of its place however unique its pair.
            tandem_cap = np.floor(6.02 * (chosen_score[reads] - tandem[reads]) / scoring.match + 0.499)
            mapq[reads] = np.where(tandem[reads] != NO_SCORE, np.clip(np.minimum(lifted, tandem_cap), 0, None), lifted)
            proper[reads] = True
    return scored, PairChoice(window, chosen_score, second, mapq.astype(np.uint8), proper)
