"""`bowmap asm`: the kernel owner and Python API (:mod:`.kernels`) and the NumPy reference
(:mod:`.reference`) of ``opencl/modules/asm*.cl``.

Owner of ``opencl/modules/asm.cl``: approximate string matching (ASM) on an OpenCL device.

Imports :mod:`bowmap.runtime` (and :mod:`bowmap.modules.edit_distance`) only.
"""
