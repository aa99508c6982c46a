"""The HTML page of an agreement report: the headline (the cheap measures ranked by ρ, what was
left out), the correlation table, the scatter of every pair (the PNG beside the page), the
models' measures and the runs' costs, in one offline file."""

from __future__ import annotations

import pandas as pd
from markupsafe import Markup

from ctxeval.render.agreement import correlation_rows, costs, headline, wide_measures
from ctxeval.render.page import environment, static


def render_agreement(measures: pd.DataFrame, correlations: pd.DataFrame, scatter_file: str, replicates: int) -> str:
    """The page; the scatter is the PNG beside it (`scatter_file`)."""
    def table(df: pd.DataFrame) -> Markup:
        return Markup(df.to_html(index=False, float_format=lambda v: f"{v:.4g}", border=0))

    return environment().get_template("agreement.html.j2").render(
        css=Markup(static("report.css")), headline=headline(measures, correlations, replicates), correlations=table(correlation_rows(correlations)), measures=table(wide_measures(measures)),
        costs=table(costs(measures)), scatter=scatter_file)
