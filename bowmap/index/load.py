"""Loading a bowmap index (see :mod:`bowmap.index.format`) and mapping text coordinates.

Coordinates: "text" positions are 0-based offsets in the concatenation of all contigs; block
positions are offsets inside one block's text (add the block's ``start`` for text positions);
contig positions are 0-based offsets inside a contig.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field

import numpy as np

from bowmap.index.alphabet import ALPHABET_FORMAT_VERSION, ALPHABETS, WAVELET_LINE_WORDS, levels_for
from bowmap.index.alphabet import line_count as wavelet_line_count
from bowmap.index.format import (
    FORMAT_VERSION,
    MAGIC,
    MANIFEST_SUFFIX,
    SAM_REFERENCE_NAME,
    UNPACK_2BIT,
    WORDS_PER_LINE,
    group_count,
    line_count,
    unpack_2bit,
)
from bowmap.runtime.arrays import prefix_mask, segment_ranges, windows
from bowmap.runtime.errors import BowmapError
from bowmap.runtime.files import open_for_reading, read_bytes

# UNPACK_2BIT's rows as little-endian 32-bit words: a byte's four codes in one gather.
_UNPACK_2BIT_WORDS = np.ascontiguousarray(UNPACK_2BIT).view("<u4").reshape(256)


@dataclass
class IndexBlock:
    """One block's FM-index, in host memory."""

    number: int
    start: int  # text position of the block's first base
    length: int  # n
    primary: int
    symbol_counts: np.ndarray  # int64[4] (DNA), int64[sigma] (protein, text: by code)
    occ: np.ndarray  # uint32[lines, 16] (DNA); the wavelet lines uint32[levels, lines, 16] (protein, text)
    marks: np.ndarray  # uint32[groups, 4]
    samples: np.ndarray  # uint32
    zeros: np.ndarray | None = None  # int64[levels]: each wavelet level's 0 bits (protein, text)

    @property
    def first_rows(self) -> np.ndarray:
        """C: row of the first suffix starting with each symbol, A, C, G, T for DNA (row 0 is the
        empty suffix)."""
        return (1 + np.concatenate(([0], np.cumsum(self.symbol_counts)[:-1]))).astype(np.int64)


# What a data file of a loaded index was: (device, inode, size, modification time in ns) of the
# file mapped. A rebuild at the same prefix renames new files into place (new inodes); an edit in
# place changes the time. Comparing these is a stat, not a re-hash.
FileStat = tuple[int, int, int, int]


def _file_stat(status: os.stat_result) -> FileStat:
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)


@dataclass(frozen=True)
class IndexIdentity:
    """The index a run checked: its manifest and each data file's :data:`FileStat` by name. A
    worker process loads with it (``load_index(prefix, identity=...)``): it takes this manifest
    rather than reading the manifest file again, and fails when a file it maps is not the one
    the run checked (the index was rebuilt or changed at that prefix meanwhile). Picklable."""

    manifest: dict
    files: dict[str, FileStat]


@dataclass
class FMIndex:
    prefix: str
    manifest: dict
    contig_names: list[str]
    contig_starts: np.ndarray  # int64, text positions
    contig_lengths: np.ndarray  # int64
    ambiguous_starts: np.ndarray  # int64, text positions of ambiguous runs
    ambiguous_lengths: np.ndarray  # int64
    packed: np.ndarray  # uint8, 2-bit packed text (DNA); the symbols, a byte each (protein, text)
    blocks: list[IndexBlock]
    file_stats: dict[str, FileStat] = field(default_factory=dict)  # of the files mapped, by name

    @property
    def identity(self) -> IndexIdentity:
        """What a worker process needs to load exactly this index (see :class:`IndexIdentity`)."""
        return IndexIdentity(self.manifest, dict(self.file_stats))

    @property
    def alphabet(self) -> str:
        """dna, protein or text (bowmap.index.alphabet); a manifest without the key is DNA's."""
        return self.manifest.get("alphabet", "dna")

    @property
    def symbols(self) -> np.ndarray:
        """uint8: the byte values of a protein or text index's symbols, by code."""
        return np.array(self.manifest.get("symbols", []), dtype=np.uint8)

    @property
    def total_length(self) -> int:
        return int(self.manifest["total_length"])

    @property
    def sa_sample(self) -> int:
        return int(self.manifest["parameters"]["sa_sample"])

    @property
    def max_read_length(self) -> int:
        return int(self.manifest["parameters"]["max_read_length"])

    def text(self, start: int = 0, length: int | None = None) -> np.ndarray:
        """Codes 0..3 of the indexed text (ambiguous bases read as their random stand-ins)."""
        length = self.total_length - start if length is None else length
        return unpack_2bit(self.packed, start, length)

    def spans(self, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """Reference codes of many text spans at once, concatenated: 0..3 for A, C, G, T and 4
        where the reference base is ambiguous (its indexed stand-in is not reported).

        Equal to ``codes_at`` of every position of every span, but a span at a time rather
        than a base at a time: the packed bytes under each span are gathered as a row and
        unpacked through a 256-entry table of 32-bit words (four codes a byte in one look-up),
        each span is cut from its row, and the spans, cut to their lengths, are concatenated.
        Only spans that meet an ambiguous run are then checked base by base."""
        starts = np.asarray(starts, dtype=np.int64)
        lengths = np.asarray(lengths, dtype=np.int64)
        total = int(lengths.sum())
        if total == 0:
            return np.zeros(0, dtype=np.uint8)
        width = int(lengths.max())
        row_bytes = min(width // 4 + 2, len(self.packed))  # width bases from any offset 0..3
        # Rows of packed bytes through a strided view (no index array): row k starts at byte
        # first[k], moved back near the text's end so that it stays inside the array.
        first = np.minimum(starts >> 2, len(self.packed) - row_bytes)
        packed_rows = np.lib.stride_tricks.sliding_window_view(self.packed, row_bytes)[first]
        unpacked = np.take(_UNPACK_2BIT_WORDS, packed_rows).view(np.uint8).reshape(-1)
        # Each span starts 0..3 codes into its unpacked row (more near the text's end): a window
        # of the rows laid end to end, which may run into the next row past the span's length.
        rows = windows(unpacked, np.arange(len(starts), dtype=np.int64) * (4 * row_bytes) + (starts - 4 * first), width)
        if int(lengths.min()) == width:
            codes = rows.reshape(-1)
        else:
            codes = rows[prefix_mask(lengths, width)]
        if len(self.ambiguous_starts):
            # The last ambiguous run starting before a span's end meets it if it ends after the
            # span's start (runs are sorted and do not overlap).
            run = np.searchsorted(self.ambiguous_starts, starts + lengths, side="left") - 1
            run_ends = self.ambiguous_starts + self.ambiguous_lengths
            meets = (run >= 0) & (lengths > 0) & (run_ends[np.maximum(run, 0)] > starts)
            if meets.any():
                first = np.cumsum(lengths) - lengths
                flat = segment_ranges(first[meets], lengths[meets])
                positions = segment_ranges(starts[meets], lengths[meets])
                codes[flat] = self.codes_at(positions)
        return codes

    def codes_at(self, positions: np.ndarray) -> np.ndarray:
        """Reference codes (uint8) at text positions, 4 where the base is ambiguous."""
        positions = np.asarray(positions, dtype=np.int64)
        codes = (self.packed[positions >> 2] >> ((positions & 3) << 1).astype(np.uint8)) & 3
        if len(self.ambiguous_starts):
            run = np.searchsorted(self.ambiguous_starts, positions, side="right") - 1
            inside = (run >= 0) & (positions < (self.ambiguous_starts + self.ambiguous_lengths)[np.maximum(run, 0)])
            codes[inside] = 4
        return codes.astype(np.uint8)

    def to_contig(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Text positions -> (contig index, 0-based position in that contig)."""
        positions = np.asarray(positions, dtype=np.int64)
        contigs = np.searchsorted(self.contig_starts, positions, side="right") - 1
        return contigs, positions - self.contig_starts[contigs]

    def span_is_clean(self, positions: np.ndarray, length: int | np.ndarray) -> np.ndarray:
        """For each text span [position, position + length): True when it lies inside one contig
        and touches no ambiguous base, so an alignment there may be reported."""
        positions = np.asarray(positions, dtype=np.int64)
        ends = positions + np.asarray(length, dtype=np.int64)
        contigs, _ = self.to_contig(positions)
        inside = ends <= self.contig_starts[contigs] + self.contig_lengths[contigs]
        hole_ends = self.ambiguous_starts + self.ambiguous_lengths
        # The first hole ending after the span's start must begin at or after the span's end.
        first = np.searchsorted(hole_ends, positions, side="right")
        clear = np.ones(len(positions), dtype=bool)
        has_hole = first < len(hole_ends)
        clear[has_hole] = self.ambiguous_starts[first[has_hole]] >= ends[has_hole]
        return inside & clear


def index_folder(prefix: str) -> str:
    """The folder holding the index at ``prefix``: the manifest's, where its data files lie too."""
    return os.path.dirname(os.path.abspath(prefix + MANIFEST_SUFFIX))


_MISSING = "index file missing (rebuild the index with `bowmap index`)"


def _changed(path: str, prefix: str) -> BowmapError:
    return BowmapError(
        f"{path}: index file changed since this run checked the index (rebuilt at {prefix} meanwhile?); run again"
    )


def _load_file(prefix: str, entry: dict, dtype, shape: tuple[int, ...], stats: dict, expected: dict | None) -> np.ndarray:
    """One index file as a read-only array mapped from the file (processes mapping one index share
    its pages), after checking its size against the manifest and the layout. The mapped file's
    :data:`FileStat` goes into ``stats``; with ``expected`` (an :class:`IndexIdentity`'s files)
    it must equal the one recorded there."""
    path = os.path.join(index_folder(prefix), entry["name"])
    with open_for_reading(path, missing=_MISSING) as handle:
        stat = _file_stat(os.fstat(handle.fileno()))
        if expected is not None and expected.get(entry["name"]) != stat:
            raise _changed(path, prefix)
        stats[entry["name"]] = stat
        size = stat[2]
        if size != entry["bytes"]:
            raise BowmapError(f"{path}: index file truncated or damaged ({size} bytes, expected {entry['bytes']})")
        expected_size = int(np.prod(shape)) * np.dtype(dtype).itemsize
        if expected_size != size:
            raise BowmapError(f"{path}: index file has {size} bytes where the manifest's layout needs {expected_size}")
        if size == 0:
            return np.empty(shape, dtype=dtype)
        # A plain array over the mapping of this very file (not of whatever the path names by
        # the time it is mapped): indexing a np.memmap subclass costs far more per call.
        try:
            return np.memmap(handle, dtype=dtype, mode="r", shape=shape).view(np.ndarray)
        except OSError as error:
            raise BowmapError(f"{path}: cannot read ({error.strerror or error})") from None


def verify_index(index: FMIndex) -> None:
    """Check the SHA-256 of every file of a loaded index, reading each file in pieces, the files
    at once in threads (hashlib lets other threads run meanwhile: `bowmap align` checks in a
    helper thread while its first chunks are mapped, given an index loaded with ``verify=False``,
    and writes nothing before they match: a 0.35 GB index took 0.21 s one file after another,
    0.11 s at once, on 2 cores; at that rate a human genome's, about 2.7 GB, would hold the
    first records back 1.6 s). The first file in the manifest's order that fails is the error."""
    from concurrent.futures import ThreadPoolExecutor

    folder = index_folder(index.prefix)
    entries = list(index.manifest["files"].values()) + [entry for block in index.manifest["blocks"] for entry in block["files"].values()]
    with ThreadPoolExecutor(max_workers=max(1, min(len(entries), os.cpu_count() or 1, 8)), thread_name_prefix="bowmap-checksum") as pool:
        problems = list(pool.map(lambda entry: _file_problem(index, folder, entry), entries))
    for problem in problems:
        if problem is not None:
            raise problem


def _file_problem(index: FMIndex, folder: str, entry: dict) -> BowmapError | None:
    """What is wrong with one index file (changed since loaded, unreadable, corrupted), or None."""
    path = os.path.join(folder, entry["name"])
    try:
        with open_for_reading(path, missing=_MISSING) as handle:
            # The file hashed must be the one mapped: an index rebuilt at this prefix since it
            # was loaded has other files, and their checksums would vouch for the wrong data.
            if index.file_stats and index.file_stats.get(entry["name"]) != _file_stat(os.fstat(handle.fileno())):
                return _changed(path, index.prefix)
            digest = hashlib.sha256()
            try:
                while piece := handle.read(1 << 22):
                    digest.update(piece)
            except OSError as error:
                return BowmapError(f"{path}: cannot read ({error.strerror})")
    except BowmapError as error:  # missing or unreadable
        return error
    if digest.hexdigest() != entry["sha256"]:
        return BowmapError(f"{path}: index file corrupted (SHA-256 does not match the manifest)")
    return None


def index_prefix(name: str) -> str:
    """The prefix of the index that ``name`` names: ``name`` itself, or, when ``name`` is an
    index's manifest (``P.bmi``, a file) and no ``P.bmi.bmi`` exists, ``P`` -- as bwa takes
    ``ref.fa`` for its files ``ref.fa.bwt``, ``ref.fa.pac``, a user may give the file's own name."""
    if name.endswith(MANIFEST_SUFFIX) and os.path.isfile(name) and not os.path.exists(name + MANIFEST_SUFFIX):
        return name[: -len(MANIFEST_SUFFIX)]
    return name


def read_manifest(prefix: str) -> dict:
    path = prefix + MANIFEST_SUFFIX
    raw = read_bytes(path, missing=f"no bowmap index at {prefix!r} (build one with `bowmap index REF.fa {prefix}`)")
    try:
        manifest = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        manifest = None
    if not isinstance(manifest, dict) or manifest.get("magic") != MAGIC:
        raise BowmapError(f"{path}: not a bowmap index manifest")
    version = manifest.get("format_version")
    alphabet = manifest.get("alphabet", "dna")
    if version == ALPHABET_FORMAT_VERSION and alphabet in ALPHABETS[1:]:
        return manifest
    if version != FORMAT_VERSION or "alphabet" in manifest:
        raise BowmapError(
            f"{path}: index format version {version} is not the one this bowmap reads ({FORMAT_VERSION}); rebuild the index"
        )
    return manifest


def _check_contigs(manifest_path: str, names: list, starts: np.ndarray, lengths: np.ndarray, total: int, dna: bool = True) -> None:
    """The manifest's contigs must tile the indexed text exactly, with names SAM can carry (DNA;
    protein and text: names with no tab or line break): a wrong length would reach the SAM
    header (@SQ LN) and every position past it."""
    if not names:
        raise BowmapError(f"{manifest_path}: damaged manifest (no contigs)")
    for name in names:
        if not isinstance(name, str) or not (SAM_REFERENCE_NAME.fullmatch(name) if dna else name and not set(name) & set("\t\r\n")):
            raise BowmapError(f"{manifest_path}: damaged manifest (contig name {name!r} is not a valid SAM reference name)")
    if len(set(names)) != len(names):
        raise BowmapError(f"{manifest_path}: damaged manifest (contig names repeat)")
    if (lengths < 1).any():
        raise BowmapError(f"{manifest_path}: damaged manifest (contig {names[int(np.argmax(lengths < 1))]!r} has length < 1)")
    expected_starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    if not np.array_equal(starts, expected_starts):
        bad = int(np.argmax(starts != expected_starts))
        raise BowmapError(
            f"{manifest_path}: damaged manifest (contig {names[bad]!r} starts at {int(starts[bad])}, "
            f"but the contigs before it end at {int(expected_starts[bad])})"
        )
    if int(lengths.sum()) != total:
        raise BowmapError(
            f"{manifest_path}: damaged manifest (contig lengths sum to {int(lengths.sum())} bases, the index holds {total})"
        )


def _check_layout(manifest_path: str, index: FMIndex) -> None:
    """Blocks and ambiguous runs must lie inside the text, runs sorted and apart."""
    total = index.total_length
    for block in index.blocks:
        if block.start < 0 or block.length < 1 or block.start + block.length > total:
            raise BowmapError(f"{manifest_path}: damaged manifest (block {block.number} lies outside the {total}-base text)")
    starts, lengths = index.ambiguous_starts, index.ambiguous_lengths
    if len(starts) != len(lengths) or (lengths < 1).any() or (starts < 0).any() or (len(starts) and starts[-1] + lengths[-1] > total) \
            or (starts[1:] < starts[:-1] + lengths[:-1]).any():
        raise BowmapError(f"{manifest_path}: damaged manifest (ambiguous runs unsorted, overlapping or outside the text)")


def load_index(prefix: str, verify: bool = True, identity: IndexIdentity | None = None) -> FMIndex:
    """Read and check the index at ``prefix``. With ``verify``, every file's SHA-256 is checked.
    With ``identity`` (a worker process's: the index its run checked), that manifest is used and
    every file mapped must be the very file the run checked, else :class:`BowmapError`."""
    manifest = read_manifest(prefix) if identity is None else identity.manifest
    manifest_path = prefix + MANIFEST_SUFFIX
    expected = None if identity is None else identity.files
    stats: dict[str, FileStat] = {}
    try:
        contigs = manifest["contigs"]
        total = int(manifest["total_length"])
        sa_sample = int(manifest["parameters"]["sa_sample"])
        contig_names = [contig["name"] for contig in contigs]
        contig_starts = np.array([int(contig["start"]) for contig in contigs], dtype=np.int64)
        contig_lengths = np.array([int(contig["length"]) for contig in contigs], dtype=np.int64)
        dna = manifest.get("alphabet", "dna") == "dna"
        _check_contigs(manifest_path, contig_names, contig_starts, contig_lengths, total, dna)
        if dna:
            packed = _load_file(prefix, manifest["files"]["pac"], np.uint8, (-(-total // 4),), stats, expected)
        else:
            packed = _load_file(prefix, manifest["files"]["sym"], np.uint8, (total,), stats, expected)
            levels = levels_for(len(manifest["symbols"]))
        blocks = []
        for number, block in enumerate(manifest["blocks"]):
            n = int(block["length"])
            files = block["files"]
            marks = _load_file(prefix, files["mrk"], np.uint32, (group_count(n), 4), stats, expected)
            if dna:
                occ, zeros = _load_file(prefix, files["occ"], np.uint32, (line_count(n), WORDS_PER_LINE), stats, expected), None
            else:
                occ = _load_file(prefix, files["wm"], np.uint32, (levels, wavelet_line_count(n), WAVELET_LINE_WORDS), stats, expected)
                zeros = np.array(block["zeros"], dtype=np.int64)
                if len(zeros) != levels or len(block["symbol_counts"]) != len(manifest["symbols"]):
                    raise BowmapError(f"{manifest_path}: damaged manifest (block {number}'s symbol counts or levels)")
            blocks.append(
                IndexBlock(
                    number=number,
                    start=int(block["start"]),
                    length=n,
                    primary=int(block["primary"]),
                    symbol_counts=np.array(block["symbol_counts"], dtype=np.int64),
                    occ=occ,
                    marks=marks,
                    samples=_load_file(prefix, files["sa"], np.uint32, (files["sa"]["bytes"] // 4,), stats, expected),
                    zeros=zeros,
                )
            )
        index = FMIndex(
            prefix=prefix,
            manifest=manifest,
            contig_names=contig_names,
            contig_starts=contig_starts,
            contig_lengths=contig_lengths,
            ambiguous_starts=np.array(manifest["ambiguous"]["starts"], dtype=np.int64),
            ambiguous_lengths=np.array(manifest["ambiguous"]["lengths"], dtype=np.int64),
            packed=packed,
            blocks=blocks,
            file_stats=stats,
        )
    except (KeyError, TypeError, ValueError, OverflowError) as error:
        raise BowmapError(f"{manifest_path}: damaged manifest ({type(error).__name__}: {error})") from None
    if sa_sample < 1 or not blocks:
        raise BowmapError(f"{manifest_path}: damaged manifest (no blocks or bad sa_sample)")
    _check_layout(manifest_path, index)
    if verify:
        verify_index(index)
    return index
