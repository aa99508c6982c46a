"""corr.md: each metric's Kendall τ-b with the human ranking."""

from __future__ import annotations

import math
from dataclasses import replace

from ctxeval.render.renderer import Renderer
from ctxeval.results.correlations import Correlation, Correlations


def correlation_markdown(results: list[Correlation], human_models: list[str]) -> str:
    """One row per metric: τ-b, its p-value, the models it covers of the human-rated ones, the tasks averaged."""
    lines = ["| metric | Kendall τ-b | p | models | tasks |", "|---|---:|---:|---:|---:|"]
    for r in results:
        tau = "n/a (constant)" if math.isnan(r.tau) else f"{r.tau:.3f}"
        p = "" if math.isnan(r.p_value) else f"{r.p_value:.3g}"
        tasks = "" if r.tasks is None else str(r.tasks)
        lines.append(f"| {r.metric} | {tau} | {p} | {len(r.models)} of {len(human_models)} | {tasks} |")
    return "\n".join(lines) + "\n"


def texts(r: Correlations) -> Correlations:
    """corr.md, from the correlations."""
    return replace(r, markdown=correlation_markdown(r.correlations, sorted(r.human)))


RENDERER = Renderer(texts)
