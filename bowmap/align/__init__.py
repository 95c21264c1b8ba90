"""`bowmap align`: one module a stage, in the order data flows through them::

    reads -> seeds -> windows -> extend -> mapq -> sam

:mod:`.reads` parses FASTQ/FASTA into chunks of NumPy arrays; :mod:`.seeds` cuts them into
seeds; :mod:`.windows` searches and locates them (:mod:`.fm_search`, the FM kernels' owner) and
merges the hits into candidate windows; :mod:`.extend` scores the windows by Smith-Waterman
(:mod:`.smith_waterman`, the kernels' owner) and traces each read's best; :mod:`.mapq` gives its
mapping quality; :mod:`.sam` formats the chunk. :mod:`.pipeline` moves chunks through threads
and processes and writes them in input order; :mod:`.workers` puts the stages on a device queue;
:mod:`.run` wires it all; :mod:`.options` holds the run's options. :mod:`.references` holds the
NumPy twins of the align kernels.

Imports :mod:`bowmap.runtime` and :mod:`bowmap.index` only.
"""
