"""A token metric declared once in the registry shows up in every view that lists metrics."""

import math

import numpy as np
import pandas as pd
import pytest

from ctxeval.metrics.config import MetricConfig
from ctxeval.metrics import registry
from ctxeval.render.figures import plot_scores
from ctxeval.report.summary import summarize
from ctxeval.render.tables import markdown_tables, score_columns
from tests.test_summary import records

TOY = registry.TokenMetric("mean_rank", "MEAN RANK", lambda t: float(np.mean(t.ranks)), False, per_token=lambda t: t.ranks.astype(float),
                           panel=9, title="mean rank")


@pytest.fixture
def with_toy(monkeypatch):
    """The declared metrics plus TOY, for one test (monkeypatch restores the list)."""
    monkeypatch.setattr(registry, "DECLARED", [*registry.DECLARED, TOY])


def _records() -> pd.DataFrame:
    return records(
        [
            {"nominal_len": 8, "window_id": "w0", "target_pos": 10, "logprob": math.log(0.5), "rank": 1},
            {"nominal_len": 8, "window_id": "w1", "target_pos": 20, "logprob": math.log(0.25), "rank": 4, "repeat": 1},
        ]
    )


def test_a_declared_metric_reaches_summary_tables_trends_and_plot(with_toy, tmp_path):
    metrics = MetricConfig(cutoff=3, alphas=(0.1,), approx_k=3)
    summary = summarize(_records(), metrics, {"m": 100}, (1.0,))
    row = summary.iloc[0]
    assert row["mean_rank"] == pytest.approx(2.5)
    assert row["mean_rank_sd"] == pytest.approx(np.std([1, 4], ddof=1))
    # plotted: its interval beside it, t over the two windows' means 1 and 4 (se 1.5, t quantile 12.706)
    assert (row["mean_rank.se"], row["mean_rank.n"], row["mean_rank.confidence"], row["mean_rank.method"]) == (pytest.approx(1.5), 2, 0.95, "t over 2 windows")
    assert (row["mean_rank.low"], row["mean_rank.high"]) == (pytest.approx(2.5 - 12.7062 * 1.5, abs=1e-3), pytest.approx(2.5 + 12.7062 * 1.5, abs=1e-3))
    assert score_columns(metrics)[-1] == ("mean_rank", "MEAN RANK")
    assert ("mean_rank", "MEAN RANK") not in score_columns(metrics, thesis=True)
    assert "| MEAN RANK " in markdown_tables(summary, metrics, pd.DataFrame())
    assert registry.trend_keys(MetricConfig(alphas=(0.1,)))[-1] == "mean_rank"
    assert registry.panel_metrics(metrics)[-1] is TOY
    plot_scores(summary, metrics, tmp_path / "scores.png")  # a fifth panel: a third row
    assert (tmp_path / "scores.png").stat().st_size > 0


def test_without_the_declaration_no_view_names_it():
    metrics = MetricConfig(cutoff=3, alphas=(0.1,), approx_k=3)
    summary = summarize(_records(), metrics, {"m": 100}, (1.0,))
    assert "mean_rank" not in summary.columns
    assert "MEAN RANK" not in markdown_tables(summary, metrics, pd.DataFrame())
    assert "mean_rank" not in registry.trend_keys(MetricConfig(alphas=(0.1,)))


def test_declared_orders_of_each_view():
    metrics = MetricConfig(alphas=(0.1, 0.3))
    keys = [m.key for m in registry.token_metrics(metrics)]
    assert keys == ["nll", "ppl", "bpb", "lin", "rp", "a0.1", "a0.3", "avg", "approx_ppl", "top1"]
    assert registry.rank_keys(metrics) == ["lin", "rp", "a0.1", "a0.3", "avg"]
    assert registry.trend_keys(metrics) == ["avg", "lin", "rp", "a0.1", "a0.3", "ppl", "approx_ppl", "nll", "bpb", "top1"]
    assert [m.key for m in registry.panel_metrics(metrics)] == ["avg", "rp", "ppl", "approx_ppl"]
    assert [k for k, _ in score_columns(metrics)] == ["ppl", "approx_ppl", "lin", "rp", "a0.1", "a0.3", "avg", "top1", "bpb"]
    assert [k for k, _ in score_columns(metrics, thesis=True)] == ["approx_ppl", "lin", "rp", "a0.1", "a0.3", "avg"]
