"""Each result kind's renderer, from the Result alone: its texts (the Markdown, and a page, a
Result holds are built here, not by the task that computed it) and its view on the `ctxeval
report` page (render/views.py). `RENDERING` (texts, and render/figures.py's `draw`) is what the
command layer hands the engine, so the one write path renders every kind while neither tasks
nor the engine import render/."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ctxeval.render import (agreement, agreement_page, compare, context_gain, correlations, diff, diff_page, effective_length, figures, judge, leval, meta_eval,
                            numerics, pplqa, probe_report, retrieval, ruler, tables, trends, views)
from ctxeval.results.agreement import SCATTER_PNG
from ctxeval.results.base import Result


def _diff(r: Any) -> Any:
    """diff.md from the report; report.html from the records, token texts and key-token mask
    the result was built with (a diff read back from its folder holds its page already)."""
    page = r.html if r.records is None else diff_page.render_diff(r.report, r.records, r.pieces or {}, r.key_mask)
    return replace(r, markdown=diff.render_markdown(r.report), html=page)


# kind -> the result with its texts rendered; a kind that holds no text is absent
TEXTS: dict[str, Callable[[Any], Any]] = {
    "scoring": lambda r: replace(r, tables=tables.markdown_tables(r.summary, r.metrics, r.approx_vs_exact) + "\n" + numerics.run_markdown(r.manifest)),
    "comparison": lambda r: replace(r, markdown=compare.render_markdown(r.report)),
    "trends": lambda r: replace(r, markdown=trends.render_trends(r.trends, r.variance, r.outlier_rule)),
    "context-gain": lambda r: replace(r, markdown=context_gain.render_markdown(r.summary, r.by_distance)),
    "effective-length": lambda r: replace(r, markdown=effective_length.render_markdown(r.summary)),
    "retrieval": lambda r: replace(r, markdown=retrieval.results_markdown(r.variant, r.cells)),
    "ruler": lambda r: replace(r, markdown=ruler.results_markdown(r.table, r.effective_lengths, r.agreement, r.threshold)),
    "agreement": lambda r: replace(r, html=agreement_page.render_agreement(r.measures, r.correlations, SCATTER_PNG, r.replicates),
                                   markdown=agreement.agreement_markdown(r.measures, r.correlations, len(r.runs), r.replicates)),
    "probe-report": lambda r: replace(r, markdown=probe_report.render(r.at_a_glance, r.sections, r.runs)),
    "diff": _diff,
    "judge": lambda r: replace(r, markdown=judge.markdown(r.report)),
    "pplqa": lambda r: replace(r, markdown=pplqa.markdown(r.report)),
    "meta-eval": lambda r: replace(r, markdown=meta_eval.markdown_table(r.report)),
    "leval": lambda r: replace(r, markdown=leval.markdown(r.scores, r.variant, r.tokenize, r.notes)),
    "correlations": lambda r: replace(r, markdown=correlations.correlation_markdown(r.correlations, sorted(r.human))),
}

# kind -> its view on the `ctxeval report` page (a kind without one shows its manifest there)
VIEWS: dict[str, Callable[[Any, str, int], tuple[views.RunView, list[views.Arm]]]] = {
    "scoring": views.lm_view,
    "comparison": views.compare_view,
    "context-gain": views.gain_view,
    "effective-length": views.effective_view,
    "retrieval": views.retrieval_view,
    "ruler": views.ruler_view,
    "agreement": views.agreement_view,
    "diff": views.diff_view,
    "pplqa": views.answers_view,
    "meta-eval": views.answers_view,
}


class KindRendering:
    """render/'s `Rendering` (pipeline/engine.py): every kind's texts and figure."""

    def texts(self, result: Result) -> Result:
        """`result` with the texts it holds rendered from its data (a kind without text as is)."""
        render = TEXTS.get(result.KIND)
        return render(result) if render is not None else result

    def draw(self, result: Result, out: Path) -> None:
        """Draw `result`'s figure into `out` (render/figures.py)."""
        figures.draw(result, out)


RENDERING = KindRendering()
