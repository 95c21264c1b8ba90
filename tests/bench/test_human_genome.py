"""bench/human_genome.py: the same seed writes the same bytes; the stated fractions hold and
match the FASTA; repeat copies resemble their consensus at the stated divergence."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from tests.bench.conftest import load_bench


@pytest.fixture(scope="module")
def human_genome():
    return load_bench("human_genome")


def _parameters(module, seed=7):
    return module.Parameters(total_bases=20_000_000, seed=seed, contig_min=2_000_000, contig_max=8_000_000)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def genome(human_genome, tmp_path_factory):
    folder = tmp_path_factory.mktemp("human")
    path = folder / "a.fa"
    return path, human_genome.generate(path, _parameters(human_genome))


def test_same_seed_same_bytes_other_seed_other_bytes(human_genome, genome, tmp_path):
    path, description = genome
    again = tmp_path / "again.fa"
    repeated = human_genome.generate(again, _parameters(human_genome))
    assert _digest(again) == _digest(path)
    assert {**repeated, "seconds": 0} == {**description, "seconds": 0}
    other = tmp_path / "other.fa"
    human_genome.generate(other, _parameters(human_genome, seed=8))
    assert _digest(other) != _digest(path)
    assert not list(tmp_path.glob("*.partial"))


def test_workers_write_the_same_bytes(human_genome, genome, tmp_path):
    path, description = genome
    parallel = tmp_path / "parallel.fa"
    made = human_genome.generate(parallel, _parameters(human_genome), workers=2)
    assert _digest(parallel) == _digest(path)
    assert {**made, "seconds": 0} == {**description, "seconds": 0}


def test_stated_sizes_and_fractions(genome):
    path, description = genome
    assert json.loads(Path(str(path) + ".json").read_text()) == description
    assert sum(description["contigs"].values()) == 20_000_000 == sum(description["bases"].values())
    assert len(description["contigs"]) >= 2
    for length in description["contigs"].values():
        assert 2_000_000 * 0.75 <= length <= 8_000_000 * 1.35  # one common scaling (few contigs here)
    fractions = description["fractions"]
    for kind, target in (("alu", 0.10), ("l1", 0.17), ("segdup", 0.05), ("satellite", 0.03), ("microsatellite", 0.03)):
        assert abs(fractions[kind] - target) < 0.001, kind
    assert 0.005 < fractions["gap"] < 0.04
    # The FASTA holds exactly the stated bases: N for the gaps, 60-column lines.
    data = path.read_bytes()
    lines = data.split(b"\n")
    headers = [line for line in lines if line.startswith(b">")]
    assert [line.split()[0][1:].decode() for line in headers] == list(description["contigs"])
    sequence = b"".join(line for line in lines if not line.startswith(b">"))
    assert len(sequence) == 20_000_000 and max(len(line) for line in lines) == 60
    assert sequence.count(b"N") == description["bases"]["gap"]
    assert set(sequence) == set(b"ACGTN")


def test_alu_copies_are_their_family_at_5_to_20_percent(human_genome):
    parameters = _parameters(human_genome)
    library = human_genome.Library(parameters.seed)
    rng = np.random.default_rng(3)
    codes, bases_of, (kinds, starts, lengths) = human_genome.make_contig(rng, library, 4_000_000, parameters, None)
    assert int(np.count_nonzero(codes == 4)) == bases_of[human_genome.KINDS.index("gap")]
    alu = library.alu  # 40 subfamilies of 282 bp
    reverse = human_genome.COMPLEMENT[alu[:, ::-1]]
    chosen = np.flatnonzero(kinds == human_genome.ALU)
    assert len(chosen) > 1000
    distances, background = [], []
    for element in chosen[:400]:
        copy = codes[starts[element] : starts[element] + lengths[element]]
        if lengths[element] < 282 + 10:
            continue  # cut short where the layout ran out
        forward = np.count_nonzero(alu != copy[:282], axis=1).min()
        backward = np.count_nonzero(reverse != copy[-282:], axis=1).min()
        distances.append(min(forward, backward) / 282)
        random_place = int(rng.integers(0, len(codes) - 282))
        background.append(np.count_nonzero(alu != codes[random_place : random_place + 282], axis=1).min() / 282)
    distances = np.array(distances)
    assert np.mean((distances >= 0.02) & (distances <= 0.26)) > 0.95, np.percentile(distances, [1, 50, 99])
    assert 0.08 < np.median(distances) < 0.17
    assert np.median(background) > 0.5  # unrelated sequence is far from every subfamily
    # Microsatellites repeat a short unit.
    micro = np.flatnonzero(kinds == human_genome.MICRO)[:50]
    periodic = [
        max(np.mean(segment[p:] == segment[:-p]) for p in range(1, 7))
        for segment in (codes[starts[m] : starts[m] + lengths[m]] for m in micro if lengths[m] > 40)
    ]
    assert np.median(periodic) > 0.85, periodic
