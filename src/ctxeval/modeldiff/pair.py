"""Two models held by one worker, and the task that scores a pass on both in lockstep.

A worker loads the REF and CAND models together (`PairSpec`), so the executors (local, Ray)
deal diff passes exactly as they deal scoring passes. For each pass, both models run the same
input, and their logits arrive block by block (`ScorerBase.logit_blocks`); each REF block is
compared with the rows of CAND that are in hand, and a model's next block is asked for only
once its current one is used up. So at any moment at most one block of each model exists
(a view of each backend's own buffer), never a [positions x vocab] matrix for both.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ctxeval.backends.base import ScorerBase
from ctxeval.modeldiff.divergence import DiffScores, compare_block
from ctxeval.pipeline.executors.spec import ScorerSpec
from ctxeval.pipeline.executors.work import WorkItem


class ModelPair:
    """REF and CAND scorers, loaded; what a diff worker holds."""

    concurrency = 1
    remote = False

    def __init__(self, ref: ScorerBase, cand: ScorerBase) -> None:
        self.ref = ref
        self.cand = cand

    @property
    def name(self) -> str:
        return f"{self.ref.name} vs {self.cand.name}"

    def describe(self) -> dict:
        return {"name": self.name, "ref": self.ref.describe(), "cand": self.cand.describe()}

    def usage(self) -> dict:
        return {}

    def close(self) -> None:
        self.ref.close()
        self.cand.close()


@dataclass(frozen=True)
class PairSpec:
    """How a worker loads its own REF and CAND (picklable, as a `Loadable`)."""

    ref: ScorerSpec
    cand: ScorerSpec

    def load(self, n_threads: int | None = None) -> ModelPair:
        return ModelPair(self.ref.load(n_threads), self.cand.load(n_threads))

    def per_server(self) -> list[PairSpec]:
        return [self]


@dataclass(frozen=True)
class DiffTask:
    """Compare REF and CAND on each pass: a `DiffScores` per item."""

    top_k: int
    reverse: bool
    block_rows: int

    def __call__(self, model: ModelPair, items: list[WorkItem]) -> list[object]:
        return [self.compare(model, item) for item in items]

    def compare(self, model: ModelPair, item: WorkItem) -> DiffScores:
        ref = model.ref.logit_blocks(item.input_ids, item.output_positions, self.block_rows)
        cand = model.cand.logit_blocks(item.input_ids, item.output_positions, self.block_rows)
        return lockstep(ref, cand, item.target_ids, self.top_k, self.reverse)


def lockstep(ref_blocks: Iterator[np.ndarray], cand_blocks: Iterator[np.ndarray], targets: np.ndarray, top_k: int, reverse: bool) -> DiffScores:
    """Compare two streams of logit blocks row for row (the streams may cut their blocks
    differently); each stream's next block is requested only when its current one is used up."""
    parts: list[DiffScores] = []
    ref = cand = np.empty((0, 0), dtype=np.float32)
    r = c = done = 0  # rows used of the current REF and CAND blocks, rows compared
    while done < len(targets):
        if r == len(ref):
            ref, r = _next_block(ref_blocks, "REF"), 0
        if c == len(cand):
            cand, c = _next_block(cand_blocks, "CAND"), 0
        if ref.shape[1] != cand.shape[1]:
            raise ValueError(f"REF gives {ref.shape[1]} logits per row, CAND {cand.shape[1]}")
        m = min(len(ref) - r, len(cand) - c)
        parts.append(compare_block(ref[r : r + m], cand[c : c + m], targets[done : done + m], top_k, reverse))
        r, c, done = r + m, c + m, done + m
    for stream, name in ((ref_blocks, "REF"), (cand_blocks, "CAND")):
        if next(stream, None) is not None:
            raise ValueError(f"{name} gave more logit rows than targets")
    return DiffScores.concat(parts)


def _next_block(blocks: Iterator[np.ndarray], name: str) -> np.ndarray:
    block = next(blocks, None)
    if block is None:
        raise ValueError(f"{name} gave fewer logit rows than targets")
    return block
