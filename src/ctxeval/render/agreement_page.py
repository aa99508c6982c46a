"""The HTML page of an agreement report: the headline (the cheap measures ranked by ρ, what was
left out), the correlation table, the scatter of every pair (the PNG beside the page), the
models' measures and the runs' costs, in one offline file."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd
from markupsafe import Markup

from ctxeval.render import figures, intervals
from ctxeval.render.agreement import agreement_markdown, correlation_rows, costs, headline, wide_measures
from ctxeval.render.page import environment, static
from ctxeval.render.renderer import Renderer
from ctxeval.render.views import Arm, RunView, header
from ctxeval.results.agreement import SCATTER_PNG, AgreementResult
from ctxeval.results.manifest import read_manifest


def render_agreement(measures: pd.DataFrame, correlations: pd.DataFrame, scatter_file: str, replicates: int) -> str:
    """The page; the scatter is the PNG beside it (`scatter_file`)."""
    def table(df: pd.DataFrame) -> Markup:
        return Markup(df.to_html(index=False, float_format=lambda v: f"{v:.4g}", border=0))

    return environment().get_template("agreement.html.j2").render(
        css=Markup(static("report.css")), headline=headline(measures, correlations, replicates), correlations=table(correlation_rows(correlations)), measures=table(wide_measures(measures)),
        costs=table(costs(measures)), scatter=scatter_file, level=intervals.header(dict.fromkeys(intervals.kinds(correlations, "spearman") + intervals.kinds(correlations, "kendall"))))


def texts(r: AgreementResult) -> AgreementResult:
    """agreement.html and agreement.md, from the measures and their correlations."""
    return replace(r, html=render_agreement(r.measures, r.correlations, SCATTER_PNG, r.replicates),
                   markdown=agreement_markdown(r.measures, r.correlations, len(r.runs), r.replicates))


def view(result: AgreementResult, label: str, first_arm: int) -> tuple[RunView, list[Arm]]:
    """An agreement report: the cheap measures ranked by ρ, and what it read."""
    manifest = read_manifest(result.out).to_json()
    return RunView(label, result.out, "agreement", manifest, header(manifest, "agreement"),
                   answer=headline(result.measures, result.correlations, result.replicates)), []


def draw(r: AgreementResult, out: Path) -> None:
    figures.scatter_grid(r.measures, r.correlations, out / SCATTER_PNG)


RENDERER = Renderer(texts, view, draw)
