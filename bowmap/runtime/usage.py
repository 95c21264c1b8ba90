"""Developers' profiles (BOWMAP_PROFILE): a process's CPU time beside its age."""

from __future__ import annotations

import json
import resource
import time


def write_usage(path: str, started: float, ready: float | None = None) -> None:
    """This process's CPU time (all its threads) and its age since ``started`` (time.monotonic),
    as JSON: CPU / age is how busy it kept its core. ``ready``: its age when it was ready to work."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    with open(path, "w") as file:
        json.dump({"user_s": usage.ru_utime, "system_s": usage.ru_stime, "age_s": time.monotonic() - started, "ready_s": ready}, file)
