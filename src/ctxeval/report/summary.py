"""Per model x text x context length summaries, recomputed from the token records."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

import numpy as np
import pandas as pd

from ctxeval.metrics.config import MetricConfig
from ctxeval.metrics import perplexity as ppl
from ctxeval.metrics import registry
from ctxeval.metrics.rank import Cutoff, ranking_lengths, short_lists
from ctxeval.results.records import temperature_column
from ctxeval.stats.interval import Interval
from ctxeval.stats.trends import mean_interval

GROUP_KEYS = ["model", "text_id", "method", "context_mode", "nominal_len"]


def _returned(df: pd.DataFrame) -> np.ndarray | None:
    """Per target, the length of the top-k list an API returned its rank from (NaN: a rank over
    the full vocabulary); None for records written before the column existed."""
    return df["topk_returned"].to_numpy(dtype=float) if "topk_returned" in df.columns else None


def cutoffs(df: pd.DataFrame, metrics: MetricConfig, vocab_size: int) -> Cutoff:
    """l of the rank scores per target: the run's cutoff, or a shorter list's length (eq. 4)."""
    return ranking_lengths(metrics.cutoff or vocab_size, _returned(df))


def n_short_lists(df: pd.DataFrame, metrics: MetricConfig, vocab_size: int) -> int:
    """Targets whose rank scores used a list shorter than the cutoff (see metrics.rank.short_lists)."""
    return short_lists(metrics.cutoff or vocab_size, _returned(df))


def tokens(df: pd.DataFrame, metrics: MetricConfig, vocab_size: int) -> registry.Tokens:
    """The targets of `df` as the declared metrics read them."""
    topk = np.stack(df["topk_logprobs"].to_numpy()) if len(df) else np.empty((0, metrics.approx_k))
    return registry.tokens(df["logprob"].to_numpy(), df["rank"].to_numpy(), df["n_bytes"].to_numpy(), topk, cutoffs(df, metrics, vocab_size), metrics)


def group_metrics(df: pd.DataFrame, metrics: MetricConfig, vocab_size: int, temperatures: tuple[float, ...]) -> dict[str, float]:
    """All scalar metrics of one set of token records: the declared ones, then the perplexity
    at each other temperature of the run."""
    out = registry.values(tokens(df, metrics, vocab_size))
    for t in temperatures:
        if t != 1.0:
            out[f"ppl_t{t:g}"] = ppl.perplexity(df[temperature_column(t)].to_numpy())
    return out


def token_values(df: pd.DataFrame, metrics: MetricConfig, vocab_size: int) -> dict[str, np.ndarray]:
    """Per target, the value whose mean gives each plotted metric (`registry.panel_metrics`):
    its score, or its NLL for a perplexity (which is exp of the mean)."""
    targets = tokens(df, metrics, vocab_size)
    return {m.key: m.per_token(targets) for m in registry.panel_metrics(metrics)}


def on_scale(interval: Interval, estimate: float, log_scale: bool) -> Interval:
    """A metric's interval as its summary column reads: centred on `estimate` (the group's value
    the summary writes: the token-weighted mean of its per-target values, exp of it for a
    perplexity); a perplexity's bounds are exp of the mean NLL's and it has no standard error
    on its own scale (NaN)."""
    if not log_scale:
        return replace(interval, estimate=estimate)
    return replace(interval, estimate=estimate, low=math.exp(interval.low), high=math.exp(interval.high), se=math.nan)


def intervals(df: pd.DataFrame, metrics: MetricConfig, vocab_size: int, estimates: Mapping[str, float]) -> dict[str, Interval]:
    """The interval of each plotted metric for one group (`mean_interval`: a t interval over its
    windows, or a bootstrap over one window's targets), around the group's value in `estimates`."""
    windows = df["window_id"].to_numpy()
    log_scale = {m.key for m in registry.panel_metrics(metrics) if m.log_scale}
    return {name: on_scale(mean_interval(values, windows), estimates[name], name in log_scale)
            for name, values in token_values(df, metrics, vocab_size).items()}


def window_metrics(records: pd.DataFrame, metrics: MetricConfig, vocab_sizes: dict[str, int], temperatures: tuple[float, ...]) -> pd.DataFrame:
    """One row per window (the unit of spread and of pairing), in record (plan) order: its group
    keys, repeat, window id, scored character span and metrics."""
    rows = []
    for key, window in records.groupby(GROUP_KEYS + ["repeat", "window_id"], sort=False):
        row = dict(zip(GROUP_KEYS + ["repeat", "window_id"], key))
        row["n"] = len(window)
        row["span_start"] = int(window["char_start"].min())
        row["span_end"] = int(window["char_end"].max())
        row.update(group_metrics(window, metrics, vocab_sizes[key[0]], temperatures))
        rows.append(row)
    return pd.DataFrame(rows)


def summarize(
    records: pd.DataFrame, metrics: MetricConfig, vocab_sizes: dict[str, int], temperatures: tuple[float, ...]
) -> pd.DataFrame:
    """One row per group: token count, window count, how many targets' rank scores used a list
    shorter than the cutoff (`n_short_list`), each metric over all tokens of the group
    (token-weighted), a plotted metric's with its interval (`intervals`) as the row's columns
    beside it (`Interval.columns`: `ppl`, `ppl.low`, `ppl.high`, ..., `ppl.confidence`,
    `ppl.method`), and its SD over the group's windows (NaN with fewer than two windows)."""
    windows_of = dict(tuple(window_metrics(records, metrics, vocab_sizes, temperatures).groupby(GROUP_KEYS, sort=False)))
    rows = []
    for key, group in records.groupby(GROUP_KEYS, sort=False):
        row = dict(zip(GROUP_KEYS, key))
        row["n"] = len(group)
        windows = windows_of[key]
        row["n_windows"] = len(windows)
        row["n_short_list"] = n_short_lists(group, metrics, vocab_sizes[key[0]])
        overall = group_metrics(group, metrics, vocab_sizes[key[0]], temperatures)
        shown = intervals(group, metrics, vocab_sizes[key[0]], overall)
        for name, value in overall.items():
            row |= shown[name].columns(name) if name in shown else {name: value}
            row[f"{name}_sd"] = float(windows[name].std(ddof=1)) if len(windows) > 1 else math.nan
        row["approx_ppl_rel_err"] = overall["approx_ppl"] / overall["ppl"] - 1.0
        rows.append(row)
    summary = pd.DataFrame(rows)
    if not summary.empty:
        summary = summary.sort_values(GROUP_KEYS, kind="stable").reset_index(drop=True)
    return summary


def approx_vs_exact(records: pd.DataFrame) -> pd.DataFrame:
    """Mean |logprob(approx) - logprob(exact)| per model x text x length, on the same targets.

    The cost of `--context-mode approx`: its targets see L...L+n_c-1 tokens instead of L.
    """
    sweep = records[records["method"] == "sweep"]
    keys = ["model", "text_id", "nominal_len", "repeat", "target_pos"]
    exact = sweep[sweep["context_mode"] == "exact"][keys + ["logprob", "rank"]]
    approx = sweep[sweep["context_mode"] == "approx"][keys + ["logprob", "rank"]]
    if exact.empty or approx.empty:
        return pd.DataFrame()
    paired = exact.merge(approx, on=keys, suffixes=("_exact", "_approx"))
    paired["abs_delta"] = (paired["logprob_approx"] - paired["logprob_exact"]).abs()
    paired["rank_changed"] = paired["rank_approx"] != paired["rank_exact"]
    return (
        paired.groupby(["model", "text_id", "nominal_len"], sort=True)
        .agg(n=("abs_delta", "size"), mean_abs_delta_logprob=("abs_delta", "mean"), max_abs_delta_logprob=("abs_delta", "max"), rank_changed=("rank_changed", "mean"))
        .reset_index()
    )
