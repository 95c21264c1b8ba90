"""`bowmap index`: BWT and layout against a naive suffix sort, blocks, the manifest, atomicity."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from bowmap.index_builder import build as build_module
from bowmap.index_builder import runner as runner_module
from bowmap.index_builder.blocks import plan_blocks
from bowmap.index_builder.build import IndexOptions, build_index
from bowmap.index_builder.fm_block import build_block
from conftest import build_test_index, codes_to_text, random_genome, write_fasta

from bowmap.align.references.fm_search import bwt_symbol
from bowmap.index.format import (
    BASES_PER_LINE,
    MANIFEST_SUFFIX,
    ROWS_PER_GROUP,
    unpack_2bit,
)
from bowmap.index.load import load_index, verify_index
from bowmap.runtime.errors import BowmapError, UsageError


def naive_suffix_array(text: np.ndarray) -> list[int]:
    """All n+1 suffixes (the empty one first), sorted: the definition the index must follow."""
    as_bytes = text.tobytes()
    return sorted(range(len(text) + 1), key=lambda start: as_bytes[start:])


@pytest.mark.parametrize("length", [1, 2, 95, 96, 191, 192, 193, 1000])
@pytest.mark.parametrize("sa_sample", [1, 3, 32])
def test_block_arrays_follow_the_naive_suffix_array(length, sa_sample):
    rng = np.random.default_rng(length * 31 + sa_sample)
    text = random_genome(rng, length) if length > 50 else rng.integers(0, 4, size=length, dtype=np.uint8)
    arrays = build_block(text, sa_sample)
    suffix_array = naive_suffix_array(text)
    assert arrays.primary == suffix_array.index(0)
    bwt = [text[start - 1] for start in suffix_array if start != 0]  # the stored BWT: "$" dropped

    class Block:  # the fields the reference's unpacking helper reads
        occ, primary = arrays.occ, arrays.primary

    rows = [row for row in range(length + 1) if row != arrays.primary]
    assert bwt_symbol(Block, np.array(rows)).tolist() == bwt
    for line in range(len(arrays.occ)):
        before = np.bincount(np.array(bwt[: line * BASES_PER_LINE], dtype=np.int64), minlength=4)
        assert arrays.occ[line, :4].tolist() == before.tolist()
    marked = [row for row, start in enumerate(suffix_array) if start < length and start % sa_sample == 0]
    bits = (arrays.marks[:, 1:, None] >> np.arange(32, dtype=np.uint32)) & 1
    assert np.flatnonzero(bits.reshape(-1)).tolist() == marked
    assert arrays.samples.tolist() == [suffix_array[row] for row in marked]
    ranks = np.concatenate(([0], np.cumsum(bits.reshape(-1, ROWS_PER_GROUP).sum(axis=1))[:-1]))
    assert arrays.marks[:, 0].tolist() == ranks.tolist()
    assert arrays.symbol_counts.tolist() == np.bincount(text, minlength=4).tolist()


@pytest.mark.parametrize("total, block, overlap", [(10, 100, 5), (1000, 300, 50), (1001, 300, 50), (301, 300, 299)])
def test_block_plan_covers_every_span_of_overlap_length(total, block, overlap):
    plan = plan_blocks(total, block, overlap)
    assert plan[0][0] == 0 and sum(plan[-1]) == total
    assert all(length <= block for _, length in plan)
    for start in range(total - overlap + 1):
        assert any(first <= start and start + overlap <= first + length for first, length in plan)


def test_block_plan_refuses_memory_below_the_overlap():
    with pytest.raises(UsageError, match="--device-mem"):
        plan_blocks(1000, 100, 100)


def test_index_round_trip_with_contigs_and_ambiguous_runs(tmp_path):
    rng = np.random.default_rng(3)
    sequences = [codes_to_text(random_genome(rng, size)).lower() for size in (5000, 30, 7000)]
    sequences[0] = sequences[0][:100] + "N" * 250 + sequences[0][350:]
    sequences[2] = "nnn" + sequences[2][3:-1] + "R"
    index = build_test_index(tmp_path, list(zip(["alpha", "beta", "gamma"], sequences)), device_memory=8_000)
    assert len(index.blocks) > 2
    assert index.contig_names == ["alpha", "beta", "gamma"]
    assert index.contig_lengths.tolist() == [5000, 30, 7000]
    assert index.contig_starts.tolist() == [0, 5000, 5030]
    assert index.ambiguous_starts.tolist() == [100, 5030, 12029]
    assert index.ambiguous_lengths.tolist() == [250, 3, 1]
    text = index.text()
    original = "".join(sequences).upper()
    clean = np.array([base in "ACGT" for base in original])
    assert codes_to_text(text[clean]) == "".join(base for base in original if base in "ACGT")
    np.testing.assert_array_equal(unpack_2bit(index.packed, 4999, 40), text[4999:5039])
    contig, offset = index.to_contig(np.array([0, 4999, 5000, 5029, 5030, 12029]))
    assert contig.tolist() == [0, 0, 1, 1, 2, 2] and offset.tolist() == [0, 4999, 0, 29, 0, 6999]
    clean_spans = index.span_is_clean(np.array([0, 91, 350, 4990, 5000, 5029, 5033, 12000]), 10)
    assert clean_spans.tolist() == [True, False, True, True, True, False, True, True]
    assert index.span_is_clean(np.array([12020]), 9).tolist() == [True]
    assert index.span_is_clean(np.array([12020]), 10).tolist() == [False]
    for block in index.blocks:  # each block indexes its slice of the text
        assert block.symbol_counts.tolist() == np.bincount(text[block.start : block.start + block.length], minlength=4).tolist()


@pytest.fixture
def small_index(tmp_path):
    rng = np.random.default_rng(5)
    build_test_index(tmp_path, [("chr", codes_to_text(random_genome(rng, 3000)))], device_memory=4_000)
    return str(tmp_path / "ref")


def edit_manifest(prefix, change):
    path = prefix + MANIFEST_SUFFIX
    manifest = json.loads(open(path).read())
    change(manifest)
    with open(path, "w") as handle:
        json.dump(manifest, handle)


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda prefix: os.unlink(prefix + MANIFEST_SUFFIX), "no bowmap index"),
        (lambda prefix: open(prefix + MANIFEST_SUFFIX, "w").write("PK\x03\x04"), "not a bowmap index manifest"),
        (lambda prefix: edit_manifest(prefix, lambda m: m.update(magic="other")), "not a bowmap index manifest"),
        (lambda prefix: edit_manifest(prefix, lambda m: m.update(format_version=0)), "format version 0"),
        (lambda prefix: edit_manifest(prefix, lambda m: m.pop("contigs")), "damaged manifest"),
        (lambda prefix: os.truncate(prefix + ".1.occ", 100), "truncated"),
        (lambda prefix: os.unlink(prefix + ".0.sa"), "missing"),
        (lambda prefix: os.truncate(prefix + ".pac", 0), "truncated"),
    ],
)
def test_load_refuses_a_damaged_index(small_index, damage, message):
    load_index(small_index)
    damage(small_index)
    with pytest.raises(BowmapError, match=message):
        load_index(small_index)


def set_contig(field, value, contig=0):
    return lambda manifest: manifest["contigs"][contig].update({field: value})


def add_contig(manifest):
    manifest["contigs"].append({"name": "extra", "start": 3000, "length": 10})


@pytest.mark.parametrize(
    "change, message",
    [
        (set_contig("length", 5000), "contig lengths sum to 5000 bases, the index holds 3000"),
        (set_contig("length", 0), "has length < 1"),
        (set_contig("start", 7), "starts at 7"),
        (add_contig, "sum to 3010"),
        (set_contig("name", "two words"), "'two words' is not a valid SAM reference name"),
        (set_contig("name", "*"), "not a valid SAM reference name"),
        (set_contig("name", 12), "12 is not a valid SAM reference name"),
        (set_contig("length", 1e30), "damaged manifest"),
        (lambda manifest: manifest.update(contigs=[]), "no contigs"),
        (lambda manifest: manifest["blocks"][1].update(start=2990), "block 1 lies outside"),
        (lambda manifest: manifest["ambiguous"].update(starts=[2999], lengths=[5]), "ambiguous runs"),
    ],
)
def test_load_checks_the_manifest_contigs_and_names_the_manifest(small_index, change, message):
    """A wrong contig length reached the SAM header (LN) unchecked; every error names the manifest."""
    edit_manifest(small_index, change)
    with pytest.raises(BowmapError) as caught:
        load_index(small_index)
    assert str(caught.value).startswith(small_index + MANIFEST_SUFFIX + ": damaged manifest")
    assert message in str(caught.value)


def test_a_worker_loading_with_the_checked_identity_refuses_a_rebuilt_index(small_index, tmp_path):
    """What a worker process of `align` does: it maps exactly the files its run checked."""
    checked = load_index(small_index)
    again = load_index(small_index, verify=False, identity=checked.identity)  # the same files: fine
    assert again.contig_names == ["chr"] and again.manifest == checked.manifest
    fasta = write_fasta(tmp_path / "new.fa", [("other", "ACGT" * 750)])
    build_index(IndexOptions(reference=fasta, prefix=small_index, device_memory=4_000, max_allocation=1_000, max_read_length=64))
    with pytest.raises(BowmapError, match=r"ref\.pac: index file changed since this run checked the index"):
        load_index(small_index, verify=False, identity=checked.identity)
    # The parent's own checksum pass hashes the files it mapped, not the new ones.
    with pytest.raises(BowmapError, match="changed since"):
        verify_index(checked)
    assert load_index(small_index).contig_names == ["other"]


def test_load_detects_a_flipped_byte(small_index):
    with open(small_index + ".0.mrk", "r+b") as handle:
        handle.seek(5)
        byte = handle.read(1)
        handle.seek(5)
        handle.write(bytes([byte[0] ^ 1]))
    with pytest.raises(BowmapError, match="corrupted"):
        load_index(small_index)
    load_index(small_index, verify=False)  # sizes still match: only the checksum sees it


def test_the_first_damaged_file_in_the_manifests_order_is_the_error(small_index):
    """verify_index hashes the files at once in threads; the error names the first damaged file in
    the manifest's order (the text's .pac, then each block's files), whichever thread ends first."""
    from bowmap.index.load import verify_index

    index = load_index(small_index, verify=False)
    names = [entry["name"] for entry in index.manifest["files"].values()]
    names += [entry["name"] for block in index.manifest["blocks"] for entry in block["files"].values()]
    assert len(names) >= 5
    for damaged in (names[-2:], names[1:3], names[:1] + names[-1:]):
        originals = {}

        def flip(path, data):  # in place, its modification time kept: the loaded stats still match
            times = os.stat(path)
            data[len(data) // 2] ^= 0x40
            with open(path, "r+b") as handle:
                handle.write(bytes(data))
            os.utime(path, ns=(times.st_atime_ns, times.st_mtime_ns))

        for name in damaged:
            path = os.path.join(os.path.dirname(small_index), name)
            originals[path] = bytearray(open(path, "rb").read())
            flip(path, originals[path])
        try:
            with pytest.raises(BowmapError, match="corrupted") as raised:
                verify_index(index)
            assert os.path.basename(str(raised.value).split(":")[0]) == damaged[0], (damaged, str(raised.value))
        finally:
            for path, data in originals.items():
                flip(path, data)
    verify_index(index)


def test_failed_build_leaves_the_old_index_and_no_temporary_files(small_index, tmp_path, monkeypatch):
    before = sorted(os.listdir(tmp_path))
    options = IndexOptions(
        reference=write_fasta(tmp_path / "new.fa", [("x", "ACGT" * 3000)]),
        prefix=small_index,
        device_memory=4_000,
        max_allocation=1_000,
        max_read_length=64,
        threads=1,  # blocks in this process, where the patched write_block runs (workers: test_parallel_build)
    )

    def fail(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner_module, "write_block", fail)
    with pytest.raises(KeyboardInterrupt):
        build_index(options)
    assert sorted(os.listdir(tmp_path)) == sorted(before + ["new.fa"])
    assert load_index(small_index).contig_names == ["chr"]


def test_large_genome_sizes_blocks_by_the_selected_device(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(build_module, "GUARANTEED_MEMORY", 1000)  # as if the genome were large
    fasta = write_fasta(tmp_path / "ref.fa", [("chr", "ACGTTGCA" * 500)])
    with caplog.at_level("INFO", logger="bowmap.index_builder"):
        manifest = build_index(IndexOptions(reference=fasta, prefix=str(tmp_path / "ref"), devices="cpu"))
    from bowmap.runtime.devices import list_devices, parse_device_spec

    (device,) = parse_device_spec("cpu", list_devices())
    assert manifest["parameters"]["device_memory"] == device.global_memory
    assert "sizing blocks for" in caplog.text


def test_small_genome_needs_no_device_query(tmp_path, monkeypatch):
    from bowmap.runtime import devices

    monkeypatch.setattr(devices, "list_devices", lambda: pytest.fail("queried the devices"))
    fasta = write_fasta(tmp_path / "ref.fa", [("chr", "ACGTTGCA" * 500)])
    manifest = build_index(IndexOptions(reference=fasta, prefix=str(tmp_path / "ref")))
    assert len(manifest["blocks"]) == 1


def test_spans_mark_ambiguous_bases(tmp_path):
    sequence = "ACGTNNACGTRACGT"
    index = build_test_index(tmp_path, [("a", sequence), ("b", "TTTTN")])
    codes = index.spans(np.array([0, 3, 10, 15, 19]), np.array([15, 4, 1, 5, 1]))
    decode = "ACGTN"
    text = "".join(decode[code] for code in codes)
    assert text == "ACGTNNACGTNACGT" + "TNNA" + "N" + "TTTTN" + "N"
    assert index.spans(np.array([], dtype=np.int64), np.array([], dtype=np.int64)).tolist() == []


def test_spans_equal_the_per_base_lookup_on_random_spans(tmp_path):
    rng = np.random.default_rng(11)
    letters = np.frombuffer(b"ACGTN", dtype=np.uint8)
    sequences = []
    for length in (1, 3, 517, 1203):
        codes = rng.integers(0, 4, size=length)
        for _ in range(length // 100):  # ambiguous runs of 1..12 bases
            start = int(rng.integers(0, length))
            codes[start : start + int(rng.integers(1, 13))] = 4
        sequences.append(letters[codes].tobytes().decode())
    index = build_test_index(tmp_path, [(f"c{i}", s) for i, s in enumerate(sequences)])
    total = index.total_length
    starts = rng.integers(0, total, size=3000)
    lengths = np.minimum(rng.integers(0, 260, size=3000), total - starts)
    lengths[::7] = 0
    lengths[1::11] = total - starts[1::11]  # up to the text's very end
    positions = np.concatenate([np.arange(s, s + n) for s, n in zip(starts, lengths)]).astype(np.int64)
    assert np.array_equal(index.spans(starts, lengths), index.codes_at(positions))
    assert index.spans(np.array([total - 1]), np.array([1])).tolist() == index.codes_at(np.array([total - 1])).tolist()


@pytest.mark.parametrize("suffix", ["/", "/.", "/..", "//"])
def test_a_prefix_naming_a_folder_is_a_usage_error_and_writes_nothing(tmp_path, capsys, suffix):
    """`index REF a/` wrote the manifest as a/.bmi and the data files as hidden files beside a/:
    a second index at b/ replaced the first one's data."""
    from bowmap.cli import main

    fasta = write_fasta(tmp_path / "ref.fa", [("chr", "ACGTTGCA" * 50)])
    (tmp_path / "a").mkdir()
    before = sorted(os.listdir(tmp_path))
    prefix = str(tmp_path / "a") + suffix
    assert main(["index", fasta, prefix]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"bowmap: error: PREFIX {prefix!r} names a folder"), err
    assert sorted(os.listdir(tmp_path)) == before and os.listdir(tmp_path / "a") == []


@pytest.mark.parametrize("spec, message", [("foo", "expected gpu, cpu, all or device indexes"), ("99", "there is no device 99")])
def test_index_checks_devices_as_align_does(tmp_path, capsys, spec, message):
    """`index --devices foo` was accepted when the reference was small (no device query)."""
    from bowmap.cli import main

    fasta = write_fasta(tmp_path / "ref.fa", [("chr", "ACGTTGCA" * 50)])
    assert main(["index", fasta, str(tmp_path / "ref"), "--devices", spec]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert sorted(os.listdir(tmp_path)) == ["ref.fa"]
    assert main(["-q", "index", fasta, str(tmp_path / "ref"), "--devices", "cpu"]) == 0  # a good one still works
