"""Owner of ``opencl/align/fm_search.cl``: exact FM-index search and locate on an OpenCL device.

Usage: upload each block once per device (:class:`DeviceBlock`, shared by every queue of that
context), then give each worker thread its own :class:`FMSearch` (own queue, own kernels).
Patterns travel as one concatenated ``uint8`` code array with per-pattern offsets and lengths,
the layout a chunk of reads and its seeds already has.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyopencl as cl
import pyopencl.cltypes as cltypes

from bowmap.index.load import FMIndex, IndexBlock
from bowmap.runtime.arrays import segment_ranges
from bowmap.runtime.devices import DeviceArray, DeviceContext, ReusedBuffer, filled_buffer, make_buffer, make_kernel, read_back, work_group_size
from bowmap.runtime.errors import BowmapError

SOURCE = "align/fm_search.cl"


class DeviceBlock:
    """One index block's read-only buffers in one device context."""

    def __init__(self, device: DeviceContext, block: IndexBlock):
        for name, array in (("occ", block.occ), ("marks", block.marks), ("samples", block.samples)):
            if array.nbytes > device.info.max_allocation:
                raise BowmapError(
                    f"index block {block.number} needs a {array.nbytes}-byte buffer but {device.info.name} "
                    f"allows {device.info.max_allocation}: rebuild the index with --device-mem for this device"
                )
        self.block = block
        self.occ = filled_buffer(device, block.occ)
        self.marks = filled_buffer(device, block.marks)
        # A zero-size buffer is not allowed: a block always has its offset-0 suffix sampled.
        self.samples = filled_buffer(device, block.samples)
        self.first_rows = cltypes.make_uint4(*(int(value) for value in block.first_rows))

    BUFFERS = ("occ", "marks", "samples")

    @classmethod
    def of_owner(cls, device, number: int, block: IndexBlock) -> DeviceBlock:
        """Block ``number`` as its device owner uploaded it for every host worker (see
        bowmap.runtime.remote: ``device`` is a RemoteDevice; the buffers are named
        ``block<number>.<buffer>``, :meth:`shared_buffers`)."""
        self = cls.__new__(cls)
        self.block = block
        for name in cls.BUFFERS:
            setattr(self, name, device.shared_buffer(f"block{number}.{name}"))
        self.first_rows = cltypes.make_uint4(*(int(value) for value in block.first_rows))
        return self

    def shared_buffers(self, number: int) -> dict:
        """This block's buffers by the names :meth:`of_owner` gives them."""
        return {f"block{number}.{name}": getattr(self, name) for name in self.BUFFERS}


def _as_u32(array, what: str) -> np.ndarray:
    array = np.asarray(array)
    if array.size and (array.min() < 0 or array.max() >= 2**32):
        raise ValueError(f"{what} must fit in uint32")
    return np.ascontiguousarray(array, dtype=np.uint32)


class FMSearch:
    """Kernels, a command queue and reused buffers for one worker thread on one device."""

    def __init__(self, device: DeviceContext, queue: cl.CommandQueue | None = None):
        self.device = device
        self.queue = queue if queue is not None else device.queue()
        program = device.program(SOURCE)
        self._search = make_kernel(program, "fm_search")
        self._locate = make_kernel(program, "fm_locate")
        self._locate_intervals = make_kernel(program, "fm_locate_intervals")
        self._seed_search = make_kernel(program, "seed_search")
        self._choose_seeds = make_kernel(program, "choose_seeds")
        self._locate_hits = make_kernel(program, "locate_hits")
        self._add_block_occurrences = make_kernel(program, "add_block_occurrences")
        self._subtract_overlaps = make_kernel(program, "subtract_overlaps")
        self._block_rows = make_kernel(program, "block_rows")
        self._group = work_group_size(self._search, device)
        mf = cl.mem_flags
        context = device.context
        self._codes, self._offsets, self._lengths = (ReusedBuffer(context, mf.READ_ONLY) for _ in range(3))
        self._sent_codes = ReusedBuffer(context, mf.READ_ONLY)  # send_codes': apart, so no search overwrites it
        self._rows = ReusedBuffer(context, mf.READ_ONLY)
        self._results = ReusedBuffer(context, mf.READ_WRITE)
        # seed_hits' scratch: seed_first, read offsets, taken, read_rows, crowded, read starts.
        self._seed_scratch = [ReusedBuffer(context, mf.READ_WRITE) for _ in range(6)]
        # With several blocks: each block's intervals (the first is _results), all blocks'
        # occurrences, and each block's rows of every read.
        self._block_results = [self._results]
        self._combined, self._rows_by_block = ReusedBuffer(context, mf.READ_WRITE), ReusedBuffer(context, mf.READ_WRITE)
        # The latest kernel launch: with a profiling queue, benchmarks read its device time.
        self.last_kernel_event: cl.Event | None = None

    # seed_search and locate_hits take two resident blocks a launch (a launch as long as one);
    # where blocks are streamed through slots (StreamingSearch) one, so that naming a block's
    # buffers never evicts the other's. add_block_occurrences and block_rows read no block's
    # buffers, only the intervals: they take two a launch either way.
    blocks_together = True

    def _global_size(self, count: int) -> tuple[int]:
        return (-(-count // self._group) * self._group,)

    def search(self, block: DeviceBlock, codes, offsets, lengths) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """SA intervals [lo, hi) of each pattern in ``block`` (``lo = hi = 0`` when absent) and
        ``depth``, the length of the pattern's longest suffix that occurs. All uint32."""
        codes = np.ascontiguousarray(codes, dtype=np.uint8)
        offsets = _as_u32(offsets, "pattern offsets")
        lengths = _as_u32(lengths, "pattern lengths")
        count = len(offsets)
        if len(lengths) != count:
            raise ValueError("offsets and lengths differ in size")
        if count and int(np.add(offsets, lengths, dtype=np.uint64).max()) > len(codes):
            raise ValueError("a pattern reaches past the end of codes")
        results = np.zeros((3, count), dtype=np.uint32)
        if count == 0:
            return results[0], results[1], results[2]
        read_back(self.queue, results, self._search_on_device(block, codes, offsets, lengths))
        return results[0], results[1], results[2]

    def _search_on_device(self, block: DeviceBlock, codes, offsets, lengths):
        """The fm_search kernel enqueued over checked patterns (count > 0); its results buffer."""
        count = len(offsets)
        inputs = [codes.buffer if isinstance(codes, DeviceArray) else self._codes.upload(self.queue, codes)]
        inputs += [staging.upload(self.queue, array) for staging, array in zip((self._offsets, self._lengths), (offsets, lengths))]
        results_device = self._results.at_least(3 * 4 * count)
        self.last_kernel_event = self._search(
            self.queue, self._global_size(count), (self._group,),
            block.occ, np.uint32(block.block.primary), np.uint32(block.block.length), block.first_rows,
            *inputs, np.uint32(count), results_device,
        )
        return results_device

    def locate(self, block: DeviceBlock, rows) -> np.ndarray:
        """Block offsets (uint32) of the suffixes at ``rows`` (each in 1..n)."""
        rows = _as_u32(rows, "rows")
        count = len(rows)
        positions = np.zeros(count, dtype=np.uint32)
        if count == 0:
            return positions
        if rows.min() < 1 or rows.max() > block.block.length:
            raise ValueError(f"rows must lie in 1..{block.block.length}")
        rows_device = self._rows.upload(self.queue, rows)
        positions_device = self._results.at_least(positions.nbytes)
        self.last_kernel_event = self._locate(
            self.queue, self._global_size(count), (self._group,),
            block.occ, np.uint32(block.block.primary), block.first_rows, block.marks, block.samples,
            rows_device, np.uint32(count), positions_device,
        )
        read_back(self.queue, positions, positions_device)
        return positions

    def locate_intervals(self, block: DeviceBlock, lo, hi) -> np.ndarray:
        """Block offsets (uint32) of the suffixes at every row of every SA interval [lo, hi) of
        ``block``, interval after interval: ``locate(block, interval_rows(lo, hi)[1])``, with
        the rows made on the device from the intervals rather than sent one by one."""
        lo = _as_u32(lo, "interval starts")
        sizes = _as_u32(hi, "interval ends").astype(np.int64) - lo
        if len(sizes) != len(lo):
            raise ValueError("lo and hi differ in size")
        if (sizes < 0).any():
            raise ValueError("an interval ends before it starts")
        occupied = sizes > 0
        if occupied.any() and (lo[occupied].min() < 1 or (lo[occupied] + sizes[occupied]).max() > block.block.length + 1):
            raise ValueError(f"rows must lie in 1..{block.block.length}")
        before = np.cumsum(sizes) - sizes
        count = int(sizes.sum())
        if count >= 2**32:
            raise ValueError("more than 2^32 - 1 rows at once")
        positions = np.zeros(count, dtype=np.uint32)
        if count == 0:
            return positions
        starts = self._rows.upload(self.queue, np.concatenate((lo, before.astype(np.uint32))))
        positions_device = self._results.at_least(positions.nbytes)
        self.last_kernel_event = self._locate_intervals(
            self.queue, self._global_size(count), (self._group,),
            block.occ, np.uint32(block.block.primary), block.first_rows, block.marks, block.samples,
            starts, np.uint32(len(lo)), np.uint32(count), positions_device,
        )
        read_back(self.queue, positions, positions_device)
        return positions

    def send_codes(self, codes) -> DeviceArray:
        """Pattern codes sent once for several :meth:`seed_hits` calls (a chunk's rounds)."""
        return self._sent_codes.send(self.queue, np.ascontiguousarray(codes, dtype=np.uint8))

    def choose_seeds(self, results, seed_first: np.ndarray, max_occurrences: int, budget: int, seed_first_device=None):
        """The choose_seeds kernel on the SA intervals in device buffer ``results`` (fm_search's
        layout, 2 * seed_first[-1] seeds): (taken, per-read rows, per-read crowded flags), the
        first a device buffer, the others read back (uint32, bool). ``seed_first_device``:
        ``seed_first`` on the device already."""
        reads = len(seed_first) - 1
        if seed_first_device is None:
            seed_first_device = self._seed_scratch[0].upload(self.queue, _as_u32(seed_first, "seed firsts"))
        taken, rows_device, crowded_device = self._enqueue_choice(results, seed_first_device, reads, int(seed_first[-1]), max_occurrences, budget)
        rows = np.zeros(reads, dtype=np.uint32)
        crowded = np.zeros(reads, dtype=np.uint8)
        if reads:
            read_back(self.queue, rows, rows_device, crowded, crowded_device)
        return taken, rows, crowded.astype(bool)

    def _enqueue_choice(self, results, seed_first_device, reads: int, half: int, max_occurrences: int, budget: int):
        """choose_seeds enqueued (when there are reads): its taken, read_rows and crowded buffers."""
        taken = self._seed_scratch[2].at_least(4 * max(1, 2 * half))
        rows_device = self._seed_scratch[3].at_least(4 * max(1, reads))
        crowded_device = self._seed_scratch[4].at_least(max(1, reads))
        if reads:
            self._choose_seeds(
                self.queue, self._global_size(reads), (self._group,), results, seed_first_device, np.uint32(reads), np.uint32(half),
                np.uint32(max_occurrences), np.uint32(budget), taken, rows_device, crowded_device,
            )
        return taken, rows_device, crowded_device

    def overlap_table(self, keys: np.ndarray, counts: np.ndarray) -> OverlapTable:
        """A seed length's table of the blocks' overlaps (see :meth:`seed_hits`) on this device."""
        return OverlapTable(self.device, keys, counts)

    def seed_occurrences(self, blocks: list[DeviceBlock], codes, read_starts, seed_first, read_offset, seed_length: int,
                         overlaps: OverlapTable | None = None) -> np.ndarray:
        """Each seed's occurrences in the whole text (uint32; seeds as :meth:`seed_hits` takes
        them), as seed_hits counts them before it chooses: the sum over ``blocks`` less those
        inside two blocks' overlap (``overlaps``; with several blocks). The device twin of
        ``SeedFilter._hits``' counts, which the tests compare."""
        reads, half, seed_first, read_starts, read_offset = self._checked_seeds(
            blocks, codes, read_starts, seed_first, read_offset, seed_length, overlaps)
        occurrences = np.zeros(2 * half, dtype=np.uint32)
        if half:
            inputs, results = self._search_seeds(blocks, codes, read_starts, seed_first, read_offset, seed_length)
            counts = results[0] if len(blocks) == 1 else self._combine(results, inputs, reads, half, seed_length, read_starts[-1], overlaps)
            both = np.zeros((3 if len(blocks) == 1 else 2) * 2 * half, dtype=np.uint32)
            read_back(self.queue, both, counts)
            occurrences = both[2 * half : 4 * half] - both[: 2 * half]
        return occurrences

    def _checked_seeds(self, blocks, codes, read_starts, seed_first, read_offset, seed_length: int, overlaps):
        """:meth:`seed_hits`' checks of a round of seeds: (reads, forward seeds, and the arrays as uint32)."""
        reads = len(seed_first) - 1
        half = int(seed_first[-1])
        if len(read_starts) != reads + 1 or len(read_offset) != half or len(codes) != 2 * int(read_starts[-1]):
            raise ValueError("codes, read_starts, seed_first and read_offset disagree on the reads and seeds")
        if not blocks or not all(seed_hits_fit(block.block) for block in blocks):
            raise ValueError("one block or more, whose text positions fit 32 bits")
        if len(blocks) > 1 and (overlaps is None or seed_length > 32):
            raise ValueError("several blocks need the table of their overlaps' seeds (32 bases at most)")
        seed_first, read_starts, read_offset = (_as_u32(array, what) for array, what in (
            (seed_first, "seed firsts"), (read_starts, "read starts"), (read_offset, "read offsets")))
        if half and (read_offset.astype(np.int64) + seed_length > np.repeat(np.diff(read_starts.astype(np.int64)), np.diff(seed_first))).any():
            raise ValueError("a seed reaches past the end of its read")
        return reads, half, seed_first, read_starts, read_offset

    def _search_seeds(self, blocks, codes, read_starts, seed_first, read_offset, seed_length: int):
        """seed_search enqueued in every block: the uploaded (codes, seed_first, read_offset,
        read_starts) buffers and each block's results buffer."""
        reads, half = len(seed_first) - 1, int(seed_first[-1])
        if not isinstance(codes, DeviceArray):
            codes = self._codes.upload(self.queue, np.ascontiguousarray(codes, dtype=np.uint8))
        inputs = [codes.buffer if isinstance(codes, DeviceArray) else codes]
        inputs += [staging.upload(self.queue, array) for staging, array in zip(self._seed_scratch[:2] + self._seed_scratch[5:], (seed_first, read_offset, read_starts))]
        while len(self._block_results) < len(blocks):
            self._block_results.append(ReusedBuffer(self.device.context, cl.mem_flags.READ_WRITE))
        results = [staging.at_least(3 * 4 * 2 * half) for staging in self._block_results[: len(blocks)]]
        # Last block first: seed_hits then locates first to last, so where blocks are streamed
        # through a few device slots (bowmap.align.seed.residency) each sweep begins with the blocks
        # the one before ended on, still resident. The results do not depend on the order.
        for launch in in_launches(list(reversed(list(zip(blocks, results)))), self.blocks_together):
            (block, block_results), (block_b, results_b) = launch[0], launch[-1]
            self.last_kernel_event = self._seed_search(
                self.queue, self._global_size(len(launch) * 2 * half), (self._group,),
                *(value for one in (block, block_b) for value in (
                    one.occ, np.uint32(one.block.primary), np.uint32(one.block.length), one.first_rows)),
                np.uint32(len(launch)), inputs[0], inputs[3], inputs[1], inputs[2], np.uint32(reads),
                np.uint32(half), np.uint32(seed_length), np.uint32(read_starts[-1]), block_results, results_b,
            )
        return inputs, results

    def _combine(self, results, inputs, reads: int, half: int, seed_length: int, total: int, overlaps: OverlapTable):
        """Several blocks' intervals -> each seed's occurrences in the text (add_block_occurrences,
        subtract_overlaps), in a results-layout buffer for choose_seeds."""
        combined = self._combined.at_least(2 * 4 * 2 * half)
        for number, launch in enumerate(in_launches(results, True)):  # the first launch sets, the others add
            self._add_block_occurrences(
                self.queue, self._global_size(2 * half), (self._group,), launch[0], launch[-1], np.uint32(len(launch)),
                np.uint32(2 * half), np.uint32(number == 0), combined,
            )
        self._subtract_overlaps(
            self.queue, self._global_size(2 * half), (self._group,), inputs[0], inputs[3], inputs[1], inputs[2], np.uint32(reads),
            np.uint32(half), np.uint32(seed_length), np.uint32(total), overlaps.keys, overlaps.counts, np.uint32(overlaps.size), combined,
        )
        return combined

    def seed_hits(self, blocks: list[DeviceBlock], codes, read_starts, seed_first, read_offset, seed_length: int, max_occurrences: int,
                  budget: int, buffers: HitBuffers, overlaps: OverlapTable | None = None) -> tuple[DeviceHits, np.ndarray]:
        """Search a round of seeds of one length, choose them (:func:`bowmap.align.seed.seeds.choose_seeds`)
        and locate the chosen ones' every occurrence, all on the device: the hits stay there for
        seed_windows.cl, only per-read counts come back, and the seeds travel as their offsets in
        their reads. Seeds: every read's forward seeds (read r's are ``seed_first[r] ..
        seed_first[r + 1] - 1``, seed f ``codes[read_starts[r] + read_offset[f]:][:seed_length]``),
        then as many reverse ones in the same order and places of the reverse codes, which follow
        the forward ones in ``codes`` (host codes or :meth:`send_codes`'s; ``read_starts[-1]``
        codes each). Returns the hits and the mask of reads left crowded.

        ``blocks``: the index's blocks, in order. With several, seeds are chosen on their counts
        in the whole text (:meth:`seed_occurrences`: ``overlaps`` is the table of the packed
        ``seed_length``-mers of every two consecutive blocks' overlap, :meth:`overlap_table`), as
        ``SeedFilter._hits`` chooses them, and are located in every block: an occurrence inside
        an overlap is then a hit twice, which makes the same windows as once (see locate_hits)."""
        reads, half, seed_first, read_starts, read_offset = self._checked_seeds(
            blocks, codes, read_starts, seed_first, read_offset, seed_length, overlaps)
        if budget + max_occurrences >= 2**31:
            raise ValueError("budget and max_occurrences must fit the kernels' 32-bit sums")
        rows = np.zeros((len(blocks), reads), dtype=np.uint32)
        crowded = np.zeros(reads, dtype=bool)
        if half:
            inputs, results = self._search_seeds(blocks, codes, read_starts, seed_first, read_offset, seed_length)
            if len(blocks) == 1:
                taken, rows[0], crowded = self.choose_seeds(results[0], seed_first, max_occurrences, budget, inputs[1])
            else:
                combined = self._combine(results, inputs, reads, half, seed_length, read_starts[-1], overlaps)
                taken, _, crowded_device = self._enqueue_choice(combined, inputs[1], reads, half, max_occurrences, budget)
                rows_device = self._rows_by_block.at_least(rows.nbytes)
                for number, launch in zip(range(0, len(results), BLOCKS_A_LAUNCH), in_launches(results, True)):
                    self._block_rows(
                        self.queue, self._global_size(reads), (self._group,), launch[0], launch[-1], np.uint32(len(launch)),
                        taken, inputs[1], np.uint32(reads), np.uint32(half), np.uint32(number), rows_device,
                    )
                crowded_bytes = np.zeros(reads, dtype=np.uint8)
                read_back(self.queue, rows, rows_device, crowded_bytes, crowded_device)
                crowded = crowded_bytes.astype(bool)
        firsts, places = hit_layout(rows)
        first_device = buffers.first.upload(self.queue, firsts)
        total = int(firsts[reads])
        positions = buffers.positions.at_least(4 * max(1, total))
        tags = buffers.tags.at_least(4 * max(1, total))
        located = [(block, block_results, place) for block, block_results, place in zip(blocks, results if half else [], places) if place[2]]
        for launch in in_launches(located, self.blocks_together):
            arguments = []
            alone = (launch[0][:2] + ((0, 0, 0),),) * (BLOCKS_A_LAUNCH - len(launch))  # a launch of one: its block again, no hits
            for block, block_results, (hit_at, out_at, count) in launch + alone:
                arguments += [block.occ, np.uint32(block.block.primary), block.first_rows, block.marks, block.samples, block_results,
                              np.uint32(block.block.start), np.uint32(hit_at), np.uint32(out_at), np.uint32(count)]
            self.last_kernel_event = self._locate_hits(
                self.queue, self._global_size(sum(place[2] for _, _, place in launch)), (self._group,), *arguments,
                taken, inputs[1], inputs[2], np.uint32(reads), np.uint32(half), np.uint32(seed_length), first_device, positions, tags,
            )
        return DeviceHits(first_device, positions, tags, total, firsts[: reads + 1]), crowded


# The blocks a launch of seed_search, locate_hits, block_rows and add_block_occurrences takes at most.
BLOCKS_A_LAUNCH = 2


def in_launches(items: list, together: bool) -> list[tuple]:
    """``items`` (one a block) in launches of the kernels that take two blocks at once: pairs in
    order, the last alone when they are odd; one a launch unless ``together``."""
    size = BLOCKS_A_LAUNCH if together else 1
    return [tuple(items[start : start + size]) for start in range(0, len(items), size)]


def hit_layout(rows: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int, int]]]:
    """Where :meth:`FMSearch.seed_hits` puts a round's hits, from ``rows`` (blocks x reads: each
    read's hits in each block). Returns ``firsts`` (uint32, sent as one buffer): the round's
    ``first`` (reads + 1: read r's hits are first[r] .. first[r + 1] - 1, every block's), then,
    with several blocks, for each block its own first (reads + 1, the prefix sums of its rows)
    and where its hits of each read go (reads: first[r] plus the read's hits in the blocks before);
    and for each block (where its own first starts in ``firsts``, where its out slots start,
    its hits). With one block both are ``first`` itself."""
    blocks, reads = rows.shape
    rows = rows.astype(np.int64)
    first = np.zeros(reads + 1, dtype=np.int64)
    np.cumsum(rows.sum(axis=0), out=first[1:])
    if first[-1] >= 2**32:
        raise ValueError("a round has more than 2^32 - 1 hits")
    if blocks == 1:
        return first.astype(np.uint32), [(0, 0, int(first[-1]))]
    own = np.zeros((blocks, reads + 1), dtype=np.int64)
    np.cumsum(rows, axis=1, out=own[:, 1:])
    out = first[:-1] + np.cumsum(rows, axis=0) - rows
    firsts = np.concatenate((first, np.concatenate((own, out), axis=1).reshape(-1))).astype(np.uint32)
    stride = 2 * reads + 1
    return firsts, [(reads + 1 + b * stride, 2 * (reads + 1) + b * stride, int(own[b, -1])) for b in range(blocks)]


class OverlapTable:
    """The sorted packed keys (uint64) of one seed length's k-mers inside the overlaps of
    consecutive index blocks, with how often each occurs there (uint32), on one device: read-only,
    shared by the queues of its context. Made once a seed length (``SeedFilter``)."""

    def __init__(self, device: DeviceContext, keys: np.ndarray, counts: np.ndarray):
        keys = np.asarray(keys, dtype=np.uint64)
        if len(keys) != len(counts) or (np.diff(keys) <= 0).any():
            raise ValueError("overlap keys must be sorted and unique, one count each")
        flags = cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR
        self.size = len(keys)
        # A zero-size buffer is not allowed: one key more, never read (size tells the kernel).
        self.keys = make_buffer(device.context, flags, hostbuf=np.append(keys, np.uint64(0)))
        self.counts = make_buffer(device.context, flags, hostbuf=np.append(_as_u32(counts, "overlap counts"), np.uint32(0)))


@dataclass
class DeviceHits:
    """One round of seed hits left on the device, grouped by read: read r's are ``first[r] ..
    first[r + 1] - 1`` of ``positions`` (text) and ``tags`` (read offset << 7 | seed length << 1
    | reverse), seed_windows.cl's layout. ``count`` hits in all."""

    first: object  # cl.Buffer, uint[reads + 1]
    positions: object  # cl.Buffer, uint[count]
    tags: object  # cl.Buffer, uint[count]
    count: int
    first_host: np.ndarray  # ``first`` as uploaded (its length tells the reads it was made for)


class HitBuffers:
    """The device buffers of one round of hits (:meth:`FMSearch.seed_hits`): one per round that
    must live while later rounds are made."""

    def __init__(self, device: DeviceContext):
        self.first, self.positions, self.tags = (ReusedBuffer(device.context, cl.mem_flags.READ_WRITE) for _ in range(3))


def seed_hits_fit(block: IndexBlock) -> bool:
    """Whether :meth:`FMSearch.seed_hits` may locate in ``block``: its text positions fit 32 bits."""
    return block.start + block.length < 2**32


def interval_rows(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Expand SA intervals [lo, hi) into (owner interval, row) pairs, owners in order."""
    sizes = (hi.astype(np.int64) - lo).clip(0)
    owners = np.repeat(np.arange(len(sizes)), sizes)
    rows = segment_ranges(lo, sizes)
    return owners, rows


def exact_matches(index: FMIndex, device: DeviceContext, codes, offsets, lengths) -> tuple[np.ndarray, np.ndarray]:
    """Every occurrence of every pattern in the whole text, through the kernels.

    Returns (pattern, text position) pairs, sorted, each once although blocks overlap.
    """
    searcher = FMSearch(device)
    pattern_parts, position_parts = [], []
    for block in index.blocks:
        device_block = DeviceBlock(device, block)
        lo, hi, _ = searcher.search(device_block, codes, offsets, lengths)
        pattern_parts.append(np.repeat(np.arange(len(lo)), hi.astype(np.int64) - lo))
        position_parts.append(searcher.locate_intervals(device_block, lo, hi).astype(np.int64) + block.start)
    pairs = np.unique(np.stack([np.concatenate(pattern_parts), np.concatenate(position_parts)], axis=1), axis=0)
    return pairs[:, 0], pairs[:, 1]
