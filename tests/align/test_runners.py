"""Threads and queues: input order kept, identical to the serial run, failures stop everything."""

from __future__ import annotations

import random
import time

import process_workers
import pytest
from process_workers import (
    Chunk,  # spawned workers unpickle chunks: a module they can import
)

from bowmap.align.runners import OrderedWriter, run_processes, run_serial, run_threaded
from bowmap.runtime.errors import BowmapError


def slow_square(chunk: Chunk) -> Chunk:
    time.sleep(random.random() * 0.002)
    return Chunk(chunk.number, chunk.value**2)


def plus_one(chunk: Chunk) -> Chunk:
    time.sleep(random.random() * 0.002)
    return Chunk(chunk.number, chunk.value + 1)


def test_the_ordered_writer_writes_in_number_order_and_says_what_it_lost():
    import threading

    out, in_flight = [], threading.Semaphore(0)
    writer = OrderedWriter(out.append, in_flight)
    for number in (2, 0, 3, 1):
        writer.add(number, f"result {number}")
        assert out == [f"result {n}" for n in range(len(out))]
    assert len(out) == 4 and all(in_flight.acquire(blocking=False) for _ in range(4)) and not in_flight.acquire(blocking=False)
    writer.finish(4)
    writer.add(5, "result 5")  # 4 never came
    with pytest.raises(RuntimeError, match="lost chunks: 4 of 6 written"):
        writer.finish(6)


def test_the_serial_run_writes_through_the_same_writer():
    out = []
    with pytest.raises(RuntimeError, match="lost chunks: 1 of 3 written"):
        run_serial([Chunk(0, 1), Chunk(2, 3), Chunk(3, 4)], [slow_square], lambda chunk: out.append(chunk.value))
    assert out == [1]


def test_chunk_counts_add_up():
    from bowmap.align.workers import ChunkResult, Counts

    totals = Counts()
    for result in (ChunkResult(b"x", Counts(10, 8, 6, 1)), ChunkResult(b"", Counts(5, 4, 2, 0))):
        totals += result.counts
    assert totals == Counts(reads=15, mapped=12, proper=8, several=1)


@pytest.mark.parametrize("first, second, queue_size", [(1, 1, 1), (3, 2, 1), (4, 4, 8)])
def test_threaded_equals_serial_in_input_order(first, second, queue_size):
    chunks = [Chunk(number, number * 7 % 13) for number in range(60)]
    serial, threaded = [], []
    run_serial(chunks, [slow_square, plus_one], lambda chunk: serial.append(chunk.value))
    run_threaded(chunks, [[slow_square] * first, [plus_one] * second], lambda chunk: threaded.append(chunk.value), queue_size)
    assert threaded == serial


def test_empty_input():
    out = []
    run_threaded([], [[slow_square], [plus_one] * 2], out.append)
    assert out == []


@pytest.mark.parametrize("where", ["reader", "stage", "writer"])
def test_a_failure_anywhere_stops_every_thread_and_is_raised(where):
    def chunks():
        for number in range(10_000):
            if where == "reader" and number == 50:
                raise ValueError("bad record")
            yield Chunk(number, number)

    def stage(chunk):
        if where == "stage" and chunk.number == 30:
            raise ValueError("kernel failed")
        return chunk

    def write(chunk):
        if where == "writer" and chunk.number == 10:
            raise ValueError("disk full")

    started = time.monotonic()
    with pytest.raises(ValueError):
        run_threaded(chunks(), [[stage] * 3, [plus_one] * 2], write, queue_size=2)
    assert time.monotonic() - started < 5


def test_one_slow_chunk_does_not_let_later_results_pile_up():
    held = []

    def stage(chunk):
        if chunk.number == 0:
            time.sleep(0.3)  # while this one waits, the other workers finish later chunks
        return chunk

    def write(chunk):
        held.append(chunk.number)

    started = []

    def chunks():
        for number in range(200):
            started.append(number)
            yield Chunk(number, number)

    def watch(chunk):
        # When chunk 0 is written, the reader has drawn at most the in-flight bound (queue size
        # 2 x 2 queues + 4 workers) plus the one chunk it holds while waiting for room.
        if chunk.number == 0:
            assert len(started) <= 2 * 2 + 4 + 1
        write(chunk)

    run_threaded(chunks(), [[stage] * 4], watch, queue_size=2)
    assert held == list(range(200))


def test_at_most_start_at_once_workers_hold_the_start_gate(tmp_path):
    from bowmap.align.runners import START_AT_ONCE

    processes = START_AT_ONCE + 2
    out = []
    run_processes([Chunk(n, n) for n in range(20)], process_workers.GatedSquares(str(tmp_path)), out.append, processes)
    assert [value for _, value, _ in out] == [n * n for n in range(20)]
    held = [tuple(map(float, (tmp_path / str(rank)).read_text().split())) for rank in range(processes)]
    busiest = max(sum(entered <= moment < left for entered, left in held) for moment, _ in held)
    assert busiest <= START_AT_ONCE  # without the gate all of them hold it at once


@pytest.mark.parametrize("processes", [1, 3])
def test_processes_return_results_in_input_order(processes):
    chunks = [Chunk(number, number * 7 % 13) for number in range(40)]
    out = []
    run_processes(chunks, process_workers.Squares(), out.append, processes, queue_size=1)
    assert [(number, value) for number, value, _ in out] == [(c.number, c.value**2) for c in chunks]
    assert len({pid for _, _, pid in out}) <= processes


@pytest.mark.parametrize(
    "starter, error, text",
    [
        (process_workers.FailAt(12, "user"), BowmapError, "chunk 12: bad input"),
        (process_workers.FailAt(12, "bug"), RuntimeError, "ValueError: kernel failed"),
        (process_workers.FailAt(12, "crash"), RuntimeError, "ended unexpectedly"),
        (process_workers.FailsToStart(), BowmapError, "no such device"),
    ],
)
def test_a_failing_process_stops_the_run(starter, error, text):
    out = []
    started = time.monotonic()
    with pytest.raises(error, match=text):
        run_processes((Chunk(n, n) for n in range(10_000)), starter, out.append, 2, queue_size=2)
    assert time.monotonic() - started < 30
    assert [number for number, _, _ in out] == list(range(len(out))) and len(out) <= 12


def test_results_with_text_arrive_whole_and_in_order():
    chunks = [Chunk(number, number * 3 % 17) for number in range(30)]
    out = []
    run_processes(chunks, process_workers.TextSquares(), out.append, 3, queue_size=1)
    assert [(result.text, result.number) for result in out] == [(expected.text, expected.number) for expected in map(process_workers.text_square, chunks)]
    assert all(type(result) is process_workers.TextResult and isinstance(result.text, bytes) for result in out)


@pytest.mark.parametrize("start_method, starter, expected_of", [
    ("fork", process_workers.TextSquares(), process_workers.text_square),
    ("spawn", process_workers.TextSquares(), process_workers.text_square),
    ("fork", process_workers.ThreadedTextSquares(), process_workers.value_text),
])
def test_texts_through_shared_memory_arrive_whole_and_in_order(start_method, starter, expected_of):
    # Texts of 24-160 kB: those up to 60 kB come through the workers' slots (a memoryview, valid
    # during the write only, so copied there), the others through the pipe; 3 workers of 2
    # slots each, their slots reused many times over. The writer is slow now and then, so
    # results wait for it (a slot freed too early would be written over meanwhile).
    chunks = [Chunk(number, number * 3 % 17) for number in range(60)]
    out = []

    def write(result):
        if result.number % 7 == 3:
            time.sleep(0.02)
        out.append((bytes(result.text), result.number, type(result.text)))

    run_processes(chunks, starter, write, 3, queue_size=1, start_method=start_method, text_slot_bytes=60_000)
    expected = list(map(expected_of, chunks))
    assert [text for text, _, _ in out] == [result.text for result in expected]
    assert [kind for _, _, kind in out] == [memoryview if len(result.text) <= 60_000 else bytes for result in expected]


def test_texts_go_through_the_pipe_without_memfd(monkeypatch):
    def refused(*args, **kwargs):
        raise OSError("memfd_create refused")

    monkeypatch.setattr("os.memfd_create", refused)
    chunks = [Chunk(number, number) for number in range(12)]
    out = []
    run_processes(chunks, process_workers.TextSquares(), out.append, 2, queue_size=1, start_method="fork", text_slot_bytes=1 << 20)
    assert [(result.text, type(result.text)) for result in out] == [(expected.text, bytes) for expected in map(process_workers.text_square, chunks)]


def test_a_bad_record_stops_the_processes():
    def chunks():
        for number in range(10_000):
            if number == 20:
                raise BowmapError("reads.fq:81: bad record")
            yield Chunk(number, number)

    with pytest.raises(BowmapError, match="bad record"):
        run_processes(chunks(), process_workers.Squares(), lambda result: None, 2)


def test_processes_with_threaded_stages_keep_input_order():
    chunks = [Chunk(number, number * 5 % 11) for number in range(50)]
    out = []
    run_processes(chunks, process_workers.ThreadedSquares(), out.append, 2, queue_size=2)
    assert [value for _, value, _ in out] == [c.value**2 + 1 for c in chunks]  # in input order


@pytest.mark.parametrize(
    "starter, error, text",
    [
        (process_workers.ThreadedFailing(), RuntimeError, "stage failed"),
        (process_workers.DiesMidMessage(), RuntimeError, "ended unexpectedly"),
        (process_workers.ExitsQuietly(), RuntimeError, "ended unexpectedly"),
        (process_workers.DiesMidText(), RuntimeError, "ended unexpectedly"),
    ],
)
def test_workers_that_fail_or_die_in_odd_ways_stop_the_run(starter, error, text):
    def slow_write(result):
        time.sleep(0.3)  # the parent reads results slowly: a dying worker is halfway through one

    started = time.monotonic()
    with pytest.raises(error, match=text):
        run_processes((Chunk(n, n) for n in range(400)), starter, slow_write, 2, queue_size=1)
    assert time.monotonic() - started < 60


def test_what_the_watch_raises_stops_a_run_whose_workers_hang():
    """run_processes(watch=...): bowmap align's index checksums, checked while the first chunks
    are mapped: a mismatch must end the run even when its workers never answer."""
    out = []
    started = time.monotonic()

    def watch():
        if time.monotonic() - started > 0.5:
            raise BowmapError("index file corrupted")

    with pytest.raises(BowmapError, match="corrupted"):
        run_processes([Chunk(n, n) for n in range(8)], process_workers.Hangs(), out.append, 2, queue_size=1, watch=watch)
    assert out == [] and time.monotonic() - started < 30
