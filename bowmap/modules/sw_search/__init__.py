"""`bowmap sw-search`: Smith-Waterman database search (local alignment scores, affine gaps) of
protein or DNA queries against a database. :mod:`.scoring` (matrices, gaps, residue codes),
:mod:`.reference` (the NumPy reference), :mod:`.kernels` (the owner of
``opencl/modules/sw_search.cl``: intertask and intratask kernels) and :mod:`.search` (the API:
batches, devices, best hits).

Imports :mod:`bowmap.runtime` only.
"""
