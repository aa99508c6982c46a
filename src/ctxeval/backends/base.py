"""The scorer protocol every backend implements, and what a backend can and cannot measure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ctxeval.backends.logits import BlockScores


@dataclass(frozen=True)
class Capabilities:
    """What a backend sees; the pipeline adapts to it and never pretends."""

    full_logits: bool  # exact ranks over the whole vocabulary
    max_top_k: int | None  # None = unlimited
    temperatures: bool  # log-probabilities at any temperature from the same pass
    generation: bool = False  # greedy continuation of token ids (`generate`), e.g. for retrieval probes


@dataclass(frozen=True)
class ModelInfo:
    """Identity of a loaded model, recorded in every run manifest."""

    name: str
    backend: str
    path: str
    sha256: str
    vocab_size: int
    n_ctx_train: int
    bos_id: int | None  # None: the model uses no BOS token
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def uses_bos(self) -> bool:
        return self.bos_id is not None


class Scorer(Protocol):
    """Scores target tokens given token contexts. The only place a model is touched."""

    info: ModelInfo
    capabilities: Capabilities

    def tokenize(self, text: str) -> list[int]:
        """Token ids of `text` without BOS or other special tokens."""
        ...

    def token_bytes(self, token_id: int) -> bytes:
        """The exact UTF-8 bytes a token stands for in running text."""
        ...

    def score(
        self,
        input_ids: np.ndarray,
        output_positions: np.ndarray,
        target_ids: np.ndarray,
        top_k: int,
        temperatures: tuple[float, ...],
    ) -> BlockScores:
        """One forward pass over `input_ids`; row i scores `target_ids[i]` from the logits
        at input position `output_positions[i]` (the position of the token before it)."""
        ...

    def close(self) -> None: ...


@dataclass
class ScheduledScores:
    """Scores of a pass whose scorer chose the contexts (the thesis's API protocol): rows are the
    pass's consecutive targets from its first, as many as were scored, and `context_len` is
    the number of text tokens each actually saw."""

    scores: BlockScores
    context_len: np.ndarray  # int64 [n]


class ThesisScorer(Protocol):
    """A scorer that runs the thesis's generation protocol (an API without prompt log-probabilities)."""

    def score_thesis(
        self,
        input_ids: np.ndarray,
        output_positions: np.ndarray,
        target_ids: np.ndarray,
        top_k: int,
        temperatures: tuple[float, ...],
        n_compare: int,
        exhaustive: bool,
    ) -> ScheduledScores:
        """Score from the pass's first target (L tokens after its context start) on, with the
        thesis's context schedule; n_c comparisons, or n_c requests if `exhaustive`."""
        ...

    def estimate_thesis(self, length: int, n_targets: int, n_compare: int, exhaustive: bool) -> tuple[int, int, int]:
        """Upper bounds (requests, prompt tokens, completion tokens) of one thesis pass."""
        ...


class Generator(Protocol):
    """A scorer that can also continue a token sequence greedily (Capabilities.generation)."""

    def generate(self, input_ids: np.ndarray, max_new_tokens: int) -> list[int]: ...

    def score_stepwise(
        self, prompt_ids: np.ndarray, continuation_ids: np.ndarray, top_k: int, temperatures: tuple[float, ...]
    ) -> BlockScores:
        """Teacher-forced scores of a continuation computed on generation's own kernel path
        (one token per step), so a greedy chain read from them is what `generate` produces."""
        ...
