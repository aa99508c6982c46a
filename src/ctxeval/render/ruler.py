"""results.md of a RULER run: scores per task and length, effective lengths, and how often the
two scorings agree."""

from __future__ import annotations

import pandas as pd

from ctxeval.results.ruler import MEAN_TASK


def results_markdown(table: pd.DataFrame, lengths: dict[str, dict[str, dict]], agree: dict, threshold: float) -> str:
    """results.md: the mean and per-task scores by length, effective lengths, and agreement."""
    lines = ["# RULER synthetic tasks", ""]
    for model, part in table.groupby("model", sort=False):
        pivot = part.assign(cell=[f"{s:.1f} [{lo:.0f}, {hi:.0f}]" for s, lo, hi in zip(part["score"], part["low"], part["high"])])
        wide = pivot.pivot(index="task", columns="length", values="cell")
        order = [t for t in dict.fromkeys(part["task"]) if t != MEAN_TASK] + [MEAN_TASK]
        wide = wide.reindex(order)
        wide["effective length"] = [_length_text(lengths[str(model)][t]) for t in wide.index]
        lines += [f"## {model}", "", f"Score (percent, {_scored_by(set(part['scored_by']))}; 95 % Wilson interval) by length in tokens; "
                  f"effective length at ≥ {threshold:g}.", "", wide.reset_index().to_markdown(index=False), ""]
    if agree["samples"]:
        lines += [f"Generation and likelihood agree on {agree['agree']:.1%} of {agree['samples']} samples; on {agree['answered_in_another_form']:.1%} generation found answers "
                  f"that the likelihood pass's greedy prefix did not hold (another order or form); likelihood above generation on {agree['likelihood_above_generation']:.1%}.", ""]
    return "\n".join(lines)


def _scored_by(kinds: set[str]) -> str:
    """Which scoring a model's numbers are: RULER's on generated text, or likelihood where its samples were not generated."""
    generated = "RULER's string_match_all on the greedy generation"
    if kinds == {"generation"}:
        return generated
    likelihood = "by likelihood, not generated: the share of answers inside the teacher-forced greedy prefix"
    return likelihood if kinds == {"likelihood"} else f"{generated}; cells without generation {likelihood}"


def _length_text(entry: dict) -> str:
    if entry["value"] is None:
        return "below the shortest"
    return f"≥ {entry['value']}" if entry["at_least"] else str(entry["value"])
