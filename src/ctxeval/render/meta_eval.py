"""Markdown rendering of a meta-evaluation in the shape of the PPLqa paper's Table 3."""

from __future__ import annotations

from dataclasses import replace

from ctxeval.render.intervals import header, numbers
from ctxeval.render.renderer import Renderer
from ctxeval.render.views import answers_view
from ctxeval.results.meta_eval import MetaEvalResult
from ctxeval.stats.interval import Interval


ROWS = (("Precision", "precision"), ("Recall", "recall"), ("F1", "f1"))


def tie_policy_line(dataset: dict) -> str:
    """How human ties entered the metrics, in words (a result's `dataset` section)."""
    policy, ties = dataset.get("tie_policy", "none"), dataset.get("labels", {}).get("0", 0)
    if policy == "keep":
        return (f"Human ties kept as a third class ({ties} items): a method picks a tie only by giving both answers equal scores, so a human tie "
                "counts as wrong in accuracy (unless the scores are equal) and in the precision of the label picked, not in either recall, "
                "and the MCC is the 3-class one "
                "(as in the PPLqa paper's Table 3).")
    if policy == "drop":
        return f"Human ties dropped ({dataset.get('ties_dropped', 0)} items): binary labels."
    return "No human ties in the data."


def _cell(entry: dict, key: str) -> str:
    """A method's metric with its interval where it has one (none below two items)."""
    row = entry["intervals"].get(key)
    return f"{entry['metrics'][key]:.3f}" if row is None else numbers(Interval.from_row(row), 3)


def _kinds(result: dict) -> str:
    """The level and method of every interval of the table, from its rows."""
    found = [(row["confidence"], row["method"]) for entry in result["methods"].values() for row in entry["intervals"].values()]
    return f"Values with their intervals ({header(dict.fromkeys(found))})." if found else "Values without intervals (fewer than two items)."


def markdown_table(result: dict) -> str:
    """Rows: precision/recall/F1 per label (label 1, label 2), accuracy, MCC; columns: methods."""
    methods = list(result["methods"])
    ds = result["dataset"]
    labels = [1, 2]
    lines = [
        f"# Meta-evaluation on {ds['name']} ({ds['items']} items, evaluator {result['evaluator']['name']})",
        "",
        f"{_kinds(result)} Two values per row: label 1 (first answer better), label 2 (second).",
        "",
        "| metric | " + " | ".join(methods) + " |",
        "|---|" + "---|" * len(methods),
    ]
    for title, key in ROWS:
        for label in labels:
            cells = [_cell(result["methods"][m], f"{key}_{label}") for m in methods]
            lines.append(f"| {title} (label {label}) | " + " | ".join(cells) + " |")
    for title, key in (("Accuracy", "accuracy"), ("MCC", "mcc")):
        cells = [_cell(result["methods"][m], key) for m in methods]
        lines.append(f"| {title} | " + " | ".join(cells) + " |")
    lines.append("| tie picks | " + " | ".join(str(result["methods"][m]["tie_picks"]) for m in methods) + " |")
    cfg = result["config"]
    lines += ["", f"PPLqa scope: `{cfg['qa_scope']}`; aspect (G-Eval, +prompt variants): `{cfg['aspect']}`; "
              f"human labels: {ds['labels']}; scoring took {result['timing']['scoring_seconds']} s "
              f"({result['timing']['passes_run_this_session']} new model passes).", "", tie_policy_line(ds)]
    return "\n".join(lines) + "\n"


def texts(r: MetaEvalResult) -> MetaEvalResult:
    """The Markdown table, from the report."""
    return replace(r, markdown=markdown_table(r.report))


RENDERER = Renderer(texts, answers_view)
