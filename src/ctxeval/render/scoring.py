"""The `scoring` kind (sweep, score, summary): its tables, its view and its figure."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ctxeval.render import figures, numerics, tables
from ctxeval.render.renderer import Renderer
from ctxeval.render.views import lm_view
from ctxeval.results.scoring import PLOT_FILE, RunResult


def texts(r: RunResult) -> RunResult:
    """tables.md: the metric tables, then the run's numeric path."""
    return replace(r, tables=tables.markdown_tables(r.summary, r.metrics, r.approx_vs_exact) + "\n" + numerics.run_markdown(r.manifest))


def draw(r: RunResult, out: Path) -> None:
    figures.plot_scores(r.summary, r.metrics, out / PLOT_FILE)


RENDERER = Renderer(texts, lm_view, draw)
