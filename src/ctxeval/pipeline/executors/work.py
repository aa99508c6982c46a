"""What an executor deals out: a `Work` is jobs grouped into units plus the `Task` a worker runs
on each unit with its loaded model. Scoring passes, retrieval cases, QA evaluator passes and
judge requests are all `Work`, so every model-backed command runs through the same executors
and a job gives the same result wherever it runs.

A task and the items it receives are pickled to Ray actors; the `item` and `cost` functions
run on the driver only. `work_item` is the model input of a pass (the whole window), shared by
the token-scoring commands and diff; each family's own tasks live with it (scoring/work.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from ctxeval.backends.base import ModelInfo
from ctxeval.errors import FieldError
from ctxeval.pipeline.tokens import TokenizedText
from ctxeval.pipeline.windows import Pass

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


def work_item(info: ModelInfo, tt: TokenizedText, p: Pass) -> WorkItem:
    """Input ids (BOS first when the model uses one), scored positions and target ids of a pass.
    The input is the whole window, its last target included (`Pass.n_input`): the model decodes
    exactly what llama.cpp's own tools decode, so every target's numbers equal theirs."""
    text_ids = tt.ids[p.context_start : p.target_end]
    bos = [info.bos_id] if info.uses_bos else []
    if not bos and p.target_start == p.context_start:
        raise FieldError("method", f"{info.name} has no BOS token, so a target with no context cannot be scored; use {{method}} fixed {{head}} skip or a sweep")
    input_ids = np.concatenate([np.asarray(bos, dtype=np.int32), text_ids]).astype(np.int32)
    targets = np.arange(p.target_start, p.target_end)
    # the logits at input position j predict the token after it
    output_positions = targets - p.context_start - 1 + len(bos)
    return WorkItem(p.context_mode == "thesis", input_ids, output_positions, tt.ids[targets])
