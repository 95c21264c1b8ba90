"""OpenCL C kernel sources of bowmap, shipped as package data (``bowmap.opencl``).

Each ``.cl`` file has exactly one Python owner module in ``bowmap``, which builds it through
:func:`bowmap.devices.DeviceContext.program` and is the only code that launches its kernels.
"""
