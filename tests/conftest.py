"""Shared fixtures: the embedded model is loaded once per test session; the split of the suite into parts."""

from __future__ import annotations

import ctypes
import gc
import json
import os
import signal
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


def needs_shared(path: Path) -> pytest.MarkDecorator:
    """Skip a test whose data only the shared data folder holds: CI has it, a fresh clone does not."""
    return pytest.mark.skipif(not path.exists(), reason=f"{path} not present: a shared data file (../shared/data beside the checkout, or CTXEVAL_SHARED_DATA)")


# scripts/test.sh runs the suite as two pytest processes, so that no process holds every model
# the suite loads: in one process (6.8 GB peak, 2-core AMD EPYC, 2026-11-27) the hf models of
# test_serve_lmeval.py (hf Gemma and lm-eval's copies of it) and test_smollm2_model.py
# (SmolLM2's three hf models) stayed under those of the rest. The other modules that load an hf
# model (test_hf.py, test_diff_model.py, ...) hold it in a module-scoped fixture or a test, so a
# worker frees it before its next module. With CTXEVAL_TEST_PART=N, pytest collects only the
# test modules of part N: those TEST_PARTS names for N, and for part 1 every module it does not
# name. Unset (a plain `pytest`): all of them.
TEST_PART_ENV = "CTXEVAL_TEST_PART"
TEST_PARTS = {"test_serve_lmeval.py": "2", "test_smollm2_model.py": "2"}


def _pin_this_worker() -> None:
    """Under pytest-xdist (scripts/test.sh runs two workers) each worker runs on its own share of
    the cores, and the backends' default thread count follows it (`usable_cores`): two workers
    each running llama.cpp on every core made a one-token-decode test seven times slower
    (llama.cpp's threads spin while they wait; 2-core AMD EPYC, 2026-11-27). Subprocesses the
    tests start inherit the share; OpenMP (torch) is told it before it starts."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER"), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if worker is None or count < 2 or not hasattr(os, "sched_setaffinity"):
        return
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) >= count:
        share = cores[int(worker.removeprefix("gw")) % count::count]
        os.sched_setaffinity(0, share)
        os.environ["OMP_NUM_THREADS"] = str(len(share))


_pin_this_worker()


def _in_another_part(path: Path) -> bool:
    part = os.environ.get(TEST_PART_ENV)
    return bool(part) and path.name.startswith("test_") and TEST_PARTS.get(path.name, "1") != part


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """A test module of another part is not even imported (None: pytest decides as usual)."""
    return True if collection_path.suffix == ".py" and _in_another_part(collection_path) else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests of a module of another part named on the command line (pytest collects those
    whatever pytest_ignore_collect says) are deselected."""
    other = [item for item in items if _in_another_part(item.path)]
    if other:
        config.hook.pytest_deselected(items=other)
        items[:] = [item for item in items if not _in_another_part(item.path)]
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # pytest-xdist deals modules to its workers in this order (scripts/test_part.sh passes
        # --no-loadscope-reorder; by default xdist deals the modules with most tests first): the
        # modules that load a model (the long ones) first, so that the short ones fill the end
        loads = {item.path for item in items if item.get_closest_marker("model") is not None}
        items.sort(key=lambda item: item.path not in loads)  # stable: each module's tests keep their order


@pytest.fixture(scope="session")
def gemma():
    """The embedded Gemma 3 270M scorer (llama.cpp backend)."""
    from ctxeval.backends.registry import load_scorer, parse_model_spec

    scorer = load_scorer(parse_model_spec("gemma-3-270m"))
    yield scorer
    scorer.close()


SHORT_MT_BENCH_QUESTION = "120"  # "Given that f(x) = 4x^3 - 9x - 14, find the value of f(2).": six distinct answers, 903 characters


@pytest.fixture(scope="session")
def short_mt_bench(tmp_path_factory) -> Path:
    """One real MT-Bench question with the turn-1 answers of its six models, as a `pplqa` answers
    file (JSONL); beside it `reference.csv`, LLMBar's net human wins for them, which
    `--reference auto` would use for `mt-bench`. `pplqa mt-bench --limit 1` takes question 81,
    whose answers are 12,557 characters: the same passes (6 answers x methods) on 1/14 of the
    text. The answers differ from each other, so none shares another's passes."""
    from ctxeval.data.mt_bench import human_net_wins, load_mt_bench

    if not (SHARED_DATA / "mt_bench").is_dir():
        pytest.skip(f"{SHARED_DATA / 'mt_bench'} not present: a shared data folder (../shared/data beside the checkout, or CTXEVAL_SHARED_DATA)")
    question = next(q for q in load_mt_bench() if q.question_id == SHORT_MT_BENCH_QUESTION)
    assert len(set(question.answers.values())) == 6
    path = tmp_path_factory.mktemp("mt_bench") / "answers.jsonl"
    path.write_text("".join(json.dumps({"question_id": question.question_id, "question": question.question, "model": model, "answer": answer}) + "\n"
                            for model, answer in question.answers.items()), encoding="utf-8")
    reference, _ = human_net_wins([question])
    assert reference[question.question_id]  # human votes on some of its answers
    rows = [f"{qid},{model},{score}" for qid, scores in reference.items() for model, score in scores.items()]
    (path.parent / "reference.csv").write_text("question_id,model,score\n" + "".join(r + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module", autouse=True)
def _release_memory_after_each_module():
    """After a module, hand the heap's free pages back to the system: each part of the suite
    runs in one process, and glibc keeps what a test's large arrays (logits, float64 references, hf models)
    freed, so the process's resident size would grow from module to module."""
    yield
    gc.collect()
    if sys.platform.startswith("linux"):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


# Signals whose disposition (handler) or blocked state a test must leave as it found them: a
# process started with SIGINT ignored or blocked inherits that, and Python then raises no
# KeyboardInterrupt in it, so a test that sends Ctrl-C to a child would pass or fail by which
# module ran before it in the same worker.
_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _signal_state() -> tuple:
    return tuple(signal.getsignal(s) for s in _SIGNALS), frozenset(signal.pthread_sigmask(signal.SIG_BLOCK, []))


@pytest.fixture(autouse=True)
def _signals_restored(request):
    """Fail the test that leaves a signal ignored, handled or blocked in the test process, after
    restoring it, so no later test inherits the change."""
    before = _signal_state()
    yield
    after = _signal_state()
    if after != before:
        for sig, handler in zip(_SIGNALS, before[0]):
            signal.signal(sig, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, before[1])
        log = os.environ.get("CTXEVAL_SIGNAL_LEAKS")
        if log:
            with open(log, "a") as f:
                f.write(f"{request.node.nodeid}: {before} -> {after}\n")
        pytest.fail(f"the test changed the process's signal handling: {before} -> {after} (restored)", pytrace=False)


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
