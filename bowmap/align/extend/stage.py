"""The extend stage's entry: a chunk and its candidate windows -> its alignments, one function
of the chunk for single-end and paired reads (:func:`extend_chunk`), and the paired model's
sample chunk -> its confident pairs' observations (:func:`pair_observations`).

Each scores every window by Smith-Waterman (:class:`bowmap.align.extend.extender.Extender`),
then, single-end, takes each read's best; paired, chooses each pair's alignments under the
chunk's insert-size model (:func:`bowmap.align.extend.pairs.choose_pairs`); then traces them and
adds the records beyond the primary (:func:`bowmap.align.extend.records.chunk_alignments`).
"""

from __future__ import annotations

from dataclasses import dataclass

from bowmap.align.extend.extender import Extender
from bowmap.align.extend.pairs import choose_pairs, sample_observations
from bowmap.align.extend.records import chunk_alignments


@dataclass
class ExtendKernels:
    """The extend stage's kernels beside Smith-Waterman, on its queue: the tandem scores
    (:class:`bowmap.align.extend.tandem.TandemKernel`) and the windows' ranking
    (:class:`bowmap.align.extend.ranking.RankKernel`). None: made by NumPy, their references."""

    tandem: object | None = None
    ranking: object | None = None

    @classmethod
    def on(cls, device, queue, device_text, ranking: bool = False) -> ExtendKernels:
        """The kernels on ``device``'s ``queue``; the ranking's only with ``ranking`` (see
        bowmap.align.extend.ranking.on_device_by_default)."""
        from bowmap.align.extend.ranking import RankKernel
        from bowmap.align.extend.tandem import TandemKernel

        return cls(TandemKernel(device, queue, device_text), RankKernel(device, queue) if ranking else None)


def extend_chunk(device_text, index, smith_waterman, chunk, windows, scoring, options, rescuer=None, kernels=None):
    """A chunk's records (``ChunkAlignments``): Smith-Waterman over every candidate window, the
    traceback of each read's best (a paired chunk: of each pair's choice, under
    ``chunk.insert_model``), and its other records (:func:`chunk_alignments`).

    With a ``rescuer`` (a SeedFilter on ``smith_waterman``'s queue: it reads the chunk's reads
    sent there), reads whose best alignment is poor (``rescue_mismatches`` or more below a
    perfect match, or none) get the windows of dense seeds too (:meth:`SeedFilter.rescue_windows`),
    scored and ranked with the others; a pair's missing mates are rescued with it.
    ``kernels``: the :class:`ExtendKernels` on the same queue
    (None: the tandem scores and the ranking by NumPy, their references)."""
    extender = Extender(device_text, index, smith_waterman, chunk, scoring, options, kernels)
    scored = extender.scored(windows, rescuer)
    if not chunk.paired:
        return chunk_alignments(extender, scored, scored.best, scored.best_score, scored.second_score, scored.suboptimal, rescuer=rescuer)
    scored, choice = choose_pairs(scored, extender, chunk.insert_model, options.unpaired_penalty)
    return chunk_alignments(extender, scored, choice.window, choice.score, choice.second, scored.suboptimal, choice.mapq, choice.proper,
                            rescuer=rescuer)


def pair_observations(device_text, index, smith_waterman, chunk, windows, scoring, options, rescuer=None, kernels=None) -> tuple:
    """The paired model's sample chunk (no ``insert_model`` yet), its mates mapped as single
    reads: the orientations and insert sizes of its confident pairs
    (:func:`bowmap.align.extend.pairs.sample_observations`)."""
    extender = Extender(device_text, index, smith_waterman, chunk, scoring, options, kernels)
    return sample_observations(extender.scored(windows, rescuer), extender)
