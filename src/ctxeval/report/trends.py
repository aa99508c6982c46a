"""Slopes of every metric against context length, and the spread of repeated starts."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from ctxeval.results.rows import wide_ints
from ctxeval.results.trends import ALL_TEXTS, SERIES, Trends
from ctxeval.stats.trends import loo_outliers, slope


def trend_table(per_window: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """Per series x metric: slope against length and against log2 length, one point per window.

    Where a model x setting covers several texts, one more fit pools the windows of all of them
    (text_id `(all texts)`): the thesis's "both texts combined" slopes in section 5 are this
    least-squares fit over the points of both texts, not a fit to the per-length means."""
    rows = [_fits(dict(zip(SERIES, key)), series, names) for key, series in per_window.groupby(SERIES, sort=False)]
    combined = [s for s in SERIES if s != "text_id"]
    for key, series in per_window.groupby(combined, sort=False):
        if series["text_id"].nunique() > 1:
            rows.append(_fits(dict(zip(combined, key)) | {"text_id": ALL_TEXTS}, series, names))
    return pd.DataFrame([row for block in rows for row in block])


def _fits(labels: dict, series: pd.DataFrame, names: list[str]) -> list[dict]:
    x = series["nominal_len"].to_numpy(dtype=float)
    rows = []
    for name in names:
        for scale, xs in (("length", x), ("log2_length", np.log2(x))):
            fit = slope(xs, series[name].to_numpy(dtype=float))
            rows.append(labels | {"metric": name, "x": scale} | fit.columns("slope") | {"intercept": fit.intercept, "r": fit.r, "p_value": fit.p_value})
    return rows


def variance_table(per_window: pd.DataFrame, names: list[str], k: float) -> pd.DataFrame:
    """Per series x length x metric: mean and SD across windows (repeats) and the flagged ones."""
    rows = []
    for key, group in per_window.groupby(SERIES + ["nominal_len"], sort=True):
        for name in names:
            values = group[name].to_numpy(dtype=float)
            flags = loo_outliers(values, k)
            rows.append(
                dict(zip(SERIES + ["nominal_len"], key))
                | {
                    "metric": name,
                    "windows": len(values),
                    "mean": float(values.mean()),
                    "sd": float(values.std(ddof=1)) if len(values) > 1 else math.nan,
                    "outliers": [w for w, f in zip(group["window_id"], flags) if f],
                }
            )
    return pd.DataFrame(rows)


def outlier_rule(k: float) -> str:
    """The outlier rule in words, as trends.json and trends.md state it."""
    return f"a window is flagged when it lies more than {k:g} SD from the mean of the other windows at its length (leave-one-out; needs >= 3 windows)"


def trends_result(trends: pd.DataFrame, variance: pd.DataFrame, outlier_sd: float, out: Path) -> Trends:
    """The `trends` result of the tables (render/ adds its Markdown)."""
    rule = outlier_rule(outlier_sd)
    trends, variance = wide_ints(trends), wide_ints(variance)
    return Trends(trends, variance, rule, Path(out))
