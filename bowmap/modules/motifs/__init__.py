"""`bowmap motifs`: the kernel owner and Python API (:mod:`.kernels`) and the NumPy reference
(:mod:`.reference`) of ``opencl/modules/motifs*.cl``.

All-to-all motif finding with multi-level hash tables: table construction (vectorised NumPy),
the owner of ``opencl/modules/motifs.cl``, and the Python API of ``bowmap motifs``.

Imports :mod:`bowmap.runtime` only.
"""
