"""What an executor deals out: a `Work` is jobs grouped into units plus the `Task` a worker runs
on each unit with its loaded model. Scoring passes, retrieval cases, QA evaluator passes and
judge requests are all `Work`, so every model-backed command runs through the same executors
and a job gives the same result wherever it runs.

A task and the items it receives are pickled to Ray actors; the `item` and `cost` functions
run on the driver only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from ctxeval.backends.base import ModelInfo, ScorerBase
from ctxeval.config import RunConfig
from ctxeval.errors import ScoringFailed, UserError
from ctxeval.pipeline.tokens import TokenizedText
from ctxeval.pipeline.windows import Pass

MAX_BATCH_PASSES = 64

J = TypeVar("J")
Job = tuple[int, TokenizedText, Pass]  # a scoring job: (pass index in the plan, its text, the pass)


class Task(Protocol):
    """What a worker does with the items of one unit on its loaded model: one result per item,
    in order. Picklable (a frozen dataclass), since it travels to Ray actors."""

    def __call__(self, model: Any, items: list[Any]) -> list[object]: ...


@dataclass
class Work(Generic[J]):
    """Jobs grouped into units (consumed once, lazily by the local executor), what a worker
    runs on a unit, the picklable input of a job (built when it is sent), and a job's cost
    (the Ray executor deals long and short units together)."""

    task: Task
    units: Iterable[list[J]]
    item: Callable[[J], Any]
    cost: Callable[[J], int]


def one_per_unit(jobs: Iterable[J]) -> Iterator[list[J]]:
    """Each job its own unit (work no backend batches)."""
    for job in jobs:
        yield [job]


@dataclass(frozen=True)
class WorkItem:
    """The model input of one pass: small enough to ship to a worker, all a scorer needs."""

    thesis: bool
    input_ids: np.ndarray
    output_positions: np.ndarray
    target_ids: np.ndarray

    @property
    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.input_ids, self.output_positions, self.target_ids


@dataclass(frozen=True)
class ScoreTask:
    """Scoring passes: BlockScores (ScheduledScores for a thesis pass) per item."""

    config: RunConfig

    def __call__(self, model: ScorerBase, items: list[WorkItem]) -> list[object]:
        return score_unit(model, self.config, items)


def scoring_work(scorer: ScorerBase, config: RunConfig, jobs: Iterable[Job]) -> Work[Job]:
    """The scoring passes of one model as work."""
    return Work(ScoreTask(config), units(scorer, jobs), lambda job: work_item(scorer.info, job[1], job[2]), lambda job: job[2].n_input)


def units(scorer: ScorerBase, jobs: Iterable[Job]) -> Iterator[list[Job]]:
    """Jobs grouped into units of work, lazily (a corpus's jobs arrive one document at a time):
    for a backend that `batches`, consecutive passes of one text with equal input length (up to
    MAX_BATCH_PASSES) go to `score_batch` together; every other unit is one pass."""
    unit: list[Job] = []
    for job in jobs:
        if unit and not (scorer.batches and job[1] is unit[0][1] and job[2].n_input == unit[0][2].n_input and len(unit) < MAX_BATCH_PASSES):
            yield unit
            unit = []
        unit.append(job)
    if unit:
        yield unit


def work_item(info: ModelInfo, tt: TokenizedText, p: Pass) -> WorkItem:
    """Input ids (BOS first when the model uses one), scored positions and target ids of a pass.
    The input is the whole window, its last target included (`Pass.n_input`): the model decodes
    exactly what llama.cpp's own tools decode, so every target's numbers equal theirs."""
    text_ids = tt.ids[p.context_start : p.target_end]
    bos = [info.bos_id] if info.uses_bos else []
    if not bos and p.target_start == p.context_start:
        raise UserError(f"{info.name} has no BOS token, so a target with no context cannot be scored; use --method fixed --head skip or a sweep")
    input_ids = np.concatenate([np.asarray(bos, dtype=np.int32), text_ids]).astype(np.int32)
    targets = np.arange(p.target_start, p.target_end)
    # the logits at input position j predict the token after it
    output_positions = targets - p.context_start - 1 + len(bos)
    return WorkItem(p.context_mode == "thesis", input_ids, output_positions, tt.ids[targets])


def score_unit(scorer: ScorerBase, config: RunConfig, items: list[WorkItem]) -> list[object]:
    """BlockScores (or ScheduledScores for a thesis pass) per item, in order; a unit the backend
    fails to score (`ScoringFailed`) gives that failure for each of its items. A thesis pass
    (API models only: api.sweep refuses others) is scored by the protocol, which decides how
    many targets and which contexts."""
    try:
        if len(items) > 1:
            return list(scorer.score_batch([w.arrays for w in items], config.top_k, config.temperatures))
        (w,) = items
        if w.thesis:
            return [scorer.score_thesis(*w.arrays, config.top_k, config.temperatures, config.n_compare, config.exhaustive)]
        return [scorer.score(*w.arrays, config.top_k, config.temperatures)]
    except ScoringFailed as exc:
        return [exc] * len(items)
