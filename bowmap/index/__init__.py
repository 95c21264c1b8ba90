"""The FM-index on disk: its format (:mod:`.format`: file layout, occurrence lines, sampled
suffix array) and its loading and checking (:mod:`.load`). The build lives in the top-level
``index_builder/`` (installed as :mod:`bowmap.index_builder`).

Imports :mod:`bowmap.runtime` only.
"""
