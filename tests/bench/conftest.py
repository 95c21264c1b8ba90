"""The bench scripts (bench/*.py) are scripts, not a package: tests load them by path."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load_bench(name: str):
    """bench/<name>.py as a module named ``name`` (registered in sys.modules: dataclasses look
    their module up there)."""
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def checkout_environment() -> dict:
    """The environment for a bench script run as a subprocess (bench/harness.py's
    tree_environment: this checkout first on PYTHONPATH, the caller's path kept)."""
    harness = sys.modules.get("harness") or load_bench("harness")
    return harness.tree_environment()
