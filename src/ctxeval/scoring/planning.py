"""Planners: which passes each command scores, for every model and text, as the executor needs them.

A planner is called with the models and the texts as each model tokenized them ([model][text])
and returns the passes ([model][text][pass]) and facts about the plan for the manifest. It is a
small frozen object (not a closure inside `api`), so it can be tested alone and sent to a worker.
`windows` decides the passes of one text under one tokenizer; a planner combines them across
models and texts — for the sweep, by starting every model at the same character.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ctxeval.pipeline import windows
from ctxeval.backends.base import ModelInfo
from ctxeval.data.texts import Text
from ctxeval.errors import FieldError, UserError
from ctxeval.pipeline.tokens import TokenizedText
from ctxeval.pipeline.windows import Pass

Plan = list[list[list[Pass]]]


def check_context(infos: list[ModelInfo], window_tokens: int, field: str, what: str) -> None:
    """Refuse a window of `window_tokens` text tokens, decoded whole with BOS first
    (`Pass.n_input`), longer than a model's training context. Checked on the options, before
    the texts' lengths, so a too-long request is refused even on a short text. `what` names the
    request, spelling the option `field` as {name}."""
    for info in infos:
        needed = window_tokens + (1 if info.uses_bos else 0)
        if needed > info.n_ctx_train:
            raise FieldError(field, f"{what} needs {needed} tokens per pass, beyond {info.name}'s training context of {info.n_ctx_train}")


@dataclass(frozen=True)
class SweepPlanner:
    """The thesis sweep: per text, length and repeat a seeded start, aligned to a character where
    every model's tokenizer starts a token, so models with different tokenizers score the same
    stretch of text. `thesis_targets` and `gen_tokens` size the passes of the API schedule."""

    lengths: tuple[int, ...]
    n_compare: int
    seed: int
    repeats: int
    modes: tuple[str, ...]
    thesis_targets: int
    gen_tokens: int = 1

    def __call__(self, infos: list[ModelInfo], tokenized: list[list[TokenizedText]]) -> tuple[Plan, dict[str, Any]]:
        # before the texts' lengths: the longest whole window (exact: L + its target; approx: L + n_c)
        longest = max(self.lengths) + (self.n_compare if "approx" in self.modes else 1) + (min(self.gen_tokens, self.thesis_targets) - 1)
        check_context(infos, longest, "lengths", f"context length {max(self.lengths)} of {{name}}")
        starts: dict[str, dict[str, int]] = {}
        plan: Plan = [[[] for _ in tokenized[0]] for _ in tokenized]
        for ti, text in enumerate(tt.text for tt in tokenized[0]):
            start_chars = self.start_chars(text, [per_model[ti] for per_model in tokenized])
            starts[text.text_id] = {f"L{length}-r{repeat}": c for (length, repeat), c in sorted(start_chars.items())}
            for mi, per_model in enumerate(tokenized):
                for mode in self.modes:
                    plan[mi][ti].extend(windows.sweep(per_model[ti].char_starts, self.lengths, self.n_compare, start_chars, mode, self.thesis_targets))
        return plan, {"start_chars": starts}

    def start_chars(self, text: Text, per_model: list[TokenizedText]) -> dict[tuple[int, int], int]:
        """(length, repeat) -> the start character shared by every model for this text."""
        boundaries = [windows.token_start_chars(tt.char_starts, tt.char_ends) for tt in per_model]
        out = {}
        for length in self.lengths:
            max_char = min(windows.max_sweep_start_char(tt.char_starts, length, self.n_compare) for tt in per_model)
            for repeat in range(self.repeats):
                drawn = windows.sweep_start_char(windows.sweep_fraction(self.seed, text.sha256, length, repeat), max_char)
                out[(length, repeat)] = windows.aligned_start_char(drawn, boundaries, max_char)
        return out


@dataclass(frozen=True)
class ScorePlanner:
    """A whole text (or its first `max_tokens` tokens) in chunked, sliding or fixed windows."""

    method: str
    window: int
    stride: int | None = None
    head: str = "full"
    max_tokens: int | None = None

    def __call__(self, infos: list[ModelInfo], tokenized: list[list[TokenizedText]]) -> tuple[Plan, dict[str, Any]]:
        # fixed: W tokens of context and the target; chunked and sliding: windows of W
        check_context(infos, self.window + (1 if self.method == "fixed" else 0), "window", f"{{name}} {self.window}")
        n_tokens = len(tokenized[0][0])
        if self.max_tokens is not None:
            n_tokens = min(n_tokens, self.max_tokens)
        if self.method == "chunked":
            passes = windows.chunked(n_tokens, self.window)
        elif self.method == "sliding":
            passes = windows.sliding(n_tokens, self.window, self.stride)
        else:
            passes = windows.fixed(n_tokens, self.window, self.head)
        return [[passes]], {"n_tokens_scored_from": n_tokens}


@dataclass(frozen=True)
class ContextGainPlanner:
    """Every target twice: in chunks of `window` tokens (long context), then with only the last
    `short`..`short + stride - 1` tokens of that same context (short)."""

    window: int
    short: int
    stride: int
    max_tokens: int | None = None

    def __call__(self, infos: list[ModelInfo], tokenized: list[list[TokenizedText]]) -> tuple[Plan, dict[str, Any]]:
        check_context(infos, self.window, "window", f"{{name}} {self.window}")
        plan: Plan = []
        for per_model in tokenized:
            per_text = []
            for tt in per_model:
                n_tokens = len(tt) if self.max_tokens is None else min(len(tt), self.max_tokens)
                long_passes = windows.chunked(n_tokens, self.window)
                per_text.append(long_passes + windows.truncated(long_passes, self.short, self.stride))
            plan.append(per_text)
        return plan, {"long": f"chunked, window {self.window}", "short": f"last {self.short}..{self.short + self.stride - 1} tokens of the same context"}


@dataclass(frozen=True)
class EffectiveLengthPlanner:
    """The paired design of `effective-length`: per text, `spans` seeded spans of `targets`
    consecutive target tokens, each far enough into the text that the longest length fits;
    every length L scores the *same* targets in one pass of L + targets tokens (target j sees
    L + j tokens). Spans start at a character where every model's tokenizer starts a token
    (as the sweep's starts), one span per equal stratum of the text, so they never overlap.
    A truncated model (`?max_context=N`, `caps`: each model's N from its spec, in the order of
    the models; empty: none is truncated) scores each target with its last N tokens once
    (`windows.cap_context(unique=True)`), whatever the length."""

    lengths: tuple[int, ...]
    spans: int
    targets: int
    seed: int
    caps: tuple[int | None, ...] = ()

    def __call__(self, infos: list[ModelInfo], tokenized: list[list[TokenizedText]]) -> tuple[Plan, dict[str, Any]]:
        longest = max(self.lengths)
        check_context(infos, longest + self.targets, "targets", f"context length {longest} with {{name}} {self.targets}")
        plan: Plan = [[[] for _ in tokenized[0]] for _ in tokenized]
        starts: dict[str, list[int]] = {}
        for ti, text in enumerate(tt.text for tt in tokenized[0]):
            per_model = [m[ti] for m in tokenized]
            chars = self.span_chars(text, per_model)
            starts[text.text_id] = chars
            for mi, tt in enumerate(per_model):
                passes = []
                for k, char in enumerate(chars):
                    first = int(np.searchsorted(tt.char_starts, char, side="left"))
                    passes.extend(Pass(f"E{k}-L{length}", "effective-length", "approx", length, k, first - length, first, first + self.targets)
                                  for length in self.lengths)
                plan[mi][ti] = windows.cap_context(passes, self.caps[mi] if self.caps else None, unique=True)
        return plan, {"span_start_chars": starts, "targets_per_span": self.targets}

    def span_chars(self, text: Text, per_model: list[TokenizedText]) -> list[int]:
        """The first character of each span, shared by every model: span k is drawn uniformly
        in the k-th of `spans` equal strata of the tokens that have the longest length before
        them, leaving room for its targets inside the stratum, then moved to the next
        character where every tokenizer starts a token."""
        longest = max(self.lengths)
        need = longest + self.spans * self.targets
        for tt in per_model:
            if len(tt) < need:
                raise UserError(f"text {text.text_id} has {len(tt)} tokens; {self.spans} spans of {self.targets} targets after "
                                f"{longest} tokens of context need at least {need}")
        boundaries = [windows.token_start_chars(tt.char_starts, tt.char_ends) for tt in per_model]
        reference = per_model[0]
        width = (len(reference) - longest) // self.spans
        chars = []
        for k in range(self.spans):
            offset = int(windows.sweep_fraction(self.seed, text.sha256, longest, k) * (width - self.targets + 1))
            token = longest + k * width + offset
            max_char = min(int(tt.char_starts[len(tt) - self.targets]) for tt in per_model)
            chars.append(windows.aligned_start_char(int(reference.char_starts[token]), boundaries, max_char))
        for tt in per_model:
            firsts = np.searchsorted(tt.char_starts, chars, side="left")
            if firsts[0] < longest or np.any(np.diff(firsts) < self.targets):
                raise FieldError("starts", f"text {text.text_id}: the tokenizers share too few token boundaries to place {self.spans} spans of "
                                 f"{self.targets} targets apart; use fewer {{name}} or {{targets}}")
        return chars
