"""Shared fixtures: the embedded model is loaded once per test session."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def gemma():
    """The embedded Gemma 3 270M scorer (llama.cpp backend)."""
    from ctxeval.backends.registry import load_scorer

    scorer = load_scorer("gemma-3-270m")
    yield scorer
    scorer.close()


def run_cli(*args: str, cwd: Path | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    """Run `ctxeval ARGS` as a user would, in a subprocess."""
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "ctxeval.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=timeout, env=env
    )
