"""Markdown of `ctxeval pplqa`: mean rank per model and method, then the Kendall tau table."""

from __future__ import annotations

from dataclasses import replace

from ctxeval.render.renderer import Renderer
from ctxeval.render.views import answers_view
from ctxeval.results.pplqa import PplqaResult


TAU_NOTES = {
    "a": "Kendall tau-a per question (the paper's eq. 4: a tied pair counts 0, a constant ranking gives 0), averaged over questions",
    "b": "Kendall tau-b per question, averaged over questions; a question with a constant ranking is skipped",
}


def markdown(result: dict) -> str:
    """Mean rank per model and method, then the tau table (`result`: pplqa.json's content)."""
    methods = list(result["mean_rank_per_model"])
    models = list(next(iter(result["mean_rank_per_model"].values())))
    lines = [f"# Answer rankings ({result['questions']} questions, {result['answers']} answers, evaluator {result['evaluator']['name']})", "",
             "Mean rank per model (1 = best):", "", "| model | " + " | ".join(methods) + " |", "|---|" + "---|" * len(methods)]
    for model in models:
        lines.append(f"| {model} | " + " | ".join(f"{result['mean_rank_per_model'][m][model]:.2f}" for m in methods) + " |")
    lines += ["", f"{TAU_NOTES[result['tau_variant']]} (p: t-test of the per-question taus against 0):", "",
              "| comparison | mean tau | questions used | constant ranking | skipped | p | questions with p < 0.05 | random baseline (tau >= 0) |",
              "|---|---|---|---|---|---|---|---|"]
    for name, a in result["agreement"].items():
        lines.append(f"| {name} | {a['mean_tau']:.3f} | {a['items_used']} | {a['items_constant']} | {a['items_skipped']} | {a['p_mean_tau_ttest']:.3g} | "
                     f"{a['items_p_below_0.05']} | {a['random_baseline_nonnegative']:.3f} |")
    if result.get("reference"):
        lines += ["", f"Reference: {result['reference'].get('description', '')}"]
    return "\n".join(lines) + "\n"


def texts(r: PplqaResult) -> PplqaResult:
    """The Markdown, from the report."""
    return replace(r, markdown=markdown(r.report))


RENDERER = Renderer(texts, answers_view)
