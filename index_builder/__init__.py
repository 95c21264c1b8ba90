"""`bowmap index`: the build of the blocked FM-index (installed as :mod:`bowmap.index_builder`):
the reference read (:mod:`.fasta`), cut into blocks sized to device memory (:mod:`.blocks`), each
block's BWT, occurrence lines and sampled suffix array (:mod:`.fm_block`), written atomically
(:mod:`.build`).

Imports :mod:`bowmap.runtime` and :mod:`bowmap.index` only.
"""
