"""`bowmap index`: reference FASTA -> packed reference + blocked FM-index, written atomically.

Everything is written into a temporary folder beside the prefix; only when every file is there
are they renamed into place, the manifest last, so a failed or interrupted build never leaves
an index that loads.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass

import numpy as np
from bowmap.index_builder.blocks import block_bases_for_memory, plan_blocks
from bowmap.index_builder.fasta import read_reference
from bowmap.index_builder.fm_block import HashedFile
from bowmap.index_builder.runner import build_blocks

from bowmap import __version__
from bowmap.index.format import (
    AMBIGUOUS,
    DEFAULT_MAX_READ_LENGTH,
    DEFAULT_SA_SAMPLE,
    FORMAT_VERSION,
    MAGIC,
    MANIFEST_SUFFIX,
    SEAM_MARGIN,
    pack_2bit,
)
from bowmap.runtime.errors import BowmapError, UsageError

log = logging.getLogger("bowmap.index_builder")

# Seed of the pseudo-random bases that stand in for ambiguous ones in the indexed text (as BWA
# does): random rather than a constant base, so long N runs make no huge poly-A SA intervals.
AMBIGUOUS_FILL_SEED = 0x6A6D


@dataclass
class IndexOptions:
    """Parameters of one index build. Memory sizes in bytes."""

    reference: str
    prefix: str
    # Global memory of the smallest target device and the largest buffer it allows; None: ask
    # the OpenCL devices that ``devices`` selects (see bowmap.runtime.devices.parse_device_spec).
    device_memory: int | None = None
    max_allocation: int | None = None
    devices: str | None = None
    sa_sample: int = DEFAULT_SA_SAMPLE
    max_read_length: int = DEFAULT_MAX_READ_LENGTH
    progress: bool = False
    # Blocks built at once are at most ``threads`` (None: the cores this process may use) and
    # their predicted peaks stay under ``max_memory`` bytes (None: see memory.default_max_memory).
    threads: int | None = None
    max_memory: int | None = None
    alphabet: str = "dna"  # dna, protein or text (bowmap.index.alphabet)

    @property
    def overlap(self) -> int:
        return self.max_read_length + SEAM_MARGIN


class _Phase:
    """Logs one line with the elapsed time when a phase of the build ends."""

    def __init__(self, what: str):
        self.what = what

    def __enter__(self):
        self.started = time.perf_counter()
        return self

    def __exit__(self, kind, value, traceback):
        if kind is None:
            log.info("%s [%.2f s]", self.what, time.perf_counter() - self.started)


def fill_ambiguous(codes: np.ndarray) -> np.ndarray:
    """Replace, in place, each ambiguous base by a reproducible random base; return ``codes``."""
    text = codes
    ambiguous = np.flatnonzero(text == AMBIGUOUS)
    rng = np.random.default_rng(AMBIGUOUS_FILL_SEED)
    text[ambiguous] = rng.integers(0, 4, size=len(ambiguous), dtype=np.uint8)
    return text


# Bases filled and packed per step of write_packed_text: 64 M bases, temporaries of ~150 MB.
_PACK_STEP = 1 << 26


def write_packed_text(folder: str, name: str, codes: np.ndarray, ambiguous_bases: int) -> dict:
    """Fill the ambiguous bases of ``codes`` in place (as :func:`fill_ambiguous` does, the same
    bases) and write them 2 bits a base to ``folder/name`` step by step; the manifest entry."""
    rng = np.random.default_rng(AMBIGUOUS_FILL_SEED)
    # One draw for all of them, as fill_ambiguous makes: draws split in parts give other bases.
    fill = rng.integers(0, 4, size=ambiguous_bases, dtype=np.uint8)
    used = 0
    packed = HashedFile(folder, name)
    try:
        for first in range(0, len(codes), _PACK_STEP):
            piece = codes[first : first + _PACK_STEP]
            ambiguous = np.flatnonzero(piece == AMBIGUOUS)
            piece[ambiguous] = fill[used : used + len(ambiguous)]
            used += len(ambiguous)
            packed.write(pack_2bit(piece))
    finally:
        packed.handle.close()
    assert used == ambiguous_bases, (used, ambiguous_bases)
    return packed.close()


def check_prefix(prefix: str) -> None:
    """Refuse a PREFIX with no file name of its own (``a/``, ``a/.``, ``..``): its manifest would
    be ``a/.bmi`` while its data files took the folder's name, and two such indexes would share
    files. bwa and bowtie2 write hidden files (``a/.bwt``, ``a/.1.bt2``) there, which ``ls`` and
    ``rm a/*`` skip: a usage error that shows the intended form is clearer."""
    if os.path.basename(prefix) in ("", ".", ".."):
        raise UsageError(
            f"PREFIX {prefix!r} names a folder, not a file prefix: the index is written as PREFIX.bmi, "
            f"PREFIX.pac, ...; give a name inside it, e.g. {os.path.join(prefix, 'ref')}"
        )


# A build's temporary folder, beside the prefix: ".BASE.XXXXXXXX.bowmap-tmp" (mkdtemp's eight
# characters), holding a lock file that names the prefix and that the build holds locked
# (flock) while it runs. A build killed outright (SIGKILL) leaves its folder; the lock dies with
# it, so the next build of the same prefix knows the folder is abandoned and removes it.
WORKSPACE_SUFFIX = ".bowmap-tmp"
WORKSPACE_LOCK = "build.lock"


def _workspace_pattern(base: str):
    import re

    return re.compile(rf"\.{re.escape(base)}\.[a-z0-9_]{{8}}{re.escape(WORKSPACE_SUFFIX)}")


def remove_abandoned_workspaces(prefix: str) -> list[str]:
    """Remove the temporary folders that killed builds of ``prefix`` left beside it: only
    folders named as this prefix's, whose lock file names this prefix and is locked by no one
    (a running build holds its lock). Anything else is left alone. Returns the paths removed."""
    import fcntl

    folder = os.path.dirname(os.path.abspath(prefix))
    pattern = _workspace_pattern(os.path.basename(prefix))
    removed = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    for name in sorted(names):
        path = os.path.join(folder, name)
        if not pattern.fullmatch(name) or os.path.islink(path) or not os.path.isdir(path):
            continue
        try:
            descriptor = os.open(os.path.join(path, WORKSPACE_LOCK), os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue  # no lock file: not a folder this bowmap made, or one just being made
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            owner = os.read(descriptor, 1 << 12).decode("utf-8", "replace")
            if owner == os.path.abspath(prefix):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
                log.info("removed %s, left by a build of %s that was killed", path, prefix)
        except OSError:
            pass  # locked: a build of this prefix is running
        finally:
            os.close(descriptor)
    return removed


def _make_workspace(prefix: str) -> tuple[str, int]:
    """A new temporary folder for the build, and the descriptor of its lock file, held locked
    until the build ends (see WORKSPACE_LOCK)."""
    import fcntl

    folder = os.path.dirname(os.path.abspath(prefix))
    if not os.path.isdir(folder):
        raise BowmapError(f"{prefix}: cannot write the index, folder {folder} does not exist")
    remove_abandoned_workspaces(prefix)
    try:
        workspace = tempfile.mkdtemp(prefix=f".{os.path.basename(prefix)}.", suffix=WORKSPACE_SUFFIX, dir=folder)
        descriptor = os.open(os.path.join(workspace, WORKSPACE_LOCK), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except OSError as error:
        raise BowmapError(f"{prefix}: cannot write the index in {folder} ({error.strerror})") from None
    # Locked before the prefix is written in: a cleaner that opens the file first reads no
    # prefix and leaves the folder alone.
    fcntl.flock(descriptor, fcntl.LOCK_EX)
    os.write(descriptor, os.path.abspath(prefix).encode())
    return workspace, descriptor


def _install(workspace: str, prefix: str, manifest: dict) -> None:
    """Move the built files to their final names, the manifest last."""
    folder = os.path.dirname(os.path.abspath(prefix))
    manifest_path = prefix + MANIFEST_SUFFIX
    if os.path.lexists(manifest_path):
        os.unlink(manifest_path)  # an older index at this prefix stops loading before its files change
    entries = list(manifest["files"].values()) + [entry for block in manifest["blocks"] for entry in block["files"].values()]
    for entry in entries:
        os.replace(os.path.join(workspace, entry["name"]), os.path.join(folder, entry["name"]))
    os.replace(os.path.join(workspace, os.path.basename(manifest_path)), manifest_path)


# OpenCL's full profile promises at least 128 MiB in one buffer, so every device has that much.
GUARANTEED_MEMORY = 128 << 20


def _selected_devices(spec: str | None) -> list:
    """The devices ``--devices`` names, checked as `align` checks them (a usage error for
    ``foo`` or ``99``), before any work; None when it was not given (no device query)."""
    if spec is None:
        return None
    from bowmap.runtime.devices import list_devices, parse_device_spec

    # Only the devices' memory matters here: no kernel is built, so no build probe.
    return parse_device_spec(spec, list_devices(), builds=lambda info: True)


def _device_limits(options: IndexOptions, total: int, selected: list | None = None, levels: int | None = None) -> tuple[int, int]:
    """(device memory, largest allocation) to size blocks by, in bytes."""
    if options.device_memory is not None:
        return options.device_memory, options.max_allocation or options.device_memory // 4
    if block_bases_for_memory(GUARANTEED_MEMORY, GUARANTEED_MEMORY, options.sa_sample, levels) >= total:
        # One block on any device: asking the devices could not change the plan, and loading an
        # OpenCL driver (PoCL brings LLVM) would cost more memory than indexing a small genome.
        log.info("the whole index fits any OpenCL device: one block, no device query")
        return GUARANTEED_MEMORY, GUARANTEED_MEMORY
    if selected is None:
        from bowmap.runtime.devices import list_devices, parse_device_spec

        selected = parse_device_spec(None, list_devices(), builds=lambda info: True)
    smallest = min(selected, key=lambda info: info.global_memory)
    log.info("sizing blocks for %s (%d bytes of global memory)", smallest.name, smallest.global_memory)
    return smallest.global_memory, smallest.max_allocation


def _manifest(options: IndexOptions, reference, total: int, plan_info: tuple[int, int, int], holes, files: dict, blocks: list) -> dict:
    """The manifest; a DNA index's is today's, key for key (protein and text add theirs after)."""
    block_bases, device_memory, max_allocation = plan_info
    hole_starts, hole_lengths = holes
    return {
        "magic": MAGIC,
        "format_version": FORMAT_VERSION,
        "bowmap_version": __version__,
        "reference": os.path.abspath(options.reference),
        "parameters": {
            "sa_sample": options.sa_sample,
            "max_read_length": options.max_read_length,
            "overlap": options.overlap,
            "block_bases": block_bases,
            "device_memory": device_memory,
            "max_allocation": max_allocation,
        },
        "total_length": total,
        "contigs": [
            {"name": name, "start": int(start), "length": int(length)}
            for name, start, length in zip(reference.names, reference.starts, reference.lengths)
        ],
        "ambiguous": {"starts": hole_starts.tolist(), "lengths": hole_lengths.tolist()},
        "files": files,
        "blocks": blocks,
    }


def _plan(options: IndexOptions, total: int, selected, levels: int | None = None) -> tuple[list, tuple[int, int, int]]:
    device_memory, max_allocation = _device_limits(options, total, selected, levels)
    block_bases = block_bases_for_memory(device_memory, max_allocation, options.sa_sample, levels)
    plan = plan_blocks(total, block_bases, options.overlap)
    unit = "bases" if levels is None else "symbols"
    log.info(
        "%d block(s) of at most %d %s (device memory %d bytes, overlap %d %s)",
        len(plan), block_bases, unit, device_memory, options.overlap, unit,
    )
    return plan, (block_bases, device_memory, max_allocation)


def _build_dna(options: IndexOptions, selected, workspace: str, base: str) -> dict:
    with _Phase("read reference") as phase:
        reference = read_reference(options.reference)
        hole_starts, hole_lengths = reference.ambiguous_runs()
        total = len(reference.codes)
        phase.what = (
            f"read {options.reference}: {len(reference.names)} contig(s), {total} bases, "
            f"{len(hole_starts)} ambiguous run(s) ({int(hole_lengths.sum())} bases)"
        )
    with _Phase("pack reference") as phase:
        pac_entry = write_packed_text(workspace, f"{base}.pac", reference.codes, int(hole_lengths.sum()))
        del reference.codes  # the blocks read their text back from the .pac file
        phase.what = f"packed reference: {pac_entry['bytes']} bytes"
    plan, plan_info = _plan(options, total, selected)
    blocks = build_blocks(options, plan, os.path.join(workspace, pac_entry["name"]), workspace, base)
    return _manifest(options, reference, total, plan_info, (hole_starts, hole_lengths), {"pac": pac_entry}, blocks)


def _build_symbols(options: IndexOptions, selected, workspace: str, base: str) -> dict:
    """A protein or text index (bowmap.index.alphabet): symbols file, wavelet-matrix blocks."""
    from bowmap.index.alphabet import ALPHABET_FORMAT_VERSION, levels_for
    from bowmap.index_builder.symbols import read_protein, read_text, write_symbol_block, write_symbol_text

    with _Phase("read reference") as phase:
        reference = (read_protein if options.alphabet == "protein" else read_text)(options.reference)
        total = len(reference.codes)
        symbols = np.flatnonzero(np.bincount(reference.codes, minlength=256)).tolist()
        phase.what = (
            f"read {options.reference} as {options.alphabet}: {len(reference.names)} contig(s), {total} symbols, "
            f"{len(symbols)} distinct"
        )
    sym_entry = write_symbol_text(workspace, f"{base}.sym", reference.codes)
    del reference.codes
    levels = levels_for(len(symbols))
    plan, plan_info = _plan(options, total, selected, levels)
    blocks = build_blocks(
        options, plan, os.path.join(workspace, sym_entry["name"]), workspace, base,
        writer=write_symbol_block, extra=(symbols, options.alphabet), fields=("zeros",),
    )
    empty = np.zeros(0, dtype=np.int64)
    manifest = _manifest(options, reference, total, plan_info, (empty, empty), {"sym": sym_entry}, blocks)
    manifest["format_version"] = ALPHABET_FORMAT_VERSION
    manifest["alphabet"] = options.alphabet
    manifest["symbols"] = symbols
    return manifest


def build_index(options: IndexOptions) -> dict:
    """Build the index; return its manifest. Raises :class:`BowmapError` on bad input."""
    started = time.perf_counter()
    check_prefix(options.prefix)
    selected = _selected_devices(options.devices)
    workspace, lock = _make_workspace(options.prefix)
    try:
        base = os.path.basename(options.prefix)
        if options.alphabet == "dna":
            manifest = _build_dna(options, selected, workspace, base)
        else:
            manifest = _build_symbols(options, selected, workspace, base)
        with open(os.path.join(workspace, base + MANIFEST_SUFFIX), "w", encoding="utf-8") as handle:
            json.dump(manifest, handle, indent=1)
            handle.write("\n")
        _install(workspace, options.prefix, manifest)
    except OSError as error:
        raise BowmapError(f"{options.prefix}: writing the index failed ({error.strerror or error})") from None
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
        os.close(lock)
    log.info("index %s written [%.2f s]", options.prefix, time.perf_counter() - started)
    return manifest
