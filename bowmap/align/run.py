"""`bowmap align`: the run that wires the stages to devices and threads or processes.

Per chunk (plain functions, so the serial runner and the threads share them):
  1. reads (:mod:`bowmap.align.reads`): a chunk, or a byte range parsed in the worker;
  2. seeds and windows (:mod:`bowmap.align.seed.seeds`, :mod:`bowmap.align.seed.filter`): FM search,
     locate, candidate windows;
  3. extend (:mod:`bowmap.align.extend.extender`): Smith-Waterman, best and second best, traceback, MAPQ;
  4. sam (:mod:`bowmap.align.output.sam`): SAM text of the chunk, written in input order.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
import os
import threading
import time

from bowmap.align.options import AlignOptions
from bowmap.align.workers import (
    MOST_WORKERS_PER_CORE,
    ChunkResult,
    Counts,
    ProcessWorker,
    capped_processes,
    default_processes,
    default_queue_pairs,
    device_workers,
    import_worker_modules,
)
from bowmap.runtime import usage

log = logging.getLogger("bowmap.align")

# The first chunks are 1/16, 1/8, 1/4 and 1/2 of --chunk-bases (pairs: after the insert-size sample) (see
# reads.chunk.ramped), so the first records are written after mapping 1/16 of a chunk, not a
# whole one (bench/startup.py, PoCL on 2 busy cores, 20,000 lambda reads of 100 bp, one chunk
# before: the first SAM record after 2.46 s, now 1.33 s, medians of 6; with -p 2 and
# --chunk-bases 500000, 1.76 s, now 1.11 s); the ramp's chunks add up to less than one chunk,
# so a run has at most 4 more chunks, and output never depends on where chunks are cut.
FIRST_CHUNKS_RAMP = 4


def text_slot_bytes(chunk_bases: int) -> int:
    """The shared-memory slot for a worker process's SAM text of one chunk (runners.TextSlots):
    a chunk of 150-bp reads makes about 2.7 bytes of SAM a base (chr20, pairs or single), four
    leave room for long names and tags; a longer text (many secondary lines, a streamed run's
    huge chunks) goes through the pipe instead, as does any past 64 MiB."""
    return min(4 * chunk_bases + (1 << 20), 64 << 20)


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

    def check(self) -> None:
        """Raise its error if it has ended with one; else return at once."""
        if not self._thread.is_alive() and self._error is not None:
            raise self._error


def run_align(options: AlignOptions) -> dict:
    """Map every read of ``options.reads``; return the run's summary figures."""
    from bowmap.align.runners import run_processes, run_serial, run_threaded
    from bowmap.align.output.progress import Progress
    from bowmap.align.reads import (
        RangeInputError,
        check_reads,
        chunk_bound,
        first_input_error,
        input_chunks,
        record_window,
    )
    from bowmap.align.output.reference import ReferenceText, sam_header
    from bowmap.align.seed.residency import (
        DEFAULT_CHUNK_BASES,
        block_device_bytes,
        plan_memory,
        processes_a_device,
        text_device_bytes,
    )
    from bowmap.align.extend.smith_waterman import Scoring
    from bowmap.index.load import load_index, verify_index
    from bowmap.index_builder.memory import available_memory
    from bowmap.runtime.devices import context_for, context_for_info, format_memory, list_devices, may_fork_device_users, may_fork_host_workers, parse_device_spec
    from bowmap.runtime.output import SamWriter

    started = time.perf_counter()
    started_clock = time.monotonic()  # the same instant on the clock every process shares (see _StartLog)
    usage.mark("run")
    scoring = options.scoring or Scoring(end_to_end=options.end_to_end)
    # Mapped, not read: the checksums are checked by a helper thread while the run starts and
    # maps its first chunks; nothing is written before they all match (see write below).
    index = load_index(options.index, verify=False)
    # A missing, unreadable or malformed reads file is one line at once: before a device is
    # opened, a checksum read or a byte written (the writer holds the header back until the
    # first chunk is mapped, so standard input and the checksums are checked before output too).
    check_reads([options.reads, options.mates], index.max_read_length)
    header = sam_header(index.contig_names, index.contig_lengths, options.command_line, options.read_group)
    writer = SamWriter(options.output, header, options.output_format)  # fails now, before any work, if it cannot write
    # A device owner forked now, before this process asks OpenCL anything or starts a thread,
    # opens its device while this process checks the index, lists the devices and plans the
    # layout; it is given its work once the layout is known, or stopped (see OwnerProcess).
    standby = None
    if not options.serial and options.processes != 1 and may_fork_device_users():  # (-p 1 maps here)
        from bowmap.runtime.owner_process import OwnerProcess

        standby = OwnerProcess(start_method="fork", prepare=True, spec=options.devices)
        import_worker_modules()  # meanwhile, for the host workers forked later
    verification = _Background(verify_index, index)
    log.info("loaded index %s: %d contig(s), %d block(s) [%.2f s]", options.index, len(index.contig_names), len(index.blocks), time.perf_counter() - started)
    bar = Progress(options.reads, options.progress)
    model = _ModelHolder(options.insert_size, started_clock)
    owners = []  # the device owners of a run whose host workers share each device
    success = False
    workers = []  # this process's own device workers (a run of one process)
    try:
        # The standby's list where it made one: this process then opens the driver only if it maps itself.
        listed = standby.devices() if standby is not None else None
        device_infos = parse_device_spec(options.devices, list_devices() if listed is None else listed)
        if options.serial:
            device_infos = device_infos[:1]
        # What bowmap may use of each device (--device-mem caps it): the processes' share and
        # the blocks' residency are planned within it.
        capped_infos = [
            dataclasses.replace(info, global_memory=min(info.global_memory, info.global_memory if options.device_memory is None else options.device_memory))
            for info in device_infos
        ]
        needed = sum(block_device_bytes(block) for block in index.blocks) + text_device_bytes(index)
        bound = chunk_bound(options.reads, (options.chunk_bases or DEFAULT_CHUNK_BASES) // (2 if options.mates else 1))
        if bound is not None:
            # The first chunks are smaller (see below): up to this many more. Pairs too, now that
            # host workers are forked beside one owner (H200, chr20, 10,000 pairs in turns: 1.12 s
            # whole against 1.23 s in one process; 652c02e had left pairs out when each of five
            # processes opened the device itself, 1.74-2.04 s against 1.30-1.55 s).
            bound += FIRST_CHUNKS_RAMP
        if not options.serial and options.processes and (capped := capped_processes(options.processes, bound)) < options.processes:
            log.info("-p %d: %d worker process(es), at most %d a CPU core and one a chunk of the input (%s)", options.processes,
                     capped, MOST_WORKERS_PER_CORE, "unknown" if bound is None else f"at most {bound}")
        # One owner a device (bowmap.runtime.remote) wherever host workers are several and the
        # index, once a device, fits beside every worker's buffers: a worker then adds neither a
        # context nor a copy of the index. Otherwise (blocks streamed) each worker process has
        # its own context and residency, as before.
        plan = None
        if not options.serial:
            host_workers = capped if options.processes else default_processes(capped_infos, 0, bound)
            pairs = options.queues_per_device or 1
            if host_workers > 1:
                total_pairs = processes_a_device(host_workers, len(device_infos)) * pairs
                plan = plan_memory(index, [info.global_memory for info in capped_infos], options.chunk_bases, total_pairs, total_pairs,
                                   available_memory(), host_workers * 4)
                if plan.streamed:
                    plan = None
                else:
                    processes = host_workers
                    plan = dataclasses.replace(plan, queue_pairs=pairs)
        owned = plan is not None
        if standby is not None and not owned:  # unused: it goes now, with the context it opened
            standby.close(wait=False)
            standby = None
        if not owned:
            processes = 1 if options.serial else capped if options.processes else default_processes(capped_infos, needed, bound)
            plan = plan_memory(
                index, [info.global_memory // processes_a_device(processes, len(device_infos)) for info in capped_infos],
                options.chunk_bases, 1 if options.serial else options.queues_per_device,
                default_queue_pairs(capped_infos, processes, bound, chosen=not options.serial and not options.processes), available_memory(),
                # chunks a streamed run holds at once: run_processes' or run_threaded's (queue_size=1) bound
                processes * 4 if processes > 1 else 3 + 2 * (options.queues_per_device or 1),
            )
        options = dataclasses.replace(options, chunk_bases=plan.chunk_bases, queues_per_device=plan.queue_pairs)
        if plan.streamed:
            log.info("%s", plan.describe([info.name for info in device_infos]))
        if processes == 1:
            reference_text = ReferenceText.from_index(index)
            set_up = {"context": 0.0, "programs": 0.0, "upload": 0.0}
            for info, slots in zip(device_infos, plan.slots):
                opening = time.perf_counter()
                device = context_for(info.index)
                opened, built = time.perf_counter(), device.build_seconds
                workers += device_workers(index, reference_text, device, plan.queue_pairs, options, scoring, slots)
                set_up["context"] += opened - opening
                set_up["programs"] += device.build_seconds - built
                set_up["upload"] += time.perf_counter() - opened - (device.build_seconds - built)
            log.info("device set-up: context %.2f s, programs %.2f s, index upload %.2f s", set_up["context"], set_up["programs"], set_up["upload"])
            layout = f"{len(workers)} worker queue pair(s)"
        elif owned:
            from bowmap.align.workers import OwnerIndex
            from bowmap.runtime.owner_process import OwnerProcess

            # Each owner in a process of its own: its GIL is then not shared with the reader, the
            # writer or another device's owner (see OwnerProcess).
            # Developers: BOWMAP_OWNERS_PER_DEVICE=k runs k owners a device (each its own copy of
            # the index), the host workers spread over them in turn.
            per_device = _owners_per_device()
            owner_infos = [info for info in device_infos for _ in range(per_device)]
            for n, info in enumerate(owner_infos):
                work = functools.partial(context_for_info, info), OwnerIndex(options.index, index.identity), f"{info.index}.{n}"
                owners.append(standby.serve(*work, info=info) if n == 0 and standby is not None else OwnerProcess(*work))
            layout = f"one owner a device, {processes} host worker processes of {plan.queue_pairs} queue pair(s)"
        else:
            layout = f"{processes} worker processes, {plan.queue_pairs} queue pair(s) each"
        log.info("devices: %s; %s [%.2f s]", ", ".join(info.name for info in device_infos), layout, time.perf_counter() - started)
        usage.mark("devices")
        totals = Counts()
        written = {"first": None, "last": None}  # seconds from the start to the first and the last chunk's SAM
        exit_seconds = None  # the wait for the worker processes to exit
        mapping_started = time.perf_counter()

        def write(result: ChunkResult):
            nonlocal totals
            if written["first"] is None:
                checked()
            if result.observations is not None:  # a chunk of the paired model's sample: nothing to write
                model.observe(*result.observations)
                return
            with usage.timed("writing"):
                writer.write(result.text)
            written["last"] = time.perf_counter() - started
            if written["first"] is None:
                written["first"] = written["last"]
            totals += result.counts
            bar.written(result.counts.reads)

        index_checked = []  # once its checksums match

        def checked():
            """The index's checksums, waited for once: by the first write, or in a run of one
            process before its first chunk (there a corrupted index could crash the process that
            maps, where worker processes or an owner would only fail)."""
            if not index_checked:
                verification.result()
                index_checked.append(True)
                log.info("index checksums match [%.2f s]", time.perf_counter() - started)

        def verified_chunks():
            if processes == 1:
                checked()
            # The first chunks small (not when blocks are streamed: a chunk costs a sweep of them).
            ramp = 0 if plan.streamed else FIRST_CHUNKS_RAMP
            if options.paired:
                for chunk in paired_chunks(options, index.max_read_length, model, processes, ramp):
                    if chunk.insert_model is not None:  # the sample's chunks write nothing
                        bar.handed_out(chunk)
                    yield chunk
                return
            # Chunks, or byte ranges of the input that the workers read and parse themselves
            # (parsed here for --skip/--upto: a range's record count is known once parsed).
            items = input_chunks(options.reads, options.chunk_bases, index.max_read_length, ramp)
            for item in record_window(items, options.skip, options.upto) if options.windowed else items:
                bar.handed_out(item)
                yield item

        chunks = verified_chunks()
        try:
            if options.serial:
                worker = workers[0]
                run_serial(chunks, [worker.seed, worker.extend], write)
            elif processes > 1:
                starter = ProcessWorker(options, scoring, owner_infos if owned else device_infos, plan.queue_pairs, index.identity, plan.slots if plan.streamed else None,
                                        [owner.endpoint for owner in owners] if owned else None)
                # Host workers of device owners make no OpenCL call of their own: forked (from
                # the command line), they start at once (see run_processes).
                start_method = "fork" if owned and may_fork_host_workers() else "spawn"
                # The checksums are checked meanwhile: a mismatch stops the workers within a poll,
                # whatever a corrupted index made them do (watch).
                exit_seconds = run_processes(chunks, starter, write, processes, ready=_StartLog(processes, started_clock, owners),
                                             start_method=start_method, text_slot_bytes=text_slot_bytes(options.chunk_bases),
                                             watch=verification.check)
            else:
                # Streamed, chunks are large: one queued between stages, not four, bounds the host memory.
                run_threaded(chunks, [[w.seed for w in workers], [w.extend for w in workers]], write, queue_size=1 if plan.streamed else 4)
        except Exception as error:
            verification.result()  # a corrupted index explains whatever failed: its error first
            if not isinstance(error, RangeInputError):
                raise
            if options.paired:
                from bowmap.align.reads.pairs import first_pair_error

                raise first_pair_error(options.reads, options.mates, index.max_read_length, error) from None
            raise first_input_error(options.reads, index.max_read_length, error) from None
        success = True
        usage.mark("mapped")
    finally:
        if standby is not None and standby not in owners:  # the layout needed none, or it failed first
            standby.close()
        for owner in owners:
            owner.close(wait=not success)  # a finished run does not wait for the driver's teardown
        usage.mark("owners closed")
        model.stop.set()  # a reader waiting for the model after a failure gives up
        bar.close()
        writer.close(success)
        usage.mark("closed")
    elapsed = time.perf_counter() - started
    reads = totals.reads
    residencies = {id(worker.residency): worker.residency for worker in workers if worker.residency is not None}
    if residencies:  # one process: the block uploads of its devices
        uploads = sum(residency.uploads for residency in residencies.values())
        log.info("block by block: %d block uploads, %s, %.2f s", uploads,
                 format_memory(sum(residency.uploaded_bytes for residency in residencies.values())),
                 sum(residency.upload_seconds for residency in residencies.values()))
    summary = {
        "reads": reads,
        "mapped": totals.mapped,
        "seconds": elapsed,
        "mapping_seconds": time.perf_counter() - mapping_started,
        "devices": [info.name for info in device_infos],
        "first_chunk_seconds": written["first"],
    }
    if usage.FOLDER:  # developers: see bowmap.runtime.usage
        from bowmap.align.runners import write_usage

        write_usage(os.path.join(usage.FOLDER, "parent.usage.json"))
    if written["first"] is not None:
        log.info("first chunk written after %.2f s, the last after %.2f s%s", written["first"], written["last"],
                 "" if exit_seconds is None else f"; the worker processes exited {exit_seconds:.2f} s after their last result")
    log.info(
        "%d reads, %.2f%% mapped, %.2f s, %.0f reads/s, on %s",
        reads, 100 * totals.mapped / max(reads, 1), elapsed, reads / max(elapsed, 1e-9), ", ".join(summary["devices"]),
    )
    # bowtie2's summary: reads aligned 0 times, exactly once, more than once (mapped reads for
    # which another alignment was found: their XS is its score).
    once = totals.mapped - totals.several
    summary.update(aligned_once=once, aligned_several=totals.several)
    log.info(
        "aligned 0 times: %d (%.2f%%); exactly 1 time: %d (%.2f%%); >1 times: %d (%.2f%%)",
        reads - totals.mapped, 100 * (reads - totals.mapped) / max(reads, 1), once, 100 * once / max(reads, 1),
        totals.several, 100 * totals.several / max(reads, 1),
    )
    if options.paired:
        summary.update(pairs=reads // 2, proper=totals.proper, insert_model=model.model)
        log.info(
            "%d pairs, %.2f%% of reads properly paired; %s",
            reads // 2, 100 * totals.proper / max(reads, 1), model.model.describe() if model.model else "no pairs",
        )
    return summary


def _owners_per_device() -> int:
    """BOWMAP_OWNERS_PER_DEVICE (developers; default 1), a positive integer or a usage error."""
    from bowmap.runtime.errors import UsageError

    text = os.environ.get("BOWMAP_OWNERS_PER_DEVICE", "1")
    if not text.strip().isdigit() or int(text) < 1:
        raise UsageError(f"BOWMAP_OWNERS_PER_DEVICE={text!r}: owner processes a device must be a positive integer")
    return int(text)


class _StartLog:
    """run_processes' ``ready`` callback: once every worker process has started, one line saying
    when the first and the last were ready (seconds from the run's start) and where the last one's
    start went: its interpreter, imports and arguments (``python``: from the spawn to its body),
    mapping the index, waiting for its turn to open the device (runners.start_gate), the device
    context, the programs' builds and the index's upload."""

    PIECES = ("index", "waiting", "context", "programs", "upload")

    def __init__(self, processes: int, started_clock: float, owners=()):
        self.processes = processes
        self.started_clock = started_clock
        self.owners = owners
        self.ready: list[dict] = []

    def __call__(self, rank: int, timings: dict) -> None:
        self.ready.append(timings)
        log.debug("worker process %d ready after %.2f s", rank, timings["ready"] - self.started_clock)
        if len(self.ready) == self.processes:
            last = max(self.ready, key=lambda item: item["ready"])
            pieces = [f"python {last['entered'] - last['spawned']:.2f} s"]
            pieces += [f"{name} {last[name]:.2f} s" for name in self.PIECES if name in last]
            log.info("%d worker processes ready after %.2f-%.2f s (the last: %s)", self.processes,
                     min(item["ready"] for item in self.ready) - self.started_clock, last["ready"] - self.started_clock, ", ".join(pieces))
            for owner in self.owners:
                if owner.set_up_seconds:
                    log.info("device owner: context %.2f s%s, index upload %.2f s", owner.set_up_seconds["context"],
                             " (opened as the run started)" if owner.set_up_seconds.get("prepared") else "", owner.set_up_seconds["upload"])


class _ModelHolder:
    """The run's insert-size model: given, or estimated in the writer from the sample's result
    (``sample_chunks`` chunks, observed in order) while the reader waits for it (see
    :func:`paired_chunks`)."""

    def __init__(self, model, started_clock: float | None = None):
        self.model = model
        self.started_clock = started_clock  # the run's start (time.monotonic), for the log
        self.sample_pairs = 0
        self.sample_chunks = 0
        self._observed: list[tuple] = []
        self.ready = threading.Event()
        self.stop = threading.Event()
        if model is not None:
            self.ready.set()

    def observe(self, orientation, distance) -> None:
        """One sample chunk's observations; the model once the last has come."""
        self._observed.append((orientation, distance))
        if len(self._observed) == self.sample_chunks:
            import numpy as np

            self.estimate(*(np.concatenate(parts) for parts in zip(*self._observed)))

    def estimate(self, orientation, distance) -> None:
        from bowmap.align.extend.pairs import estimate_model

        self.model = estimate_model(orientation, distance, self.sample_pairs)
        usage.mark("insert model")
        when = "" if self.started_clock is None else f" [{time.monotonic() - self.started_clock:.2f} s]"
        log.info("%s%s", self.model.describe(), when)
        self.ready.set()

    def wait(self):
        """The model once estimated; None when the run has stopped first (it failed)."""
        while not self.ready.wait(0.1):
            if self.stop.is_set():
                return None
        return self.model


# The insert-size sample's chunks are at least this many bases (see paired_chunks).
SMALLEST_SAMPLE_CHUNK_BASES = 1 << 16


def paired_chunks(options: AlignOptions, max_read_length: int, model: _ModelHolder, workers: int = 1, ramp: int = 0):
    """Chunks of whole pairs, each carrying the insert-size model. Without a given model, the
    first items are the model's sample (the first SAMPLE_PAIRS pairs, in chunks of
    ``options.chunk_bases`` as any others, so that their buffers are no larger: numbers 0 ..
    k - 1, no model): the pipeline maps them, the writer estimates the model from them (each
    pair's observation is its own, so one chunk or several give the same), and only then do
    the chunks follow (numbered from k), so every chunk is paired under one model whatever the
    threads, processes or chunk size. The chunks read for the sample are held, not read again:
    stdin works too. The first ``ramp`` chunks are smaller (see FIRST_CHUNKS_RAMP). The sample is
    cut into at least ``workers`` chunks (of at least
    SMALLEST_SAMPLE_CHUNK_BASES), so that the run's workers share it."""
    import dataclasses

    from bowmap.align.extend.pairs import SAMPLE_PAIRS
    from bowmap.align.reads import record_window
    from bowmap.align.reads.chunk import Batch, Chunker, concatenate_batches, slice_batch
    from bowmap.align.reads.pairs import paired_ranges, read_pairs

    # Byte ranges of both files that the workers read and parse, or chunks parsed here.
    ranges = None if options.mates is None else paired_ranges(options.reads, options.mates, options.chunk_bases, max_read_length, ramp)
    chunks = read_pairs(options.reads, options.mates, options.chunk_bases, max_read_length, ramp=ramp) if ranges is None else iter(ranges)
    held, shift = [], 0
    if model.model is None:
        # The sample: the first pairs, parsed here (from the files' heads when the workers read ranges).
        sampled = chunks if ranges is None else read_pairs(options.reads, options.mates, options.chunk_bases, max_read_length)
        while sum(chunk.count for chunk in held) < 2 * SAMPLE_PAIRS:
            chunk = next(sampled, None)
            if chunk is None:
                break
            held.append(chunk)
        if held:
            batch = concatenate_batches([Batch(c.names, c.name_offsets, c.codes, c.offsets, c.qualities) for c in held])
            batch = slice_batch(batch, 0, min(batch.count, 2 * SAMPLE_PAIRS))
            model.sample_pairs = batch.count // 2
            # Cut so that every one of the ``workers`` maps a piece: the run waits for the sample.
            sample_bases = -(-int(batch.offsets[-1]) // max(1, workers))
            chunker = Chunker(min(options.chunk_bases, max(SMALLEST_SAMPLE_CHUNK_BASES, sample_bases)), unit=2)
            sample = [*chunker.add(batch), *chunker.finish()]
            model.sample_chunks = len(sample)
            yield from sample
            if model.wait() is None:
                return
            shift = len(sample)
        if ranges is not None:
            held = []  # the ranges hold these pairs too
    # --skip/--upto cut the pairs after the sample is taken: every part of an input is paired
    # under the model of the whole input's first pairs, as one run over all of it would be.
    chunks = itertools.chain(held, chunks)
    if options.windowed:
        chunks = record_window(chunks, options.skip, options.upto, unit=2)
    for chunk in chunks:
        yield dataclasses.replace(chunk, number=chunk.number + shift, insert_model=model.model)
