"""The benchmarks' shared harness: one loader for the bench scripts (bench/ is no package),
timed runs of a command with the peak memory of its whole process tree, tool versions and the
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
from pathlib import Path

HERE = Path(__file__).resolve().parent
SAMPLE_SECONDS = 0.2  # how often run_measured samples the process tree's memory


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


def process_tree_memory_kib(root: int, high_water: dict[int, int]) -> int:
    """Sum of VmRSS over ``root`` and all its descendants (one scan of /proc); each one's VmHWM
    goes into ``high_water`` (pid -> KiB)."""
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
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, ()))
        try:
            with open(f"/proc/{pid}/status", "rb") as handle:
                for line in handle:
                    if line.startswith(b"VmHWM:"):
                        high_water[pid] = max(high_water.get(pid, 0), int(line.split()[1]))
                    elif line.startswith(b"VmRSS:"):
                        total += int(line.split()[1])
                        break
        except (OSError, ValueError):
            continue
    return total


def run_measured(command: list[str], log_path: Path, stdout_path: Path | None = None) -> tuple[float, int]:
    """Run ``command``: stderr (and stdout unless ``stdout_path``) into ``log_path``.
    Returns (wall seconds, peak RSS of its process tree in KiB)."""
    peak, high_water = [0], {}
    done = threading.Event()

    def sample(pid):
        while True:
            peak[0] = max(peak[0], process_tree_memory_kib(pid, high_water))
            if done.wait(SAMPLE_SECONDS):
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
    return seconds, max(peak[0], max(high_water.values(), default=0))



def fmt(value, spec: str, missing: str = "-") -> str:
    return missing if value is None else format(value, spec)
