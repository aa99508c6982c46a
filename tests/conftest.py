"""Shared fixtures: the embedded model is loaded once per test session."""

from __future__ import annotations

import ctypes
import gc
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import model_guard

# The project's shared data (../shared/data beside the checkout, or where CTXEVAL_SHARED_DATA points);
# ctxeval itself reads named datasets (llmbar:NAME, pandalm, mt-bench) only from that variable.
SHARED_DATA = Path(os.environ.get("CTXEVAL_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
os.environ.setdefault("CTXEVAL_SHARED_DATA", str(SHARED_DATA))
FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def gemma():
    """The embedded Gemma 3 270M scorer (llama.cpp backend)."""
    from ctxeval.backends.registry import load_scorer

    scorer = load_scorer("gemma-3-270m")
    yield scorer
    scorer.close()


@pytest.fixture(scope="module", autouse=True)
def _release_memory_after_each_module():
    """After a module, hand the heap's free pages back to the system: the suite runs in one
    process, and glibc keeps what a test's large arrays (logits, float64 references, hf models)
    freed, so the process's resident size would grow from module to module."""
    yield
    gc.collect()
    if sys.platform.startswith("linux"):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


_GUARD = pytest.StashKey[pytest.MonkeyPatch]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before any fixture of an unmarked test (module-scoped ones included): no model loads."""
    if item.get_closest_marker("model") is None:
        item.stash[_GUARD] = patch = pytest.MonkeyPatch()
        model_guard.forbid(patch)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    patch = item.stash.get(_GUARD, None)
    if patch is not None:
        patch.undo()


def run_cli(*args: str, cwd: Path | None = None, timeout: float = 900, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run `ctxeval ARGS` as a user would, in a subprocess (with model loading forbidden in
    tests not marked `model`), with `env` added to the environment."""
    env = dict(os.environ, COLUMNS="200", **(env or {}))
    module = "tests.model_guard" if os.environ.get(model_guard.ENV) else "ctxeval.cli"
    if module == "tests.model_guard":
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, cwd=cwd, timeout=timeout, env=env)
