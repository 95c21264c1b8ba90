"""bowmap: a short-read aligner whose heavy stages run as OpenCL kernels.

The same code runs on NVIDIA, AMD and Intel GPUs and on CPUs through PoCL. See DESIGN notes in
the README for the two phases (``bowmap index``, ``bowmap align``) and the kernel modules.
"""

__version__ = "0.1.0"
