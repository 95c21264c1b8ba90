"""The benchmarks' shared harness: one loader for the bench scripts (bench/ is no package),
timed runs of a command with the peak memory of its whole process tree (summed RSS, and summed
PSS: unique memory, each shared page split among the processes mapping it), tool versions and the
machine for cache keys, JSON written whole or not at all, progress notes, table cells.

bench/end_to_end.py, bench/paired_end.py and bench/human_scale.py (through end_to_end) use it;
other scripts may take what they need from it rather than load each other by file path.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
SAMPLE_SECONDS = 0.2  # how often run_measured samples the process tree's summed RSS
# Summed RSS costs about 0.02 ms a sample for 15 processes (VmRSS is a counter), summed Pss a walk of
# every mapped page: measured here (2-core VM, Linux 6.18) 3.0-3.7 ms a sample per GiB of summed RSS
# for a file mapped by 2-15 processes (0.35 ms a GiB for private anonymous memory in huge pages), so
# about 0.25 s a sample for today's 3.1 Gbp run (63-76 GiB summed RSS, the index mapped 15 times):
# every 50 ms it would take 5 cores. Pss is sampled at most this share of one core instead: after a
# sample that took c seconds the next waits c / PSS_CPU_SHARE (0.25 s: 25 s; 5 GiB: about 1.7 s).
# The walk also holds each process's mmap lock for reading, so a rarer sample disturbs it less.
PSS_CPU_SHARE = 0.01


def load_bench(name: str):
    """bench/<name>.py as a module (as align_accuracy loads index_build)."""
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # their dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


align_accuracy = load_bench("align_accuracy")  # read_truth, score_sam (and index_build with it)
fm_search = load_bench("fm_search")  # make_genome, write_fasta
index_build = align_accuracy.index_build  # sha256_of, tool_version
BenchError = index_build.BenchError
STARTED = time.perf_counter()


def tree_environment(tree: Path = HERE.parent, **more: str) -> dict:
    """This process's environment with the checkout ``tree`` (default this one) first on
    PYTHONPATH, the caller's path kept (on the GPU machine the dependencies live there), and
    ``more`` variables: how the bench scripts run bowmap of a given tree in a subprocess."""
    path = os.pathsep.join([str(tree), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])
    return {**os.environ, "PYTHONPATH": path, **more}


def note(message: str) -> None:
    print(f"[end_to_end {time.perf_counter() - STARTED:7.1f} s] {message}", file=sys.stderr, flush=True)


def write_json(path: Path, value) -> None:
    """Written under a temporary name, then renamed: a file that exists is complete."""
    temporary = path.with_name(path.name + ".partial")
    temporary.write_text(json.dumps(value, indent=1) + "\n")
    temporary.replace(path)


def read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


# ---------------------------------------------------------------- machine and tools


def describe_machine() -> dict:
    model, cores = "unknown CPU", 0
    with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name") and model == "unknown CPU":
                model = line.split(":", 1)[1].strip()
            cores += line.startswith("processor")
    memory_kib = 0
    with open("/proc/meminfo", encoding="utf-8") as meminfo:
        for line in meminfo:
            if line.startswith("MemTotal:"):
                memory_kib = int(line.split()[1])
    gpus = []
    if shutil.which("nvidia-smi"):
        try:
            listed = subprocess.run(["nvidia-smi", "-L"], check=False, capture_output=True, text=True, timeout=60)
            gpus = [re.sub(r"\s*\(UUID:.*\)", "", line).strip() for line in listed.stdout.splitlines() if line.strip()]
        except (OSError, subprocess.TimeoutExpired):
            gpus = ["nvidia-smi -L failed"]
    return {
        "cpu": model,
        "cores": cores,
        "nproc": len(os.sched_getaffinity(0)),
        "memory_gib": round(memory_kib / 2**20, 1),
        "gpus": gpus,
    }


def bowmap_sources_sha() -> str:
    """SHA-256 of bowmap's Python and OpenCL sources: a bowmap run is reused only for the same code."""
    spec = importlib.util.find_spec("bowmap")
    if spec is None or spec.origin is None:
        raise BenchError("bowmap is not importable: pip install -e . or put the checkout on PYTHONPATH")
    package = Path(spec.origin).parent
    roots = [package] + [
        package.parent / name for name in ("opencl", "index_builder") if (package.parent / "pyproject.toml").exists()
    ]
    digest = hashlib.sha256()
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.suffix in (".py", ".cl") and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(root.parent)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def bowmap_index_format() -> int | None:
    try:
        from bowmap.index.format import FORMAT_VERSION
    except ImportError:
        return None
    return FORMAT_VERSION


def tool_versions(bowmap: list[str], sources_sha: str) -> dict:
    def first_line(command):
        try:
            finished = subprocess.run(command, check=False, capture_output=True, text=True)
        except FileNotFoundError:
            return "not installed"
        lines = (finished.stdout or finished.stderr).strip().splitlines()
        return lines[0].split()[-1] if lines else "?"

    return {
        "bowmap": f"{first_line([*bowmap, '--version'])} (sources {sources_sha[:12]})",
        "bowtie2": index_build.tool_version(["bowtie2", "--version"], "version "),
        "bwa": index_build.tool_version(["bwa"], "Version: "),
        "minimap2": first_line(["minimap2", "--version"]),
    }


# ---------------------------------------------------------------- measured runs


def process_tree_pids(root: int) -> list[int]:
    """``root`` and all its descendants, from one scan of /proc."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                parent = int(handle.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(name))
    pids, todo = [], [root]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        todo.extend(children.get(pid, ()))
    return pids


def _status_kib(pid: int, high_water: dict[int, int] | None = None) -> int | None:
    """VmRSS of ``pid`` in KiB (None: gone, or no memory: a zombie); its VmHWM into ``high_water``."""
    try:
        with open(f"/proc/{pid}/status", "rb") as handle:
            for line in handle:
                if line.startswith(b"VmHWM:") and high_water is not None:
                    high_water[pid] = max(high_water.get(pid, 0), int(line.split()[1]))
                elif line.startswith(b"VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def process_tree_memory_kib(root: int, high_water: dict[int, int]) -> int:
    """Sum of VmRSS over ``root`` and all its descendants (one scan of /proc); each one's VmHWM
    goes into ``high_water`` (pid -> KiB)."""
    return sum(_status_kib(pid, high_water) or 0 for pid in process_tree_pids(root))


def process_tree_pss_kib(pids: list[int]) -> tuple[int, int]:
    """(sum of Pss over ``pids`` in KiB, how many of them had no readable /proc/PID/smaps_rollup
    and were counted at their VmRSS instead). Pss: each resident page divided by the number of
    processes mapping it, so an index mapped by 15 processes counts once in the sum, not 15 times.
    A process gone meanwhile counts 0."""
    total = fell_back = 0
    for pid in pids:
        pss = None
        try:
            with open(f"/proc/{pid}/smaps_rollup", "rb") as handle:
                for line in handle:
                    if line.startswith(b"Pss:"):
                        pss = int(line.split()[1])
                        break
        except (OSError, ValueError):
            pass
        if pss is None:  # unreadable (another user's, a kernel before 4.14), or no memory (zombie, gone)
            rss = _status_kib(pid)
            fell_back += bool(rss)
            pss = rss or 0
        total += pss
    return total, fell_back


@dataclass
class Memory:
    """One measured run: wall time and the memory of its process tree (KiB)."""

    seconds: float
    peak_rss_kib: int  # run_measured's figure: the largest summed VmRSS sample, or any one process's VmHWM if larger
    tree_rss_kib: int  # the largest summed VmRSS sample alone
    peak_pss_kib: int | None  # the largest summed Pss sample (None: not sampled)
    pss_rss_kib: int | None  # the summed VmRSS at that sample: near tree_rss_kib when it was taken at the peak
    pss_samples: int
    pss_sample_seconds: float | None  # mean time one Pss sample of the whole tree took
    pss_fell_back: int  # the most processes of one sample counted at VmRSS (smaps_rollup unreadable); 0: none


def run_measured_memory(
    command: list[str],
    log_path: Path,
    stdout_path: Path | None = None,
    sample_seconds: float = SAMPLE_SECONDS,
    pss_share: float = PSS_CPU_SHARE,
) -> Memory:
    """Run ``command``: stderr (and stdout unless ``stdout_path``) into ``log_path``. Samples the
    process tree's summed VmRSS every ``sample_seconds`` and, at most ``pss_share`` of one core
    (0: never), its summed Pss: after a Pss sample that took c seconds the next waits c / pss_share."""
    high_water: dict[int, int] = {}
    found = {"tree_rss": 0, "pss": None, "pss_rss": None, "samples": 0, "pss_seconds": 0.0, "fell_back": 0}
    done = threading.Event()

    def sample(pid):
        next_pss = 0.0
        while True:
            pids = process_tree_pids(pid)
            rss = sum(_status_kib(each, high_water) or 0 for each in pids)
            found["tree_rss"] = max(found["tree_rss"], rss)
            started = time.perf_counter()
            if pss_share > 0 and started >= next_pss and rss:
                pss, fell_back = process_tree_pss_kib(pids)
                took = time.perf_counter() - started
                next_pss = started + took / pss_share
                found["samples"] += 1
                found["pss_seconds"] += took
                found["fell_back"] = max(found["fell_back"], fell_back)
                if found["pss"] is None or pss > found["pss"]:
                    found["pss"], found["pss_rss"] = pss, rss
            if done.wait(sample_seconds):
                return

    with open(log_path, "wb") as log, open(stdout_path or os.devnull, "wb") as stdout:
        output = stdout if stdout_path else log
        actions = [(os.POSIX_SPAWN_DUP2, output.fileno(), 1), (os.POSIX_SPAWN_DUP2, log.fileno(), 2)]
        started = time.perf_counter()
        try:  # returns once the child has called exec
            pid = os.posix_spawnp(command[0], command, os.environ, file_actions=actions)
        except OSError as error:
            raise BenchError(f"{command[0]}: {error.strerror}") from None
        sampler = threading.Thread(target=sample, args=(pid,), daemon=True)
        sampler.start()
        _, status = os.waitpid(pid, 0)
        seconds = time.perf_counter() - started
        done.set()
        sampler.join()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        lines = log_path.read_text(errors="replace").strip().splitlines()
        raise BenchError(
            f"`{shlex.join(command)}` exited {code}: {lines[-1] if lines else 'no output'} (log: {log_path})"
        )
    samples = found["samples"]
    return Memory(
        seconds=seconds,
        peak_rss_kib=max(found["tree_rss"], max(high_water.values(), default=0)),
        tree_rss_kib=found["tree_rss"],
        peak_pss_kib=found["pss"],
        pss_rss_kib=found["pss_rss"],
        pss_samples=samples,
        pss_sample_seconds=found["pss_seconds"] / samples if samples else None,
        pss_fell_back=found["fell_back"],
    )


def run_measured(command: list[str], log_path: Path, stdout_path: Path | None = None) -> tuple[float, int]:
    """Run ``command``: stderr (and stdout unless ``stdout_path``) into ``log_path``.
    Returns (wall seconds, peak RSS of its process tree in KiB); no Pss samples."""
    measured = run_measured_memory(command, log_path, stdout_path, pss_share=0)
    return measured.seconds, measured.peak_rss_kib


def union_seconds(intervals) -> float:
    """Seconds covered by at least one of the (start, end) intervals, in ns (OpenCL's profiling
    clock): a GPU's busy time from its kernels' intervals, which overlap where they ran at once."""
    total, reach = 0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total * 1e-9


def fmt(value, spec: str, missing: str = "-") -> str:
    return missing if value is None else format(value, spec)


def sam_lines(path: Path):
    """A SAM file's lines but @PG (which holds the command line): what two runs that must write
    the same records are compared by."""
    with open(path, "rb") as file:
        yield from (line for line in file if not line.startswith(b"@PG"))
