"""The package layout holds its rules: layers import downwards only, no import cycles, no module
over 600 lines, every package says what it holds (see README, "Architecture")."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LONGEST_MODULE = 600

# Layer of each top-level part of bowmap: a module may import its own layer's part and lower
# layers only. align and modules share a layer but never import each other.
LAYERS = {"runtime": 0, "index": 1, "index_builder": 1, "align": 2, "modules": 2, "commands": 3, "cli": 4}


def modules() -> dict[str, Path]:
    """Every module of the installed package by its dotted name (index_builder/ is bowmap.index_builder)."""
    found = {}
    for folder, package in ((ROOT / "bowmap", "bowmap"), (ROOT / "index_builder", "bowmap.index_builder")):
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


def imports(path: Path, name: str, known: set[str]) -> set[str]:
    """The bowmap modules ``path`` imports anywhere (inside functions too)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        found.update(target for target in targets if target in known and target != name)
    return found


def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports(path, name, set(found)) for name, path in found.items()}


def part(name: str) -> str:
    """The top-level part of bowmap a module belongs to (``__main__`` is the CLI's)."""
    top = name.split(".")[1] if name.count(".") else ""
    return "cli" if top == "__main__" else top


def test_layers_import_downwards_only():
    wrong = []
    for source, targets in graph().items():
        for target in targets:
            if target == "bowmap":  # the version, from the root
                continue
            low, high = part(target), part(source)
            if high == "opencl" or low not in LAYERS or high not in LAYERS:
                wrong.append(f"{source} -> {target}")
            elif LAYERS[low] > LAYERS[high] or (LAYERS[low] == LAYERS[high] and low != high and (high, low) != ("index_builder", "index")):
                wrong.append(f"{source} -> {target}")
    assert not wrong, "imports against the layers: " + ", ".join(sorted(wrong))


def test_kernel_modules_keep_to_themselves():
    """Nothing reaches into a kernel module's package but its own code and its command."""
    wrong = []
    for source, targets in graph().items():
        for target in targets:
            if part(target) == "modules" and target.count(".") >= 3:
                owner = ".".join(target.split(".")[:3])
                command = "bowmap.commands." + target.split(".")[2]
                if not (source == owner or source.startswith(owner + ".") or source == command):
                    wrong.append(f"{source} -> {target}")
    assert not wrong, ", ".join(sorted(wrong))


# The align stages' packages, in data order (bowmap/align/__init__.py): a stage's module imports
# its own stage's, earlier stages' and bowmap.align.options, never a later stage's or the wiring
# (runners, workers, run) that calls the stages.
ALIGN_STAGES = ("reads", "seed", "extend", "output")
# Imports against that order, each with its reason. ChunkAlignments, the records extend hands on,
# lives beside its formatter in output/sam.py (issue 29, item 7: to move into extend/ once the
# performance work on sam.py has landed).
ALIGN_STAGE_EXCEPTIONS = {("bowmap.align.extend", "bowmap.align.output.sam")}


def test_align_stages_import_in_data_order():
    wrong = []
    for source, targets in graph().items():
        source_parts = source.split(".")
        if source_parts[:2] != ["bowmap", "align"] or len(source_parts) < 3 or source_parts[2] not in ALIGN_STAGES:
            continue
        stage = ALIGN_STAGES.index(source_parts[2])
        for target in targets:
            target_parts = target.split(".")
            if target_parts[:2] != ["bowmap", "align"] or target in ("bowmap.align", "bowmap.align.options"):
                continue
            if (".".join(source_parts[:3]), target) in ALIGN_STAGE_EXCEPTIONS:
                continue
            if len(target_parts) < 3 or target_parts[2] not in ALIGN_STAGES or ALIGN_STAGES.index(target_parts[2]) > stage:
                wrong.append(f"{source} -> {target}")
    assert not wrong, "align stages importing against the data order: " + ", ".join(sorted(wrong))


INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([^"]+)"', re.MULTILINE)
KERNEL_PARTS = ("align", "modules")  # as in Python: neither includes the other's headers


def test_kernel_sources_include_shared_headers_only():
    """opencl/ keeps the Python layering: a kernel of align/ or modules/ includes a header beside
    it or one of a shared folder (fm/, sw/: code both use), never the other part's; a header
    includes nothing (bowmap.runtime.devices.kernel_source expands one level); every header is
    included somewhere (a shared folder groups kin, so fm/ holds wavelet_rank.h, which only
    modules/find.cl uses, beside the DNA rank both parts use)."""
    wrong, users = [], {}
    opencl = ROOT / "opencl"
    for path in sorted(opencl.glob("*/*")):
        if path.suffix not in (".cl", ".h"):
            continue
        folder = path.parent.name
        for included in INCLUDE.findall(path.read_text()):
            if path.suffix == ".h":
                wrong.append(f"{path.relative_to(ROOT)} includes {included} (headers include nothing)")
                continue
            target = opencl / included if "/" in included else path.parent / included
            if not target.is_file():
                wrong.append(f"{path.relative_to(ROOT)} includes {included}, which does not exist")
            elif "/" in included and target.parent.name in KERNEL_PARTS:
                wrong.append(f"{path.relative_to(ROOT)} includes {included}: shared code goes in a folder of its own")
            else:
                users.setdefault(target.relative_to(opencl).as_posix(), set()).add(folder)
    for header in sorted(opencl.glob("*/*.h")):
        if header.relative_to(opencl).as_posix() not in users:
            wrong.append(f"{header.relative_to(ROOT)} is included by no kernel")
    assert not wrong, "; ".join(wrong)


def test_no_import_cycles():
    edges = graph()
    # Tarjan's strongly connected components; any with more than one module is a cycle.
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    assert not cycles, f"import cycles: {cycles}"


# Benchmark scripts over the limit, each edited by other work when the rule reached bench/
# (issue 30): split them when that work has landed, and take them off this list.
LONG_BENCH_SCRIPTS = {"paired_accuracy.py", "human_scale.py"}


def test_no_module_is_too_long():
    long = {name: lines for name, path in modules().items() if (lines := len(path.read_text().splitlines())) > LONGEST_MODULE}
    assert not long, f"modules over {LONGEST_MODULE} lines: {long}"


def test_no_benchmark_script_is_too_long():
    lengths = {path.name: len(path.read_text().splitlines()) for path in (ROOT / "bench").glob("*.py")}
    long = {name: lines for name, lines in lengths.items() if lines > LONGEST_MODULE and name not in LONG_BENCH_SCRIPTS}
    assert not long, f"bench scripts over {LONGEST_MODULE} lines: {long}"
    back = sorted(name for name in LONG_BENCH_SCRIPTS if lengths.get(name, 0) <= LONGEST_MODULE)
    assert not back, f"under {LONGEST_MODULE} lines now: take them off LONG_BENCH_SCRIPTS: {back}"


# A project path in a comment, docstring or string: a top folder, then path characters; a glob
# (``opencl/modules/asm*.cl``) names the files it matches; ``tests/process_workers.FailingAligner``
# a name in a module.
PROJECT_PATH = re.compile(r"(?<![\w/.-])((?:bowmap|index_builder|opencl|bench|tests|workflow|data|docs|\.ci)/[\w./*-]*[\w*])")
GENERATED = ("bench/work", "bench/results")  # what the benchmarks write (ignored by git)


def test_paths_named_in_the_code_exist():
    """A comment that names a project file must name one that exists (STYLE.md, 14)."""
    missing = []
    for folder in ("bowmap", "index_builder", "opencl", "bench", "tests"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix not in (".py", ".cl", ".h") or "__pycache__" in path.parts:
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                for match in PROJECT_PATH.finditer(line):
                    named = match.group(1).rstrip(".")
                    if named.startswith(GENERATED):
                        continue
                    if "*" in named:
                        found = any(ROOT.glob(named))
                    else:
                        module = named.rsplit(".", 1)[0] + ".py"
                        found = (ROOT / named).exists() or ("." in named.rsplit("/", 1)[-1] and (ROOT / module).is_file())
                    if not found:
                        missing.append(f"{path.relative_to(ROOT)}:{number}: {named}")
    assert not missing, "paths named that do not exist: " + ", ".join(missing)


def test_every_package_says_what_it_holds():
    silent = [name for name, path in modules().items() if path.name == "__init__.py" and not ast.get_docstring(ast.parse(path.read_text()))]
    assert not silent, f"packages without a docstring: {silent}"
