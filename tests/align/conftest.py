"""Fixtures the align tests share: the bundled lambda genome indexed once a session, as one
block and as four (small --device-mem), so every test can compare the two."""

from __future__ import annotations

from pathlib import Path

import pytest

from bowmap.cli import main

LAMBDA = Path(__file__).resolve().parents[2] / "data" / "lambda_virus.fa"


@pytest.fixture(scope="session")
def indexes(tmp_path_factory):
    folder = tmp_path_factory.mktemp("indexes")
    one, many = folder / "one", folder / "many"
    assert main(["-q", "index", str(LAMBDA), str(one)]) == 0
    assert main(["-q", "index", str(LAMBDA), str(many), "--device-mem", "48K", "--max-read-length", "150"]) == 0
    return one, many
