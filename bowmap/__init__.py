"""bowmap: a short-read aligner whose heavy stages run as OpenCL kernels.

The same code runs on NVIDIA, AMD and Intel GPUs and on CPUs through PoCL. See the README for
the two phases (``bowmap index``, ``bowmap align``) and the kernel modules.
"""

import os as _os

__version__ = "0.1.0"

# Installed, the subpackages bowmap.opencl and bowmap.index_builder come from the repository's
# top-level folders opencl/ and index_builder/ (pyproject.toml maps them). In a checkout used
# through PYTHONPATH alone, nothing maps them: let the package look beside itself too.
_checkout = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if _os.path.isfile(_os.path.join(_checkout, "pyproject.toml")) and _os.path.isdir(_os.path.join(_checkout, "index_builder")):
    __path__.append(_checkout)
