"""`bowmap find`: every exact occurrence of patterns in a DNA, protein or text index, searched on
the device (backward search and locate, ``opencl/modules/find.cl``).

:mod:`.kernels` owns the kernels, :mod:`.reference` is their NumPy twin and the Python
substring-search ground truth, :mod:`.search` reads patterns, drives blocks and devices and
formats the output.
"""
