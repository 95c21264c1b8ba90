"""`bowmap index --threads/--max-memory`: blocks built in worker processes are byte-identical to
the one-thread build and to the in-memory reference; the memory model's schedule and prediction;
streaming steps (reading, packing, ambiguous runs) against their whole-array forms."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os

import numpy as np
import pytest
from bowmap.index_builder import build as build_module
from bowmap.index_builder import fasta as fasta_module
from bowmap.index_builder import fm_block
from bowmap.index_builder.build import IndexOptions, build_index, fill_ambiguous, write_packed_text
from bowmap.index_builder.fasta import read_reference
from bowmap.index_builder.fm_block import build_block, read_packed_text, write_block
from bowmap.index_builder.memory import block_peak_bytes, may_start, plan_schedule
from conftest import random_genome, write_fasta

from bowmap.index.format import AMBIGUOUS, MANIFEST_SUFFIX, pack_2bit, unpack_2bit
from bowmap.index.load import load_index
from bowmap.runtime.errors import BowmapError


def _pac(tmp_path, text):
    path = str(tmp_path / "text.pac")
    with open(path, "wb") as handle:
        handle.write(pack_2bit(text).tobytes())
    return path


@pytest.mark.parametrize("chunk_lines", [1, 2, 1 << 15])
@pytest.mark.parametrize("length", [1, 2, 95, 191, 192, 193, 384, 1001, 5000])
@pytest.mark.parametrize("sa_sample", [1, 3, 32])
def test_written_block_equals_the_in_memory_reference(tmp_path, monkeypatch, chunk_lines, length, sa_sample):
    monkeypatch.setattr(fm_block, "_CHUNK_LINES", chunk_lines)
    rng = np.random.default_rng(length * 7 + sa_sample + chunk_lines)
    text = random_genome(rng, length + 11)
    start = 3  # not a multiple of 4: the block starts inside a packed byte
    pac = _pac(tmp_path, text)
    result = write_block(pac, start, length, sa_sample, str(tmp_path), "b", 1)
    arrays = build_block(text[start : start + length], sa_sample)
    assert result["primary"] == arrays.primary
    assert result["symbol_counts"] == arrays.symbol_counts.tolist()
    assert list(result["files"]) == ["occ", "mrk", "sa"]
    for kind, array in (("occ", arrays.occ), ("mrk", arrays.marks), ("sa", arrays.samples)):
        with open(tmp_path / f"b.{kind}", "rb") as handle:
            assert handle.read() == array.astype(array.dtype.newbyteorder("<")).tobytes(), kind
        assert result["files"][kind]["bytes"] == array.nbytes


@pytest.mark.parametrize("read_bytes", [1, 5, 1 << 22])
def test_packed_text_is_read_back_in_steps(tmp_path, monkeypatch, read_bytes):
    monkeypatch.setattr(fm_block, "_READ_BYTES", read_bytes)
    text = np.random.default_rng(5).integers(0, 4, size=1003, dtype=np.uint8)
    pac = _pac(tmp_path, text)
    for start, length in ((0, 1003), (1, 1), (2, 37), (5, 998), (1002, 1)):
        codes, counts = read_packed_text(pac, start, length)
        assert codes.tolist() == text[start : start + length].tolist()
        assert counts.tolist() == np.bincount(text[start : start + length], minlength=4).tolist()
        assert codes.tolist() == unpack_2bit(pack_2bit(text), start, length).tolist()


def test_packing_in_steps_fills_and_packs_as_the_whole_array(tmp_path, monkeypatch):
    monkeypatch.setattr(build_module, "_PACK_STEP", 8)
    monkeypatch.setattr(fasta_module, "_RUNS_STEP", 5)
    rng = np.random.default_rng(9)
    codes = rng.integers(0, 4, size=301, dtype=np.uint8)
    for start, length in ((0, 3), (6, 4), (14, 20), (99, 1), (290, 11)):  # runs across steps, at both ends
        codes[start : start + length] = AMBIGUOUS
    reference = fasta_module.Reference("x", ["a"], np.array([301]), np.array([0]), codes.copy())
    starts, lengths = reference.ambiguous_runs()
    assert starts.tolist() == [0, 6, 14, 99, 290] and lengths.tolist() == [3, 4, 20, 1, 11]
    entry = write_packed_text(str(tmp_path), "t.pac", reference.codes, int(lengths.sum()))
    with open(tmp_path / "t.pac", "rb") as handle:
        assert handle.read() == pack_2bit(fill_ambiguous(codes)).tobytes()
    assert entry["bytes"] == 76
    assert reference.codes.tolist() == codes.tolist()  # filled in place, the same bases


def test_reference_encoded_in_steps(tmp_path, monkeypatch):
    records = [("a", "ACGTN" * 41), ("b", "acgtRYKM" * 13)]
    whole = read_reference(write_fasta(tmp_path / "r.fa", records))
    monkeypatch.setattr(fasta_module, "_ENCODE_STEP", 7)
    stepped = read_reference(write_fasta(tmp_path / "r.fa", records))
    assert stepped.codes.tolist() == whole.codes.tolist() and len(whole.codes) == 205 + 104
    assert stepped.names == ["a", "b"] and stepped.lengths.tolist() == [205, 104]
    with pytest.raises(BowmapError, match=r"r2.fa:6: invalid character '-' in record 'b'"):
        read_reference(write_fasta(tmp_path / "r2.fa", [("a", "ACGT" * 20), ("b", "A" * 70 + "-")]))


def _build(tmp_path, name, fasta, threads, max_memory=1 << 40):
    return build_index(
        IndexOptions(
            reference=fasta, prefix=str(tmp_path / name), device_memory=20_000, max_allocation=5_000,
            max_read_length=64, threads=threads, max_memory=max_memory,
        )
    )


def _index_bytes(tmp_path, name, manifest):
    names = [manifest["files"]["pac"]["name"]] + [e["name"] for b in manifest["blocks"] for e in b["files"].values()]
    contents = {}
    for file_name in names:
        with open(tmp_path / file_name, "rb") as handle:
            contents[file_name[len(name) :]] = handle.read()
    return contents


def test_blocks_are_byte_identical_whatever_the_threads(tmp_path, caplog):
    rng = np.random.default_rng(3)
    sequence = "".join("ACGT"[code] for code in random_genome(rng, 100_000))
    fasta = write_fasta(tmp_path / "ref.fa", [("c1", sequence[:61_000]), ("c2", "N" * 500 + sequence[61_000:])])
    with caplog.at_level(logging.INFO, logger="bowmap.index_builder"):
        one = _build(tmp_path, "one", fasta, threads=1)
    assert "with 1 block(s) at once" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="bowmap.index_builder"):
        three = _build(tmp_path, "three", fasta, threads=3)
    assert "with 3 block(s) at once" in caplog.text and "in its process" in caplog.text
    assert len(one["blocks"]) >= 4
    assert json.dumps(one["blocks"]).replace('"one.', '"three.') == json.dumps(three["blocks"])
    assert _index_bytes(tmp_path, "one", one) == _index_bytes(tmp_path, "three", three)
    assert load_index(str(tmp_path / "three")).total_length == 100_500
    assert not multiprocessing.active_children()


def test_a_block_over_the_cap_is_built_alone_with_a_warning(tmp_path, caplog):
    fasta = write_fasta(tmp_path / "ref.fa", [("c", "ACGTTGCAAT" * 3000)])
    with caplog.at_level(logging.INFO, logger="bowmap.index_builder"):
        manifest = _build(tmp_path, "idx", fasta, threads=2, max_memory=1 << 20)
    assert "over --max-memory 0.00 GiB: it is built alone" in caplog.text
    assert "with 1 block(s) at once" in caplog.text
    assert len(manifest["blocks"]) >= 2 and load_index(str(tmp_path / "idx")).total_length == 30_000


def test_schedule_follows_threads_and_the_cap():
    mib = 1 << 20
    lengths = [100 * mib, 100 * mib, 100 * mib, 10 * mib]
    one = block_peak_bytes(100 * mib, 32)
    unlimited = plan_schedule(lengths, 32, 1 << 50, threads=16, baseline=0)
    assert unlimited.at_once == 4 and unlimited.order == [0, 1, 2, 3] and unlimited.over_cap == []
    assert unlimited.peak == sum(unlimited.predictions)
    assert plan_schedule(lengths, 32, 1 << 50, threads=2, baseline=0).at_once == 2
    small = block_peak_bytes(10 * mib, 32)
    two = plan_schedule(lengths, 32, 2 * one + small + mib, threads=16, baseline=mib)
    assert two.at_once == 3  # two large ones, and the small one fits beside them, not a third large one
    assert two.peak == 2 * one + small + mib
    assert plan_schedule(lengths, 32, 2 * one + mib, threads=16, baseline=mib).at_once == 2
    alone = plan_schedule(lengths, 32, one // 2, threads=16, baseline=0)
    assert alone.at_once == 1 and alone.over_cap == [0, 1, 2] and alone.peak == one
    assert may_start(0, [], [10**12], 0, 1, 1)  # nothing running: even a block over the cap
    assert not may_start(1, [0], [5, 5], 0, 100, 1)  # no free thread
    assert not may_start(1, [0], [60, 50], 0, 100, 4) and may_start(1, [0], [50, 50], 0, 100, 4)


def test_prediction_covers_a_measured_block(tmp_path):
    """One block of 6 Mbases in a fresh process: its VmHWM under the prediction, and not far under."""
    length = 6_000_000
    text = np.random.default_rng(1).integers(0, 4, size=length, dtype=np.uint8)
    pac = _pac(tmp_path, text)
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        result = pool.apply(write_block, (pac, 0, length, 32, str(tmp_path), "b", 1))
    predicted = block_peak_bytes(length, 32)
    assert 0.5 * predicted < result["peak_bytes"] <= predicted, (result["peak_bytes"], predicted)


def test_a_worker_error_stops_the_build_and_leaves_no_index(tmp_path, monkeypatch):
    from bowmap.index_builder import runner

    fasta = write_fasta(tmp_path / "ref.fa", [("c", "ACGTTGCAAT" * 6000)])
    real = runner._run_in_workers

    def broken_jobs(jobs, *args):
        jobs = {number: (str(tmp_path / "absent.pac"),) + job[1:] for number, job in jobs.items()}
        return real(jobs, *args)

    monkeypatch.setattr(runner, "_run_in_workers", broken_jobs)
    with pytest.raises(BowmapError, match="writing the index failed"):
        _build(tmp_path, "idx", fasta, threads=2)
    assert sorted(os.listdir(tmp_path)) == ["ref.fa"]
    assert not multiprocessing.active_children()


def test_an_interrupt_stops_the_workers_and_leaves_no_index(tmp_path, monkeypatch):
    import multiprocessing.connection

    fasta = write_fasta(tmp_path / "ref.fa", [("c", "ACGTTGCAAT" * 6000)])

    def interrupted(*args, **kwargs):
        assert multiprocessing.active_children()  # workers were running
        raise KeyboardInterrupt

    monkeypatch.setattr(multiprocessing.connection, "wait", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _build(tmp_path, "idx", fasta, threads=2)
    assert sorted(os.listdir(tmp_path)) == ["ref.fa"]
    assert not multiprocessing.active_children()


@pytest.mark.parametrize(
    "arguments, message",
    [(["--threads", "0"], "--threads: 0 is out of range"), (["--max-memory", "lots"], "not a memory size")],
)
def test_bad_threads_and_memory_are_usage_errors(tmp_path, capsys, arguments, message):
    from bowmap.cli import main

    fasta = write_fasta(tmp_path / "ref.fa", [("chr", "ACGTTGCA" * 50)])
    assert main(["index", fasta, str(tmp_path / "ref")] + arguments) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert sorted(os.listdir(tmp_path)) == ["ref.fa"]


def test_cli_logs_the_prediction(tmp_path, capsys):
    from bowmap.cli import main

    fasta = write_fasta(tmp_path / "ref.fa", [("chr", "ACGTTGCA" * 5000)])
    assert main(["index", fasta, str(tmp_path / "ref"), "--threads", "2", "--max-memory", "1G", "--device-mem", "40K"]) == 0
    err = capsys.readouterr().err
    assert "predicted peak" in err and "--max-memory 1.00 GiB, --threads 2" in err, err
    assert os.path.exists(str(tmp_path / "ref") + MANIFEST_SUFFIX)


def test_a_worker_is_spawned_with_no_standard_error_and_the_builder_keeps_its_own(capfd):
    """A block worker gets /dev/null as fd 2 (one whose parent is killed while it starts would
    print multiprocessing's traceback there); the builder's own fd 2 is the same afterwards."""
    from bowmap.index_builder.runner import _stderr_to_null

    with _stderr_to_null():
        process = multiprocessing.get_context("spawn").Process(target=os.write, args=(2, b"from the worker\n"))
        process.start()
    process.join(60)
    os.write(2, b"from the builder\n")
    assert process.exitcode == 0
    assert capfd.readouterr().err == "from the builder\n"
