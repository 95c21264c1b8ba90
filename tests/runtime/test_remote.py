"""bowmap.runtime.remote: kernel owners driven through a device owner give exactly what they give
on the device itself, and the owner's failures reach the host worker as one error."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest
from conftest import DEVICE_SPECS, build_test_index, random_genome

from bowmap.align.workers import owner_shared_buffers
from bowmap.runtime.errors import BowmapError
from bowmap.runtime.remote import RemoteDevice


def raises_in_another_thread(call) -> bool:
    """Whether ``call()`` raises a BowmapError in a thread of its own (a connection of its own)."""
    raised = []

    def body():
        try:
            call()
        except BowmapError:
            raised.append(True)

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    return bool(raised)


def owner_and_client(device, shared, register_arenas=None):
    from bowmap.runtime.owner import DeviceOwner

    owner = DeviceOwner(lambda: device, shared, register_arenas=register_arenas)
    return owner, RemoteDevice(device.info, *owner.endpoint)


def arena_settled(owner, remote) -> None:
    """This thread's arena made (a batch with bytes) and, where the owner registers arenas, its
    registration done: the batches after run registered (one arrives in a thread of its own)."""
    assert copied_back(remote, np.random.default_rng(0), 1024)
    owner.pinning.wait()


# Both ways of serving a batch: arenas registered with the driver (NVIDIA's default: the batch
# queued at once, waited for at its end) or not (each copy after its queue is idle).
@pytest.mark.parametrize("register_arenas", [False, True], ids=["pageable", "registered"])
def test_fm_search_and_smith_waterman_through_an_owner_equal_the_device_itself(device, tmp_path, register_arenas):
    from bowmap.align.seed.fm_search import DeviceBlock, FMSearch
    from bowmap.align.extend.packed_text import PackedText
    from bowmap.align.extend.smith_waterman import Scoring, SmithWaterman

    rng = np.random.default_rng(29)
    genome = random_genome(rng, 5003)
    index = build_test_index(tmp_path, [("a", "".join("ACGT"[c] for c in genome[:3001])), ("b", "".join("ACGT"[c] for c in genome[3001:]))],
                             device_memory=1 << 16)
    owner, remote = owner_and_client(device, lambda owned: owner_shared_buffers(index, owned), register_arenas)
    try:
        arena_settled(owner, remote)
        local_blocks = [DeviceBlock(device, block) for block in index.blocks]
        remote_blocks = [DeviceBlock.of_owner(remote, number, block) for number, block in enumerate(index.blocks)]
        lengths = rng.integers(1, 40, size=257)
        starts = rng.integers(0, len(genome) - 40, size=257)
        patterns = [genome[start : start + length].copy() for start, length in zip(starts, lengths)]
        for pattern in patterns[::7]:
            pattern[rng.integers(0, len(pattern))] = rng.integers(0, 4)  # some absent
        codes = np.concatenate(patterns).astype(np.uint8)
        offsets = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        local, remote_search = FMSearch(device), FMSearch(remote)
        for local_block, remote_block in zip(local_blocks, remote_blocks):
            expected = local.search(local_block, codes, offsets, lengths)
            got = remote_search.search(remote_block, codes, offsets, lengths)
            for a, b in zip(expected, got):
                np.testing.assert_array_equal(a, b)
            lo, hi, _ = expected
            np.testing.assert_array_equal(local.locate_intervals(local_block, lo, hi), remote_search.locate_intervals(remote_block, lo, hi))

        scoring = Scoring()
        reads = [genome[start : start + 100].copy() for start in rng.integers(0, len(genome) - 140, size=33)]
        read_codes = np.concatenate(reads).astype(np.uint8)
        read_offsets = np.arange(33, dtype=np.int64) * 100
        window_starts = rng.integers(0, len(genome) - 160, size=65)
        pair_reads = rng.integers(0, 33, size=65)
        arguments = (read_codes, read_offsets, np.full(33, 100), None, window_starts, np.full(65, 150), pair_reads, np.arange(65))
        results = []
        for target in (device, remote):
            text = PackedText.from_index(target, index) if target is device else PackedText.of_owner(target, index)
            aligner = SmithWaterman(target, scoring)
            call = list(arguments)
            call[3] = text
            results.append((aligner.best(*call), aligner.traceback(*call)))
        for expected, got in zip(*results):
            for a, b in zip(expected, got):
                np.testing.assert_array_equal(a, b)
        # every batch after the arena's first in the way asked for (its first registered only if
        # its registration came at once)
        kinds = owner.batches
        assert (kinds["pageable"] <= 1 < 4 <= kinds["registered"]) if register_arenas else (kinds["registered"] == 0 < 5 <= kinds["pageable"]), kinds
    finally:
        owner.close()


def test_clients_in_threads_share_the_owners_one_kernel_of_a_name_and_get_their_own_results(device, tmp_path):
    """DeviceOwner._kernel: one kernel object a program and name for every client, its arguments
    set by the one loop just before each launch; two clients searching different patterns at
    once get what the device itself gives each."""
    from bowmap.align.seed.fm_search import DeviceBlock, FMSearch

    rng = np.random.default_rng(31)
    genome = random_genome(rng, 4001)
    index = build_test_index(tmp_path, [("a", "".join("ACGT"[c] for c in genome))])
    owner, first = owner_and_client(device, lambda owned: owner_shared_buffers(index, owned))
    second = RemoteDevice(device.info, *owner.endpoint)
    try:
        local = FMSearch(device)
        local_block = DeviceBlock(device, index.blocks[0])
        cases = []
        for client in (first, second):
            lengths = rng.integers(5, 30, size=rng.integers(50, 300))
            codes = rng.integers(0, 4, size=int(lengths.sum())).astype(np.uint8)
            offsets = np.concatenate(([0], np.cumsum(lengths)[:-1]))
            cases.append((client, codes, offsets, lengths, local.search(local_block, codes, offsets, lengths)))
        failures = []

        def search(client, codes, offsets, lengths, expected):
            try:
                searcher, block = FMSearch(client), DeviceBlock.of_owner(client, 0, index.blocks[0])
                for _ in range(5):
                    for a, b in zip(expected, searcher.search(block, codes, offsets, lengths)):
                        np.testing.assert_array_equal(a, b)
            except Exception as error:  # noqa: BLE001 - reported below
                failures.append(error)

        threads = [threading.Thread(target=search, args=case) for case in cases]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not failures, failures
        assert len(owner._kernels) == 1 and "fm_search" in next(iter(owner._kernels.values()))  # one program here: one kernel a name
    finally:
        owner.close()


def test_an_owner_whose_set_up_failed_answers_every_request_with_its_error(device):
    def failing(_):
        raise BowmapError("index block 3 needs more than the device allows")

    owner, remote = owner_and_client(device, failing)
    try:
        with pytest.raises(BowmapError, match="index block 3 needs"):
            remote.queue().wait_idle()  # a batch waits for the set-up: its error
        # once it failed, a program too (before, one may be built beside the upload)
        with pytest.raises(BowmapError, match="index block 3 needs"):
            remote.program("align/fm_search.cl")
        # each thread its own connection: the same error there
        assert raises_in_another_thread(lambda: remote.queue().wait_idle())
    finally:
        owner.close()


def test_a_program_is_answered_once_the_context_is_open_while_the_owner_still_uploads_and_a_batch_once_it_has(device):
    from bowmap.runtime.owner import DeviceOwner

    opening, uploading = threading.Event(), threading.Event()
    release = threading.Event()

    def slow_context():
        assert opening.wait(30)
        return device

    def slow_upload(_):
        uploading.set()
        assert release.wait(30)
        return {}

    owner = DeviceOwner(slow_context, slow_upload)
    remote = RemoteDevice(device.info, *owner.endpoint)
    try:
        programs, done = [], []
        asking = threading.Thread(target=lambda: programs.append(remote.program("align/fm_search.cl")))
        asking.start()
        asking.join(0.3)
        assert not programs  # asked before the context is open: it waits
        opening.set()
        assert uploading.wait(30)
        asking.join(10)
        assert programs and programs[0].facts  # answered while the upload still runs
        batch = threading.Thread(target=lambda: done.append(remote.queue().wait_idle()))
        batch.start()
        batch.join(0.3)
        assert not done  # a batch waits for the shared buffers
        release.set()
        batch.join(30)
        assert done == [None]
    finally:
        release.set()
        owner.close()


def test_a_host_worker_sees_an_owner_that_has_gone(device):
    owner, remote = owner_and_client(device, lambda owned: {})
    queue = remote.queue()
    queue.wait_idle()  # connected, answered
    owner.close()
    with pytest.raises(BowmapError, match="stopped answering"):
        for _ in range(3):
            queue.wait_idle()


# The owner in a process of its own (OwnerProcess): its set-up (OwnerIndex) maps the index there.


def owner_process_and_client(device, prefix):
    import functools

    from bowmap.align.workers import OwnerIndex
    from bowmap.runtime.devices import context_for_info
    from bowmap.runtime.owner_process import OwnerProcess

    owner = OwnerProcess(functools.partial(context_for_info, device.info), OwnerIndex(prefix), "test")
    return owner, RemoteDevice(device.info, *owner.endpoint)


@pytest.fixture
def small_index(tmp_path):
    genome = random_genome(np.random.default_rng(31), 2000)
    build_test_index(tmp_path, [("a", "".join("ACGT"[c] for c in genome))])
    return str(tmp_path / "ref")


def test_an_owner_process_serves_kernels_and_copies_as_the_device_itself(device, small_index):
    import pyopencl as cl

    from bowmap.align.extend.packed_text import PackedText
    from bowmap.index.load import load_index
    from bowmap.runtime.devices import make_buffer

    owner, remote = owner_process_and_client(device, small_index)
    try:
        index = load_index(small_index)
        local, shared = PackedText.from_index(device, index), PackedText.of_owner(remote, index)
        for (name, buffer), (_, remote_buffer) in zip(sorted(local.shared_buffers().items()), sorted(shared.shared_buffers().items())):
            expected, got = np.empty(buffer.size, np.uint8), np.empty(buffer.size, np.uint8)
            cl.enqueue_copy(device.queue(), expected, buffer)
            remote.queue().copy(got, remote_buffer)
            np.testing.assert_array_equal(got, expected, err_msg=name)
        data = np.arange(1000, dtype=np.int32)
        buffer = make_buffer(remote.context, cl.mem_flags.READ_WRITE, size=data.nbytes)
        queue = remote.queue()
        queue.copy(buffer, data, is_blocking=False)
        back = np.empty_like(data)
        queue.copy(back, buffer)
        np.testing.assert_array_equal(back, data)
        assert remote.device.platform.name == device.device.platform.name
        while not owner.set_up_seconds:  # reported once set up; a request waited for that already
            time.sleep(0.01)
        assert set(owner.set_up_seconds) == {"context", "upload", "prepared"} and owner.set_up_seconds["prepared"] is False
    finally:
        owner.close()
    assert not owner.process.is_alive()


def test_an_owner_process_closed_without_waiting_ends_on_its_own_and_is_not_joined_at_exit(device, small_index):
    """OwnerProcess.close(wait=False), a finished run's: it returns once the owner has stopped
    serving; the process ends by itself, multiprocessing no longer counts it among the children
    its exit joins, and the next close collects it."""
    import multiprocessing

    from bowmap.runtime import owner_process

    owner, remote = owner_process_and_client(device, small_index)
    data = np.arange(64, dtype=np.int32)
    queue = remote.queue()
    buffer = remote.context.buffer(1, data.nbytes)
    queue.copy(buffer, data, is_blocking=False)
    back = np.empty_like(data)
    queue.copy(back, buffer)
    np.testing.assert_array_equal(back, data)
    owner.close(wait=False)
    assert owner.process not in multiprocessing.active_children() and owner.process in owner_process._DETACHED
    deadline = time.monotonic() + 20
    while owner.process.exitcode is None and time.monotonic() < deadline:
        owner.process.join(timeout=0.05)
    assert owner.process.exitcode == 0
    owner_process._reap()
    assert owner.process not in owner_process._DETACHED
    with pytest.raises(BowmapError, match="stopped answering|stopped before it answered"):
        remote.queue().wait_idle()


def test_an_owner_process_whose_set_up_failed_answers_with_its_error(device, tmp_path):
    owner, remote = owner_process_and_client(device, str(tmp_path / "missing"))
    try:
        with pytest.raises(BowmapError, match="missing"):
            remote.program("align/fm_search.cl")
    finally:
        owner.close()


def test_a_host_worker_sees_an_owner_process_that_was_killed(device, small_index):
    import os
    import signal

    owner, remote = owner_process_and_client(device, small_index)
    try:
        queue = remote.queue()
        queue.wait_idle()
        os.kill(owner.process.pid, signal.SIGKILL)
        owner.process.join()
        with pytest.raises(BowmapError, match="stopped answering"):
            queue.wait_idle()
        # a thread that had not connected yet: it does not wait for an owner that will never listen
        assert raises_in_another_thread(lambda: remote.queue().wait_idle())
    finally:
        owner.close()


def test_buffers_are_made_with_their_batch_and_dropped_once_released_whatever_the_thread(device):
    import gc

    import pyopencl as cl

    from bowmap.runtime.devices import make_buffer

    owner, remote = owner_and_client(device, lambda owned: {})

    def client_buffers():
        return [key for key in owner._buffers if key[0] != "shared"]

    try:
        # made, written and dropped before its thread's batch goes: made, used, then forgotten
        queue = remote.queue()
        buffer = make_buffer(remote.context, cl.mem_flags.READ_WRITE, size=64)
        queue.copy(buffer, np.arange(16, dtype=np.int32), is_blocking=False)
        del buffer
        gc.collect()
        queue.wait_idle()
        assert client_buffers() == []

        # made by one thread, its release sent by another's batch before the maker's batch
        made, go, held = threading.Event(), threading.Event(), {}

        def maker():
            maker_queue = remote.queue()
            held["buffer"] = make_buffer(remote.context, cl.mem_flags.READ_WRITE, size=64)
            made.set()
            go.wait()
            maker_queue.wait_idle()  # this thread's batch: the creation

        thread = threading.Thread(target=maker)
        thread.start()
        made.wait()
        del held["buffer"]
        gc.collect()
        queue.wait_idle()  # this thread's batch carries the release, before the creation came
        go.set()
        thread.join()
        assert client_buffers() == []
        assert not owner._released_early

        # kept while held, and usable by another thread once its maker has synchronised
        kept = make_buffer(remote.context, cl.mem_flags.READ_WRITE, size=64)
        remote.context.flush()
        back = np.empty(16, dtype=np.int32)

        def user():
            user_queue = remote.queue()
            user_queue.copy(kept, np.arange(16, dtype=np.int32), is_blocking=False)
            user_queue.copy(back, kept)

        thread = threading.Thread(target=user)
        thread.start()
        thread.join()
        np.testing.assert_array_equal(back, np.arange(16))
        assert len(client_buffers()) == 1
    finally:
        owner.close()


def copied_back(remote, rng, words: int) -> bool:
    """Whether ``words`` random int32s copied to a buffer of ``remote`` come back the same (one
    batch of this thread, there and back)."""
    import pyopencl as cl

    from bowmap.runtime.devices import make_buffer, read_back

    data = rng.integers(0, 2**31, size=words, dtype=np.int32)
    buffer = make_buffer(remote.context, cl.mem_flags.READ_WRITE, size=data.nbytes)
    queue = remote.queue()
    queue.copy(buffer, data, is_blocking=False)
    back = np.empty_like(data)
    read_back(queue, back, buffer)
    return bool(np.array_equal(back, data))


@pytest.mark.parametrize("register_arenas", [False, True], ids=["pageable", "registered"])
def test_copies_larger_than_the_arena_grow_it_and_come_back_whole(device, register_arenas, monkeypatch):
    """A batch whose bytes outgrow the thread's arena (8 MiB at first, then at least 32, then
    doubling) gets a new one, mapped (and registered) in place of the old, which is closed; its
    copies come back whole."""
    from bowmap.runtime import remote as remote_module

    sizes, make = [], remote_module._arena_file
    monkeypatch.setattr(remote_module, "_arena_file", lambda size: (sizes.append(size), make(size))[1])
    owner, remote = owner_and_client(device, lambda owned: {}, register_arenas)
    try:
        rng = np.random.default_rng(5)
        assert all(copied_back(remote, rng, words) for words in (1 << 20, 5 << 20, 9 << 20))  # 4, 20 and 36 MiB
        # each batch copies its words there and back: 8 MiB, 40 and 72 (and alignment)
        assert sizes == [8 << 20, 32 << 20, 64 << 20, 128 << 20]
        # a first batch larger than the first arena gets at least what a second would (32 MiB):
        # 20 MiB there, then 40 in all
        other = []
        worker = threading.Thread(target=lambda: other.append(copied_back(remote, rng, 5 << 20)))
        worker.start()
        worker.join()
        assert other == [True] and sizes[4:] == [32 << 20, 64 << 20]
        del sizes[4:]
        # the same again in the last arena, once registered (where asked): every batch so
        owner.pinning.wait()
        before = dict(owner.batches)
        assert all(copied_back(remote, rng, words) for words in (1 << 20, 5 << 20, 9 << 20))
        kind = "registered" if register_arenas else "pageable"
        assert owner.batches[kind] - before[kind] == 3 and len(sizes) == 4
    finally:
        owner.close()


def test_an_arena_replaced_while_its_registration_ran_keeps_its_buffer_and_the_next_is_used_registered(device, monkeypatch):
    """DeviceOwner._pinned: a registration that ends after its arena was replaced (a batch needing
    more) goes with the departed arenas; the new arena's is the client's, and copies stay whole."""
    from bowmap.runtime import pinning

    release, register, made = threading.Event(), pinning.register, []

    def slow_first(context, arena):
        if not made:
            made.append(None)
            assert release.wait(30)
        registered = register(context, arena)
        made.append(registered)
        return registered

    monkeypatch.setattr(pinning, "register", slow_first)
    owner, remote = owner_and_client(device, lambda owned: {}, register_arenas=True)
    try:
        rng = np.random.default_rng(11)
        # 4 KiB there and back in the first arena, then 24 MiB: a second
        assert copied_back(remote, rng, 1 << 10) and copied_back(remote, rng, 3 << 20)
        owner.pinning.wait(1)  # the second arena's registration, not held
        release.set()
        owner.pinning.wait()
        first, second = made[2], made[1]  # the second arena's ended first
        assert len(first.arena) == 8 << 20 and len(second.arena) >= 32 << 20
        assert any(kept is first for kept in owner._departed)
        before = owner.batches["registered"]
        assert copied_back(remote, rng, 1 << 10)
        assert owner.batches["registered"] == before + 1
    finally:
        release.set()
        owner.close()


def test_a_buffer_pool_gives_the_smallest_kept_buffer_that_fits_and_keeps_no_more_than_its_limit():
    from bowmap.runtime.buffer_pool import BufferPool

    pool = BufferPool(limit=10_000)
    assert pool.take(1, 100) is None
    assert pool.keep(1, 4000, "a") and pool.keep(1, 1000, "b") and pool.keep(2, 1000, "c")
    assert not pool.keep(1, 5000, "d")  # 6,000 kept: no room
    assert pool.bytes == 6000
    assert pool.take(1, 200) is None  # 1,000 is more than FIT (4) times 200
    assert pool.take(1, 900) == (1000, "b")  # the smallest that fits, of the flags asked for
    assert pool.take(1, 900) is None  # 4,000: too large
    assert pool.take(1, 1000) == (4000, "a")
    assert pool.take(1, 1000) is None
    assert pool.take(2, 1000) == (1000, "c")
    assert pool.take(2, 1001) is None
    assert pool.bytes == 0


def test_an_owner_gives_a_dropped_buffer_to_the_next_creation_it_fits(device):
    import gc

    import pyopencl as cl

    from bowmap.runtime.devices import make_buffer

    owner, remote = owner_and_client(device, lambda owned: {})
    try:
        queue = remote.queue()
        first = make_buffer(remote.context, cl.mem_flags.READ_WRITE, size=4096)
        queue.wait_idle()
        made = owner._buffers[first.key]
        del first
        gc.collect()
        queue.wait_idle()  # carries the release: to the pool
        assert owner._pool.bytes == 4096

        again = make_buffer(remote.context, cl.mem_flags.READ_WRITE, size=3000)
        other_flags = make_buffer(remote.context, cl.mem_flags.READ_ONLY, size=3000)
        data, back = np.arange(750, dtype=np.int32), np.empty(750, dtype=np.int32)
        queue.copy(again, data, is_blocking=False)
        queue.copy(back, again)  # the reused buffer holds what is written to it
        np.testing.assert_array_equal(back, data)
        assert owner._buffers[again.key] is made
        assert owner._buffers[other_flags.key] is not made
        assert owner._pool.bytes == 0
    finally:
        owner.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this system")
def test_a_forked_process_names_its_buffers_with_a_token_of_its_own():
    from bowmap.runtime import remote

    remote._RELEASED.append(("parent", 1))
    try:
        parent_key = remote._key()
        reader, writer = os.pipe()
        child = os.fork()
        if child == 0:  # the child: its first key and what it would release
            os.write(writer, repr((remote._key(), list(remote._RELEASED))).encode())
            os._exit(0)
        os.close(writer)
        child_key, child_released = eval(os.read(reader, 1000).decode())  # noqa: S307 - our own repr
        os.close(reader)
        os.waitpid(child, 0)
        assert child_key[0] != parent_key[0] and child_key[0].startswith(f"{child}-")
        assert child_released == []
        assert remote._key()[0] == parent_key[0]
    finally:
        remote._RELEASED.clear()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this system")
def test_an_owner_process_given_no_work_stops_when_closed():
    """A run's forked standby owner (see bowmap.align.run) that its layout did not need."""
    from bowmap.runtime.owner_process import OwnerProcess

    owner = OwnerProcess(start_method="fork")
    assert owner.process.is_alive() and owner.set_up_seconds == {}
    owner.close()
    assert owner.process.exitcode == 0
    assert not os.path.exists(owner.address)  # it listened from its start: its socket file is gone
    # Closed without waiting (a run whose layout needed no owner): left to end on its own.
    owner = OwnerProcess(start_method="fork")
    owner.close(wait=False)
    owner.process.join(timeout=10)
    assert owner.process.exitcode == 0
    assert not os.path.exists(owner.address)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this system")
def test_a_standby_owner_that_died_before_its_work_is_one_error():
    """A standby killed before it was served (a driver's abort while it opened its device, the
    OOM killer): the run gets one BowmapError, not a broken pipe (which the command line takes
    for its standard output's reader gone: exit 141, no message)."""
    import signal

    from bowmap.runtime.owner_process import OwnerProcess

    owner = OwnerProcess(start_method="fork")
    os.kill(owner.process.pid, signal.SIGKILL)
    owner.process.join(timeout=10)
    with pytest.raises(BowmapError, match="device owner process exited before its work came"):
        owner.serve(dict, dict)  # picklable stand-ins: the pipe fails before anyone calls them
    owner.close()


# A fresh interpreter: an owner forked to open a device must be forked before its parent's first
# OpenCL call (bowmap.runtime.devices.may_fork_device_users), which this test process made long ago.
PREPARED_OWNERS = r"""
import functools, json, sys, time
from bowmap.runtime.owner_process import OwnerProcess

def nothing_shared(device):
    return {}

spec = sys.argv[1]
owners = [OwnerProcess(start_method="fork", prepare=True, spec=spec) for _ in range(3)]
import pyopencl as cl
from bowmap.runtime.devices import context_for_info, list_devices, make_buffer, parse_device_spec
from bowmap.runtime.remote import RemoteDevice

assert owners[0].devices() == list_devices()  # what the run plans its layout with
info = parse_device_spec(spec, list_devices())[0]
prepared = []
for owner, given in zip(owners, (info, None)):  # served with the device's info, and without it
    owner.serve(functools.partial(context_for_info, info), nothing_shared, "test", info=given)
    remote = RemoteDevice(info, *owner.endpoint)
    buffer = make_buffer(remote.context, cl.mem_flags.READ_WRITE, size=4096)  # the device answers
    remote.queue().wait_idle()
    while not owner.set_up_seconds:  # reported once set up, maybe after the answer above
        time.sleep(0.01)
    prepared.append(owner.set_up_seconds["prepared"])
    owner.close()
owners[2].close()  # never served: stops at once, its device opened or not
assert owners[2].process.exitcode == 0
print(json.dumps(prepared))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this system")
@pytest.mark.parametrize("spec", DEVICE_SPECS)
def test_a_forked_owner_serves_the_device_it_opened_before_its_work_came(spec):
    """OwnerProcess(prepare=True, spec=spec), a run's standby: it lists the devices for the run; served the
    device the spec selects first (its info given), it takes the context it opened while the run
    planned its layout; served without the info, it opens the device again; never served, it
    stops when closed."""
    import json
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", PREPARED_OWNERS, spec], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == [True, False]


def test_a_program_comes_with_its_kernels_facts_so_a_worker_asks_no_more(device):
    """The owner answers a program with every kernel's KERNEL_FACTS (work-group size and its
    preferred multiple, local memory): the values the device itself gives, and a host worker's
    set-up then asks the owner nothing per kernel."""
    import pyopencl as cl

    from bowmap.runtime import remote
    from bowmap.runtime.devices import make_kernel

    owner, client = owner_and_client(device, lambda owned: {})
    asked = []
    call = remote._Channel.call

    def counted(channel, message):
        asked.append(message[0])
        return call(channel, message)

    try:
        remote._Channel.call = counted
        key = ("align/smith_waterman.cl", ("-DMATCH=1", "-DMISMATCH=4", "-DAMBIGUOUS=1", "-DGAP_OPEN=6", "-DGAP_EXTEND=1", "-DEND_TO_END=0"))
        local, distant = device.program(*key), client.program(*key)
        names = [kernel.function_name for kernel in local.all_kernels()]
        assert len(names) > 1
        for name in names:
            for parameter in remote.KERNEL_FACTS:
                assert make_kernel(distant, name).get_work_group_info(parameter) == \
                    cl.Kernel(local, name).get_work_group_info(parameter, device.device), (name, parameter)
        assert asked.count("program") == 1 and "kernel_info" not in asked
        # Any other question is asked once a program, kernel and question.
        private = cl.kernel_work_group_info.PRIVATE_MEM_SIZE
        for _ in range(2):
            assert make_kernel(distant, names[0]).get_work_group_info(private) == \
                cl.Kernel(local, names[0]).get_work_group_info(private, device.device)
        assert asked.count("kernel_info") == 1
    finally:
        remote._Channel.call = call
        owner.close()


def test_a_client_that_hangs_up_is_forgotten_but_what_it_made_is_kept_not_freed(device):
    """DeviceOwner._forget: a host worker's buffers and arena leave the owner's tables when it
    hangs up, but are kept (freeing device memory waits for the whole device on NVIDIA, holding
    up the loop while the other workers map their last chunks); the owner serves on."""
    import gc

    import pyopencl as cl

    from bowmap.runtime import remote
    from bowmap.runtime.devices import make_buffer

    owner, client = owner_and_client(device, lambda owned: {}, register_arenas=True)
    try:
        queue = client.queue()
        buffer = make_buffer(client.context, cl.mem_flags.READ_WRITE, size=64)
        queue.copy(buffer, np.arange(16, dtype=np.int32), is_blocking=False)
        queue.wait_idle()
        made = owner._buffers[buffer.key]
        client.context.channel().connection.close()  # hangs up (its process ended)
        deadline = time.monotonic() + 10
        while buffer.key in owner._buffers and time.monotonic() < deadline:
            time.sleep(0.01)
        assert buffer.key not in owner._buffers and any(kept is made for kept in owner._departed)
        assert any(isinstance(kept, tuple) and kept[0] is not None for kept in owner._departed)  # its registered arena
        del buffer, made
        gc.collect()
        again = remote.RemoteDevice(device.info, *owner.endpoint)
        other = make_buffer(again.context, cl.mem_flags.READ_WRITE, size=64)
        back = np.empty(16, dtype=np.int32)
        again_queue = again.queue()
        again_queue.copy(other, np.arange(16, dtype=np.int32), is_blocking=False)
        again_queue.copy(back, other)
        np.testing.assert_array_equal(back, np.arange(16))
    finally:
        owner.close()


def test_the_owner_declares_a_kernels_scalar_types_and_passes_the_same_values(device):
    """owner._launch: the numpy scalars' dtypes declared to pyopencl once (again where they
    change), the kernel given the same values as an undeclared call."""
    import pyopencl as cl

    from bowmap.runtime.owner import _launch

    program = cl.Program(device.context, """
        __kernel void add(__global long *out, long a, int b, __local int *scratch, uchar c) {
            scratch[get_local_id(0)] = b; barrier(CLK_LOCAL_MEM_FENCE);
            out[get_global_id(0)] = a + scratch[0] + c + (long)get_global_id(0); }""").build()
    queue = cl.CommandQueue(device.context)
    out = cl.Buffer(device.context, cl.mem_flags.READ_WRITE, 8 * 4)
    typed = [cl.Kernel(program, "add"), None]
    back = np.empty(4, dtype=np.int64)
    for a, b, c in ((5, -3, 7), (2**40, 11, 255), (-(2**50), 2**31 - 1, 0)):
        _launch(typed, queue, (4,), (4,), [out, np.int64(a), np.int32(b), cl.LocalMemory(16), np.uint8(c)])
        cl.enqueue_copy(queue, back, out)
        np.testing.assert_array_equal(back, a + b + c + np.arange(4))
    assert typed[1] == [None, np.dtype(np.int64), np.dtype(np.int32), None, np.dtype(np.uint8)]


def test_an_arena_gets_its_pages_when_made_and_where_its_folder_is_full_lives_in_a_memory_file(device, small_index, tmp_path, monkeypatch):
    """remote._arena_file: an arena's file is allocated whole when the channel makes it (its
    pages then cost the owner's registration nothing). Where the folder is full (a container's
    small /dev/shm), the arena is a memfd the owner process opens by its /proc path, copies come
    back whole, and no file is left; with no memory either, a BowmapError."""
    import errno

    from bowmap.runtime import remote
    from bowmap.runtime.devices import make_buffer, read_back

    folder = tmp_path / "shm"
    folder.mkdir()
    monkeypatch.setattr(remote, "_arena_folder", lambda: str(folder))
    size = 1 << 20
    arena, path, forget = remote._arena_file(size)
    assert os.stat(path).st_blocks * 512 >= size  # allocated, not sparse
    forget()
    arena.close()
    assert not os.listdir(folder)

    allocate = os.posix_fallocate

    def full_folder(descriptor, offset, length):
        if os.readlink(f"/proc/self/fd/{descriptor}").startswith(str(folder)):
            raise OSError(errno.ENOSPC, "No space left on device")
        allocate(descriptor, offset, length)

    monkeypatch.setattr(os, "posix_fallocate", full_folder)
    names, make = [], remote._arena_file

    def recorded(size):
        made = make(size)
        names.append(made[1])
        return made

    monkeypatch.setattr(remote, "_arena_file", recorded)
    owner, remote_device = owner_process_and_client(device, small_index)
    try:
        rng = np.random.default_rng(7)
        queue = remote_device.queue()
        for words in (1 << 16, 9 << 20):  # the second outgrows the first arena (8 MiB)
            data = rng.integers(0, 2**31, size=words, dtype=np.int32)
            buffer = make_buffer(remote_device.context, 1, size=data.nbytes)
            queue.copy(buffer, data, is_blocking=False)
            back = np.empty_like(data)
            read_back(queue, back, buffer)
            np.testing.assert_array_equal(back, data)
        assert len(names) >= 2 and all(name.startswith(f"/proc/{os.getpid()}/fd/") for name in names)  # memfds, the owner mapped both
        assert not os.listdir(folder)
    finally:
        owner.close()

    def no_memory(descriptor, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", no_memory)
    with pytest.raises(BowmapError, match="no memory for a 1 MiB arena"):
        remote._arena_file(size)
    assert not os.listdir(folder)
