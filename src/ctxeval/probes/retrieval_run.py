"""Run a line-retrieval grid (lines x depths x samples) on one or more models, resumably.

Cases are planned with stable indices and run by the same executors as scoring passes (local,
or Ray actors each holding a loaded model); each finished case is a record (`CASES`: one row
per case) written in atomic Parquet parts, so an interrupted run loses at most the cases in
flight, and a re-run of the same command scores only the missing ones. At the end the parts
are merged into `cases.parquet` in plan order. The run's identity is a hash of everything that
decides the cases, as for scoring runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from ctxeval.backends.base import Scorer
from ctxeval.errors import FieldError
from ctxeval.pipeline.engine import Plan, Rendering, RunSpec, Step, run
from ctxeval.pipeline.time_left import Cost, Load
from ctxeval.backends.registry import ModelSpec
from ctxeval.pipeline.executors import ExecutorOptions, ScorerSpec, Work
from ctxeval.pipeline.executors.work import one_per_unit
from ctxeval.config import config_id
from ctxeval.results.manifest import Manifest
from ctxeval.probes.retrieval import CaseSpec, RetrievalTask
from ctxeval.probes.retrieval_data import N_EXAMPLES, make_case
from ctxeval.probes.sizing import largest_fitting
from ctxeval.results.records import RecordKind, append_row
from ctxeval.results.retrieval import CASES_FILE


CASES = RecordKind(CASES_FILE, "case_index", ("case_index",))
CASE_SCHEMA = pa.schema(
    [
        ("case_index", pa.int32()),
        ("model", pa.string()),
        ("variant", pa.string()),
        ("tokens_target", pa.int32()),
        ("lines", pa.int32()),
        ("depth", pa.float64()),
        ("sample", pa.int32()),
        ("char_depth", pa.float64()),
        ("prompt_tokens", pa.int32()),
        ("correct", pa.bool_()),
        ("prediction", pa.string()),
        ("accuracy_method", pa.string()),
        ("min_margin", pa.float64()),
        ("first_rank", pa.int64()),
        ("value_logprob", pa.float64()),
        ("value_tokens", pa.int32()),
        ("answer_ranks", pa.list_(pa.int64())),
    ]
)


@dataclass(frozen=True)
class RetrievalConfig:
    """Everything that decides which cases are scored."""

    variant: str
    lines: tuple[int, ...]  # record sizes in lines, or () when `tokens` sets them per model
    depths: tuple[float, ...]
    samples: int
    seed: int
    models: tuple[str, ...]
    # 2: accuracy from generation's own kernel path (the batched teacher-forced shortcut of
    # protocol 1 could disagree with real generation on some CPUs)
    protocol: int = 2
    tokens: tuple[int, ...] = ()  # prompt sizes in tokens (NIAH/RULER style), lines chosen per model

    def run_id(self) -> str:
        return config_id(asdict(self))


CaseJob = tuple[int, int | None, CaseSpec]  # (case index in the plan, token target, case)
Finish = Callable[[Path, Manifest], Any]  # the command's result of a finished run


class RetrievalRun:
    """The retrieval grid as a task of the engine: one record per (model, lines, depth, sample) case."""

    records = CASES
    schema = CASE_SCHEMA
    unit = "cases"
    finish_incomplete = False

    def __init__(self, config: RetrievalConfig, models: list[ModelSpec], finish: Finish, n_threads: int | None = None) -> None:
        self.config = config
        self._finish = finish
        self._specs = [ScorerSpec(model, n_threads) for model in models]

    def load_specs(self) -> list[ScorerSpec]:
        return self._specs

    def plan(self, models: list[Scorer], done: set) -> Plan:
        config = self.config
        sizes = {s.info.name: record_sizes(s, config) for s in models}
        plans = _plan_cases(config, [s.info.name for s in models], sizes)
        task = RetrievalTask(config.variant, config.seed)
        work = [Work(task, one_per_unit([job for job in plan if job[0] not in done]), lambda job: job[2], lambda job: job[2].lines) for plan in plans]
        manifest = {"lines_for_tokens": {name: {str(t): n for t, n in size} for name, size in sizes.items()} if config.tokens else None,
                    "plan": {"cases": sum(len(p) for p in plans), "record_kind": "retrieval case", "records": CASES_FILE}}
        total = sum(len(p) for p in plans)
        return Plan(work, manifest, units=total, noun="cases", total=total, already=sum(job[0] in done for plan in plans for job in plan),
                    load=Load.of(_cost(job[2]) for plan in plans for job in plan if job[0] not in done))

    def record(self, model: Scorer, job: CaseJob, result: object, columns: dict[str, list]) -> None:
        index, target, _ = job
        append_row(columns, {"case_index": index, "tokens_target": target, **result})

    def progress(self, model: Scorer, job: CaseJob) -> Step:
        case = job[2]
        return Step(1, f"{model.info.name} · {case.lines} lines · depth {case.depth:g}", _cost(case))

    def model_done(self, run_dir: Path, model: Scorer) -> None:
        """Nothing to keep from the loaded model."""

    def finish(self, run_dir: Path, manifest: Manifest) -> Any:
        return self._finish(run_dir, manifest)


def run_retrieval(config: RetrievalConfig, models: list[ModelSpec], run_dir: Path, finish: Finish, progress: bool = True, n_threads: int | None = None,
                  executor: ExecutorOptions | None = None, *, render: Rendering) -> Any:
    """Score every (model, lines, depth, sample) case not yet recorded (`models`:
    `config.models` typed), then return what `finish` makes of the run (the command's result,
    rendered by `render`)."""
    spec = RunSpec("retrieval", config.run_id(), asdict(config))
    return run(RetrievalRun(config, models, finish, n_threads), spec, Path(run_dir), render=render, executor=executor, progress=progress)


def _plan_cases(config: RetrievalConfig, names: list[str], sizes: dict[str, list[tuple[int | None, int]]]) -> list[list[CaseJob]]:
    """Each model's cases in plan order, indexed across models."""
    plans, index = [], 0
    for name in names:
        grid = [(t, CaseSpec(n, d, k)) for t, n in sizes[name] for d in config.depths for k in range(config.samples)]
        plans.append([(index + i, t, case) for i, (t, case) in enumerate(grid)])
        index += len(grid)
    return plans


def record_sizes(scorer: Scorer, config: RetrievalConfig) -> list[tuple[int | None, int]]:
    """(token target, lines) per record size: `--lines` as given, or for each `--tokens` target
    the most lines whose prompt (BOS included) fits in that many of this model's tokens."""
    if not config.tokens:
        return [(None, n) for n in config.lines]
    sizes = [(t, lines_for_tokens(scorer, config.variant, t, config.seed)) for t in config.tokens]
    lines = [n for _, n in sizes]
    if len(set(lines)) < len(lines):
        raise FieldError("tokens", f"{','.join(map(str, config.tokens))} give records of {lines} lines for {scorer.info.name}: choose targets further apart")
    return sizes


def lines_for_tokens(scorer: Scorer, variant: str, target: int, seed: int) -> int:
    """The largest line count whose mid-depth record prompt has at most `target` tokens.

    Prompt length grows with the line count (each line adds 15-25 tokens), so `largest_fitting`
    finds it in about 2 log2(lines) tokenizations."""

    def size(n: int) -> int:
        return int(scorer.info.uses_bos) + len(scorer.tokenize(make_case(variant, n, 0.5, 0, seed).prompt))

    low = N_EXAMPLES + 1
    lines = largest_fitting(lambda n: size(n) <= target, low)
    if lines is None:
        raise FieldError("tokens", f"{target} is too small: the smallest {variant} record ({low} lines) has {size(low)} tokens for {scorer.info.name}")
    return lines


def _cost(case: CaseSpec) -> Cost:
    """A case's work for the time-left estimate: its lines stand for its tokens (each about alike)."""
    return Cost(case.lines, case.lines)
