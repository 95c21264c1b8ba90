"""Building the blocks of an index: one after another in this process, or several at once in
worker processes, as many as ``--threads`` allows and the memory model predicts fit under
``--max-memory`` (:mod:`.memory`).

Each block is the same call of :func:`.fm_block.write_block` wherever it runs, reading its text
from the packed reference in the temporary folder and writing its files there, so the files are
byte-identical whatever the number of threads. Worker processes, not threads: pydivsufsort's
ctypes call releases the GIL, but the BWT pass after the sort is NumPy steps that hold it for a
good share of a block's time, each process's peak can be measured apart (VmHWM), and a worker
can be stopped at once on ^C or on another block's error.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import traceback

from bowmap.index_builder.fm_block import peak_resident_bytes, write_block
from bowmap.index_builder.memory import GIB, default_max_memory, plan_schedule, resident_bytes
from bowmap.runtime.errors import BowmapError

log = logging.getLogger("bowmap.index_builder")


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity mask, as nproc counts)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def build_blocks(options, plan: list[tuple[int, int]], pac_path: str, folder: str, base: str,
                 writer=None, extra: tuple = (), fields: tuple = ()) -> list[dict]:
    """Build every block of ``plan`` ((start, length) each) into ``folder``; their manifest entries
    in block order. ``writer`` builds one block (``fm_block.write_block`` for DNA,
    ``symbols.write_symbol_block`` for protein and text, given ``extra`` after the usual
    arguments); ``fields`` names what else of its result goes into the manifest entry."""
    from tqdm import tqdm

    writer = writer or write_block  # looked up at the call: tests replace it
    threads = options.threads or usable_cores()
    cap = options.max_memory or default_max_memory()
    baseline = resident_bytes()
    reading = peak_resident_bytes()  # so far: reading and packing the reference
    lengths = [length for _, length in plan]
    schedule = plan_schedule(lengths, options.sa_sample, cap, threads, baseline)
    # libdivsufsort sorts with OpenMP threads; blocks at once share the --threads cores.
    openmp_threads = max(1, threads // schedule.at_once)
    log.info(
        "predicted peak %.2f GiB with %d block(s) at once (blocks %.2f GiB: largest %.2f GiB, this process "
        "%.2f GiB; reading the reference took %.2f GiB; --max-memory %.2f GiB, --threads %d, %d sort "
        "thread(s) a block)",
        max(schedule.peak, reading) / GIB, schedule.at_once, schedule.peak / GIB, max(schedule.predictions) / GIB,
        baseline / GIB, reading / GIB, cap / GIB, threads, openmp_threads,
    )
    for number in schedule.over_cap:
        log.warning(
            "block %d alone is predicted to need %.2f GiB, over --max-memory %.2f GiB: it is built alone "
            "(a smaller --device-mem makes smaller blocks)",
            number, (baseline + schedule.predictions[number]) / GIB, cap / GIB,
        )
    jobs = {
        number: (pac_path, start, length, options.sa_sample, folder, f"{base}.{number}", openmp_threads, *extra)
        for number, (start, length) in enumerate(plan)
    }
    bar = tqdm(total=len(plan), desc="index blocks", unit="block", disable=not options.progress, leave=False)
    results: dict[int, dict] = {}

    def finished(number: int, result: dict, own_process: bool) -> None:
        results[number] = result
        start, length = plan[number]
        # A block built in this process adds to what it holds, and VmHWM covers the whole build
        # so far (it is not reset: /proc/self/clear_refs would also reset what `time` reports).
        predicted = schedule.predictions[number] + (0 if own_process else baseline)
        log.info(
            "block %d: %d bases from %d [%.2f s; peak RSS %.2f GiB %s, predicted %.2f GiB]",
            number, length, start, result["seconds"], result["peak_bytes"] / GIB,
            "in its process" if own_process else "of the build so far", predicted / GIB,
        )
        bar.update(1)

    try:
        if schedule.at_once == 1:
            for number in schedule.order:
                finished(number, writer(*jobs[number]), own_process=False)
        else:
            _run_in_workers(jobs, schedule, baseline, cap, threads, finished, options.prefix, writer)
    finally:
        bar.close()
    blocks = []
    for number, (start, length) in enumerate(plan):
        result = results[number]
        blocks.append(
            {
                "start": start,
                "length": length,
                "primary": result["primary"],
                "symbol_counts": result["symbol_counts"],
                **{field: result[field] for field in fields},
                "files": result["files"],
            }
        )
    if schedule.at_once > 1:
        log.info(
            "blocks built, at most %d at once; measured peak of this process %.2f GiB, largest block process %.2f GiB",
            max(result["at_once"] for result in results.values()), peak_resident_bytes() / GIB,
            max(result["peak_bytes"] for result in results.values()) / GIB,
        )
    return blocks


def _leave_with_parent(parent: int) -> None:
    """End this worker, quietly, when the build process ``parent`` dies (SIGKILL, the OOM
    killer): it would otherwise build its block for nobody and print a traceback when its
    result finds no reader. Linux: the kernel sends SIGKILL on the parent's death
    (PR_SET_PDEATHSIG; the parent's thread that started the worker waits for it, so it outlives
    it). Elsewhere, a thread that watches the parent's id. A parent already gone: leave now."""
    import ctypes
    import threading
    import time

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        armed = libc.prctl(1, signal.SIGKILL, 0, 0, 0) == 0  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        armed = False
    if os.getppid() != parent:
        os._exit(1)
    if not armed:

        def watch():
            while os.getppid() == parent:
                time.sleep(0.5)
            os._exit(1)

        threading.Thread(target=watch, daemon=True, name="bowmap-parent-watch").start()


@contextlib.contextmanager
def _stderr_to_null():
    """This process's standard error (fd 2) pointed at /dev/null while a worker is spawned, so
    that the worker has it as its own. A worker writes nothing there (its errors come back
    through its pipe, its death as an exit code); but one whose parent is killed between its
    spawn and the start-up data multiprocessing sends it would print that module's EOFError
    traceback (seen once in a full test run on a 2-core machine)."""
    if sys.stderr is not None:
        sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no standard error at all: the worker has none either
        yield
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def _block_worker(connection, job, parent: int, writer=write_block) -> None:
    """Entry of a worker process: build one block, send back its result or error text."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles ^C and stops the workers
    _leave_with_parent(parent)
    try:
        try:
            message = ("done", writer(*job))
        except OSError as error:
            message = ("oserror", error.strerror or str(error))
        except BaseException:  # noqa: BLE001 - sent to the parent, which raises it
            message = ("error", traceback.format_exc())
        connection.send(message)
    except OSError:  # the parent is gone (its end of the pipe closed): nobody to tell
        os._exit(1)
    finally:
        connection.close()


def _run_in_workers(jobs: dict, schedule, baseline: int, cap: int, threads: int, finished, prefix: str, writer=write_block) -> None:
    """Start blocks in ``schedule.order`` under :func:`memory.may_start`, one spawned process a
    block; call ``finished(number, result, True)`` as each ends. On any error or interrupt the
    running workers are terminated before it propagates."""
    import multiprocessing
    from multiprocessing.connection import wait

    from bowmap.index_builder.memory import may_start

    context = multiprocessing.get_context("spawn")
    pending = list(schedule.order)
    running: dict[int, tuple] = {}  # block -> (process, receiving end)
    try:
        while pending or running:
            for number in list(pending):
                if may_start(number, list(running), schedule.predictions, baseline, cap, threads):
                    receiver, sender = context.Pipe(duplex=False)
                    process = context.Process(
                        target=_block_worker, args=(sender, jobs[number], os.getpid(), writer), name=f"bowmap-index-block-{number}", daemon=True
                    )
                    with _stderr_to_null():
                        process.start()
                    sender.close()
                    running[number] = (process, receiver, len(running) + 1)
                    pending.remove(number)
            ready = wait([receiver for _, receiver, _ in running.values()])
            for number in [number for number, (_, receiver, _) in running.items() if receiver in ready]:
                process, receiver, at_once = running.pop(number)
                try:
                    kind, payload = receiver.recv()
                except EOFError:
                    process.join()
                    raise BowmapError(
                        f"block {number}: the worker process building it died (exit code {process.exitcode}"
                        + ("; killed, perhaps for lack of memory: try a smaller --max-memory or --threads)" if process.exitcode == -signal.SIGKILL else ")")
                    ) from None
                receiver.close()
                process.join()
                if kind == "oserror":
                    raise BowmapError(f"{prefix}: writing the index failed ({payload})")
                if kind == "error":
                    raise RuntimeError(f"block {number} failed in its worker process:\n{payload}")
                payload["at_once"] = at_once
                finished(number, payload, True)
    finally:
        for process, receiver, _ in running.values():
            process.terminate()
        for process, receiver, _ in running.values():
            process.join()
            receiver.close()
