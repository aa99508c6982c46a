"""trends.md: the slopes of the headline metrics against context length, and the spread of
repeated starts."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from ctxeval.render import intervals
from ctxeval.render.renderer import Renderer
from ctxeval.results.trends import ALL_TEXTS, SERIES, Trends


def render_trends(trends: pd.DataFrame, variance: pd.DataFrame, rule: str) -> str:
    """trends.md: the slopes of the headline metrics, then the spread across repeats."""
    shown = trends[trends["metric"].isin(["avg", "ppl", "approx_ppl"])]
    level = intervals.table_header(shown, "slope")
    names = {"slope.se": "SE", "p_value": "p", "slope.low": "low", "slope.high": "high", "slope.n": "n"}
    table = shown[SERIES + ["metric", "x", "slope", *names]].rename(columns=names)
    md = ["# Trends over context length", "", f"`{ALL_TEXTS}`: one fit over the windows of every text (the thesis's combined slopes); "
          f"low/high: the slope's {level} interval.", "", table.to_markdown(index=False, floatfmt=".4g"), ""]
    spread = variance[variance["metric"].isin(["avg", "ppl"])].copy()
    spread["outliers"] = spread["outliers"].map(lambda w: ", ".join(w))
    md += ["# Spread across repeats", "", rule + ".", "", spread.to_markdown(index=False, floatfmt=".4g"), ""]
    return "\n".join(md)


def texts(r: Trends) -> Trends:
    """trends.md, from the fits and the spread."""
    return replace(r, markdown=render_trends(r.trends, r.variance, r.outlier_rule))


RENDERER = Renderer(texts)
