"""The seed/filter stage: seeds where bowtie2 puts them, the kernels' windows equal the
reference's, and simulated reads find their true place among the windows."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest
from conftest import build_test_index, codes_to_text, random_genome

from bowmap.align.seed.fm_search import DeviceBlock, FMSearch
from bowmap.align.references import fm_search as reference
from bowmap.align.seed.seeds import SeedOptions, extract_seeds
from bowmap.align.seed.filter import SeedFilter

COMPLEMENT = np.array([3, 2, 1, 0, 4], dtype=np.uint8)


def simulate_reads(rng, genome, count, length, error_rate=0.01):
    """Reads from random places, half reverse-complemented, with substitutions: codes,
    reverse codes, offsets, true starts and strands."""
    starts = rng.integers(0, len(genome) - length, size=count)
    reads = genome[starts[:, None] + np.arange(length)]
    reverse = rng.random(count) < 0.5
    reads[reverse] = COMPLEMENT[reads[reverse][:, ::-1]]
    errors = rng.random(reads.shape) < error_rate
    reads[errors] = (reads[errors] + rng.integers(1, 4, size=int(errors.sum()))) % 4
    codes = reads.reshape(-1).astype(np.uint8)
    reverse_codes = COMPLEMENT[reads[:, ::-1]].reshape(-1)
    offsets = np.arange(count + 1, dtype=np.int64) * length
    return codes, reverse_codes, offsets, starts, reverse


def test_seeds_follow_the_bowtie2_interval():
    options = SeedOptions(seed_length=20)
    lengths = np.array([0, 19, 20, 21, 100, 150, 250])
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    codes = np.zeros(offsets[-1], dtype=np.uint8)
    seeds = extract_seeds(codes, codes, offsets, options)
    for read, length in enumerate(lengths):
        interval = int(1 + 1.15 * length**0.5)
        expected = list(range(0, length - 20 + 1, interval)) if length >= 20 else []
        if expected and expected[-1] != length - 20:
            expected.append(length - 20)  # one more seed ends at the read's last base
        for reverse in (False, True):
            mine = (seeds.read == read) & (seeds.reverse == reverse)
            assert seeds.read_offset[mine].tolist() == expected
            base = offsets[read] + (len(codes) if reverse else 0)
            assert (seeds.offset[mine] - base).tolist() == expected
    assert interval == 19  # floor(1 + 1.15 * sqrt(250))


@pytest.mark.parametrize("length", [19, 20, 21, 31, 150, 151])
def test_seeds_of_reads_of_one_length_follow_their_definition(length):
    """Reads of one length (extract_seeds tiles one read's offsets), from an offset ``first``,
    every ``interval`` bases, only the reads in a mask: each read's seeds start at first,
    first + interval, ... and one more ends at its last base."""
    rng = np.random.default_rng(length)
    options = SeedOptions(seed_length=20)
    count = 37
    offsets = np.arange(count + 1, dtype=np.int64) * length
    codes = rng.integers(0, 4, offsets[-1]).astype(np.uint8)
    for first, only, interval in ((None, None, None), (np.full(count, 3), None, 7), (None, np.ones(count, bool), 1),
                                  (np.full(count, 5), rng.random(count) < 0.5, None), (rng.integers(0, 4, count), None, 4)):
        seeds = extract_seeds(codes, codes, offsets, options, first=first, only=only, interval=interval)
        step = interval if interval is not None else int(1 + 1.15 * length**0.5)
        for read in range(count):
            start = 0 if first is None else int(first[read])
            expected = list(range(start, length - 20 + 1, step)) if (only is None or only[read]) and length - start >= 20 else []
            if expected and expected[-1] != length - 20:
                expected.append(length - 20)
            assert seeds.within[seeds.seed_first[read] : seeds.seed_first[read + 1]].tolist() == expected


class ReferenceSearcher:
    """The NumPy references behind the FMSearch interface."""

    def search(self, device_block, codes, offsets, lengths):
        return reference.search(device_block.block, codes, offsets, lengths)

    def locate(self, device_block, rows):
        return reference.locate(device_block.block, rows)

    def locate_intervals(self, device_block, lo, hi):
        return reference.locate_intervals(device_block.block, lo, hi)


def test_windows_from_kernels_equal_windows_from_references_and_contain_the_truth(tmp_path, device):
    rng = np.random.default_rng(11)
    genome = random_genome(rng, 30_000)
    index = build_test_index(tmp_path, [("chr", codes_to_text(genome))], device_memory=30_000, max_read_length=150)
    assert len(index.blocks) > 1
    codes, reverse_codes, offsets, starts, reverse = simulate_reads(rng, genome, 301, 100)
    blocks = [DeviceBlock(device, block) for block in index.blocks]
    options = SeedOptions()
    windows = SeedFilter(index, blocks, FMSearch(device), options).windows(codes, reverse_codes, offsets)
    expected = SeedFilter(index, blocks, ReferenceSearcher(), options).windows(codes, reverse_codes, offsets)
    for name in ("read", "reverse", "start", "end", "hits"):
        np.testing.assert_array_equal(getattr(windows, name), getattr(expected, name))
    assert (np.diff(windows.read) >= 0).all()
    assert np.bincount(windows.read).max() <= options.windows_per_read
    found = [
        ((windows.read == read) & (windows.reverse == reverse[read]) & (windows.start <= starts[read]) & (windows.end >= starts[read] + 100)).any()
        for read in range(len(starts))
    ]
    assert np.mean(found) >= 0.98


def test_reads_whose_seeds_all_fail_are_seeded_again(tmp_path, device):
    rng = np.random.default_rng(5)
    genome = rng.integers(0, 4, size=20_000, dtype=np.uint8)
    index = build_test_index(tmp_path, [("chr", codes_to_text(genome))])
    read = genome[5_000:5_100].copy()
    read[[10, 28, 46, 64, 82]] = (read[[10, 28, 46, 64, 82]] + 1) % 4  # one error in every 20-base seed
    offsets = np.array([0, 100])
    reverse_codes = COMPLEMENT[read[::-1]]
    blocks = [DeviceBlock(device, block) for block in index.blocks]
    first_round_only = SeedFilter(index, blocks, FMSearch(device), SeedOptions(reseed_length=0))
    assert len(first_round_only.windows(read, reverse_codes, offsets)) == 0
    windows = SeedFilter(index, blocks, FMSearch(device), SeedOptions()).windows(read, reverse_codes, offsets)
    assert [(w.item(), s.item()) for w, s in zip(windows.reverse, windows.start)] == [(False, 5_000 - 32)]


@pytest.mark.parametrize("limit", [1, 2, 5, 16])
def test_keep_best_takes_half_from_each_strand_then_the_best_of_the_rest(limit):
    from bowmap.align.seed.filter import SeedFilter, Windows

    rng = np.random.default_rng(limit)
    reads = np.sort(rng.integers(0, 40, 900))
    reverse = rng.random(len(reads)) < rng.random(40)[reads]  # some reads lean to one strand
    start = rng.integers(0, 10**6, len(reads))
    order = np.lexsort((start, reverse, reads))
    windows = Windows(reads[order], reverse[order], start[order], start[order] + 200, rng.integers(1, 6, len(reads)))
    kept = SeedFilter(None, [], None, SeedOptions(windows_per_read=limit))._keep_best(windows)
    expected = []
    for read in np.unique(windows.read):
        rows = [int(i) for i in np.flatnonzero(windows.read == read)]
        if len(rows) <= limit:
            expected += rows
            continue
        by_hits = sorted(rows, key=lambda i: (-int(windows.hits[i]), i))  # ties: (strand, start) order
        first = [i for strand in (False, True) for i in [j for j in by_hits if windows.reverse[j] == strand][: limit // 2]]
        rest = [i for i in by_hits if i not in first][: limit - len(first)]
        expected += sorted(first + rest)
    expected = np.array(sorted(expected))
    for name in Windows.FIELDS:
        assert np.array_equal(getattr(kept, name), getattr(windows, name)[expected]), name


def random_hits(rng, index, reads, lengths, per_read_high):
    """Hits as _hits returns them, grouped by read in two rounds (as the long-seed round is
    appended), with the awkward cases: reads without hits, crowded reads with hundreds, runs of
    diagonals a few bases apart (tandem chains cut into bins), hits near contig ends and at the
    text's start (negative diagonals), seeds over ambiguous runs or past their contig (dropped),
    duplicates, and reads of different lengths."""
    counts = rng.integers(0, per_read_high, reads) * (rng.random(reads) < 0.8)
    counts[0] = per_read_high - 1  # the most a read may have
    read = np.repeat(np.arange(reads), counts)
    contig_starts, contig_lengths = index.contig_starts, index.contig_lengths
    contig = rng.integers(0, len(contig_starts), len(read))
    anchor = rng.integers(0, contig_lengths[contig])  # one place per hit, then clustered
    clustered = rng.random(len(read)) < 0.7
    anchor[clustered] = anchor[np.maximum(np.flatnonzero(clustered) - 1, 0)] + rng.integers(-40, 41, int(clustered.sum()))
    positions = np.clip(contig_starts[contig] + anchor, 0, index.total_length - 1)
    read_offset = rng.integers(0, np.maximum(lengths[read] - 15, 1))
    reverse = rng.random(len(read)) < 0.4
    duplicate = rng.random(len(read)) < 0.05
    positions[1:][duplicate[1:]] = positions[:-1][duplicate[1:]]
    seed_length = rng.choice([16, 20, 32], len(read))
    # Two rounds: the second takes a random part of each read's hits, appended after the first.
    second = rng.random(len(read)) < 0.3
    order = np.concatenate((np.flatnonzero(~second), np.flatnonzero(second)))
    return read[order], reverse[order], positions[order], read_offset[order], seed_length[order]


@pytest.mark.parametrize("limit, margin", [(16, 32), (1, 32), (2, 5), (5, 0), (7, 100)])
@pytest.mark.parametrize("grouped, group_keys", [(False, 1024), (True, 1024), (True, 16)])
def test_device_windows_equal_the_host_reference(tmp_path, device, limit, margin, grouped, group_keys):
    """Both kernels (a work-item a read; a work-group a read, its keys sorted in local memory, and
    with 16 keys of room, most reads too many for it) against the host reference."""
    from bowmap.align.seed.filter import DeviceWindows, Windows

    rng = np.random.default_rng(limit * 1000 + margin)
    holed = codes_to_text(random_genome(rng, 5_123))
    holed = holed[:700] + "N" * 30 + holed[730:2000] + "NRY" + holed[2003:]  # ambiguous runs inside a contig
    contigs = [("a", codes_to_text(random_genome(rng, 3_000))), ("b", "ACGT" * 10), ("c", holed), ("d", "N" * 50 + "ACGTTGCA" * 20)]
    index = build_test_index(tmp_path, contigs, max_read_length=300)
    options = SeedOptions(windows_per_read=limit, margin=margin)
    on_device = SeedFilter(index, [], FMSearch(device), options)
    on_host = SeedFilter(index, [], FMSearch(device), options, windows_on_device=False)
    assert on_device.device_windows is not None and on_host.device_windows is None
    on_device.device_windows = DeviceWindows(on_device.searcher.device, on_device.searcher.queue, index, options, grouped, group_keys)
    for reads, high in ((1, 1), (1, 900), (37, 3), (257, 60), (1000, 12)):
        lengths = rng.integers(16, 301, reads)
        lengths[0] = 300
        hits = random_hits(rng, index, reads, lengths, high)
        # The same hits as one, two or three rounds on the device (grouped by read, or not).
        cuts = np.sort(rng.integers(0, len(hits[0]) + 1, 2))
        expected = on_host._merge_on_host(*hits, lengths)
        expected_support = np.zeros(reads, dtype=np.int64)
        np.maximum.at(expected_support, expected.read, expected.hits)
        for rounds in ([hits], [tuple(part) for part in zip(*(np.split(array, cuts[1:]) for array in hits))],
                       [tuple(part) for part in zip(*(np.split(array, cuts) for array in hits))]):
            on_device.device_windows.run(rounds, lengths)
            np.testing.assert_array_equal(on_device.device_windows.best_support(), expected_support)
            got = on_device.device_windows.fetch()
            for name in Windows.FIELDS:
                np.testing.assert_array_equal(getattr(got, name), getattr(expected, name), err_msg=f"{name}, {len(rounds)} rounds")
        # Part of the hits first, then all of them for the reads of a mask only: the others
        # keep their first windows.
        part = tuple(array[: cuts[0]] for array in hits)
        again = rng.random(reads) < 0.5
        on_device.device_windows.run([part], lengths)
        on_device.device_windows.run(rounds, lengths, only=again)
        mixed = on_device.device_windows.fetch()
        before = on_host._merge_on_host(*part, lengths)
        for name in Windows.FIELDS:
            np.testing.assert_array_equal(getattr(mixed, name)[again[mixed.read]], getattr(expected, name)[again[expected.read]], err_msg=name)
            np.testing.assert_array_equal(getattr(mixed, name)[~again[mixed.read]], getattr(before, name)[~again[before.read]], err_msg=name)
        if len(hits[0]) > 1000:
            assert not index.span_is_clean(hits[2], hits[4]).all()  # some hits were dropped
        for name in Windows.FIELDS:
            np.testing.assert_array_equal(getattr(got, name), getattr(expected, name), err_msg=f"{name}, {reads} reads")
            assert getattr(got, name).dtype == getattr(expected, name).dtype, name
        if high > 60:
            assert len(expected) and np.bincount(expected.read).max() == limit  # crowded reads were cut


def test_device_windows_need_32_bit_positions(tmp_path):
    from types import SimpleNamespace

    from bowmap.align.seed.filter import DeviceWindows

    def index(total, contigs, longest=1024):
        return SimpleNamespace(total_length=total, max_read_length=longest, contig_starts=np.zeros(contigs, dtype=np.int64), ambiguous_starts=[])

    assert DeviceWindows.fits(index(3_200_000_000, 3_000))  # a human assembly
    assert not DeviceWindows.fits(index(2**32 - 1000, 1))
    assert not DeviceWindows.fits(index(3_200_000_000, 2**22))  # too many contigs for the keys
    assert not DeviceWindows.fits(None)
    assert not DeviceWindows.fits(index(10_000, 1, longest=5_000))  # its offset bit set would not fit a work-item


def test_windows_order_by_one_key_equals_the_lexsort():
    from bowmap.align.seed.filter import _by_read_strand_start

    rng = np.random.default_rng(8)
    for count, text_length in ((0, 10), (1, 10), (1000, 5000), (20000, 64_000_000), (300, 2**61)):  # the last: no room for the key
        read = np.sort(rng.integers(0, max(1, count // 8), count))
        reverse = rng.random(count) < 0.5
        start = rng.integers(0, min(text_length, 3000), count)
        np.testing.assert_array_equal(_by_read_strand_start(read, reverse, start, text_length), np.lexsort((start, reverse, read)))


def seeded_reads(rng, genome, count, length, near=()):
    """Simulated reads (see simulate_reads), some of them shorter than a seed, some with an
    ambiguous base (N), and about a third of them from around the text spans ``near`` ((start,
    end) pairs: the overlaps of index blocks), many inside them."""
    codes, _, offsets, _, _ = simulate_reads(rng, genome, count, length, error_rate=0.02)
    reads = codes.reshape(count, length)
    if near and count:
        moved = np.flatnonzero(rng.random(count) < 0.35)
        spans = np.array(near)[rng.integers(0, len(near), len(moved))]
        starts = np.clip(rng.integers(spans[:, 0] - length // 2, spans[:, 1] - length // 2), 0, len(genome) - length)
        reads[moved] = genome[starts[:, None] + np.arange(length)]
    reads[rng.random(reads.shape) < 0.003] = 4
    lengths = np.diff(offsets)
    lengths[rng.random(count) < 0.1] = 7  # too short for any seed: cut to 7 bases
    keep = np.concatenate([np.arange(o, o + n) for o, n in zip(offsets[:-1], lengths)]) if count else np.zeros(0, dtype=np.int64)
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    codes = codes[keep]
    reverse_codes = np.concatenate([COMPLEMENT[codes[a:b][::-1]] for a, b in pairwise(offsets)]) if count else codes
    return codes, reverse_codes, offsets


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_choose_seeds_kernel_equals_the_reference(device, seed):
    import pyopencl as cl

    from bowmap.align.seed.seeds import choose_seeds

    rng = np.random.default_rng(seed)
    searcher = FMSearch(device)
    for reads, high in ((0, 1), (1, 1), (1, 40), (7, 3), (300, 30), (2000, 12)):
        per_read = rng.integers(0, high, reads)
        seed_read = np.repeat(np.arange(reads), per_read)
        seed_read = np.concatenate((seed_read, seed_read))  # forward seeds, then reverse
        kinds = rng.integers(0, 5, len(seed_read))  # absent, rare, tied, near the cap, over it
        occurrences = np.choose(kinds, [np.zeros(len(seed_read), dtype=np.int64), rng.integers(1, 6, len(seed_read)),
                                        np.full(len(seed_read), 40), rng.integers(490, 502, len(seed_read)), rng.integers(501, 10**6, len(seed_read))])
        lo = rng.integers(1, 2**30, len(seed_read)) * (occurrences > 0)
        results = np.stack((lo, lo + occurrences, np.zeros_like(lo))).astype(np.uint32)
        buffer = cl.Buffer(device.context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR, hostbuf=np.concatenate((results.reshape(-1), np.zeros(1, dtype=np.uint32))))
        seed_first = np.concatenate(([0], np.cumsum(per_read)))
        for budget in (1, 40, 256, 2000):
            taken_buffer, rows, crowded = searcher.choose_seeds(buffer, seed_first, 500, budget)
            taken = np.zeros(len(seed_read), dtype=np.uint32)
            if len(taken):
                cl.enqueue_copy(searcher.queue, taken, taken_buffer, is_blocking=True)
            chosen, expected_crowded = choose_seeds(occurrences, seed_read, reads, 500, budget)
            expected = np.zeros(len(seed_read), dtype=np.int64)
            expected[chosen] = occurrences[chosen]
            np.testing.assert_array_equal(taken, expected)
            np.testing.assert_array_equal(rows, np.bincount(seed_read, weights=expected, minlength=reads))
            np.testing.assert_array_equal(crowded, expected_crowded)
        if reads > 100:
            assert expected_crowded.any() and (~expected_crowded).any()


def by_read(first, positions, tags):
    """Each read's hits as a sorted list of (position, tag): the rounds' contract is per read."""
    return [sorted(zip(positions[a:b].tolist(), tags[a:b].tolist())) for a, b in pairwise(first)]


# Device memory that cuts blocked_genome's 40,000 bases into that many blocks (150-base reads).
BLOCK_MEMORY = {1: 1 << 30, 2: 28_000, 3: 19_000, 4: 14_000}


@pytest.fixture(scope="module", params=sorted(BLOCK_MEMORY))
def blocked_genome(request, tmp_path_factory):
    """A 40,000-base genome with a microsatellite, indexed as 1 to 4 blocks, with seeds made to
    lie in every overlap of two blocks: a tandem repeat of 3-base units (a seed's occurrences
    counted twice there would pass max_occurrences) and a copy of a segment found elsewhere.
    Returns the genome's codes, the index and the overlaps' (start, end) text spans."""
    rng = np.random.default_rng(request.param)
    genome = random_genome(rng, 40_000)
    genome[20_000:20_600] = np.tile(genome[20_000:20_006], 100)  # a microsatellite: crowded seeds
    folder = tmp_path_factory.mktemp(f"blocks{request.param}")
    index = build_test_index(folder, [("chr", codes_to_text(genome))], device_memory=BLOCK_MEMORY[request.param], max_read_length=150)
    plan = [(block.start, block.length) for block in index.blocks]
    overlaps = [(after.start, before.start + before.length) for before, after in pairwise(index.blocks)]
    if overlaps:
        for start, end in overlaps:
            genome[start + 10 : start + 160] = np.tile(genome[start + 10 : start + 13], 50)
            genome[end - 180 : end - 30] = genome[1_000:1_150]
        index = build_test_index(folder, [("chr", codes_to_text(genome))], device_memory=BLOCK_MEMORY[request.param], max_read_length=150,
                                 name="seeded")
        assert [(block.start, block.length) for block in index.blocks] == plan  # the blocks depend on the length only
    assert len(index.blocks) == request.param
    return genome, index, overlaps


@pytest.mark.parametrize("seed_length, budget", [(20, 256), (16, 7), (32, 256), (12, 40)])
def test_seed_hits_on_the_device_equal_the_host_hits(device, blocked_genome, seed_length, budget):
    """FMSearch.seed_hits (seed_search, and with several blocks add_block_occurrences,
    subtract_overlaps and block_rows, then choose_seeds and locate_hits) against SeedFilter._hits:
    the same counts, the same crowded reads, and per read the same hits, each as many times as
    blocks hold it (the host makes them unique); and the same hits in the same slots whether two
    blocks share a launch or each has its own (blocks_together), for reads from anywhere and from
    the last block's part alone (most of their hits in one block)."""
    import pyopencl as cl

    from bowmap.align.seed.fm_search import HitBuffers

    genome, index, overlaps = blocked_genome
    rng = np.random.default_rng(seed_length * 100 + budget + len(index.blocks))
    blocks = [DeviceBlock(device, block) for block in index.blocks]
    searcher = FMSearch(device)
    options = SeedOptions(seed_length=seed_length, positions_per_read=budget, max_occurrences=60)
    host = SeedFilter(index, blocks, searcher, options, hits_on_device=False)
    table = searcher.overlap_table(*host._overlap_table(seed_length)) if len(blocks) > 1 else None
    buffers = HitBuffers(device)
    subtracted = repeated = 0
    last = index.blocks[-1].start + 600  # past the last overlap
    for count, length, source in ((0, 100, genome), (1, 150, genome), (57, 100, genome), (400, 120, genome), (30, 100, genome[last:])):
        codes, reverse_codes, offsets = seeded_reads(rng, source, count, length, overlaps if source is genome else ())
        seeds = extract_seeds(codes, reverse_codes, offsets, options)
        (read, reverse, positions, read_offset, lengths), crowded = host._hits(seeds, count)
        half = len(seeds.read) // 2
        seed_first = np.concatenate(([0], np.cumsum(np.bincount(seeds.read[:half], minlength=count))))
        codes_given = seeds.codes if count % 2 else searcher.send_codes(seeds.codes)  # host codes, or sent before
        arguments = (blocks, codes_given, offsets, seed_first, seeds.read_offset[:half], seed_length)
        # Each seed's occurrences in the text: all blocks' less those inside overlaps.
        in_blocks = sum((hi.astype(np.int64) - lo for lo, hi, _ in (searcher.search(block, seeds.codes, seeds.offset, seeds.length) for block in blocks)),
                        np.zeros(2 * half, dtype=np.int64))
        in_overlaps = host._overlap_occurrences(seeds)
        np.testing.assert_array_equal(searcher.seed_occurrences(*arguments, table), in_blocks - in_overlaps)
        subtracted += int((in_overlaps > 0).sum())
        hits, device_crowded = searcher.seed_hits(*arguments, options.max_occurrences, budget, buffers, table)
        got = [np.zeros(n, dtype=np.uint32) for n in (count + 1, hits.count, hits.count)]
        for array, buffer in zip(got, (hits.first, hits.positions, hits.tags)):
            if len(array):
                cl.enqueue_copy(searcher.queue, array, buffer, is_blocking=True)
        # Every block wholly holding an occurrence locates it.
        copies = sum(((block.start <= positions) & (positions + lengths <= block.start + block.length)).astype(np.int64) for block in index.blocks)
        assert (copies >= 1).all()
        repeated += int((copies > 1).sum())
        read, reverse, positions, read_offset, lengths = (np.repeat(array, copies) for array in (read, reverse, positions, read_offset, lengths))
        first = np.concatenate(([0], np.cumsum(np.bincount(read, minlength=count))))
        order = np.argsort(read, kind="stable")
        tags = (read_offset << 7 | lengths << 1 | reverse)[order]
        assert by_read(*got) == by_read(first, positions[order], tags)
        np.testing.assert_array_equal(device_crowded, crowded)
        if count > 100:
            assert crowded.any() and hits.count > count
        apart = FMSearch(device)  # one block a launch
        apart.blocks_together = False
        apart_hits, apart_crowded = apart.seed_hits(*arguments[:1], seeds.codes, *arguments[2:], options.max_occurrences, budget,
                                                    HitBuffers(device), table)
        for array, buffer in zip(got, (apart_hits.first, apart_hits.positions, apart_hits.tags)):
            apart_array = np.zeros_like(array)
            if len(array):
                cl.enqueue_copy(apart.queue, apart_array, buffer, is_blocking=True)
            np.testing.assert_array_equal(apart_array, array)
        np.testing.assert_array_equal(apart_crowded, device_crowded)
    if len(blocks) > 1:
        assert subtracted and repeated  # seeds met the overlaps: counted once, located twice


def test_hit_layout_places_every_block_after_the_previous_ones():
    from bowmap.align.seed.fm_search import hit_layout

    rng = np.random.default_rng(4)
    for blocks, reads in ((1, 0), (1, 5), (2, 0), (2, 1), (3, 17), (4, 300)):
        rows = rng.integers(0, 4, (blocks, reads)) * (rng.random((blocks, reads)) < 0.7)
        firsts, places = hit_layout(rows.astype(np.uint32))
        merged = firsts[: reads + 1].astype(np.int64)
        assert len(places) == blocks and sum(count for _, _, count in places) == merged[-1] == rows.sum()
        slots = []  # (read, slot) of every hit, read as locate_hits reads the layout
        for b, (hit_at, out_at, count) in enumerate(places):
            own = firsts[hit_at : hit_at + reads + 1].astype(np.int64)
            assert (np.diff(own) == rows[b]).all() and own[0] == 0 and own[-1] == count
            out = firsts[out_at : out_at + reads].astype(np.int64)
            for r in range(reads):
                slots += [(r, int(out[r]) + k) for k in range(rows[b, r])]
        # Every slot of the merged hits once, each read's in its own run.
        assert sorted(slot for _, slot in slots) == list(range(int(merged[-1])))
        assert all(merged[r] <= slot < merged[r + 1] for r, slot in slots)


@pytest.mark.parametrize("device_memory, block_count", [(1 << 30, 1), (40_000, 3), (25_000, 4)])
def test_windows_with_hits_on_the_device_equal_the_references(tmp_path, device, device_memory, block_count):
    rng = np.random.default_rng(23)
    genome = random_genome(rng, 60_000)
    for copy in range(6):  # an interspersed repeat family: crowded reads get long seeds
        genome[5_000 + copy * 9_000 : 5_300 + copy * 9_000] = genome[1_000:1_300]
    index = build_test_index(tmp_path, [("chr", codes_to_text(genome))], device_memory=device_memory, max_read_length=150)
    assert len(index.blocks) == block_count
    blocks = [DeviceBlock(device, block) for block in index.blocks]
    codes, reverse_codes, offsets, _, _ = simulate_reads(rng, genome, 500, 100, error_rate=0.03)
    options = SeedOptions(max_occurrences=4)
    on_device = SeedFilter(index, blocks, FMSearch(device), options)
    assert on_device._hit_buffers is not None
    windows = on_device.windows(codes, reverse_codes, offsets)
    for other in (SeedFilter(index, blocks, FMSearch(device), options, hits_on_device=False),
                  SeedFilter(index, blocks, ReferenceSearcher(), options)):
        expected = other.windows(codes, reverse_codes, offsets)
        for name in ("read", "reverse", "start", "end", "hits"):
            np.testing.assert_array_equal(getattr(windows, name), getattr(expected, name), err_msg=name)
    poor = rng.random(500) < 0.3
    rescued = on_device.rescue_windows(codes, reverse_codes, offsets, poor)
    expected = SeedFilter(index, blocks, ReferenceSearcher(), options).rescue_windows(codes, reverse_codes, offsets, poor)
    for name in ("read", "reverse", "start", "end", "hits"):
        np.testing.assert_array_equal(getattr(rescued, name), getattr(expected, name), err_msg=name)
    assert len(rescued) and set(np.unique(rescued.read)) <= set(np.flatnonzero(poor))
