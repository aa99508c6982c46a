"""The engine's run policy, once for every command: a run directory of another configuration is
refused, `created` is kept across sessions, failed work leaves the run `incomplete` (exit code
3, distinct from user errors' 2) and a re-run retries only it, and API usage is recorded per
session and in total. First on a small task of the engine's own contract, then through the CLI
of every model-backed command."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ctxeval.errors import EXIT_INCOMPLETE, EXIT_USER_ERROR, IncompleteRun, UserError
from ctxeval.pipeline.engine import Plan, RunSpec, Step, run
from ctxeval.pipeline.executors import Work
from ctxeval.pipeline.executors.work import one_per_unit
from ctxeval.results.manifest import Manifest, read_manifest
from ctxeval.results.records import RecordKind, append_row
from tests.conftest import SHARED_DATA, run_cli
from tests.servers.scripted import ScriptedServer

SQUARES = RecordKind("squares.parquet", "job", ("job",))


@dataclass
class _Counter:
    """A remote model that squares numbers and counts its requests; jobs in `failing` fail."""

    failing: set[int]
    name: str = "counter"
    concurrency: int = 1
    remote: bool = True
    requests: int = 0

    def describe(self) -> dict:
        return {"name": self.name, "backend": "test"}

    def usage(self) -> dict:
        return {"requests": self.requests, "tokens": {"prompt": 2 * self.requests}}

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class _CounterSpec:
    failing: frozenset[int] = frozenset()

    def load(self, n_threads: int | None = None) -> _Counter:
        return _Counter(set(self.failing))

    def per_server(self) -> list[_CounterSpec]:
        return [self]


@dataclass(frozen=True)
class _Square:
    def __call__(self, model: _Counter, items: list[int]) -> list[object]:
        model.requests += len(items)
        return [RuntimeError(f"job {x} failed") if x in model.failing else x * x for x in items]


@dataclass
class _SquaresTask:
    """Squares of 0..n-1 as records; `finish` returns them."""

    n: int
    failing: frozenset[int] = frozenset()
    ran: list[int] = field(default_factory=list)
    models_done: list[str] = field(default_factory=list)
    records = SQUARES
    schema = pa.schema([("job", pa.int32()), ("square", pa.int64())])
    unit = "jobs"
    finish_incomplete = False

    def load_specs(self) -> list[_CounterSpec]:
        return [_CounterSpec(self.failing)]

    def plan(self, models: list[_Counter], done: set) -> Plan:
        pending = [j for j in range(self.n) if j not in done]
        work = Work(_Square(), one_per_unit(pending), lambda job: job, lambda job: 1)
        return Plan([work], {"plan": {"jobs": self.n}}, units=self.n, noun="jobs", total=self.n, already=self.n - len(pending))

    def record(self, model: _Counter, job: int, result: object, columns: dict[str, list]) -> dict | None:
        self.ran.append(job)
        if isinstance(result, Exception):
            return {"job": job, "error": str(result)}
        append_row(columns, {"job": job, "square": result})
        return None

    def progress(self, model: _Counter, job: int) -> Step:
        return Step(1, str(job))

    def model_done(self, run_dir: Path, model: _Counter) -> None:
        self.models_done.append(model.name)

    def finish(self, run_dir: Path, manifest: Manifest) -> list[int]:
        return pq.read_table(run_dir / SQUARES.file).column("square").to_pylist()


def _spec(n: int) -> RunSpec:
    return RunSpec("squares", f"id-{n}", {"n": n})


def test_a_run_records_its_work_and_a_finished_run_is_not_run_again(tmp_path):
    task = _SquaresTask(4)
    assert run(task, _spec(4), tmp_path) == [0, 1, 4, 9]
    manifest = read_manifest(tmp_path)
    assert manifest.status == "complete" and manifest.command == "squares" and manifest.config == {"n": 4}
    assert manifest.models == [{"name": "counter", "backend": "test"}] and manifest.plan == {"jobs": 4}
    assert task.models_done == ["counter"]  # once, after the model's work was recorded
    again = _SquaresTask(4)
    assert run(again, _spec(4), tmp_path) == [0, 1, 4, 9] and again.ran == [] and again.models_done == []


def test_another_configuration_is_refused(tmp_path):
    run(_SquaresTask(3), _spec(3), tmp_path)
    with pytest.raises(UserError, match="different configuration"):
        run(_SquaresTask(4), _spec(4), tmp_path)


def test_resuming_into_records_with_other_columns_is_refused_before_any_work(tmp_path):
    """Part files of another version's schema would be read with this one's, nulls filling the
    missing columns: every task is refused before a model runs."""
    task = _SquaresTask(3, failing=frozenset({2}))
    with pytest.raises(IncompleteRun):
        run(task, _spec(3), tmp_path)  # records for jobs 0 and 1, status incomplete
    (tmp_path / "parts").mkdir(exist_ok=True)
    pq.write_table(pa.table({"job": pa.array([2], pa.int32())}), tmp_path / "parts" / "part-99999.parquet")
    again = _SquaresTask(3)
    with pytest.raises(UserError, match="unfinished run records with other columns"):
        run(again, _spec(3), tmp_path)
    assert again.ran == []


def test_failed_work_is_incomplete_then_retried_and_created_and_usage_totals_kept(tmp_path):
    with pytest.raises(IncompleteRun, match="1 of 5 jobs failed .*job 3 failed"):
        run(_SquaresTask(5, frozenset({3})), _spec(5), tmp_path)
    first = read_manifest(tmp_path)
    assert first.status == "incomplete" and first.failed_passes == [{"job": 3, "error": "job 3 failed"}]
    assert first.api_usage == first.api_usage_total == {"counter": {"requests": 5, "tokens": {"prompt": 10}}}
    assert first.created is not None
    retry = _SquaresTask(5)
    assert run(retry, _spec(5), tmp_path) == [0, 1, 4, 9, 16]
    assert retry.ran == [3]  # only the failed job is run again
    second = read_manifest(tmp_path)
    assert second.status == "complete" and second.failed_passes is None
    assert second.created == first.created and second.timing["resumed"] is True
    assert second.api_usage == {"counter": {"requests": 1, "tokens": {"prompt": 2}}}  # this session
    assert second.api_usage_total == {"counter": {"requests": 6, "tokens": {"prompt": 12}}}  # every session


def test_a_task_that_reports_failures_still_finishes_before_the_run_is_incomplete(tmp_path):
    task = _SquaresTask(3, frozenset({1}))
    task.finish_incomplete = True
    with pytest.raises(IncompleteRun):
        run(task, _spec(3), tmp_path)
    assert (tmp_path / SQUARES.file).is_file() and read_manifest(tmp_path).status == "incomplete"


# Every model-backed command through the CLI: run once, run again (same configuration: the
# directory is reused and keeps `created`), then with one option changed (refused, exit 2).
LEVAL = SHARED_DATA / "leval" / "predictions" / "llm_gpt4_eval"
TEXT = str(Path(__file__).parent / "fixtures" / "wikitext2-test-head.txt")
COMMANDS = {
    "sweep": (["sweep", TEXT, "--lengths", "16,32", "--n-compare", "2", "--top-k", "5", "--approx-k", "5", "--quiet"], ["--seed", "1"]),
    "score": (["score", TEXT, "--window", "32", "--max-tokens", "64", "--top-k", "5", "--approx-k", "5", "--quiet"], ["--window", "16"]),
    "context-gain": (["context-gain", TEXT, "--window", "32", "--short", "8", "--max-tokens", "64", "--replicates", "100", "--quiet"], ["--short", "16"]),
    "retrieval": (["retrieval", "--lines", "5", "--depths", "0", "--samples", "1", "--quiet"], ["--samples", "2"]),
    "ruler": (["ruler", "--tasks", "niah_single_1", "--lengths", "512", "--samples", "1", "--quiet"], ["--samples", "2"]),
    "pplqa": (["pplqa", "{short_mt_bench}", "--quiet"], ["--methods", "pplqa,gptscore"]),  # one short MT-Bench question (conftest)
    "meta-eval": (["meta-eval", "--dataset", "llmbar:MT-Bench", "--limit", "1", "--methods", "pplqa", "--replicates", "100", "--quiet"], ["--limit", "2"]),
}


def _created(out: Path) -> str:
    return json.loads((out / "manifest.json").read_text())["created"]


@pytest.mark.model
@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_keeps_created_and_refuses_another_configuration(command, tmp_path, request):
    if command in ("pplqa", "meta-eval") and not SHARED_DATA.exists():
        pytest.skip("shared data not present")
    args, changed = COMMANDS[command]
    if "{short_mt_bench}" in args:
        args = [str(request.getfixturevalue("short_mt_bench")) if a == "{short_mt_bench}" else a for a in args]
    out = tmp_path / "run"
    first = run_cli(*args, "--out", str(out))
    assert first.returncode == 0, first.stderr
    created = _created(out)
    (out / "manifest.json").write_text((out / "manifest.json").read_text().replace('"status": "complete"', '"status": "running"'))
    again = run_cli(*args, "--out", str(out))  # an unfinished session of the same configuration: resumed
    assert again.returncode == 0, again.stderr
    assert _created(out) == created and json.loads((out / "manifest.json").read_text())["status"] == "complete"
    other = run_cli(*args, *changed, "--out", str(out))
    assert other.returncode == EXIT_USER_ERROR and "different configuration" in other.stderr and other.stderr.count("\n") == 1, other.stderr


def _chat(text: str) -> dict:
    return {"choices": [{"message": {"role": "assistant", "content": text}}], "usage": {"prompt_tokens": 100, "completion_tokens": 5}}


@pytest.mark.skipif(not LEVAL.exists(), reason="shared L-Eval predictions not present")
def test_judge_follows_the_same_policy(tmp_path):
    args = ["judge", str(LEVAL / "claude-100k.pred.jsonl"), str(LEVAL / "turbo-16k-0613.pred.jsonl"), "--judge-model", "openai:judge",
            "--concurrency", "1", "--cache", "none", "--limit", "1", "--out", str(tmp_path)]
    server = ScriptedServer({"/v1/chat/completions": [_chat("[[A]]"), {"choices": []}, _chat("[[B]]")]})
    try:
        failed = run_cli(*args, "--base-url", server.url)
        assert failed.returncode == EXIT_INCOMPLETE and failed.stderr.count("\n") == 1, failed.stderr
        first = json.loads((tmp_path / "manifest.json").read_text())
        assert first["status"] == "incomplete" and first["api_usage_total"]["openai:judge"]["requests"] == 2
        assert first["models"] == [{"name": "openai:judge", "backend": "openai-chat", "max_tokens": 2048, "temperature": 0.0}]
        retried = run_cli(*args, "--base-url", server.url)
        assert retried.returncode == 0, retried.stderr
        second = json.loads((tmp_path / "manifest.json").read_text())
        assert second["created"] == first["created"] and second["status"] == "complete"
        assert second["api_usage"]["openai:judge"]["requests"] == 1 and second["api_usage_total"]["openai:judge"]["requests"] == 3
        other = run_cli(*args[:-4], "--limit", "2", "--out", str(tmp_path), "--base-url", server.url)
        assert other.returncode == EXIT_USER_ERROR and "different configuration" in other.stderr
    finally:
        server.close()


@pytest.mark.parametrize("reader,command", [(["summary"], "retrieval"), (["trends"], "judge"), (["compare", "{d}"], "meta-eval"), (["probe-report"], "pplqa")])
def test_readers_refuse_run_dirs_of_other_commands(reader, command, tmp_path):
    """summary, trends and compare read token runs, probe-report also retrieval runs: a directory
    another command wrote gives one line naming that command, exit 2."""
    from ctxeval.results.manifest import write_manifest

    run_dir = tmp_path / command
    run_dir.mkdir()
    write_manifest(run_dir, Manifest(command=command, run_id="x", config={}, models=[], status="complete"))
    args = [a.format(d=run_dir) for a in reader]
    out = ["--out", str(tmp_path / "out")] if reader[0] in ("compare", "probe-report") else []
    result = run_cli(args[0], str(run_dir), *args[1:], *out)
    assert result.returncode == EXIT_USER_ERROR and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    assert command in result.stderr
