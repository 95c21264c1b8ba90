"""`bowmap closest-substring`: the kernel owner and Python API (:mod:`.kernels`) and the NumPy reference
(:mod:`.reference`) of ``opencl/modules/closest_substring*.cl``.

The closest substring problem: owner of ``opencl/modules/closest_substring.cl`` and the Python API.

Imports :mod:`bowmap.runtime` only.
"""
