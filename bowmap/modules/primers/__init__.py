"""`bowmap primers`: the kernel owner and Python API (:mod:`.kernels`) and the NumPy reference
(:mod:`.reference`) of ``opencl/modules/primers*.cl``.

Owner of ``opencl/modules/primers.cl``, ``primers_fine.cl`` and ``primers_conventional.cl``: k-difference primers.

Imports :mod:`bowmap.runtime` (and :mod:`bowmap.modules.edit_distance`) only.
"""
