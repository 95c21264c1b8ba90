"""OpenCL C kernel sources of bowmap, shipped as package data (``bowmap.opencl``).

Grouped as the Python code is: ``align/`` (FM search, seed windows, Smith-Waterman, SAM fields;
owners in :mod:`bowmap.align`) and ``modules/`` (the extra kernel modules; owners in :mod:`bowmap.modules`).
Each ``.cl`` file has exactly one Python owner module, which builds it through
:func:`bowmap.runtime.devices.DeviceContext.program` (by its path here, ``"align/fm_search.cl"``)
and is the only code that launches its kernels. ``#include "x.h"`` names a header beside the
including file, ``#include "fm/x.h"`` one under ``opencl/``: code that kernels of ``align/`` and
``modules/`` share lives in such folders, ``fm/`` (FM-index rank, LF and the sampled rows of
align/fm_search.cl and modules/find.cl) and ``sw/`` (the packed 16-bit lanes of
align/smith_waterman.cl and modules/sw_search.cl).
"""
