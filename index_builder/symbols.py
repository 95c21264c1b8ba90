"""Protein and text references (``bowmap index --alphabet protein|text``): reading them, and
building one block's wavelet matrix, marks and SA samples (layouts: :mod:`bowmap.index.alphabet`).

A block is built wholly in memory from its slice of the ``.sym`` file: its symbols (n bytes), the
int32 suffix array (4n), the BWT codes and the wavelet levels' sequences (about 3n), so a block
peaks near 9n bytes, beside DNA's 5n (index_builder/memory.py's model is DNA's; see docs/find.md).
"""

from __future__ import annotations

import os
import time

import numpy as np
import pydivsufsort

from bowmap.index.alphabet import PROTEIN_UPPER, PROTEIN_VALID, build_wavelet, encode_table, levels_for
from bowmap.index.format import build_marks
from bowmap.index_builder.fasta import Reference
from bowmap.index_builder.fm_block import HashedFile, limit_openmp_threads, peak_resident_bytes
from bowmap.runtime.errors import BowmapError
from bowmap.runtime.fasta import invalid_symbol_error, iter_fasta
from bowmap.runtime.files import read_bytes

# Contig names of protein and text indexes: printed as CONTIG:OFFSET in a TSV line.
_BAD_NAME_BYTES = ("\t", "\n", "\r")


def read_protein(path: str) -> Reference:
    """Protein FASTA -> Reference whose ``codes`` are the uppercase letters' bytes (A-Z, '*')."""
    parts, names, lengths = [], [], []
    for record in iter_fasta(path, unique_names=True):
        error = invalid_symbol_error(path, record, PROTEIN_VALID)
        if error is not None:
            raise error
        parts.append(PROTEIN_UPPER[np.frombuffer(record.sequence, dtype=np.uint8)])
        names.append(record.name)
        lengths.append(len(record.sequence))
        del record
    return _reference(path, names, lengths, np.concatenate(parts))


def read_text(path: str) -> Reference:
    """A file's raw bytes as one contig named after the file's base name; a 0 byte or an empty
    file is an error."""
    data = np.frombuffer(read_bytes(path), dtype=np.uint8)
    if len(data) == 0:
        raise BowmapError(f"{path}: empty file, nothing to index")
    zero = np.flatnonzero(data == 0)
    if len(zero):
        raise BowmapError(
            f"{path}: byte {int(zero[0])} (0-based) is 0; a text index holds bytes 1-255 only"
        )
    name = os.path.basename(path)
    if not name or any(byte in name for byte in _BAD_NAME_BYTES):
        raise BowmapError(f"{path}: the file's name cannot name the contig (it holds a tab or line break)")
    return _reference(path, [name], [len(data)], data.copy())


def _reference(path: str, names: list[str], lengths: list[int], codes: np.ndarray) -> Reference:
    lengths = np.array(lengths, dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    return Reference(path=path, names=names, lengths=lengths, starts=starts, codes=codes)


def write_symbol_text(folder: str, name: str, codes: np.ndarray) -> dict:
    """The reference's symbols, one byte each, as ``folder/name``; its manifest entry."""
    text = HashedFile(folder, name)
    try:
        text.write(codes)
    finally:
        text.handle.close()
    return text.close()


def write_symbol_block(
    sym_path: str, start: int, length: int, sa_sample: int, folder: str, stem: str, openmp_threads: int,
    symbols: list[int], alphabet: str,
) -> dict:
    """Build the block of ``length`` symbols from ``start`` of ``sym_path``: ``folder/stem.wm``,
    ``.mrk`` and ``.sa``. Returns the block's manifest fields (primary, symbol_counts per code,
    zeros per level, files) with ``seconds`` and ``peak_bytes``, as fm_block.write_block does."""
    started = time.perf_counter()
    limit_openmp_threads(openmp_threads)
    text = np.fromfile(sym_path, dtype=np.uint8, count=length, offset=start)
    codes = encode_table(np.array(symbols, dtype=np.uint8), "text")[text]
    del text
    n = length
    suffix_array = pydivsufsort.divsufsort(codes)
    primary = int(np.argmin(suffix_array)) + 1
    # Row r >= 1 is preceded by codes[SA[r - 1] - 1]; row 0 (the empty suffix) by the last
    # symbol; the stored BWT drops row `primary` ("$"), as format.py describes for DNA.
    bwt = np.empty(n + 1, dtype=np.uint8)
    bwt[0] = codes[n - 1]
    bwt[1:] = codes[suffix_array - 1]
    stored = np.delete(bwt, primary)
    del bwt
    marked_rows = (np.flatnonzero(suffix_array % sa_sample == 0) + 1).astype(np.int64)
    samples = suffix_array[marked_rows - 1].astype("<u4")
    del suffix_array
    counts = np.bincount(codes, minlength=len(symbols)).astype(np.int64)
    del codes
    lines, zeros = build_wavelet(stored, levels_for(len(symbols)))
    del stored
    files = {}
    for key, suffix, array in (("wm", "wm", lines), ("mrk", "mrk", build_marks(marked_rows, n)), ("sa", "sa", samples)):
        handle = HashedFile(folder, f"{stem}.{suffix}")
        try:
            handle.write(array)
        finally:
            handle.handle.close()
        files[key] = handle.close()
    return {
        "primary": primary,
        "symbol_counts": counts.tolist(),
        "zeros": zeros.tolist(),
        "files": files,
        "seconds": time.perf_counter() - started,
        "peak_bytes": peak_resident_bytes(),
    }
