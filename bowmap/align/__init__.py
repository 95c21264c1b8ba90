"""`bowmap align`: a package a stage, in the order data flows through them::

    reads/ -> seed/ -> extend/ -> output/

:mod:`.reads` parses FASTQ/FASTA into chunks of NumPy arrays; :mod:`.seed` cuts them into seeds,
searches and locates them on the device and merges the hits into candidate windows;
:mod:`.extend` scores the windows by Smith-Waterman, traces each read's best, chooses pairs and
the records beyond the primary, and gives MAPQ; :mod:`.output` formats a chunk's SAM text and
holds the header and the progress bar. :mod:`.workers` puts the stages on a device queue (and
in worker processes); :mod:`.runners` moves chunks through them serially, in threads or in
processes and writes the results in input order; :mod:`.run` wires it all; :mod:`.options`
holds the run's options. :mod:`.references` holds the NumPy twins of the align kernels.

Imports :mod:`bowmap.runtime` and :mod:`bowmap.index` only.
"""
