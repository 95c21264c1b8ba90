"""`bowmap align`: the stages of one chunk, and the run that wires them to devices and threads.

Per chunk (plain functions, so the serial runner and the threads share them):
  1. seed/filter (:mod:`bowmap.seed_filter`): seeds -> FM search -> locate -> candidate windows;
  2. extend (:mod:`bowmap.smith_waterman`): best score of each read-window pair, best and second
     best per read, traceback of the best -> CIGAR, position, MAPQ;
  3. format (:mod:`bowmap.sam_output`): SAM text of the chunk, written in input order.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field

import numpy as np

from bowmap.arrays import unique
from bowmap.errors import BowmapError
from bowmap.seed_filter import SeedOptions, Windows

log = logging.getLogger("bowmap.align")


@dataclass
class AlignOptions:
    """Everything `bowmap align` needs; built by the CLI."""

    index: str
    reads: str
    output: str | None = None  # None or "-": stdout; *.bam: BAM
    devices: str | None = None
    queues_per_device: int | None = None  # None: 2 with one process, 1 a worker process
    processes: int | None = None  # worker processes; None: see default_processes
    end_to_end: bool = False
    seed: SeedOptions = field(default_factory=SeedOptions)
    scoring: object = None  # bowmap.smith_waterman.Scoring; None: its defaults
    min_score: int | None = None  # None: see minimum_scores
    write_unaligned: bool = True
    read_group: tuple[str, list[str]] | None = None
    chunk_bases: int = 4 << 20
    serial: bool = False  # debugging: no threads, one device queue
    progress: bool = False
    command_line: str = ""


def minimum_scores(read_lengths: np.ndarray, scoring, end_to_end: bool, min_score: int | None) -> np.ndarray:
    """The score a read's best alignment needs to be reported.

    Local mode: 30, BWA-MEM's -T with the same match score of 1, at most the score of a perfect
    match (short reads still map when they match well). End-to-end: half the perfect score, so
    about one mismatch in ten bases, as bowtie2's end-to-end default allows.
    """
    perfect = read_lengths.astype(np.int64) * scoring.match
    if min_score is not None:
        return np.full(len(read_lengths), min_score, dtype=np.int64)
    if end_to_end:
        return np.ceil(perfect * 0.5).astype(np.int64)
    return np.minimum(30, np.maximum(perfect, 1))


def _mix(values: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: uint64 -> well-spread uint64."""
    with np.errstate(over="ignore"):
        values = (values ^ (values >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        values = (values ^ (values >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return values ^ (values >> np.uint64(31))


def tie_breakers(codes: np.ndarray, offsets: np.ndarray, read: np.ndarray, start: np.ndarray, score: np.ndarray) -> np.ndarray:
    """A pseudo-random but reproducible order for a read's equally good windows, drawn from the
    read's bases and the window's position: repeats are spread over their copies (as bwa and
    bowtie2 do with their random choice) while the output stays the same for the same input,
    whatever the chunking or the threads. Windows sorted by read; only windows sharing their
    read's best score with another window get a non-zero key (hashing is not free)."""
    breakers = np.zeros(len(read), dtype=np.uint64)
    if len(read) == 0:
        return breakers
    first = np.flatnonzero(np.r_[True, read[1:] != read[:-1]])
    top = np.repeat(np.maximum.reduceat(score, first), np.diff(np.r_[first, len(read)]))
    at_top = score == top
    tops_per_read = np.bincount(read[at_top], minlength=int(read[-1]) + 1)
    tied = at_top & (tops_per_read[read] > 1)
    if not tied.any():
        return breakers
    reads = unique(read[tied])
    lengths = offsets[reads + 1] - offsets[reads]
    within = np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    bases = codes[np.repeat(offsets[reads], lengths) + within]
    with np.errstate(over="ignore"):
        terms = _mix(within.astype(np.uint64) * np.uint64(4) + bases.astype(np.uint64) + np.uint64(1))
        running = np.concatenate(([np.uint64(0)], np.cumsum(terms, dtype=np.uint64)))
        ends = np.cumsum(lengths)
        read_hash = running[ends] - running[ends - lengths]  # wraps modulo 2^64, as meant
    breakers[tied] = _mix(read_hash[np.searchsorted(reads, read[tied])] ^ start[tied].astype(np.uint64))
    return breakers


# Two windows' best alignments ending within this many bases of each other, on one strand, are
# one alignment found twice (windows of nearby diagonal clusters overlap): not a second best.
SAME_ALIGNMENT_BASES = 16


def best_two(
    read: np.ndarray, score: np.ndarray, count: int, tie_breaker: np.ndarray, reverse=None, end=None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each of ``count`` reads: the pair with the best score (ties: the smallest
    ``tie_breaker``, then the forward strand and the smaller ``end``, then the first), or -1;
    that score; and the best score among the read's other pairs (NO_SCORE when it has none).
    ``read`` is sorted. With ``reverse`` and ``end`` (each pair's
    strand and the text position where its alignment ends), pairs whose alignment ends within
    SAME_ALIGNMENT_BASES of the best's on its strand are the best alignment again, not others."""
    from bowmap.mapq import NO_SCORE

    reads = np.arange(count)
    starts = np.searchsorted(read, reads, side="left")
    has = np.searchsorted(read, reads, side="right") > starts
    best = np.full(count, -1, dtype=np.int64)
    best_score = np.full(count, NO_SCORE, dtype=np.int64)
    if len(read):
        # The best: among the pairs at their read's top score, the smallest tie-breaker, then
        # (equal tie-breakers: one start) the forward strand and the nearer alignment end, and
        # only then the first, so the pairs' order (which may depend on the rest of the chunk)
        # does not decide. Only those few pairs are sorted, not all of them.
        best_score[has] = np.maximum.reduceat(score.astype(np.int64), starts[has])
        top = np.flatnonzero(score == best_score[read])
        keys = [top] + ([] if end is None else [end[top], reverse[top]]) + [tie_breaker[top], read[top]]
        top = top[np.lexsort(keys)]
        first_of_read = np.r_[True, read[top][1:] != read[top][:-1]]
        best[read[top[first_of_read]]] = top[first_of_read]
    others = np.ones(len(read), dtype=bool)
    if len(read):
        chosen = best[read]
        others[chosen] = False
        if end is not None:
            others &= (reverse != reverse[chosen]) | (np.abs(end - end[chosen]) > SAME_ALIGNMENT_BASES)
    candidates = np.where(others, score.astype(np.int64), NO_SCORE)
    second_score = np.full(count, NO_SCORE, dtype=np.int64)
    if has.any():
        second_score[has] = np.maximum.reduceat(candidates, starts[has])
    return best, best_score, second_score


class DeviceWorker:
    """One device command queue's kernels and buffers: used by one thread at a time."""

    def __init__(self, index, reference_text, device, device_blocks, device_text, options: AlignOptions, scoring):
        from bowmap.fm_search import FMSearch
        from bowmap.seed_filter import SeedFilter
        from bowmap.smith_waterman import SmithWaterman

        self.index = index
        self.reference_text = reference_text
        self.options = options
        self.scoring = scoring
        # The seed and the Smith-Waterman stages run in different threads: a queue each, so
        # neither waits behind the other's kernels.
        self.seed_filter = SeedFilter(index, device_blocks, FMSearch(device, device.queue()), options.seed)
        extend_queue = device.queue()
        self.smith_waterman = SmithWaterman(device, scoring, extend_queue)
        # The rescue seeds on the extend stage's queue: the two stages may run in two threads.
        self.rescue_filter = SeedFilter(index, device_blocks, FMSearch(device, extend_queue), options.seed)
        self.device_text = device_text  # the packed reference on the device: windows are read there

    def seed(self, chunk):
        from bowmap.reader import as_chunk

        chunk = as_chunk(chunk)  # a byte range of the input is read and parsed here
        return chunk, self.seed_filter.windows(chunk.codes, chunk.reverse_codes, chunk.offsets, chunk.both_codes)

    def extend(self, item) -> tuple[bytes, int, int]:
        """The chunk's SAM text, its read count and its mapped-read count."""
        from bowmap.sam_output import format_chunk

        chunk, windows = item
        alignments = extend_chunk(
            self.device_text, self.index, self.smith_waterman, chunk, windows, self.scoring, self.options, self.rescue_filter
        )
        read_group_id = self.options.read_group[0] if self.options.read_group else None
        text = format_chunk(chunk, alignments, self.reference_text, read_group_id, self.options.write_unaligned, scoring=self.scoring)
        return text, chunk.count, int(alignments.mapped.sum())


class ProcessWorker:
    """Starts one worker process's aligner (picklable: it travels to the worker process).

    Process ``rank`` maps with device ``devices[rank % len(devices)]`` (DeviceInfo), its own
    context, copy of the index blocks on the device and ``queues_per_device`` queue pairs (one:
    chunks mapped one after the other; more: in threads, as in one process); the index files
    are mapped, not read, so the processes share their pages (the parent checked them already)."""

    def __init__(self, options: AlignOptions, scoring, devices: list, queues: int):
        self.options = options
        self.scoring = scoring
        self.devices = devices
        self.queues = queues

    def __call__(self, rank: int):
        from bowmap.devices import context_for_info
        from bowmap.index import load_index
        from bowmap.pipeline import start_gate
        from bowmap.sam_output import ReferenceText

        index = load_index(self.options.index, verify=False)
        with start_gate():
            device = context_for_info(self.devices[rank % len(self.devices)])
        workers = device_workers(index, ReferenceText.from_index(index), device, self.queues, self.options, self.scoring)
        return [[worker.seed for worker in workers], [worker.extend for worker in workers]]


def device_workers(index, reference_text, device, queues: int, options: AlignOptions, scoring) -> list[DeviceWorker]:
    """``queues`` workers on one device, sharing its copy of the index blocks and packed text."""
    from bowmap.fm_search import DeviceBlock
    from bowmap.smith_waterman import PackedText

    blocks = [DeviceBlock(device, block) for block in index.blocks]
    text = PackedText.from_index(device, index)
    return [DeviceWorker(index, reference_text, device, blocks, text, options, scoring) for _ in range(queues)]


class _Background:
    """``function(*args)`` run in a daemon thread; :meth:`result` waits and re-raises its error."""

    def __init__(self, function, *args):
        import threading

        self._error: BaseException | None = None
        self._value = None

        def body():
            try:
                self._value = function(*args)
            except BaseException as error:  # noqa: BLE001 - raised again by result()
                self._error = error

        self._thread = threading.Thread(target=body, daemon=True)
        self._thread.start()

    def result(self):
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value


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
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    per_process = index_bytes + WORKER_DEVICE_BYTES
    fitting = sum(max(1, info.global_memory // per_process) for info in device_infos)
    workers = cores - 1
    if chunks is not None and chunks >= LARGE_INPUT_CHUNKS:
        workers = int(WORKERS_PER_CORE * workers)
    return max(1, min(workers, fitting, workers if chunks is None else chunks))


def extend_chunk(device_text, index, smith_waterman, chunk, windows: Windows, scoring, options: AlignOptions, rescuer=None):
    """Smith-Waterman over every candidate window, then the traceback of each read's best.

    With a ``rescuer`` (a SeedFilter on ``smith_waterman``'s queue: it reads the chunk's reads
    sent there), reads whose best alignment is poor (``rescue_mismatches`` or more below a
    perfect match, or none) get the windows of dense seeds too (:meth:`SeedFilter.rescue_windows`), scored and ranked with the others."""
    from bowmap.arrays import segment_ranges
    from bowmap.mapq import mapping_quality
    from bowmap.sam_output import NO_SCORE, ChunkAlignments
    from bowmap.smith_waterman import cigar_scores

    count = chunk.count
    lengths = np.diff(chunk.offsets)
    read_codes = smith_waterman.send_reads(chunk.both_codes)  # once for every call below
    read_offsets = np.concatenate((chunk.offsets[:-1], chunk.offsets[:-1] + len(chunk.codes)))
    read_lengths = np.concatenate((lengths, lengths))

    def sequences(windows: Windows):
        """The Smith-Waterman calls' read and window arguments. Windows are (text position,
        length): the kernels read their bases from the packed text on the device, so none are
        gathered here or copied in."""
        return read_codes, read_offsets, read_lengths, device_text, windows.start, windows.end - windows.start

    clip_bonus = scoring.clip_bonus

    def scored(windows: Windows):
        """Best score and window end of each of ``windows``. The score is the kernel's (the
        alignment's own plus the clip bonus of each read end it reaches) less both bonuses:
        an alignment's score less the clip penalty of each end it clips, as BWA-MEM weighs
        its candidates; a read's whole-length alignment keeps its own score."""
        pairs = (windows.read + count * windows.reverse, np.arange(len(windows)))
        score, _, window_end = smith_waterman.best(*sequences(windows), *pairs)
        return score - 2 * clip_bonus, window_end

    score, window_end = scored(windows)
    best, best_score, second_score = _ranked(chunk, windows, score, window_end, count)
    seed_options = options.seed
    if rescuer is not None and seed_options.rescue_interval:
        poor_below = lengths * scoring.match - seed_options.rescue_mismatches * (scoring.match + scoring.mismatch)
        poor = (best_score < poor_below) & (lengths >= seed_options.seed_length)
        extra = _new_windows(windows, rescuer.rescue_windows(chunk.codes, chunk.reverse_codes, chunk.offsets, poor, chunk.both_codes, read_codes), poor, index) if poor.any() else None
        if extra is not None and len(extra):
            extra_score, extra_end = scored(extra)
            # The new windows go after the others, and only the rescued reads are ranked again
            # (over their old and new windows, grouped by read): ranking the whole chunk again
            # took a tenth of a worker's host time.
            ranked_again = np.concatenate((np.flatnonzero(poor[windows.read]), len(windows) + np.arange(len(extra))))
            windows = Windows(*(np.concatenate((getattr(windows, name), getattr(extra, name))) for name in Windows.FIELDS))
            score, window_end = np.concatenate((score, extra_score)), np.concatenate((window_end, extra_end))
            ranked_again = ranked_again[np.argsort(windows.read[ranked_again], kind="stable")]
            subset = Windows(*(getattr(windows, name)[ranked_again] for name in Windows.FIELDS))
            again = _ranked(chunk, subset, score[ranked_again], window_end[ranked_again], count)
            best[poor] = np.where(again[0][poor] >= 0, ranked_again[np.maximum(again[0][poor], 0)], -1)
            best_score[poor], second_score[poor] = again[1][poor], again[2][poor]
    pair_reads = windows.read + count * windows.reverse
    minimum = minimum_scores(lengths, scoring, options.end_to_end, options.min_score)
    # Reported: the best alignment's own score (AS) reaches the minimum, as BWA-MEM's -T.
    # best_score + 2 clip bonuses bounds it from above; the traceback gives it exactly.
    mapped = (best >= 0) & (best_score + 2 * clip_bonus > 0) & (best_score + 2 * clip_bonus >= minimum)
    chosen = best[mapped]
    traced_score, read_start, read_end, window_start, _, cigar_ops, cigar_starts, traced_lengths = smith_waterman.traceback(
        *sequences(windows), pair_reads[chosen], chosen
    )
    traced_score = cigar_scores(scoring, traced_score, read_start, read_end, lengths[mapped])
    kept = (traced_score > 0) & (traced_score >= minimum[mapped])
    if not kept.all():  # a clipped alignment whose bonus carried it over the minimum: unmapped
        mapped[np.flatnonzero(mapped)[~kept]] = False
        chosen, traced_score, window_start = chosen[kept], traced_score[kept], window_start[kept]
        cigar_ops = cigar_ops[segment_ranges(cigar_starts[kept].astype(np.int64), traced_lengths[kept].astype(np.int64))]
        traced_lengths = traced_lengths[kept]
    position = np.zeros(count, dtype=np.int64)
    contig = np.zeros(count, dtype=np.int32)
    contig_of, offset = index.to_contig(windows.start[chosen] + window_start)
    contig[mapped] = contig_of
    position[mapped] = offset
    cigar_lengths = np.zeros(count, dtype=np.int64)
    cigar_lengths[mapped] = traced_lengths
    cigar_offsets = np.concatenate(([0], np.cumsum(cigar_lengths)))
    # The traceback's operations are in the order of the chosen reads, which is input order.
    score_out = np.zeros(count, dtype=np.int32)
    score_out[mapped] = traced_score
    second = np.where(mapped, second_score, NO_SCORE).astype(np.int32)
    # MAPQ weighs the best against the second best as they were compared: both less the clip
    # penalty of each end they clip (AS is the best's own score, XS the second's compared one).
    # With AS in place of the best, a clipped wrong hit over a clipped second (the read's true
    # place not found) got a higher MAPQ than the scores that chose it support.
    mapq = mapping_quality(np.where(mapped, best_score, 0), second, lengths, scoring)
    return ChunkAlignments(
        mapped=mapped,
        reverse=np.where(mapped, windows.reverse[np.maximum(best, 0)], False) if len(windows) else mapped.copy(),
        contig=contig,
        position=position,
        score=score_out,
        second_score=second,
        cigar_ops=cigar_ops,
        cigar_offsets=cigar_offsets,
        mapq=mapq,
    )


def _ranked(chunk, windows: Windows, score, window_end, count: int):
    """best_two over a chunk's scored windows (sorted by read), ties broken by tie_breakers."""
    tie_breaker = tie_breakers(chunk.codes, chunk.offsets, windows.read, windows.start, score)
    return best_two(windows.read, score, count, tie_breaker, windows.reverse, windows.start + window_end)


# Window lengths enter _new_windows's keys modulo this: windows are at most a read (up to 4096
# bases in practice) plus three margins long, so two windows of one start never collide.
WINDOW_LENGTH_KEY = 8192


def _new_windows(windows: Windows, extra: Windows, rescued: np.ndarray, index) -> Windows:
    """The windows of ``extra`` (windows of the reads in the mask ``rescued``) that ``windows``
    does not hold already (same read, strand, start and end): scoring them again would only cost
    time."""
    windows = Windows(*(getattr(windows, name)[rescued[windows.read]] for name in Windows.FIELDS))  # the few rescued reads'
    span = int(index.total_length) + 1
    reads = int(max(windows.read.max(initial=0), extra.read.max(initial=0))) + 1
    if 2 * reads * span * WINDOW_LENGTH_KEY >= 2**62:  # keys would overflow: score the repeats
        return extra

    def keys(w: Windows) -> np.ndarray:
        return ((w.read * 2 + w.reverse) * span + w.start) * WINDOW_LENGTH_KEY + (w.end - w.start) % WINDOW_LENGTH_KEY

    fresh = ~np.isin(keys(extra), keys(windows))
    return Windows(*(getattr(extra, name)[fresh] for name in Windows.FIELDS))


def run_align(options: AlignOptions) -> dict:
    """Map every read of ``options.reads``; return the run's summary figures."""
    from tqdm import tqdm

    from bowmap.devices import context_for, list_devices, parse_device_spec
    from bowmap.index import load_index, verify_index
    from bowmap.pipeline import run_processes, run_serial, run_threaded
    from bowmap.reader import (
        RangeInputError,
        chunk_bound,
        first_input_error,
        input_chunks,
    )
    from bowmap.sam_output import ReferenceText, SamWriter, sam_header
    from bowmap.smith_waterman import Scoring

    started = time.perf_counter()
    scoring = options.scoring or Scoring(end_to_end=options.end_to_end)
    # Mapped, not read: the checksums are checked by a helper thread while the workers start,
    # and no chunk goes to a worker before they all match (see verified_chunks below).
    index = load_index(options.index, verify=False)
    verification = _Background(verify_index, index)
    log.info("loaded index %s: %d contig(s), %d block(s) [%.2f s]", options.index, len(index.contig_names), len(index.blocks), time.perf_counter() - started)
    header = sam_header(index.contig_names, index.contig_lengths, options.command_line, options.read_group)
    if options.output in (None, "-"):
        verification.result()  # standard output shows what is written at once: nothing before the checks
    writer = SamWriter(options.output, header)  # fails now, before any work, if it cannot write
    bar = tqdm(desc="mapped", unit=" reads", unit_scale=True, disable=not options.progress, leave=False)
    success = False
    try:
        device_infos = parse_device_spec(options.devices, list_devices())
        if options.serial:
            device_infos = device_infos[:1]
        needed = sum(block.occ.nbytes + block.marks.nbytes + block.samples.nbytes for block in index.blocks)
        needed += index.packed.nbytes + (-(-index.total_length // 8) if len(index.ambiguous_starts) else 0)  # PackedText
        for info in device_infos:
            if needed > info.global_memory:
                raise BowmapError(
                    f"{options.index}: its {len(index.blocks)} blocks and packed text need {needed} bytes together but "
                    f"{info.name} has {info.global_memory}; mapping block by block is not "
                    "implemented yet: rebuild the index with a larger --device-mem"
                )
        processes = 1 if options.serial else options.processes or default_processes(
            device_infos, needed, chunk_bound(options.reads, options.chunk_bases)
        )
        workers = []
        if processes == 1:
            reference_text = ReferenceText.from_index(index)
            queues = 1 if options.serial else options.queues_per_device or 2
            for info in device_infos:
                workers += device_workers(index, reference_text, context_for(info.index), queues, options, scoring)
            layout = f"{len(workers)} worker queue pair(s)"
        else:
            layout = f"{processes} worker processes, {options.queues_per_device or 1} queue pair(s) each"
        log.info("devices: %s; %s [%.2f s]", ", ".join(info.name for info in device_infos), layout, time.perf_counter() - started)
        totals = {"reads": 0, "mapped": 0}
        first_written: list[float] = []  # seconds from the start to the first chunk's SAM
        mapping_started = time.perf_counter()

        def write(result):
            text, reads, mapped = result
            if not totals["reads"]:
                first_written.append(time.perf_counter() - started)
            writer.write(text)
            totals["reads"] += reads
            totals["mapped"] += mapped
            bar.update(reads)

        def verified_chunks():
            verification.result()
            log.info("index checksums match [%.2f s]", time.perf_counter() - started)
            # Chunks, or byte ranges of the input that the workers read and parse themselves.
            yield from input_chunks(options.reads, options.chunk_bases, index.max_read_length)

        chunks = verified_chunks()
        try:
            if options.serial:
                worker = workers[0]
                run_serial(chunks, [worker.seed, worker.extend], write)
            elif processes > 1:
                starter = ProcessWorker(options, scoring, device_infos, options.queues_per_device or 1)
                run_processes(chunks, starter, write, processes)
            else:
                run_threaded(chunks, [[w.seed for w in workers], [w.extend for w in workers]], write)
        except RangeInputError as error:
            raise first_input_error(options.reads, index.max_read_length, error) from None
        success = True
    finally:
        bar.close()
        writer.close(success)
    elapsed = time.perf_counter() - started
    reads = totals["reads"]
    summary = {
        "reads": reads,
        "mapped": totals["mapped"],
        "seconds": elapsed,
        "mapping_seconds": time.perf_counter() - mapping_started,
        "devices": [info.name for info in device_infos],
        "first_chunk_seconds": first_written[0] if first_written else None,
    }
    if os.environ.get("BOWMAP_PROFILE"):  # developers: see pipeline.write_usage
        from bowmap.pipeline import write_usage

        write_usage(os.path.join(os.environ["BOWMAP_PROFILE"], "parent.usage.json"))
        log.info("first chunk written after %.2f s", summary["first_chunk_seconds"] or 0.0)
    log.info(
        "%d reads, %.2f%% mapped, %.2f s, %.0f reads/s, on %s",
        reads, 100 * totals["mapped"] / max(reads, 1), elapsed, reads / max(elapsed, 1e-9), ", ".join(summary["devices"]),
    )
    return summary
