"""Which index blocks are on the device, under the memory bowmap may use of it (`align --device-mem`).

Usually every block is uploaded once per device (:class:`bowmap.align.seed.fm_search.DeviceBlock`).
When the blocks, the packed text and the chunks' buffers do not fit together, the blocks are
streamed: a :class:`BlockResidency` holds a few *slots* (device buffers as large as the largest
block), the packed text stays resident (Smith-Waterman reads windows from it), and a block is
copied into a slot when a kernel needs it (each of its buffers when first named), the least
recently used block giving way. Each round of seeds (:meth:`FMSearch.seed_hits`) searches every
block, last to first, keeping every block's SA intervals on the device, chooses the seeds on
their counts in the whole text, then locates block by block, first to last: a sweep starts on
the blocks the one before ended on, so with k slots a sweep uploads all blocks but k. The
kernels, and so the SAM, are the all-resident run's.

Chunk size does not change the output, so "a batch of chunks" is one larger chunk: each sweep of
uploads then serves more reads (:func:`plan_memory`). Memory figures are bytes.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import pyopencl as cl
import pyopencl.cltypes as cltypes

from bowmap.align.seed.fm_search import FMSearch
from bowmap.index.load import FMIndex, IndexBlock
from bowmap.runtime.devices import DeviceContext, format_memory, wait_idle
from bowmap.runtime.errors import BowmapError

# Chunk sizes when --chunk-bases is not given (see plan_memory): the usual one; the least a run
# takes rather than stream the blocks (a quarter of the usual: each chunk's fixed costs, kernel
# launches and host calls, stay small); the least and the most a streamed run takes (the least:
# about 400 reads of 150 bases share each sweep of uploads; the most: a round's hits are counted
# in 32 bits, and 2^28 bases of 50-base reads with 256 hits each stay below 2^32).
DEFAULT_CHUNK_BASES = 4 << 20
SMALLEST_RESIDENT_CHUNK_BASES = 1 << 20
SMALLEST_STREAMED_CHUNK_BASES = 1 << 16
LARGEST_STREAMED_CHUNK_BASES = 1 << 28

# Device bytes of one queue pair's buffers (the seed stage's FM search and windows, the
# Smith-Waterman stage's scores, traceback and rescue seeds) per base of a chunk. Measured on
# the lambda reads (100 bases, one block): the reused buffers held 110-117 bytes a chunk base
# (20,000 to 200,000 bases a chunk; about 0.5 GiB for 4 Mi bases on an H200 too); they grow by
# doubling, so up to twice that.
DEVICE_BYTES_PER_CHUNK_BASE = 256
# Per base and index block: each block's SA intervals of every seed (12 bytes a seed, rescue
# seeds every 4 bases of both strands), in the seed and the rescue searches. Measured: about 5
# bytes a base more for a second block.
DEVICE_BYTES_PER_CHUNK_BASE_AND_BLOCK = 16
# A queue pair's buffers of any chunk (about 110 reused buffers of at least 4 KiB each).
DEVICE_BYTES_PER_QUEUE_PAIR = 1 << 20
# Host bytes a chunk takes per base while a stage works on it (measured: a 20 Mi-base chunk
# peaked at 105 bytes a base, device buffers included on PoCL); the streamed chunks in flight
# may take half the memory available.
HOST_BYTES_PER_CHUNK_BASE = 128
HOST_SHARE = 0.5


def text_device_bytes(index: FMIndex) -> int:
    """The packed text on the device (:class:`bowmap.align.extend.packed_text.PackedText`): 2 bits a
    base, and a bit a base marking ambiguous ones where there are any."""
    return int(index.packed.nbytes) + (-(-index.total_length // 8) if len(index.ambiguous_starts) else 0)


def block_device_bytes(block: IndexBlock) -> int:
    return int(block.occ.nbytes + block.marks.nbytes + block.samples.nbytes)


def slot_bytes(blocks: list[IndexBlock]) -> int:
    """One slot of a :class:`BlockResidency`: each of a block's three buffers as large as the
    largest block's."""
    return sum(max(int(getattr(block, name).nbytes) for block in blocks) for name in ("occ", "marks", "samples"))


def queue_pair_bytes(index: FMIndex, chunk_bases: int) -> int:
    """Device bytes of one queue pair (seed and Smith-Waterman stages) for chunks of
    ``chunk_bases`` bases: its buffers, and its two seed filters' tables of the blocks' overlaps
    (three seed lengths, 12 bytes a k-mer) and contig and ambiguous-run bounds."""
    blocks = index.blocks
    overlap = sum(max(0, before.start + before.length - after.start) for before, after in zip(blocks, blocks[1:]))
    bounds = 8 * (len(index.contig_starts) + len(index.ambiguous_starts) + 2)
    per_base = DEVICE_BYTES_PER_CHUNK_BASE + DEVICE_BYTES_PER_CHUNK_BASE_AND_BLOCK * len(blocks)
    return chunk_bases * per_base + DEVICE_BYTES_PER_QUEUE_PAIR + 2 * (3 * 12 * overlap + bounds)


@dataclass(frozen=True)
class MemoryPlan:
    """How a run lays out each device's memory: ``queue_pairs`` worker queue pairs a process,
    chunks of ``chunk_bases`` bases, and ``slots[d]`` blocks resident at once on device d (all
    of the index's: nothing streamed there)."""

    chunk_bases: int
    queue_pairs: int
    slots: tuple[int, ...]
    blocks: int
    memories: tuple[int, ...]  # bytes each process may use on each device

    @property
    def streamed(self) -> bool:
        return any(slots < self.blocks for slots in self.slots)

    def describe(self, names: list[str]) -> str:
        places = ", ".join(
            f"{slots} of {self.blocks} blocks at once in {format_memory(memory)} of {name}"
            for slots, memory, name in zip(self.slots, self.memories, names) if slots < self.blocks
        )
        return (f"the index's blocks do not fit the device memory bowmap may use (--device-mem): mapping block by block, "
                f"{places}; chunks of {self.chunk_bases} bases, {self.queue_pairs} queue pair(s)")


def plan_memory(index: FMIndex, memories: list[int], chunk_bases: int | None, queue_pairs: int | None, default_pairs: int,
                host_memory: int | None, chunks_in_flight: int) -> MemoryPlan:
    """The run's :class:`MemoryPlan` on devices of which a process may use ``memories`` bytes,
    for chunks of ``chunk_bases`` bases (None: chosen here) and ``queue_pairs`` queue pairs a
    process (None: chosen here, ``default_pairs`` where they fit).

    1. Every block stays resident where the blocks, the text and the pairs' buffers fit: with
       ``default_pairs``, else (neither chunk nor pairs given) as many of them as fit with chunks
       of at least half DEFAULT_CHUNK_BASES, else with one; chunks not given are
       DEFAULT_CHUNK_BASES, or fewer (one pair, down to SMALLEST_RESIDENT_CHUNK_BASES) rather
       than streaming.
    2. Otherwise the blocks are streamed, with one queue pair unless asked for more (the rounds
       of seeds take turns on the slots anyway). The blocks sweep through the device a few times
       a chunk whatever its size, so the larger the chunk the less each read pays for the uploads
       (and one slot with a chunk twice as large beats two slots): a chunk not given takes what
       one slot and the text leave of the device, but at most HOST_SHARE of ``host_memory``
       (None: not known) over ``chunks_in_flight`` chunks, and LARGEST_STREAMED_CHUNK_BASES. The
       blocks then get as many slots as the rest holds.
    A device that cannot hold one slot, the text and the pairs' buffers (of at least
    SMALLEST_STREAMED_CHUNK_BASES when chosen here) stops the run: :class:`BowmapError`."""
    blocks = index.blocks
    text = text_device_bytes(index)
    resident = sum(block_device_bytes(block) for block in blocks) + text
    fixed, per_base = queue_pair_bytes(index, 0), queue_pair_bytes(index, 1) - queue_pair_bytes(index, 0)

    def fitting_bases(room: int, pairs: int) -> int:  # the largest chunk ``pairs`` pairs' buffers take in ``room`` bytes
        return (room // pairs - fixed) // per_base

    def plan(bases: int, pairs: int, slots: list[int]) -> MemoryPlan:
        return MemoryPlan(bases, pairs, tuple(slots), len(blocks), tuple(memories))

    def fits(pairs: int, bases: int) -> bool:
        return all(resident + pairs * queue_pair_bytes(index, bases) <= memory for memory in memories)

    everything = [len(blocks)] * len(memories)
    chunk = chunk_bases or DEFAULT_CHUNK_BASES
    if fits(queue_pairs or default_pairs, chunk):
        return plan(chunk, queue_pairs or default_pairs, everything)
    if chunk_bases is None and queue_pairs is None:
        # Rather than fewer pairs, smaller chunks, down to half the usual: a pair is a thread
        # of host work, which is what a process short of device memory lacks.
        for pairs in range(default_pairs, 1, -1):
            bases = min(fitting_bases(memory - resident, pairs) for memory in memories)
            if bases >= DEFAULT_CHUNK_BASES // 2:
                return plan(bases, pairs, everything)
    if queue_pairs is None and fits(1, chunk):
        return plan(chunk, 1, everything)
    pairs = queue_pairs or 1
    if chunk_bases is None:
        smaller = min(fitting_bases(memory - resident, pairs) for memory in memories)
        if smaller >= SMALLEST_RESIDENT_CHUNK_BASES:
            return plan(smaller, pairs, everything)
        slot = slot_bytes(blocks)
        by_host = LARGEST_STREAMED_CHUNK_BASES if host_memory is None else int(host_memory * HOST_SHARE) // (
            max(1, chunks_in_flight) * HOST_BYTES_PER_CHUNK_BASE)
        chunk_bases = max(SMALLEST_STREAMED_CHUNK_BASES, min(
            min(fitting_bases(memory - text - slot, pairs) for memory in memories), by_host, LARGEST_STREAMED_CHUNK_BASES))
    slot = slot_bytes(blocks)
    buffers = pairs * queue_pair_bytes(index, chunk_bases)
    slots = []
    for memory in memories:
        fitting = (memory - text - buffers) // slot
        if fitting < 1:
            raise BowmapError(
                f"{format_memory(memory)} of device memory (--device-mem, shared by the processes on a device) is too small to "
                f"map block by block: one block ({format_memory(slot)}), "
                f"the packed text ({format_memory(text)}) and {pairs} queue pair(s) of chunks of {chunk_bases} bases "
                f"({format_memory(buffers)}) need {format_memory(text + slot + buffers)}; give more, "
                f"a smaller --chunk-bases, or rebuild the index with smaller blocks (bowmap index --device-mem)"
            )
        slots.append(min(len(blocks), int(fitting)))
    return plan(chunk_bases, pairs, slots)


class _Slot:
    """Device buffers one block at a time lives in, and which of them hold its data so far."""

    def __init__(self, context, sizes: tuple[int, int, int]):
        self.occ, self.marks, self.samples = (cl.Buffer(context, cl.mem_flags.READ_ONLY, size=max(1, size)) for size in sizes)
        self.copied: set[str] = set()


class BlockResidency:
    """An index's blocks streamed through ``slots`` device slots of one context, shared by every
    queue of that context. Kernels reach a block's buffers through its :class:`StreamedBlock`
    (``blocks``), inside a :meth:`session` on the queue they run on: the session holds the slots
    (one queue at a time), a block missing is copied into the least recently used slot on that
    queue (after the kernels queued before, which may still read the slot's old block), and the
    session's end waits for the queue, so no other queue overwrites a slot a kernel still reads."""

    def __init__(self, device: DeviceContext, blocks: list[IndexBlock], slots: int):
        if not 1 <= slots <= len(blocks):
            raise ValueError(f"1 to {len(blocks)} slots, not {slots}")
        sizes = tuple(max(int(getattr(block, name).nbytes) for block in blocks) for name in ("occ", "marks", "samples"))
        for name, size in zip(("occ", "marks", "samples"), sizes):
            if size > device.info.max_allocation:
                raise BowmapError(
                    f"an index block needs a {size}-byte {name} buffer but {device.info.name} allows "
                    f"{device.info.max_allocation}: rebuild the index with --device-mem for this device"
                )
        self.device = device
        self.index_blocks = blocks
        self._free = [_Slot(device.context, sizes) for _ in range(slots)]
        self._resident: OrderedDict[int, _Slot] = OrderedDict()  # block position -> slot, least recently used first
        self._lock = threading.RLock()
        self._queues: list = []  # the sessions open (nested, in the thread holding the lock), innermost last
        self._holder: int | None = None  # that thread
        self.blocks = [StreamedBlock(self, position, block) for position, block in enumerate(blocks)]
        self.uploads = 0  # blocks brought into a slot, the bytes copied and the seconds the copies took
        self.uploaded_bytes = 0
        self.upload_seconds = 0.0

    @contextlib.contextmanager
    def session(self, queue):
        with self._lock:
            self._queues.append(queue)
            self._holder = threading.get_ident()
            try:
                yield self
            finally:
                self._queues.pop()
                if not self._queues:
                    self._holder = None
                    wait_idle(queue)

    def buffer(self, position: int, name: str):
        """Block ``position``'s buffer ``name`` (occ, marks or samples), copied in now if it is
        not there: the search reads occ alone, so a search sweep copies about half of what a
        locate sweep does (occ is 0.33 of a block's 0.63 bytes a base with SA samples every 32)."""
        if self._holder != threading.get_ident():
            raise RuntimeError("a streamed index block is used outside a BlockResidency session")
        slot = self._resident.get(position)
        if slot is not None:
            self._resident.move_to_end(position)
        else:
            slot = self._free.pop() if self._free else self._resident.popitem(last=False)[1]
            slot.copied.clear()
            self._resident[position] = slot
            self.uploads += 1
        if name not in slot.copied:
            queue = self._queues[-1]
            array = getattr(self.index_blocks[position], name)
            wait_idle(queue)  # sleeping: the copy then waits for nothing but itself (and it waits for the kernels before)
            started = time.perf_counter()
            cl.enqueue_copy(queue, getattr(slot, name), np.ascontiguousarray(array), is_blocking=True)
            self.upload_seconds += time.perf_counter() - started
            self.uploaded_bytes += int(array.nbytes)
            slot.copied.add(name)
        return getattr(slot, name)


class StreamedBlock:
    """A :class:`bowmap.align.seed.fm_search.DeviceBlock` whose buffers are those of the slot its
    :class:`BlockResidency` holds it in, copied in when a kernel's arguments first name them."""

    def __init__(self, residency: BlockResidency, position: int, block: IndexBlock):
        self.residency = residency
        self.position = position
        self.block = block
        self.first_rows = cltypes.make_uint4(*(int(value) for value in block.first_rows))

    @property
    def occ(self):
        return self.residency.buffer(self.position, "occ")

    @property
    def marks(self):
        return self.residency.buffer(self.position, "marks")

    @property
    def samples(self):
        return self.residency.buffer(self.position, "samples")


def _in_session(name: str):
    """FMSearch's method ``name``, run in a session of the search's block residency."""

    def method(self, *args, **kwargs):
        with self.residency.session(self.queue):
            return getattr(FMSearch, name)(self, *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = getattr(FMSearch, name).__doc__
    return method


class StreamingSearch(FMSearch):
    """:class:`FMSearch` over streamed blocks: each call that reads blocks runs in a session of
    their :class:`BlockResidency` (the kernels and their order are FMSearch's own)."""

    blocks_together = False

    def __init__(self, device: DeviceContext, queue, residency: BlockResidency):
        super().__init__(device, queue)
        self.residency = residency

    search = _in_session("search")
    locate = _in_session("locate")
    locate_intervals = _in_session("locate_intervals")
    seed_occurrences = _in_session("seed_occurrences")
    seed_hits = _in_session("seed_hits")


def processes_a_device(processes: int, devices: int) -> int:
    """The most worker processes sharing one device (process r maps with device r % devices)."""
    return max(1, math.ceil(processes / max(1, devices)))
