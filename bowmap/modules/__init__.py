"""The extra kernel modules, one package each: :mod:`.primers` (k-difference primers),
:mod:`.closest_substring`, :mod:`.motifs` (all-to-all motif finding) and :mod:`.asm`
(approximate string matching). Each holds its kernel owner (``kernels``), its NumPy reference
(``reference``) and its Python API; nothing outside a package reaches into it but its command.
:mod:`.edit_distance` is the textbook DP two references share.

Imports :mod:`bowmap.runtime` only.
"""
