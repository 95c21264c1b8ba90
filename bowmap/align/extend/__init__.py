"""The extend stage: candidate windows -> Smith-Waterman -> each read's alignments and records.

:mod:`.smith_waterman` owns the Smith-Waterman kernels (``opencl/align/smith_waterman.cl``);
:mod:`.extender` scores a chunk's windows, ranks them and traces each read's best; :mod:`.records`
adds the records beyond the primary (XA, secondary, supplementary); :mod:`.pairs` chooses each
pair's alignments and rescues mates; :mod:`.tandem` and :mod:`.mapq` give the mapping quality;
:mod:`.stage` is the stage's entry, a function of a whole chunk, single-end or paired.
"""
