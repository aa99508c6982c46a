"""The tables of an agreement result (agreement.md, and the rows its HTML page shows): the
correlations with their intervals, the models' measures, the runs' costs."""

from __future__ import annotations

import pandas as pd


def _interval(value: float | None, low: float | None, high: float | None) -> str:
    if value is None or value != value:
        return "undefined"
    return f"{value:+.2f}" + (f" [{low:+.2f}, {high:+.2f}]" if low is not None and low == low else "")


def correlation_rows(c: pd.DataFrame) -> pd.DataFrame:
    """The correlation table as it is shown: one row per pair, coefficients with intervals."""
    return pd.DataFrame({"task measure": c["task"], "cheap measure": c["cheap"], "models": c["models"],
                         "Spearman ρ [95 %]": [_interval(*v) for v in zip(c["spearman"], c["spearman_low"], c["spearman_high"])],
                         "Kendall τ-b [95 %]": [_interval(*v) for v in zip(c["kendall"], c["kendall_low"], c["kendall_high"])],
                         "note": c["note"].fillna("")})


def wide_measures(measures: pd.DataFrame) -> pd.DataFrame:
    """Models as rows (numbered as in the scatter), measures as columns."""
    wide = measures.pivot(index="model", columns="measure", values="value").reindex(list(dict.fromkeys(measures["model"])))
    texts = measures.dropna(subset=["shown"]) if "shown" in measures else measures.iloc[:0]
    for measure, part in texts.groupby("measure", sort=False):  # a value that stands for a text is shown as that text
        shown = dict(zip(part["model"], part["shown"]))
        wide[measure] = [shown.get(model, "" if value != value else f"{value:g}") for model, value in wide[measure].items()]
    wide.insert(0, "#", range(1, len(wide) + 1))
    return wide.reset_index()


def costs(m: pd.DataFrame) -> pd.DataFrame:
    """Per run: its measures and its recorded seconds per model."""
    return m.groupby("run", sort=False).agg(measures=("measure", lambda s: ", ".join(dict.fromkeys(s))), seconds_per_model=("seconds_per_model", "first")).reset_index()


def agreement_markdown(measures: pd.DataFrame, pairs: pd.DataFrame, runs: int, replicates: int) -> str:
    """agreement.md: the correlations, the models' measures, the runs' costs."""
    models = len(dict.fromkeys(measures["model"]))
    return "\n".join(["# Agreement across models", "", f"{models} models from {runs} runs; values oriented so that higher is better; "
                      f"intervals: percentile bootstrap over models ({replicates} replicates).", "",
                      correlation_rows(pairs).to_markdown(index=False), "", "## Models and measures", "",
                      wide_measures(measures).to_markdown(index=False, floatfmt=".3g"), "", "## Cost", "", costs(measures).to_markdown(index=False), ""])
