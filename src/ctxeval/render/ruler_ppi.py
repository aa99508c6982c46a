"""The prediction-powered section of a `ruler --generate-share` run's results.md: scores and
paired differences with their intervals, then how each cell's samples were labelled."""

from __future__ import annotations

import math

import pandas as pd

from ctxeval.results.ruler import MEAN_TASK


def _cell(estimate: float, low: float, high: float, sign: bool = False) -> str:
    if math.isnan(estimate):
        return "no estimate (fewer than 2 generated)"
    if math.isnan(low):
        return f"{estimate:{'+' if sign else ''}.1f} (no interval)"
    return f"{estimate:{'+' if sign else ''}.1f} [{low:{'+' if sign else ''}.1f}, {high:{'+' if sign else ''}.1f}]"


def _headline_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The mean over tasks where a model has several, else its one task."""
    tasks = [t for t in dict.fromkeys(table["task"]) if t != MEAN_TASK]
    return table[table["task"] == (MEAN_TASK if len(tasks) > 1 else tasks[0])]


def _wide(table: pd.DataFrame, sign: bool) -> str:
    shown = _headline_rows(table)
    cells = shown.assign(cell=[_cell(e, lo, hi, sign) for e, lo, hi in zip(shown["estimate"], shown["low"], shown["high"])])
    wide = cells.pivot(index="model", columns="length", values="cell").reindex(list(dict.fromkeys(shown["model"])))
    wide.columns = [str(c) for c in wide.columns]
    return wide.reset_index().to_markdown(index=False)


def ppi_markdown(scores: pd.DataFrame, differences: pd.DataFrame) -> list[str]:
    """Lines of the section: scores by length, differences against the first model, labelling."""
    tasks = [t for t in dict.fromkeys(scores["task"]) if t != MEAN_TASK]
    what = f"mean of {len(tasks)} tasks" if len(tasks) > 1 else tasks[0]
    generated, predicted, exact = (int(scores.loc[scores["task"] != MEAN_TASK, k].sum()) for k in ("generated", "predicted", "exact"))
    lines = ["# RULER, prediction-powered (PPI++)", "",
             f"Score ({what}, percent) that generating every sample would give, by length in tokens; 95 % interval. "
             f"Of {exact + generated + predicted} samples: {exact} settled by likelihood (exact, no generation), {generated} generated, "
             f"{predicted} predicted from their likelihood numbers (cross-fitted calibration).", "", _wide(scores, sign=False), ""]
    if not differences.empty:
        reference = differences["reference"].iloc[0]
        lines += [f"Paired difference against {reference} (points, variant − reference, the same samples); 95 % interval.", "",
                  _wide(differences, sign=True), ""]
    cells = scores[scores["task"] != MEAN_TASK]
    table = cells.assign(score=[_cell(e, lo, hi) for e, lo, hi in zip(cells["estimate"], cells["low"], cells["high"])])
    lines += ["Per cell: score, and how its samples were labelled.", "",
              table[["model", "task", "length", "score", "exact", "generated", "predicted"]].to_markdown(index=False), ""]
    return lines
