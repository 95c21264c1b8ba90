"""The output stage: a chunk's alignments -> SAM text, and what the writer shows beside it.

:mod:`.sam` formats a chunk's records with NumPy (:mod:`.sam_text`: its text matrices);
:mod:`.sam_fields` owns the kernel that makes the CIGAR text, NM and MD on the device instead;
:mod:`.reference` holds the SAM header and the reference as SAM reads it (RNAME, NM, MD);
:mod:`.progress` is the progress bar the writer drives. The writer itself, which orders chunks,
is :mod:`bowmap.align.runners`'s; the file it writes, :mod:`bowmap.runtime.output`'s.
"""
