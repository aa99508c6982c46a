"""Every token metric of a summary, declared once: its key, label, how it is computed from a
group's targets, which direction is better, and where it is shown.

Summaries, tables, plots, trends and the explorer list their metrics from here, so a new token
metric is one more entry of `DECLARED` (a `TokenMetric`, or a function of the `MetricConfig`
giving several, as the non-linear scores give one per alpha).

Views keep their own order: each sorts the metrics it shows by their position for that view
(`table`, `trend`, `panel`), ties in declaration order; declaration order is the summary's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol

import numpy as np

from ctxeval.metrics import perplexity as ppl
from ctxeval.metrics.rank import Cutoff, alpha_key, linear_scores, nonlinear_scores, reciprocal_scores


class MetricConfig(Protocol):
    """The settings the metrics read (`ctxeval.config.MetricConfig`; named here as a protocol so
    that metrics/ imports nothing above it)."""

    @property
    def alphas(self) -> tuple[float, ...]: ...
    @property
    def approx_k(self) -> int: ...
    @property
    def penalty(self) -> float: ...

LAST = 1_000  # the position of a metric that names none: after the others


@dataclass(frozen=True)
class Tokens:
    """The targets of one group (or window), as every metric reads them."""

    logprobs: np.ndarray
    ranks: np.ndarray
    n_bytes: np.ndarray
    topk: np.ndarray  # [n, >= approx_k] top log-probabilities, sorted descending
    cutoff: Cutoff  # l of the rank scores, for all targets or one per target
    config: MetricConfig
    rank_metrics: tuple[TokenMetric, ...] = field(default=())  # the scores whose mean is AVG

    @cached_property
    def rank_values(self) -> dict[str, np.ndarray]:
        """Per target, every score that enters AVG."""
        return {m.key: m.per_token(self) for m in self.rank_metrics if m.per_token is not None}


@dataclass(frozen=True)
class TokenMetric:
    """One summary column computed from a group's targets."""

    key: str  # the summary column (and trends' `metric`)
    label: str | Callable[[MetricConfig], str]  # its name in tables
    value: Callable[[Tokens], float]  # over all targets of a group
    higher_is_better: bool
    per_token: Callable[[Tokens], np.ndarray] | None = None  # values whose mean (exp of it with log_scale) is `value`
    log_scale: bool = False  # a perplexity: intervals are exp of the per-token mean's, plots use a log axis
    rank_score: bool = False  # one of the scores averaged into AVG and paired by `compare`
    thesis: bool = False  # a row of the thesis's Appendix A
    table: int | None = LAST  # position in the all-scores tables; None: not shown
    trend: int | None = LAST  # position in trends; None: not fitted
    panel: int | None = None  # position in the plot (with its interval in the summary); None: not plotted
    title: str = ""  # the plot panel's title

    def label_for(self, config: MetricConfig) -> str:
        """The table label under these settings."""
        return self.label(config) if callable(self.label) else self.label


def _mean(values: np.ndarray) -> float:
    return float(values.mean()) if values.size else math.nan


def _rank(key: str, label: str, scores: Callable[[Tokens], np.ndarray], **where) -> TokenMetric:
    """A rank-based score in [0, 1] (thesis section 3.1.1), one of those averaged into AVG."""
    return TokenMetric(key, label, lambda t: _mean(scores(t)), True, per_token=scores, rank_score=True, thesis=True, table=2, trend=1, **where)


def _nonlinear(config: MetricConfig) -> list[TokenMetric]:
    """e^(-alpha (r-1)) per alpha of the settings (thesis eq. 8)."""
    return [_rank(alpha_key(a), f"A{a:g}", lambda t, a=a: nonlinear_scores(t.ranks, t.cutoff, a)) for a in config.alphas]


def _average(t: Tokens) -> float:
    """The thesis's AVG: the mean of the rank scores' means."""
    if t.ranks.size == 0:
        return math.nan
    return float(np.mean([float(v.mean()) for v in t.rank_values.values()]))


def _approx_logprobs(t: Tokens) -> np.ndarray:
    return ppl.approx_logprobs(t.logprobs, t.ranks, t.topk, t.config.approx_k, t.config.penalty)


def approx_ppl_label(config: MetricConfig) -> str:
    """What the thesis calls "PPL": e.g. `approx PPL (thesis, top-20, penalty 3)`."""
    return f"approx PPL (thesis, top-{config.approx_k}, penalty {config.penalty:g})"


PPL_LABEL = "PPL (exact)"

DECLARED: list[TokenMetric | Callable[[MetricConfig], list[TokenMetric]]] = [
    TokenMetric("nll", "NLL", lambda t: ppl.nll(t.logprobs), False, table=None, trend=4),
    TokenMetric("ppl", PPL_LABEL, lambda t: ppl.perplexity(t.logprobs), False, per_token=lambda t: -t.logprobs, log_scale=True,
                table=0, trend=2, panel=2, title="PPL (exact)"),
    TokenMetric("bpb", "BPB", lambda t: ppl.bits_per_byte(t.logprobs, t.n_bytes), False, table=4, trend=5),
    _rank("lin", "LIN", lambda t: linear_scores(t.ranks, t.cutoff)),
    _rank("rp", "RP", lambda t: reciprocal_scores(t.ranks, t.cutoff), panel=1, title="reciprocal rank score"),
    _nonlinear,
    TokenMetric("avg", "AVG", _average, True, per_token=lambda t: np.mean(list(t.rank_values.values()), axis=0), thesis=True,
                table=2, trend=0, panel=0, title="average rank score (AVG)"),
    TokenMetric("approx_ppl", approx_ppl_label, lambda t: ppl.perplexity(_approx_logprobs(t)), False, per_token=lambda t: -_approx_logprobs(t),
                log_scale=True, thesis=True, table=1, trend=3, panel=3, title="approx PPL (the thesis's PPL: top-k + penalty)"),
    TokenMetric("top1", "TOP1", lambda t: ppl.top1_accuracy(t.ranks), True, table=3, trend=6),
]


def token_metrics(config: MetricConfig) -> list[TokenMetric]:
    """Every declared metric under these settings, in summary order."""
    out: list[TokenMetric] = []
    for entry in DECLARED:
        out.extend(entry(config) if callable(entry) else [entry])
    return out


def _ordered(config: MetricConfig, position: Callable[[TokenMetric], int | None]) -> list[TokenMetric]:
    shown = [m for m in token_metrics(config) if position(m) is not None]
    return sorted(shown, key=position)  # stable: ties keep declaration order


def rank_keys(config: MetricConfig) -> list[str]:
    """The rank scores and AVG (`lin`, `rp`, `a<alpha>`..., `avg`): what `compare` pairs."""
    return [m.key for m in token_metrics(config) if m.rank_score] + ["avg"]


def table_metrics(config: MetricConfig, thesis: bool = False) -> list[TokenMetric]:
    """The rows of the all-scores tables in order; `thesis`: the thesis's Appendix A rows only."""
    return [m for m in _ordered(config, lambda m: m.table) if m.thesis or not thesis]


def trend_keys(config: MetricConfig) -> list[str]:
    """The metrics fitted against context length, in order."""
    return [m.key for m in _ordered(config, lambda m: m.trend)]


def panel_metrics(config: MetricConfig) -> list[TokenMetric]:
    """The plotted metrics, in panel order; each gets its interval in the summary."""
    return [m for m in _ordered(config, lambda m: m.panel) if m.per_token is not None]


def tokens(logprobs: np.ndarray, ranks: np.ndarray, n_bytes: np.ndarray, topk: np.ndarray, cutoff: Cutoff, config: MetricConfig) -> Tokens:
    """The targets of one group, with the settings' rank scores ready for AVG."""
    return Tokens(logprobs, ranks, n_bytes, topk, cutoff, config, tuple(m for m in token_metrics(config) if m.rank_score))


def values(t: Tokens) -> dict[str, float]:
    """Every declared metric of one group, in summary order."""
    return {m.key: m.value(t) for m in token_metrics(t.config)}
