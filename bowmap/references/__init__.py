"""Plain NumPy references of bowmap's OpenCL kernels: the same functions, written for clarity.

Tests run each kernel and its reference on the same random inputs and compare exactly.
"""
