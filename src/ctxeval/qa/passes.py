"""Run the evaluator passes of an answer-quality command through an executor, as records.

Each pass is a record (`QA_PASSES`: one row per pass, keyed by its content hash) written in
atomic Parquet parts while the work runs and merged into `passes.parquet` at the end, so an
interrupted `pplqa` or `meta-eval` loses at most the passes in flight, and a re-run of the same
command runs only passes not yet recorded. A run directory holds one configuration, as for
every command (the engine refuses another). The finisher turns all the records into the
command's `Result` (its `build`), which the engine writes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from ctxeval.backends.base import ModelInfo, Scorer
from ctxeval.config import config_id
from ctxeval.pipeline.engine import Plan, Rendering, RunSpec, Step, run
from ctxeval.pipeline.executors import ExecutorOptions, ScorerSpec, Work
from ctxeval.pipeline.executors.work import one_per_unit
from ctxeval.results.manifest import Manifest
from ctxeval.results.records import RecordKind, append_row
from ctxeval.qa.evaluator import Evaluator, PassRequest, QATask
from ctxeval.results.base import Result

R = TypeVar("R", bound=Result)

PASSES_FILE = "passes.parquet"
QA_PASSES = RecordKind(PASSES_FILE, "key", ("key",))
PASS_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("kind", pa.string()),
        ("n_input", pa.int32()),
        ("n_prefix", pa.int32()),
        ("prefix_sum", pa.float64()),
        ("n_cont", pa.int32()),
        ("cont_sum", pa.float64()),
        ("digit_logprobs", pa.list_(pa.float64())),
        ("top_k", pa.int32()),
    ]
)


@dataclass
class PassRecords:
    """The records of every pass an evaluation needs, by request, the evaluator model, and how
    many passes ran now."""

    evaluator: Evaluator
    by_key: dict[str, dict]
    run_now: int

    @property
    def info(self) -> ModelInfo:
        return self.evaluator.scorer.info

    def __call__(self, request: PassRequest) -> dict:
        return self.by_key[self.evaluator.key(request)]


class QAPassRun(Generic[R]):
    """The evaluator passes of an answer-quality command as a task of the engine; `build`
    turns the records of all passes (and the run's manifest) into the command's result."""

    records = QA_PASSES
    schema = PASS_SCHEMA
    unit = "passes"
    finish_incomplete = False

    def __init__(self, command: str, load_spec: ScorerSpec, requests: list[PassRequest], build: Callable[[PassRecords, Manifest], R]) -> None:
        self.command = command
        self.load_spec = load_spec
        self.requests = requests
        self.build = build
        self.evaluator: Evaluator | None = None
        self.run_now = 0

    def load_specs(self) -> list[ScorerSpec]:
        return [self.load_spec]

    def plan(self, models: list[Scorer], done: set) -> Plan:
        ev = self.evaluator = Evaluator(models[0])
        max_len = ev.max_input_len(self.requests)
        keyed = {ev.key(r): r for r in self.requests}
        pending = [key for key in keyed if key not in done]
        # cost: characters, a proxy for tokens that needs no second tokenization
        work = Work(QATask(max_len), one_per_unit(pending), lambda key: ev.qa_pass(keyed[key]), lambda key: len(keyed[key].prefix) + len(keyed[key].continuation))
        manifest = {"plan": {"passes": len(keyed), "record_kind": "qa pass", "records": PASSES_FILE}}
        return Plan([work], manifest, units=len(keyed), noun="passes", total=len(keyed), already=len(keyed) - len(pending))

    def record(self, model: Scorer, job: str, result: object, columns: dict[str, list]) -> None:
        append_row(columns, result)
        self.run_now += 1

    def progress(self, model: Scorer, job: str) -> Step:
        return Step(1, self.command)

    def model_done(self, run_dir: Path, model: Scorer) -> None:
        """Nothing to keep from the loaded model."""

    def finish(self, run_dir: Path, manifest: Manifest) -> R:
        if self.evaluator is not None:
            return self.build(self._records(self.evaluator, run_dir), manifest)
        scorer = self.load_spec.load()  # a finished run: the keys need the model's identity and tokenizer
        try:
            return self.build(self._records(Evaluator(scorer), run_dir), manifest)
        finally:
            scorer.close()

    def _records(self, evaluator: Evaluator, run_dir: Path) -> PassRecords:
        table = pq.read_table(run_dir / PASSES_FILE).to_pylist()
        return PassRecords(evaluator, {row["key"]: row for row in table}, self.run_now)


@dataclass(frozen=True)
class PassSettings:
    """Where and how an answer-quality command's passes run: the evaluator, the run folder, how
    the result is rendered, the executor and the progress bar. They decide no number; pplqa and
    meta-eval hand them to the engine as they got them."""

    evaluator: ScorerSpec
    out_dir: Path
    render: Rendering
    executor: ExecutorOptions | None = None
    progress: bool = False


def run_passes(settings: PassSettings, requests: list[PassRequest], command: str, config: dict, build: Callable[[PassRecords, Manifest], R]) -> R:
    """Record every request's pass that is not recorded yet, then build the command's result from all of them (rendered by `settings.render`)."""
    spec = RunSpec(command, config_id(config), config)
    task = QAPassRun(command, settings.evaluator, requests, build)
    return run(task, spec, settings.out_dir, render=settings.render, executor=settings.executor, progress=settings.progress)
