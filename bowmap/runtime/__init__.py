"""What every part of bowmap stands on: OpenCL devices, the program cache and reused buffers
(:mod:`.devices`), output files written atomically (:mod:`.output`), input files and FASTA
(:mod:`.files`, :mod:`.fasta`), errors (:mod:`.errors`) and small NumPy helpers (:mod:`.arrays`).

Imports nothing else of bowmap.
"""
