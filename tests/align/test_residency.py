"""Mapping block by block (`align --device-mem`): index blocks streamed through a few device
slots give the seeds, windows and SAM of the all-resident run, within the memory asked for."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
from conftest import build_test_index, codes_to_text, random_genome

from bowmap.align.seed.fm_search import DeviceBlock, FMSearch
from bowmap.align.seed.residency import (
    DEFAULT_CHUNK_BASES,
    LARGEST_STREAMED_CHUNK_BASES,
    SMALLEST_RESIDENT_CHUNK_BASES,
    SMALLEST_STREAMED_CHUNK_BASES,
    BlockResidency,
    StreamingSearch,
    plan_memory,
    queue_pair_bytes,
    slot_bytes,
    text_device_bytes,
)
from bowmap.align.seed.seeds import SeedOptions, extract_seeds
from bowmap.align.seed.filter import SeedFilter
from bowmap.cli import main
from bowmap.index.load import load_index
from bowmap.runtime.errors import BowmapError

DATA = Path(__file__).resolve().parents[2] / "data"
LAMBDA = DATA / "lambda_virus.fa"
READS = DATA / "lambda_reads_100bp.fq.gz"
R1, R2 = DATA / "lambda_pairs_R1.fq.gz", DATA / "lambda_pairs_R2.fq.gz"
FIELDS = ("read", "reverse", "start", "end", "hits")


def run(capsys, *argv):
    code = main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_streamed_blocks_give_the_resident_windows(tmp_path, device):
    """SeedFilter over 1 or 2 slots of 4 blocks (hits on the device, and on the host; rescue
    seeds) against the blocks all resident: the same windows, block uploads that follow the
    sweeps (a round of seeds searches last to first, then locates first to last)."""
    rng = np.random.default_rng(29)
    genome = random_genome(rng, 60_000)
    for copy in range(6):  # an interspersed repeat family: crowded reads get long seeds
        genome[5_000 + copy * 9_000 : 5_300 + copy * 9_000] = genome[1_000:1_300]
    index = build_test_index(tmp_path, [("chr", codes_to_text(genome))], device_memory=25_000, max_read_length=150)
    assert len(index.blocks) == 4
    resident = [DeviceBlock(device, block) for block in index.blocks]
    # 400 reads of 100 bases from random places, half reverse-complemented, 3% substitutions.
    reads = genome[rng.integers(0, len(genome) - 100, 400)[:, None] + np.arange(100)]
    flipped = rng.random(400) < 0.5
    reads[flipped] = 3 - reads[flipped][:, ::-1]
    errors = rng.random(reads.shape) < 0.03
    reads[errors] = (reads[errors] + rng.integers(1, 4, int(errors.sum()))) % 4
    codes, reverse_codes = reads.reshape(-1).astype(np.uint8), (3 - reads[:, ::-1]).reshape(-1).astype(np.uint8)
    offsets = np.arange(401, dtype=np.int64) * 100
    poor = rng.random(400) < 0.3
    options = SeedOptions(max_occurrences=4)
    expected = SeedFilter(index, resident, FMSearch(device), options)
    windows = expected.windows(codes, reverse_codes, offsets)
    rescued = expected.rescue_windows(codes, reverse_codes, offsets, poor)
    for slots in (1, 2):
        residency = BlockResidency(device, index.blocks, slots)
        for hits_on_device in (True, False):
            streamed = SeedFilter(index, residency.blocks, StreamingSearch(device, device.queue(), residency), options,
                                  hits_on_device=hits_on_device)
            assert (streamed._hit_buffers is not None) == hits_on_device
            uploads = residency.uploads
            got = streamed.windows(codes, reverse_codes, offsets)
            for name in FIELDS:
                np.testing.assert_array_equal(getattr(got, name), getattr(windows, name), err_msg=f"{slots} {name}")
            assert residency.uploads > uploads  # blocks went through the slots
            got = streamed.rescue_windows(codes, reverse_codes, offsets, poor)
            for name in FIELDS:
                np.testing.assert_array_equal(getattr(got, name), getattr(rescued, name), err_msg=f"{slots} rescue {name}")
    # One round on the device: 4 blocks through 1 slot, search 3, 2, 1, 0 then locate 0, 1, 2, 3
    # (block 0 still resident): 7 uploads at most, then 6 a round (the sweep starts on block 3).
    residency = BlockResidency(device, index.blocks, 1)
    streamed = SeedFilter(index, residency.blocks, StreamingSearch(device, device.queue(), residency), options)
    sent = streamed._send(np.concatenate((codes, reverse_codes)), True)
    seeds = extract_seeds(codes, reverse_codes, offsets, options)
    streamed._round(seeds, 400, 0, True, sent)
    assert residency.uploads == 7
    streamed._round(seeds, 400, 0, True, sent)
    assert residency.uploads == 13
    with pytest.raises(RuntimeError, match="outside a BlockResidency session"):
        residency.blocks[0].occ


def gpu_sized_index(blocks: int, scale: int = 1):
    """What plan_memory reads of an index, at a GPU's scale: ``blocks`` blocks of ``scale`` times
    4 GiB (their overlaps 1,280 bases), a packed text of 768 MiB, 25 contigs."""
    from types import SimpleNamespace

    def block(number):
        sizes = SimpleNamespace(nbytes=scale << 31), SimpleNamespace(nbytes=scale << 30), SimpleNamespace(nbytes=scale << 30)
        return SimpleNamespace(occ=sizes[0], marks=sizes[1], samples=sizes[2], start=number << 32, length=(1 << 32) + 1280)

    return SimpleNamespace(blocks=[block(number) for number in range(blocks)], packed=SimpleNamespace(nbytes=768 << 20),
                           total_length=blocks << 32, ambiguous_starts=[], contig_starts=[0] * 25)


def test_the_plan_streams_only_what_does_not_fit():
    GIB = 1 << 30
    index = gpu_sized_index(6)
    text, slot = text_device_bytes(index), slot_bytes(index.blocks)
    assert (text, slot) == (768 << 20, 4 * GIB)
    everything = text + 6 * slot
    pair = queue_pair_bytes(index, DEFAULT_CHUNK_BASES)

    def plan(memory, chunk_bases=None, queue_pairs=None, host=None, memories=None):
        return plan_memory(index, memories or [memory], chunk_bases, queue_pairs, 2, host, 5)

    def layout(plan):
        return plan.chunk_bases, plan.queue_pairs, plan.slots, plan.streamed

    def largest_chunk(room, pairs=1):  # the most bases `pairs` pairs' buffers take in `room` bytes
        bases = (room // pairs - queue_pair_bytes(index, 0)) // (queue_pair_bytes(index, 1) - queue_pair_bytes(index, 0))
        assert pairs * queue_pair_bytes(index, bases) <= room < pairs * queue_pair_bytes(index, bases + 1)
        return bases

    assert layout(plan(everything + 2 * pair)) == (DEFAULT_CHUNK_BASES, 2, (6,), False)
    # Two pairs with a slightly smaller chunk rather than one: down to half the usual chunk.
    assert layout(plan(everything + 2 * pair - 1)) == (DEFAULT_CHUNK_BASES - 1, 2, (6,), False)
    assert layout(plan(everything + pair)) == (DEFAULT_CHUNK_BASES, 1, (6,), False)  # one pair fits, two only with half chunks
    # A process short of device memory gets up to four pairs (default_queue_pairs): as many as
    # take chunks of half the usual or more.
    assert layout(plan_memory(index, [everything + 4 * pair], None, None, 4, None, 5)) == (DEFAULT_CHUNK_BASES, 4, (6,), False)
    three = plan_memory(index, [everything + 2 * pair], None, None, 4, None, 5)
    assert layout(three) == (largest_chunk(2 * pair, 3), 3, (6,), False) and three.chunk_bases >= DEFAULT_CHUNK_BASES // 2
    assert layout(plan_memory(index, [everything + 2 * pair], None, 1, 4, None, 5)) == (DEFAULT_CHUNK_BASES, 1, (6,), False)
    # Two pairs asked for: a smaller chunk; with the chunk given too, streamed.
    assert layout(plan(everything + 2 * pair - 1, queue_pairs=2)) == (DEFAULT_CHUNK_BASES - 1, 2, (6,), False)
    assert layout(plan(everything + 2 * pair - 1, DEFAULT_CHUNK_BASES, queue_pairs=2)) == (DEFAULT_CHUNK_BASES, 2, (5,), True)
    # Rather than stream, a smaller chunk: down to SMALLEST_RESIDENT_CHUNK_BASES.
    assert layout(plan(everything + pair - 1)) == (DEFAULT_CHUNK_BASES - 1, 1, (6,), False)
    assert layout(plan(everything + queue_pair_bytes(index, SMALLEST_RESIDENT_CHUNK_BASES))) == (SMALLEST_RESIDENT_CHUNK_BASES, 1, (6,), False)
    below = everything + queue_pair_bytes(index, SMALLEST_RESIDENT_CHUNK_BASES) - 1
    assert layout(plan(below)) == (largest_chunk(below - text - slot), 1, (1,), True)  # the chunk takes all but one slot
    # Streamed: the chunk takes what one slot and the text leave (the device with the least
    # memory rules), the blocks the rest; at most HOST_SHARE of the host over 5 chunks.
    chunk = largest_chunk(16 * GIB - text - slot)
    assert layout(plan(16 * GIB)) == (chunk, 1, (1,), True) and 30 << 20 < chunk < 40 << 20
    assert layout(plan(0, memories=[16 * GIB, 24 * GIB])) == (chunk, 1, (1, 3), True)
    assert layout(plan(16 * GIB, host=64 * GIB)) == (chunk, 1, (1,), True)
    by_host = 8 * GIB // 2 // (5 * 128)
    assert layout(plan(16 * GIB, host=8 * GIB)) == (by_host, 1, (3,), True)
    assert layout(plan(16 * GIB, chunk_bases=1000)) == (1000, 1, (3,), True)  # a chunk given is kept
    assert layout(plan(16 * GIB, chunk_bases=1000, queue_pairs=3)) == (1000, 3, (3,), True)
    assert "mapping block by block, 1 of 6 blocks at once in 16.0 GiB of gpu" in plan(16 * GIB).describe(["gpu"])
    large = gpu_sized_index(8, 4)  # 8 blocks of 16 GiB
    assert layout(plan_memory(large, [120 * GIB], None, None, 2, None, 5)) == (LARGEST_STREAMED_CHUNK_BASES, 1, (1,), True)
    with pytest.raises(BowmapError, match="too small to map block by block: one block"):
        plan(text + slot + queue_pair_bytes(index, 1000) - 1, chunk_bases=1000)
    with pytest.raises(BowmapError, match=f"chunks of {SMALLEST_STREAMED_CHUNK_BASES} bases"):
        plan(text + slot + queue_pair_bytes(index, SMALLEST_STREAMED_CHUNK_BASES) - 1)
    assert plan(text + slot + queue_pair_bytes(index, SMALLEST_STREAMED_CHUNK_BASES)).chunk_bases == SMALLEST_STREAMED_CHUNK_BASES


@pytest.fixture(scope="module")
def lambda_indexes(indexes, tmp_path_factory):
    """The lambda genome as one block, two (the shared fixture's) and five."""
    five = tmp_path_factory.mktemp("five") / "five"
    assert main(["-q", "index", str(LAMBDA), str(five), "--device-mem", "16K", "--max-read-length", "150"]) == 0
    return indexes[0], indexes[1], five


def streaming_memory(prefix, chunk_bases: int, slots: int, pairs: int = 1, processes: int = 1) -> int:
    """--device-mem that holds ``slots`` of the index's blocks beside the text and ``pairs``
    queue pairs of chunks of ``chunk_bases`` bases, in each of ``processes`` processes."""
    index = load_index(str(prefix), verify=False)
    assert slots < len(index.blocks)
    slot, blocks = slot_bytes(index.blocks), sum(block.occ.nbytes + block.marks.nbytes + block.samples.nbytes for block in index.blocks)
    share = text_device_bytes(index) + pairs * queue_pair_bytes(index, chunk_bases) + slots * slot
    return processes * (share + min(slot // 2, blocks - slots * slot - 1))  # less than all blocks need


def sam_body(path) -> list[bytes]:
    return [line for line in Path(path).read_bytes().splitlines() if not line.startswith(b"@PG")]


@pytest.mark.parametrize("paired", [False, True])
def test_block_by_block_gives_the_sam_of_all_blocks_resident(lambda_indexes, tmp_path, capsys, paired):
    """One block, five, and five streamed through 1, 2 or 4 slots (threads, processes, serial;
    chunks given or chosen; R1 and R2 files or interleaved): byte for byte the same SAM."""
    one, two, five = lambda_indexes
    reads = [R1, R2] if paired else [READS]
    out = tmp_path / "expected.sam"
    code, _, err = run(capsys, "-q", "align", one, *reads, "-o", out, "--devices", "cpu")
    assert code == 0, err
    expected = sam_body(out)
    interleaved = tmp_path / "interleaved.fq"
    if paired:
        first, second = (gzip.decompress(path.read_bytes()).decode().splitlines(keepends=True) for path in (R1, R2))
        interleaved.write_text("".join(part for i in range(0, len(first), 4) for part in first[i : i + 4] + second[i : i + 4]))
    runs = [
        ("five resident", five, reads, ["--chunk-bases", "20000"], None),
        ("two, 1 slot", two, reads, ["--chunk-bases", "20000", "--device-mem", streaming_memory(two, 20000, 1)], "1 of 2 blocks"),
        ("five, 1 slot", five, reads, ["--chunk-bases", "20000", "--device-mem", streaming_memory(five, 20000, 1)], "1 of 5 blocks"),
        ("five, 2 slots, 2 queue pairs", five, reads,
         ["--chunk-bases", "9000", "--queues-per-device", "2", "--device-mem", streaming_memory(five, 9000, 2, pairs=2)], "2 of 5 blocks"),
        # Memory for two processes' copies of 4 of the 5 blocks holds one owner's copy of all 5.
        ("five, 4 slots' memory, processes: one owner", five, reads,
         ["--chunk-bases", "9000", "-p", "2", "--device-mem", streaming_memory(five, 9000, 4, processes=2)], None),
        ("five, 1 slot, serial", five, reads, ["--serial", "--chunk-bases", "30000", "--device-mem", streaming_memory(five, 30000, 1)],
         "1 of 5 blocks"),
        ("five, chunks chosen", five, reads, ["--device-mem", "24M"], "chunks of "),
    ]
    if paired:
        runs.append(("five, 1 slot, interleaved", five, [interleaved, "--interleaved"],
                     ["--chunk-bases", "20000", "--device-mem", streaming_memory(five, 20000, 1)], "1 of 5 blocks"))
    for name, prefix, inputs, extra, logged in runs:
        out = tmp_path / "out.sam"
        code, _, err = run(capsys, "align", prefix, *inputs, "-o", out, "--devices", "cpu", *extra)
        assert code == 0, err
        assert ("mapping block by block" in err) == (logged is not None), (name, err)
        assert ("one owner a device" in err) == ("-p" in extra and logged is None), (name, err)
        if logged:
            assert logged in err, (name, err)
            assert "-p" in extra or "block uploads" in err, (name, err)
        assert sam_body(out) == expected, name


@pytest.mark.parametrize("paired", [False, True])
def test_block_by_block_stays_within_the_memory_asked_for(lambda_indexes, tmp_path, capsys, monkeypatch, paired):
    """Every device buffer the run makes (the reused ones at their final, largest size, the
    slots, the text and the tables) adds up to no more than --device-mem."""
    import pyopencl

    from bowmap.align.seed import residency
    from bowmap.runtime import devices

    _, _, five = lambda_indexes
    reused, once, slots = [], [], []
    original_init, original_buffer, original_slot = devices.ReusedBuffer.__init__, pyopencl.Buffer, residency._Slot.__init__

    def init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        reused.append(self)

    def buffer(context, flags, size=0, hostbuf=None):  # made once from host data: text, tables, bounds
        made = original_buffer(context, flags, size, hostbuf)
        if hostbuf is not None:
            once.append(made.size)
        return made

    def slot(self, context, sizes):
        original_slot(self, context, sizes)
        slots.append(self.occ.size + self.marks.size + self.samples.size)

    monkeypatch.setattr(devices.ReusedBuffer, "__init__", init)
    monkeypatch.setattr(pyopencl, "Buffer", buffer)
    monkeypatch.setattr(residency._Slot, "__init__", slot)
    for chunk_bases in (5000, 40000):
        memory = streaming_memory(five, chunk_bases, 2)
        for made in (reused, once, slots):
            made.clear()
        out = tmp_path / "out.sam"
        code, _, err = run(capsys, "align", five, *([R1, R2] if paired else [READS]), "-o", out, "--devices", "cpu",
                           "--chunk-bases", chunk_bases, "--device-mem", memory)
        assert code == 0 and "2 of 5 blocks" in err, err
        assert len(slots) == 2 and len(once) >= 4  # the text, its mask, the windows' bounds, overlap tables
        # The reused buffers at their final (largest) size: each replaced its smaller ones.
        used = sum(staging.capacity for staging in reused) + sum(once) + sum(slots)
        assert used <= memory, (chunk_bases, used, memory)


def test_a_device_memory_too_small_or_malformed_is_refused(lambda_indexes, tmp_path, capsys):
    _, _, five = lambda_indexes
    out = tmp_path / "out.sam"
    code, stdout, err = run(capsys, "align", five, READS, "-o", out, "--devices", "cpu", "--chunk-bases", "20000", "--device-mem", "1M")
    assert code == 1 and "Traceback" not in err and not out.exists()
    assert err.strip().splitlines()[-1].startswith("bowmap: error: 1.0 MiB of device memory") and "too small to map block by block" in err
    code, _, err = run(capsys, "align", five, READS, "-o", out, "--devices", "cpu", "--device-mem", "lots")
    assert code == 2 and "not a memory size" in err and len(err.strip().splitlines()) == 1
