"""The workers of the align pipeline: one device command queue's stages (:class:`DeviceWorker`),
what they hand the writer (:class:`ChunkResult`), the start of a worker process
(:class:`ProcessWorker`), and how many workers a run gets.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from bowmap.align.options import AlignOptions
from bowmap.align.extend.stage import extend_chunk, pair_observations

# What a worker's stages import where they first run (inside functions: a command's start pays
# only for what it uses). A run's process imports them (import_worker_modules) while its standby
# device owner lists the devices, so that host workers forked from it have them: each worker
# had imported them itself, on the way to its first chunk (H200: about 27 ms a worker).
WORKER_MODULES = ("bowmap.align.extend.ranking", "bowmap.align.output.sam", "bowmap.align.output.sam_fields", "bowmap.align.output.sam_lines")


def import_worker_modules() -> None:
    import importlib

    for name in WORKER_MODULES:
        importlib.import_module(name)


@dataclass
class Counts:
    """Reads counted for the run's summary; they add up with ``+=`` (the run's totals)."""

    reads: int = 0
    mapped: int = 0  # reads with a primary alignment
    proper: int = 0  # reads properly paired (FLAG 0x2)
    several: int = 0  # mapped reads with another alignment found (bowtie2's "aligned >1 times")

    def __iadd__(self, other: Counts) -> Counts:
        self.reads += other.reads
        self.mapped += other.mapped
        self.proper += other.proper
        self.several += other.several
        return self


@dataclass
class ChunkResult:
    """What a chunk's last stage hands the writer: its SAM text and counts, or, for a chunk of
    the paired model's sample (written nowhere: ``text`` empty), the orientations and insert
    sizes of its confident pairs. Across processes ``text`` travels through shared memory or
    as raw bytes (see :func:`bowmap.align.runners._worker_process`), and reaches the writer as
    a memoryview of the shared memory, valid during that write only (written on the device, a
    bytearray)."""

    text: bytes | bytearray = b""
    counts: Counts = field(default_factory=Counts)
    observations: tuple | None = None


class DeviceWorker:
    """One device command queue's kernels and buffers: used by one thread at a time."""

    def __init__(self, index, reference_text, device, device_blocks, device_text, options: AlignOptions, scoring, residency=None):
        from bowmap.align.seed.fm_search import FMSearch
        from bowmap.align.extend.smith_waterman import SmithWaterman
        from bowmap.align.seed.filter import SeedFilter

        self.index = index
        self.reference_text = reference_text
        self.options = options
        self.scoring = scoring
        self.residency = residency

        def searcher(queue):  # streamed blocks (residency, device_blocks its StreamedBlocks) are read in its sessions
            if residency is None:
                return FMSearch(device, queue)
            from bowmap.align.seed.residency import StreamingSearch

            return StreamingSearch(device, queue, residency)

        # The seed and the Smith-Waterman stages run in different threads: a queue each, so
        # neither waits behind the other's kernels.
        self.seed_filter = SeedFilter(index, device_blocks, searcher(device.queue()), options.seed)
        extend_queue = device.queue()
        self.smith_waterman = SmithWaterman(device, scoring, extend_queue)
        # The rescue seeds on the extend stage's queue: the two stages may run in two threads.
        self.rescue_filter = SeedFilter(index, device_blocks, searcher(extend_queue), options.seed)
        self.device_text = device_text  # the packed reference on the device: windows are read there
        from bowmap.align.output.sam_fields import SamFields

        self.sam_fields = SamFields(device, extend_queue, device_text)  # CIGAR, NM and MD on the extend stage's queue
        from bowmap.align.extend.ranking import on_device_by_default
        from bowmap.align.extend.stage import ExtendKernels

        self.extend_kernels = ExtendKernels.on(device, extend_queue, device_text, on_device_by_default())  # tandem scores (and ranking)

    def seed(self, chunk):
        from bowmap.align.reads import as_chunk

        chunk = as_chunk(chunk)  # a byte range of the input is read and parsed here
        return chunk, self.seed_filter.windows(chunk.codes, chunk.reverse_codes, chunk.offsets, chunk.both_codes)

    def extend(self, item) -> ChunkResult:
        """The chunk's SAM text and counts (the paired model's sample chunk: its observations)."""
        from bowmap.align.output.sam import format_chunk

        chunk, windows = item
        stage = (self.device_text, self.index, self.smith_waterman, chunk, windows, self.scoring, self.options, self.rescue_filter)
        if chunk.paired and chunk.insert_model is None:  # the model's sample: mapped as single reads, not written
            return ChunkResult(observations=pair_observations(*stage, kernels=self.extend_kernels))
        alignments = extend_chunk(*stage, kernels=self.extend_kernels)
        proper = int(alignments.proper[alignments.primary_rows()].sum()) if chunk.paired else 0
        read_group_id = self.options.read_group[0] if self.options.read_group else None
        sent = self.smith_waterman.sent_reads  # the chunk's read codes, on the device since its extend stage
        on_device = self.sam_fields.on(sent) if sent is not None and sent.host is chunk.both_codes else None
        text = format_chunk(chunk, alignments, self.reference_text, read_group_id, self.options.write_unaligned, scoring=self.scoring,
                            on_device=on_device)
        from bowmap.align.extend.mapq import NO_SCORE

        primary = alignments.primary_rows() & alignments.mapped  # one row a mapped read
        several = int((primary & (alignments.second_score != NO_SCORE)).sum())
        return ChunkResult(text, Counts(chunk.count, int(primary.sum()), proper, several))


class ProcessWorker:
    """Starts one worker process's aligner (picklable: it travels to the worker process).

    Process ``rank`` maps with device ``devices[rank % len(devices)]`` (DeviceInfo), its own
    context, copy of the index blocks on the device and ``queues_per_device`` queue pairs (one:
    chunks mapped one after the other; more: in threads, as in one process); the index files
    are mapped, not read, so the processes share their pages (the parent checked them already).
    ``identity`` (:class:`bowmap.index.load.IndexIdentity`) is the index the parent checked: the
    worker maps exactly those files or fails (an index rebuilt at the prefix during the run).
    ``slots``: per device, the blocks a process keeps resident there (see device_workers; None:
    all of them)."""

    def __init__(self, options: AlignOptions, scoring, devices: list, queues: int, identity=None, slots: tuple[int, ...] | None = None,
                 owners: list[tuple] | None = None):
        self.options = options
        self.scoring = scoring
        self.devices = devices
        self.queues = queues
        self.identity = identity
        self.slots = slots
        self.owners = owners  # each device's DeviceOwner endpoint: then no context of its own here

    def __call__(self, rank: int):
        import time

        from bowmap.align.runners import start_gate
        from bowmap.align.output.reference import ReferenceText
        from bowmap.index.load import load_index
        from bowmap.runtime import usage
        from bowmap.runtime.devices import context_for_info

        started = time.monotonic()
        usage.mark("worker started")
        index = load_index(self.options.index, verify=False, identity=self.identity)
        loaded = time.monotonic()
        if self.owners is not None:
            from bowmap.runtime.remote import RemoteDevice

            device = RemoteDevice(self.devices[rank % len(self.devices)], *self.owners[rank % len(self.owners)])
            device.context.channel()  # connected (and greeted) now: the marks time the set-up after it
            usage.mark("worker connected")
            workers = owner_device_workers(index, ReferenceText.from_index(index), device, self.queues, self.options, self.scoring)
            usage.mark("worker set up")
            # The owner's set-up (its context, the index's upload) is waited for in "programs".
            self.start_timings = {"index": loaded - started, "programs": time.monotonic() - loaded}
            return [[worker.seed for worker in workers], [worker.extend for worker in workers]]
        with start_gate():
            admitted = time.monotonic()
            device = context_for_info(self.devices[rank % len(self.devices)])
        opened = time.monotonic()
        slots = None if self.slots is None else self.slots[rank % len(self.devices)]
        workers = device_workers(index, ReferenceText.from_index(index), device, self.queues, self.options, self.scoring, slots)
        # Where the start went (seconds; see runners._worker_process, which sends them to the run).
        self.start_timings = {
            "index": loaded - started, "waiting": admitted - loaded, "context": opened - admitted,
            "programs": device.build_seconds, "upload": time.monotonic() - opened - device.build_seconds,
        }
        return [[worker.seed for worker in workers], [worker.extend for worker in workers]]


def device_workers(index, reference_text, device, queues: int, options: AlignOptions, scoring, slots: int | None = None) -> list[DeviceWorker]:
    """``queues`` workers on one device, sharing its copy of the index blocks and packed text:
    every block uploaded once, or with ``slots`` less than the blocks, the blocks streamed
    through that many slots (:class:`bowmap.align.seed.residency.BlockResidency`)."""
    from bowmap.align.seed.fm_search import DeviceBlock
    from bowmap.align.extend.packed_text import PackedText

    residency = None
    if slots is not None and slots < len(index.blocks):
        from bowmap.align.seed.residency import BlockResidency

        residency = BlockResidency(device, index.blocks, slots)
        blocks = residency.blocks
    else:
        blocks = [DeviceBlock(device, block) for block in index.blocks]
    text = PackedText.from_index(device, index)
    return [DeviceWorker(index, reference_text, device, blocks, text, options, scoring, residency) for _ in range(queues)]


def owner_device_workers(index, reference_text, device, queues: int, options: AlignOptions, scoring) -> list[DeviceWorker]:
    """``queues`` workers in a host worker process on a device whose owner (``device``, a
    bowmap.runtime.remote.RemoteDevice) holds the index blocks and packed text once for every
    host worker (:func:`owner_shared_buffers`)."""
    from bowmap.align.seed.fm_search import DeviceBlock
    from bowmap.align.extend.packed_text import PackedText

    blocks = [DeviceBlock.of_owner(device, number, block) for number, block in enumerate(index.blocks)]
    text = PackedText.of_owner(device, index)
    workers = [DeviceWorker(index, reference_text, device, blocks, text, options, scoring) for _ in range(queues)]
    device.context.flush()  # the buffers their set-up made exist on the owner before the stages' threads name them
    return workers


def owner_shared_buffers(index, device) -> dict:
    """A device owner's set-up: the index blocks and packed text uploaded once, by name (what
    :func:`owner_device_workers` names)."""
    from bowmap.align.seed.fm_search import DeviceBlock
    from bowmap.align.extend.packed_text import PackedText

    shared = PackedText.from_index(device, index).shared_buffers()
    for number, block in enumerate(index.blocks):
        shared.update(DeviceBlock(device, block).shared_buffers(number))
    return shared


class OwnerIndex:
    """A device owner process's shared buffers (``OwnerProcess(shared=...)``, picklable): the
    index at ``prefix`` mapped there (exactly the files the run checked, ``identity``) and
    uploaded once (:func:`owner_shared_buffers`)."""

    def __init__(self, prefix: str, identity=None):
        self.prefix = prefix
        self.identity = identity

    def __call__(self, device) -> dict:
        from bowmap.index.load import load_index

        return owner_shared_buffers(load_index(self.prefix, verify=False, identity=self.identity), device)


# Device memory a worker process needs beside its copy of the index: its context, the
# Smith-Waterman scratch and the chunk buffers (measured: about 0.5 GiB on an H200; with room).
WORKER_DEVICE_BYTES = 1 << 30


# Worker processes a CPU core with GPUs on a large input. A worker alternates its host work with
# waits for its kernels (sleeping: devices.wait_idle), so more workers than cores keep both busy
# once they run. Measured on one H200 with 16 cores, chr20, 150 bp: steady 1.15-1.18 M reads/s
# with 15 workers, 1.30 M with 24, 1.30-1.31 M with 31, 1.16 M with 40; but each worker's start
# (its device context, its kernels' builds) costs the whole run time (2 M reads: 6.6 s with 15,
# 9.2 s with 24), so 24 win only past about 30 M reads: hence one a core but one below
# LARGE_INPUT_CHUNKS (reader.chunk_bound's count: about 25 M FASTQ reads of 150 bp at the default
# --chunk-bases), or where it is not known; 1.5 times (cores - 1) above it (22 on 16 cores).
WORKERS_PER_CORE = 1.5
LARGE_INPUT_CHUNKS = 1024


def default_processes(device_infos, index_bytes: int = 0, chunks: int | None = None) -> int:
    """Worker processes when ``--processes`` is not given: with GPUs, one per CPU core this
    process may use but one (kept for reading and writing; WORKERS_PER_CORE as many on an input
    of LARGE_INPUT_CHUNKS or more), since the host's share of the work (seeds, windows, SAM text)
    and its waits for the device are what limit a GPU run, but no more than the devices' memory
    holds (each process keeps its own copy of the index there), nor than ``chunks``, a bound on
    the input's chunks where it is known (a worker with no chunk would only make a device
    context, slowing the others' start); with CPU devices one, since their kernels use every
    core already."""
    if not all(info.is_gpu for info in device_infos):
        return 1
    cores = usable_cores()
    per_process = index_bytes + WORKER_DEVICE_BYTES
    fitting = sum(max(1, info.global_memory // per_process) for info in device_infos)
    workers = cores - 1
    if chunks is not None and chunks >= LARGE_INPUT_CHUNKS:
        workers = int(WORKERS_PER_CORE * workers)
    return max(1, min(workers, fitting, workers if chunks is None else chunks))


# Queue pairs a worker process gets at most when device memory holds fewer processes than the
# cores would get (see default_queue_pairs).
MOST_QUEUE_PAIRS = 4


def default_queue_pairs(device_infos, processes: int, chunks: int | None = None, chosen: bool = True) -> int:
    """Queue pairs a worker process gets when ``--queues-per-device`` is not given: two in a run
    of one process, else one; but where device memory capped the number of processes
    (``chosen``: :func:`default_processes` chose ``processes``, fewer than it would give with an
    index of no size), as many as make up for it, at most MOST_QUEUE_PAIRS: each pair is a
    thread of host work (seeds, windows, SAM text) in its process. Measured on one H100 with 16
    cores, chr20, 150 bp, steady: ``-p 3`` with 1, 2 and 4 pairs 345 k, 546 k and 753 k reads/s,
    against 901 k with the 15 processes of one pair the cores get (whole command on 2 M reads:
    7.91, 6.17 and 5.29 s against 6.44 s)."""
    usual = 2 if processes == 1 else 1
    if not chosen:
        return usual
    wanted = default_processes(device_infos, 0, chunks)
    return max(usual, min(MOST_QUEUE_PAIRS, -(-wanted // processes)))


def usable_cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


# Most worker processes a CPU core that `-p N` gets: past WORKERS_PER_CORE, more only add starts.
MOST_WORKERS_PER_CORE = 2


def capped_processes(requested: int, chunks: int | None) -> int:
    """``-p N`` as run: at most MOST_WORKERS_PER_CORE a usable core and, where the input's chunk
    count is bounded (``chunks``, see reads.chunk_bound), one a chunk: a worker with no chunk
    only makes a device context and copies the index (``-p 1000`` for 300 reads started 1000)."""
    return max(1, min(requested, MOST_WORKERS_PER_CORE * usable_cores(), requested if chunks is None else chunks))
