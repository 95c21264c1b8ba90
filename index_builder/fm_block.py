"""One index block: suffix array (pydivsufsort) -> BWT -> occurrence lines, marks, SA samples.

:func:`write_block` is what the build runs, in the build's own process or in a worker process:
it reads its slice of the packed reference from the ``.pac`` file being written and streams the
occurrence lines and samples to their files, so a block of n bases peaks near 5n bytes (the
text and its int32 suffix array) plus 4n/``sa_sample`` for the sampled rows.
:func:`build_block` is the same function held wholly in memory, kept as the plain reference the
tests compare the files with.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import time
from dataclasses import dataclass

import numpy as np
import pydivsufsort

from bowmap.index.format import (
    BASES_PER_LINE,
    UNPACK_2BIT,
    build_marks,
    build_occ_lines,
    line_count,
    occ_line_piece,
)

_CHUNK = 1 << 20  # suffix-array entries per step of build_block: temporaries of ~10 MB
# Occurrence lines per step of write_block: 2^15 lines are 6.3 M suffix-array rows, temporaries
# of ~60 MB, few enough steps that Python's loop costs nothing beside the sort.
_CHUNK_LINES = 1 << 15
_READ_BYTES = 1 << 22  # packed bytes read per step (16 M bases: temporaries of ~40 MB)


@dataclass
class BlockArrays:
    """Host arrays of one block, laid out as :mod:`bowmap.index.format` describes."""

    length: int  # n, bases in the block
    primary: int  # BWT row whose symbol is "$" (the row of the suffix starting at 0)
    symbol_counts: np.ndarray  # int64[4]: A, C, G, T in the block
    occ: np.ndarray  # uint32[lines, 16]
    marks: np.ndarray  # uint32[groups, 4]
    samples: np.ndarray  # uint32[marked rows]


def build_block(text: np.ndarray, sa_sample: int) -> BlockArrays:
    """Index ``text`` (codes 0..3, at least one base); every suffix starting at a multiple of
    ``sa_sample`` is sampled. The in-memory reference of :func:`write_block`."""
    n = len(text)
    suffix_array = pydivsufsort.divsufsort(np.ascontiguousarray(text, dtype=np.uint8))
    # Row r >= 1 of the full suffix array is suffix_array[r - 1]; row 0 is the empty suffix,
    # preceded by the last base. Worked through in chunks to keep temporaries small.
    primary = int(np.argmin(suffix_array)) + 1
    bwt_rows = np.empty(n + 1, dtype=np.uint8)
    bwt_rows[0] = text[n - 1]
    sampled_parts = []
    for first in range(0, n, _CHUNK):
        chunk = suffix_array[first : first + _CHUNK]
        bwt_rows[1 + first : 1 + first + len(chunk)] = text[chunk - 1]  # suffix 0 wraps: dropped below
        sampled_parts.append(np.flatnonzero(chunk % sa_sample == 0) + first)
    bwt_rows[primary:n] = bwt_rows[primary + 1 :]  # drop "$": the stored BWT has n symbols
    sampled = np.concatenate(sampled_parts)
    samples = suffix_array[sampled].astype(np.uint32)
    del suffix_array, chunk  # the loop's view would keep the whole suffix array alive
    return BlockArrays(
        length=n,
        primary=primary,
        symbol_counts=np.bincount(text, minlength=4).astype(np.int64),
        occ=build_occ_lines(bwt_rows[:n]),
        marks=build_marks(sampled + 1, n),
        samples=samples,
    )


class HashedFile:
    """A file written in pieces, with its size and SHA-256 kept for the manifest entry."""

    def __init__(self, folder: str, name: str):
        self.name = name
        self.handle = open(os.path.join(folder, name), "wb")
        self.digest = hashlib.sha256()
        self.bytes = 0

    def write(self, array: np.ndarray) -> None:
        data = memoryview(np.ascontiguousarray(array)).cast("B")
        self.handle.write(data)
        self.digest.update(data)
        self.bytes += len(data)

    def close(self) -> dict:
        self.handle.close()
        return {"name": self.name, "bytes": self.bytes, "sha256": self.digest.hexdigest()}


def read_packed_text(pac_path: str, start: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Bases ``start .. start+length`` of the packed file as codes 0..3 (one byte a base), and
    their counts (int64[4]: A, C, G, T), read in steps so no temporary is near the block's size."""
    text = np.empty(length, dtype=np.uint8)
    counts = np.zeros(4, dtype=np.int64)
    first_byte = start // 4
    skip = start - 4 * first_byte
    done = 0
    with open(pac_path, "rb") as handle:
        handle.seek(first_byte)
        while done < length:
            wanted = min(_READ_BYTES, -(-(skip + length - done) // 4))
            packed = np.frombuffer(handle.read(wanted), dtype=np.uint8)
            codes = UNPACK_2BIT[packed].reshape(-1)[skip : skip + length - done]
            skip = 0
            text[done : done + len(codes)] = codes
            # Not np.bincount: it would copy the codes to int64, 8 bytes a base.
            counts += [np.count_nonzero(codes == code) for code in range(4)]
            done += len(codes)
    return text, counts


def limit_openmp_threads(threads: int) -> None:
    """Let libdivsufsort (built with OpenMP: its sort of type-B* suffixes runs in parallel) use
    at most ``threads`` threads for calls from this thread. pydivsufsort ships its own libgomp,
    loaded under a hashed name, so it is found in this process's mappings."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            paths = {line.split()[-1] for line in maps if "libgomp" in line}
    except OSError:
        return
    for path in paths:
        try:
            ctypes.CDLL(path).omp_set_num_threads(ctypes.c_int(max(1, threads)))
        except (OSError, AttributeError):
            pass


def peak_resident_bytes() -> int:
    """This process's peak resident memory so far (VmHWM), in bytes; 0 where unknown."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def write_block(
    pac_path: str, start: int, length: int, sa_sample: int, folder: str, stem: str, openmp_threads: int
) -> dict:
    """Build the block of ``length`` bases from ``start`` of the packed reference ``pac_path``,
    writing ``folder/stem.occ``, ``.mrk`` and ``.sa``. Returns the block's manifest fields
    (primary, symbol_counts, files) with ``seconds`` and ``peak_bytes`` (this process's VmHWM
    at the end: the block's own peak in a worker process started for it)."""
    started = time.perf_counter()
    limit_openmp_threads(openmp_threads)
    text, counts = read_packed_text(pac_path, start, length)
    n = length
    suffix_array = pydivsufsort.divsufsort(text)
    primary = int(np.argmin(suffix_array)) + 1
    marked = -(-n // sa_sample)  # suffixes starting at 0, s, 2s, ... < n
    marked_rows = np.empty(marked, dtype=np.uint32)
    taken = 0
    occ_file = HashedFile(folder, f"{stem}.occ")
    sample_file = HashedFile(folder, f"{stem}.sa")
    running = np.zeros(4, dtype=np.uint64)
    lines = line_count(n)
    try:
        for first_line in range(0, lines, _CHUNK_LINES):
            last_line = min(first_line + _CHUNK_LINES, lines)
            low, high = first_line * BASES_PER_LINE, min(last_line * BASES_PER_LINE, n)
            # Stored BWT position s is row s + (s >= primary); row r >= 1 is preceded by
            # text[suffix_array[r - 1] - 1], row 0 (the empty suffix) by the last base.
            before = suffix_array[max(low - 1, 0) : max(min(high, primary) - 1, 0)]
            after = suffix_array[max(low, primary) : max(high, primary)]
            bwt = np.empty(high - low, dtype=np.uint8)
            head = 1 if low == 0 else 0
            if head:
                bwt[0] = text[n - 1]
            bwt[head : head + len(before)] = text[before - 1]
            bwt[head + len(before) :] = text[after - 1]
            occ_file.write(occ_line_piece(bwt, last_line - first_line, running))
            # The same rows' samples: suffix_array entries low..high-1 are rows low+1..high.
            chunk = suffix_array[low:high]
            hits = np.flatnonzero(chunk % sa_sample == 0)
            sample_file.write(chunk[hits].astype("<u4"))
            marked_rows[taken : taken + len(hits)] = hits + (low + 1)
            taken += len(hits)
        del suffix_array, text, before, after, chunk
        files = {"occ": occ_file.close()}
        mark_file = HashedFile(folder, f"{stem}.mrk")
        mark_file.write(build_marks(marked_rows, n))
        files["mrk"] = mark_file.close()
        files["sa"] = sample_file.close()
    finally:
        for handle in (occ_file.handle, sample_file.handle):
            handle.close()
    assert taken == marked, (taken, marked)
    return {
        "primary": primary,
        "symbol_counts": counts.tolist(),
        "files": files,
        "seconds": time.perf_counter() - started,
        "peak_bytes": peak_resident_bytes(),
    }
