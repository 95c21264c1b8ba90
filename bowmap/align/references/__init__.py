"""Plain NumPy references of the align kernels (``opencl/align/``): the same functions, written
for clarity. Tests run each kernel and its reference on the same random inputs and compare
exactly.
"""
