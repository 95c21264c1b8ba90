"""OpenCL platforms and devices: listing, selection, one context per device, program cache.

Every kernel owner gets its programs through :meth:`DeviceContext.program`, which builds a kernel
source once per (context, build options) and hands the same program to every caller after that.
PyOpenCL kernels are not thread-safe; programs are, so each worker thread makes its own kernels
(``program.kernel_name`` creates a fresh one per access) and owns its command queue.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib.resources
import logging
import re
import threading
import time
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bowmap.runtime.errors import BowmapError, UsageError

if TYPE_CHECKING:
    import numpy as np

NVIDIA_LIBRARY = "libnvidia-opencl.so.1"
log = logging.getLogger("bowmap.runtime.devices")


def _opencl():
    """Import pyopencl lazily: commands that need no device (``--help``, ``index --device-mem``)
    start faster and work even where the OpenCL loader is broken."""
    try:
        import pyopencl
    except ImportError as error:  # pragma: no cover - depends on the installation
        raise BowmapError(f"cannot import pyopencl ({error}); install bowmap with: pip install 'bowmap[pocl]'") from None
    return pyopencl


# Whether this process may fork children (see may_fork_host_workers, may_fork_device_users):
# only bowmap's command line (allow_forks_of_device_users), and a child that will use OpenCL (a
# device owner: bowmap.runtime.owner_process.OwnerProcess) only while this process has not asked OpenCL
# for its platforms yet. A fork of a process that has is not safe: the driver's state and
# threads do not follow into the child.
_COMMAND_LINE = False
_MAY_FORK = False


def allow_forks_of_device_users() -> None:
    """Said by the command line's entry, the process's own start, before any OpenCL call."""
    global _MAY_FORK, _COMMAND_LINE
    _MAY_FORK = _COMMAND_LINE = True


def may_fork_host_workers() -> bool:
    """Whether host workers that make no OpenCL call may be forked: in bowmap's command line,
    whose threads at that point are known (see forking_quietly); a process that embeds bowmap
    (a test run, a notebook) may hold locks in threads of its own, so its workers are spawned."""
    import multiprocessing

    return _COMMAND_LINE and "fork" in multiprocessing.get_all_start_methods()


def may_fork_device_users() -> bool:
    """Whether a child forked now may open OpenCL devices itself (see _MAY_FORK)."""
    return _MAY_FORK and may_fork_host_workers()


@contextlib.contextmanager
def forking_quietly():
    """Around a fork this module allows (may_fork_host_workers, may_fork_device_users): Python
    3.12 warns at every fork of a process with threads. The threads here (the index checksums,
    the reader, the driver's own) hold no lock the child takes: it runs only its owner's or
    worker's body and leaves with os._exit."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*use of fork\(\) may lead to deadlocks", category=DeprecationWarning)
        yield


def _platforms():
    """OpenCL's platforms: this process's first OpenCL call, after which it forks no device user."""
    global _MAY_FORK
    _MAY_FORK = False
    return _opencl().get_platforms()


@dataclass(frozen=True)
class DeviceInfo:
    """One OpenCL device as `bowmap devices` shows it. Memory sizes are in bytes."""

    index: int  # position in the flat list over all platforms: what --devices takes
    platform: str
    name: str
    kind: str  # "GPU", "CPU", "ACCELERATOR", ...
    compute_units: int
    global_memory: int
    max_allocation: int
    local_memory: int
    opencl_version: str
    # Where the device sits: its platform's position in the loader's list, its own in the
    # platform's. A worker process opens it from these without asking every platform for its
    # devices (PoCL probes the whole machine's topology when asked: about 1 s for each of 31
    # processes starting together on a 32-core host).
    platform_position: int = 0
    device_position: int = 0

    @property
    def is_gpu(self) -> bool:
        return self.kind == "GPU"


def _all_devices():
    cl = _opencl()
    try:
        platforms = _platforms()
    except cl.Error:  # the ICD loader raises when it finds no platform at all
        platforms = []
    found = []
    for platform_position, platform in enumerate(platforms):
        try:
            devices = platform.get_devices()
        except cl.Error:
            continue
        found.extend((platform, device, (platform_position, position)) for position, device in enumerate(devices))
    return found


def _kind(device_type: int) -> str:
    # PoCL reports its CPU device as "ALL | CPU": look at the bits, most specific first.
    cl = _opencl()
    for bit, word in ((cl.device_type.GPU, "GPU"), (cl.device_type.ACCELERATOR, "ACCELERATOR"), (cl.device_type.CPU, "CPU")):
        if device_type & bit:
            return word
    return "OTHER"


def _describe(index, platform, device, positions=(0, 0)) -> DeviceInfo:
    return DeviceInfo(
        index=index,
        platform=platform.name.strip(),
        name=device.name.strip(),
        kind=_kind(device.type),
        compute_units=device.max_compute_units,
        global_memory=device.global_mem_size,
        max_allocation=device.max_mem_alloc_size,
        local_memory=device.local_mem_size,
        opencl_version=device.version.strip(),
        platform_position=positions[0],
        device_position=positions[1],
    )


def list_devices() -> list[DeviceInfo]:
    """Every device of every OpenCL platform, in the order `--devices` indexes them."""
    return [_describe(i, *found) for i, found in enumerate(_all_devices())]


def nvidia_hint(devices: list[DeviceInfo]) -> str | None:
    """A fix to print when NVIDIA's OpenCL driver is installed but the loader does not list it.

    NVIDIA's driver ships ``libnvidia-opencl.so.1``; the ICD loader only finds it through an
    ``nvidia.icd`` file in its vendor folder, which containers often lack.
    """
    if any("NVIDIA" in info.platform.upper() for info in devices):
        return None
    try:
        ctypes.CDLL(NVIDIA_LIBRARY)
    except OSError:
        return None
    return (
        f"{NVIDIA_LIBRARY} is installed but no NVIDIA OpenCL platform is visible: the OpenCL loader "
        "lacks an nvidia.icd file. Fix: mkdir -p ~/icd && echo "
        f"{NVIDIA_LIBRARY} > ~/icd/nvidia.icd && cp /etc/OpenCL/vendors/*.icd ~/icd/ 2>/dev/null; "
        "export OCL_ICD_VENDORS=~/icd"
    )


def _build(context, source: str, options: tuple[str, ...], what: str):
    """Build an OpenCL program. Drivers' informational build logs (NVIDIA's compiler prints some
    for correct code) would reach users as Python warnings: they go to the debug log instead."""
    cl = _opencl()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", cl.CompilerWarning)
        program = cl.Program(context, source).build(options=list(options))
    for warning in caught:
        log.debug("building %s: %s", what, warning.message)
    return program


_PROBE_KERNEL = "__kernel void probe(__global uint *out) { uint id = (uint)get_global_id(0); out[id] = popcount(id); }"


@functools.lru_cache(maxsize=None)
def build_problem(index: int) -> str | None:
    """Why device ``index`` cannot build OpenCL kernels, or None when it can.

    PoCL from PyPI (PoCL 3.0, LLVM 14) lists every x86 CPU but fails to compile for processors
    its LLVM does not know (AMD Zen 5: "unknown target CPU 'generic'"); a system PoCL with a newer
    LLVM then works where it does not.
    """
    cl = _opencl()
    platform, device, _ = _all_devices()[index]
    try:
        _build(cl.Context([device]), _PROBE_KERNEL, (), f"the probe kernel for {device.name.strip()}")
    except cl.Error as error:
        lines = [line.strip() for line in str(error).splitlines() if "error" in line.lower()]
        return lines[-1] if lines else str(error).splitlines()[0]
    return None


def _builds(info: DeviceInfo) -> bool:
    return build_problem(info.index) is None


def parse_device_spec(spec: str | None, devices: list[DeviceInfo], builds=_builds) -> list[DeviceInfo]:
    """Resolve ``--devices``: ``gpu``, ``cpu``, ``all``, or comma-separated indexes (``0,2``).

    ``None`` means every GPU, or when there is none, the CPU. ``cpu`` means one CPU device: the
    first that can build kernels (several CPU platforms drive the same processor). ``builds``
    says whether a device can compile kernels; callers that only read device properties pass
    ``lambda info: True``.
    """
    if not devices:
        hint = nvidia_hint(devices)
        raise BowmapError(
            "no OpenCL device found; install a CPU device with: pip install 'bowmap[pocl]'"
            + (f" ({hint})" if hint else "")
        )
    word = None if spec is None else spec.strip().lower()
    if word is None:
        gpus = [info for info in devices if info.is_gpu]
        if gpus:
            return gpus
        word = "cpu"
    if word == "all":
        return list(devices)
    if word == "gpu":
        gpus = [info for info in devices if info.is_gpu]
        if not gpus:
            raise BowmapError(f"--devices {spec}: no GPU found (see `bowmap devices`)")
        return gpus
    if word == "cpu":
        cpus = [info for info in devices if info.kind == "CPU"]
        for info in cpus:
            if builds(info):
                return [info]
        if not cpus:
            raise BowmapError("no CPU OpenCL device found; install one with: pip install 'bowmap[pocl]'")
        raise BowmapError(
            f"no CPU OpenCL device can build kernels here ({cpus[0].platform} {cpus[0].opencl_version}: "
            f"{build_problem(cpus[0].index)}); install a newer PoCL, e.g. apt-get install pocl-opencl-icd"
        )
    chosen = []
    for part in word.split(","):
        if not part.strip().isdigit():
            raise UsageError(f"--devices {spec}: expected gpu, cpu, all or device indexes such as 0,1")
        index = int(part)
        if index >= len(devices):
            raise UsageError(f"--devices {spec}: there is no device {index} (found {len(devices)}; see `bowmap devices`)")
        if devices[index] not in chosen:
            chosen.append(devices[index])
    return chosen


_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([A-Za-z0-9_./]+)"[ \t]*$', re.MULTILINE)


def kernel_source(name: str) -> str:
    """The text of ``opencl/<name>`` (a path such as ``align/fm_search.cl``), read from the
    installed package's data, with each line ``#include "other"`` replaced by the text of the
    header ``other`` beside it, or ``folder/other`` under ``opencl/`` when it names a folder (a
    header shared by kernels of several folders, such as ``fm/dna_rank.h``); one level: headers
    include nothing, since a program is built from one string without an include path."""
    resource = importlib.resources.files("bowmap.opencl").joinpath(*name.split("/"))
    try:
        text = resource.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BowmapError(f"kernel source {name} is missing from the bowmap installation") from None
    if name.endswith(".h"):
        return text
    folder = name.rpartition("/")[0]
    def header(match) -> str:
        included = match.group(1)
        if "/" in included or not folder:
            return kernel_source(included)
        return kernel_source(f"{folder}/{included}")

    return _INCLUDE.sub(header, text)


class DeviceContext:
    """One OpenCL context for one device, with the programs built on it.

    Build options are passed as a tuple of strings (``("-DTILE=16",)``): the cache key is
    (source name, options), so the same kernel compiled with other constants is another program.
    """

    def __init__(self, info: DeviceInfo, device):
        cl = _opencl()
        self.info = info
        self.device = device
        self.context = cl.Context([device])
        self._programs: dict[tuple[str, tuple[str, ...]], object] = {}
        self._lock = threading.Lock()
        self._shared_queue = None  # PoCL's one queue (see queue())
        self.build_seconds = 0.0  # spent in :meth:`program`'s builds (start-up's share: see bowmap.align.run)

    def program(self, source_name: str, options: tuple[str, ...] = ()):
        key = (source_name, tuple(options))
        with self._lock:
            program = self._programs.get(key)
            if program is None:
                cl = _opencl()
                started = time.perf_counter()
                try:
                    program = _build(self.context, kernel_source(source_name), options, f"{source_name} for {self.info.name}")
                except cl.RuntimeError as error:
                    raise BowmapError(f"building {source_name} for {self.info.name} failed: {error}") from None
                seconds = time.perf_counter() - started
                self.build_seconds += seconds
                log.debug("built %s %s for %s [%.3f s]", source_name, " ".join(options), self.info.name, seconds)
                self._programs[key] = program
            return program

    def queue(self):
        """A new in-order command queue: one per worker thread; but on PoCL one queue for
        every thread of the context (see POCL_PLATFORM)."""
        if self.info.platform == POCL_PLATFORM:
            with self._lock:
                if self._shared_queue is None:
                    self._shared_queue = _opencl().CommandQueue(self.context, self.device)
                return self._shared_queue
        return _opencl().CommandQueue(self.context, self.device)

    def __repr__(self) -> str:
        return f"DeviceContext({self.info.index}: {self.info.name})"


# PoCL 5.0 (Ubuntu 24.04's, the GPU image's) aborts (pocl_release_dlhandle_cache: Assertion
# `found->ref_count > 0') when one kernel runs on two queues at once with different grid sizes:
# its cache of compiled work-group functions finds an entry by kernel, local size and "grid at
# most as wide as the entry's", but a finished command releases the first entry of that kernel
# and local size, which is the wider entry a later command prepended, so counts go wrong once
# commands of one kernel overlap (bowmap's queues in threads, the device owner's clients; small
# first chunks make the grids grow). One in-order queue for all of a PoCL context's threads
# keeps its commands from overlapping; PoCL's CPU device runs each kernel on every core anyway,
# and the threads' host work still overlaps the device's.
POCL_PLATFORM = "Portable Computing Language"


@functools.lru_cache(maxsize=None)
def context_for(index: int) -> DeviceContext:
    platform, device, positions = _all_devices()[index]
    return DeviceContext(_describe(index, platform, device, positions), device)


def context_for_info(info: DeviceInfo) -> DeviceContext:
    """The context of the device ``info`` describes (a worker process's: the parent listed the
    devices), opened through its own platform alone; through the full list if the platform's
    devices have changed since (a device of another name at that place)."""
    cl = _opencl()
    try:
        device = _platforms()[info.platform_position].get_devices()[info.device_position]
        if device.name.strip() == info.name:
            return DeviceContext(info, device)
    except (cl.Error, IndexError):
        pass
    return context_for(info.index)


def open_devices(spec: str | None = None) -> list[DeviceContext]:
    """Contexts for the devices ``spec`` selects (see :func:`parse_device_spec`).

    Contexts are made once per device per process and shared by every caller.
    """
    return [context_for(info.index) for info in parse_device_spec(spec, list_devices())]


class DeviceArray:
    """A host array sent to the device once (:meth:`ReusedBuffer.send`), given to kernel owners
    in its place; ``host`` is the array sent (its length checks the calls' offsets)."""

    def __init__(self, buffer, host: np.ndarray):
        self.buffer = buffer
        self.host = host

    def __len__(self) -> int:
        return len(self.host)


class ReusedBuffer:
    """A device buffer kept across calls and grown (at least doubling) when a call needs more:
    creating buffers costs far more than the copies themselves on GPU drivers. One per worker
    (a kernel owner's buffers belong to its thread)."""

    def __init__(self, context, flags=None):
        cl = _opencl()
        self.context = context
        self.flags = cl.mem_flags.READ_WRITE if flags is None else flags
        self.buffer = None
        self.capacity = 0

    def at_least(self, size: int):
        if size > self.capacity:
            self.capacity = max(size, 2 * self.capacity, 4096)
            self.buffer = make_buffer(self.context, self.flags, size=self.capacity)
        return self.buffer

    def send(self, queue, array: np.ndarray) -> DeviceArray:
        """:meth:`upload`, as a :class:`DeviceArray` that kernel owners take in place of the
        host array, so that several calls use one copy (a chunk's read codes: 8 MB)."""
        return DeviceArray(self.upload(queue, array), array)

    def upload(self, queue, array):
        """Copy ``array`` in and return the buffer, after the queue's earlier commands have run
        (:func:`wait_idle`: pyopencl waits for a copy from host memory when its event is dropped,
        as here, and on NVIDIA that wait would spin)."""
        buffer = self.at_least(max(array.nbytes, 1))
        if array.nbytes:
            if getattr(queue, "is_remote", False):  # the owner keeps the copy's event until its batch ends
                queue.copy(buffer, array, is_blocking=False)
                return buffer
            wait_idle(queue)  # the copy's wait below then finds only the copy itself (see wait_idle)
            _opencl().enqueue_copy(queue, buffer, array, is_blocking=False)
        return buffer


# wait_idle's sleeps: the first, and the longest it doubles to (a wait overshoots by at most this).
_FIRST_PAUSE_SECONDS = 20e-6
_LONGEST_PAUSE_SECONDS = 200e-6


def wait_idle(queue) -> None:
    """Wait, sleeping, until everything queued on ``queue`` has run.

    NVIDIA's OpenCL spins a CPU core through every wait: a blocking read, ``finish``, an event
    wait. A "non-blocking" copy from host memory waits too, once pyopencl drops its event (the
    event's destructor waits for the copy, and so for every kernel queued before it). Measured
    on an H200 behind a 48 ms kernel (bench/device_waits.py): 48-50 ms of CPU each, and 2.4 ms
    polling the queue's marker with sleeps. With a worker process a core, the spinning workers
    took the cores the others needed. So the blocking calls are preceded by this wait, and then
    find the queue empty. A failed command raises BowmapError."""
    import time

    if getattr(queue, "is_remote", False):
        queue.wait_idle()
        return
    cl = _opencl()
    marker = cl.enqueue_marker(queue)
    queue.flush()
    pause = _FIRST_PAUSE_SECONDS
    while (status := marker.command_execution_status) > 0:  # queued, submitted or running; 0: complete
        time.sleep(pause)
        pause = min(2 * pause, _LONGEST_PAUSE_SECONDS)
    if status < 0:
        raise BowmapError(f"a device command failed (OpenCL status {status})")


def read_back(queue, host, buffer, *more) -> None:
    """Copy ``buffer`` into the NumPy array ``host``, and each further (host, buffer) pair of
    ``more``, and wait once for them all (an in-order queue finishes the earlier copies first),
    sleeping while the queue's kernels run (:func:`wait_idle`)."""
    pairs = [(host, buffer), *zip(more[::2], more[1::2])]
    if getattr(queue, "is_remote", False):  # one batch: the owner waits, copies, answers
        queue.context.channel().commands.append(("wait_idle", queue.key))
        for number, (array, device_buffer) in enumerate(pairs, 1):
            queue.copy(array, device_buffer, is_blocking=number == len(pairs))
        return
    cl = _opencl()
    wait_idle(queue)
    for array, device_buffer in pairs[:-1]:
        cl.enqueue_copy(queue, array, device_buffer, is_blocking=False)
    cl.enqueue_copy(queue, pairs[-1][0], pairs[-1][1], is_blocking=True)


def make_buffer(context, flags, size: int = 0, hostbuf=None):
    """``pyopencl.Buffer(context, flags, size, hostbuf)``, or a buffer of a device owner's when
    ``context`` is a :class:`bowmap.runtime.remote.RemoteContext` (one kernel owner code for both)."""
    if getattr(context, "is_remote", False):
        return context.buffer(flags, size, hostbuf)
    return _opencl().Buffer(context, flags, size=size, hostbuf=hostbuf)


def filled_buffer(device, hostbuf: np.ndarray):
    """A read-only buffer of ``device`` (a DeviceContext) holding ``hostbuf``'s bytes: made
    empty, then filled by one blocking copy. NVIDIA's driver copies a host pointer given at
    creation (COPY_HOST_PTR) from pageable memory at 1.7 GB/s, and a copy into a made buffer at
    8.8 GB/s (H200, 1 and 3 GiB mapped from the page cache; see bench/RESULTS.md, session 24):
    the index's upload, which a run's first chunk waits for. A device owner's client (a remote
    context) sends the bytes with the buffer's creation."""
    cl = _opencl()
    context = device.context
    if getattr(context, "is_remote", False):
        return context.buffer(cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR, 0, hostbuf)
    buffer = cl.Buffer(context, cl.mem_flags.READ_ONLY, size=hostbuf.nbytes)
    cl.enqueue_copy(device.queue(), buffer, hostbuf, is_blocking=True)
    return buffer


def make_kernel(program, name: str):
    """``pyopencl.Kernel(program, name)``, or its stand-in on a remote device's program."""
    if getattr(program, "is_remote", False):
        return program.kernel(name)
    return _opencl().Kernel(program, name)


def enqueue_copy(queue, destination, source, **options):
    """``pyopencl.enqueue_copy``, or its record on a remote queue (see :mod:`bowmap.runtime.remote`)."""
    if getattr(queue, "is_remote", False):
        return queue.copy(destination, source, **options)
    return _opencl().enqueue_copy(queue, destination, source, **options)


def nvidia_compute_capability(device) -> tuple[int, int] | None:
    """(major, minor) of an NVIDIA device (a pyopencl Device), from the cl_nv_device_attribute_query
    extension; None for other vendors or when the driver does not answer."""
    cl = _opencl()
    if "NVIDIA" not in device.platform.name.upper():
        return None
    try:
        return int(device.compute_capability_major_nv), int(device.compute_capability_minor_nv)
    except (cl.Error, AttributeError):
        return None


def work_group_size(kernel, device: DeviceContext, wavefronts: int = 4) -> int:
    """``wavefronts`` times the kernel's preferred work-group multiple on ``device`` (its warp or
    wavefront width), within the kernel's largest work-group."""
    info = _opencl().kernel_work_group_info
    multiple = kernel.get_work_group_info(info.PREFERRED_WORK_GROUP_SIZE_MULTIPLE, device.device)
    largest = kernel.get_work_group_info(info.WORK_GROUP_SIZE, device.device)
    return max(1, min(largest, multiple * wavefronts))


def format_memory(size: int) -> str:
    """Bytes as a short binary-unit string: 1536 -> '1.5 KiB'."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def parse_memory(text: str) -> int:
    """'512M', '2G', '1.5GiB', '4096' -> bytes (binary units; a bare number is bytes)."""
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    word = text.strip().upper().removesuffix("B").removesuffix("I")
    number, unit = (word[:-1], word[-1]) if word and word[-1] in units else (word, "")
    try:
        value = float(number) * units[unit]
    except ValueError:
        raise UsageError(f"{text!r} is not a memory size (examples: 512M, 2G, 1.5GiB)") from None
    if not 1 <= value < 1 << 60:
        raise UsageError(f"memory size {text!r} must be positive and finite (one byte or more)")
    return int(value)

