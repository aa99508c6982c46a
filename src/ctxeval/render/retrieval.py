"""results.md of a retrieval run: its cells as one table."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd

from ctxeval.render import figures
from ctxeval.render.renderer import Renderer
from ctxeval.render.views import retrieval_view
from ctxeval.results.retrieval import HEATMAP_FILE, RetrievalResult


def results_markdown(variant: str, cells: pd.DataFrame) -> str:
    """results.md: the cells as one table."""
    return f"# Line retrieval ({variant})\n\n" + cells.to_markdown(index=False, floatfmt=".3f") + "\n"


def texts(r: RetrievalResult) -> RetrievalResult:
    """results.md, from the cells."""
    return replace(r, markdown=results_markdown(r.variant, r.cells))


def draw(r: RetrievalResult, out: Path) -> None:
    figures.plot_heatmaps(r.cells, out / HEATMAP_FILE)


RENDERER = Renderer(texts, retrieval_view, draw)
