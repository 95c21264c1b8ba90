"""Shared fixtures: the PoCL CPU device, random genomes with repeats, small indexes."""

from __future__ import annotations

import os

import numpy as np
import pytest
from bowmap.index_builder.build import IndexOptions, build_index

from bowmap.index.load import load_index

BASES = np.frombuffer(b"ACGT", dtype=np.uint8)


# Kernel tests run on the device(s) named here, one --devices spec each, separated by ";"
# (default: the CPU, as CI has it). BOWMAP_TEST_DEVICES="gpu;cpu" runs them on a GPU and the CPU.
DEVICE_SPECS = os.environ.get("BOWMAP_TEST_DEVICES", "cpu").split(";")


@pytest.fixture(scope="session", params=DEVICE_SPECS)
def device(request):
    from bowmap.runtime.devices import open_devices

    return open_devices(request.param)[0]


def random_genome(rng: np.random.Generator, length: int) -> np.ndarray:
    """Codes 0..3 with the repeats that make FM search interesting: copied segments with a few
    substitutions, tandem repeats and low-complexity runs."""
    text = rng.integers(0, 4, size=length, dtype=np.uint8)
    for _ in range(max(1, length // 2000)):
        size = int(rng.integers(20, 400))
        source, target = rng.integers(0, max(1, length - size), size=2)
        copy = text[source : source + size].copy()
        mutated = rng.random(len(copy)) < 0.02
        copy[mutated] = rng.integers(0, 4, size=int(mutated.sum()), dtype=np.uint8)
        text[target : target + len(copy)] = copy
    for _ in range(max(1, length // 5000)):
        unit = rng.integers(0, 4, size=int(rng.integers(1, 7)), dtype=np.uint8)
        start = int(rng.integers(0, max(1, length - 300)))
        run = np.tile(unit, 300 // len(unit) + 1)[: min(300, length - start)]
        text[start : start + len(run)] = run
    return text


def write_fasta(path, records: list[tuple[str, str]], width: int = 60) -> str:
    with open(path, "w") as handle:
        for name, sequence in records:
            handle.write(f">{name} test record\n")
            for start in range(0, len(sequence), width):
                handle.write(sequence[start : start + width] + "\n")
    return str(path)


def codes_to_text(codes: np.ndarray) -> str:
    return BASES[codes].tobytes().decode()


def build_test_index(tmp_path, records, device_memory=1 << 30, sa_sample=32, max_read_length=64, name="ref"):
    fasta = write_fasta(tmp_path / f"{name}.fa", records)
    prefix = str(tmp_path / name)
    build_index(
        IndexOptions(
            reference=fasta,
            prefix=prefix,
            device_memory=device_memory,
            max_allocation=device_memory // 4,
            sa_sample=sa_sample,
            max_read_length=max_read_length,
        )
    )
    return load_index(prefix)
