"""Scoring passes as executor work: a `ScoreTask` scores the passes of one unit on a worker's
loaded scorer; consecutive equal-length passes of a text go to `score_batch` together."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ctxeval.backends.base import ScorerBase
from ctxeval.config import RunConfig
from ctxeval.errors import ScoringFailed
from ctxeval.pipeline.executors.work import Job, Work, WorkItem, work_item

MAX_BATCH_PASSES = 64


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
