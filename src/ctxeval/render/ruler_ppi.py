"""The prediction-powered section of a `ruler --generate-share` run's results.md: scores and
paired differences with their intervals and verdicts, then how each cell's samples were labelled.

Intervals are shown clipped to what a score can be (0 to 100 points, a difference −100 to +100):
a PPI interval on a few generated labels can reach past them, and clipping keeps every value
the true score can take (coverage unchanged); ppi.json keeps them unclipped."""

from __future__ import annotations

import math

import pandas as pd

from ctxeval.render.verdicts import would_settle
from ctxeval.results.ruler import MEAN_TASK


def _cell(estimate: float, low: float, high: float, sign: bool = False) -> str:
    if math.isnan(estimate):
        return "no estimate (fewer than 2 generated)"
    if math.isnan(low):
        return f"{estimate:{'+' if sign else ''}.1f} (no interval)"
    floor = -100.0 if sign else 0.0
    low, high = max(low, floor), min(high, 100.0)
    return f"{estimate:{'+' if sign else ''}.1f} [{low:{'+' if sign else ''}.1f}, {high:{'+' if sign else ''}.1f}]"


def _difference_cell(row: pd.Series) -> str:
    """A paired difference with its stored verdict; an undecided one with the samples that would
    settle it at the same share and spread (the interval's standard error scaled as 1/√n)."""
    if math.isnan(row["estimate"]):
        return _cell(row["estimate"], row["low"], row["high"], sign=True)
    needed = row["samples_needed"]
    settle = f" ({would_settle(int(needed))})" if needed is not None and not pd.isna(needed) else ""
    return f"{_cell(row['estimate'], row['low'], row['high'], sign=True)} {row['outcome']}{settle}"


def _headline_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The mean over tasks where a model has several, else its one task."""
    tasks = [t for t in dict.fromkeys(table["task"]) if t != MEAN_TASK]
    return table[table["task"] == (MEAN_TASK if len(tasks) > 1 else tasks[0])]


def _wide(table: pd.DataFrame, differences: bool = False) -> str:
    """The headline rows by length: scores, or paired differences with their verdicts."""
    shown = _headline_rows(table)
    cells = shown.assign(cell=[_difference_cell(r) if differences else _cell(r.estimate, r.low, r.high) for _, r in shown.iterrows()])
    wide = cells.pivot(index="model", columns="length", values="cell").reindex(list(dict.fromkeys(shown["model"])))
    wide.columns = [str(c) for c in wide.columns]
    return wide.reset_index().to_markdown(index=False)


def ppi_markdown(scores: pd.DataFrame, differences: pd.DataFrame, delta: float, until: dict | None = None, rounds: list[dict] | None = None) -> list[str]:
    """Lines of the section: scores by length, differences against the first model with their
    verdicts at δ = `delta` points (an `--until verdict` run's own δ), labelling; for an
    `--until` run, its rounds first and each look's confidence."""
    level = ("95 % interval" if not until else f"{until['confidence']:.0%} confidence sequence (valid at every look of --until)"
             if until.get("looks") == "sequence" else f"{until['confidence']:.2%} interval (each look of --until)")
    tasks = [t for t in dict.fromkeys(scores["task"]) if t != MEAN_TASK]
    what = f"mean of {len(tasks)} tasks" if len(tasks) > 1 else tasks[0]
    generated, predicted, exact = (int(scores.loc[scores["task"] != MEAN_TASK, k].sum()) for k in ("generated", "predicted", "exact"))
    lines = ["# RULER, prediction-powered (PPI++)", "",
             *(rounds_markdown(until, rounds or []) if until else []),
             f"Score ({what}, percent) that generating every sample would give, by length in tokens; {level}. "
             f"Of {exact + generated + predicted} samples: {exact} settled by likelihood (exact, no generation), {generated} generated, "
             f"{predicted} predicted from their likelihood numbers (cross-fitted calibration).", "", _wide(scores), ""]
    if not differences.empty:
        reference = differences["reference"].iloc[0]
        delta = until["delta"] if until and until.get("delta") is not None else delta
        lines += [f"Paired difference against {reference} (points, variant − reference, the same samples); {level}; verdict: hurts or gains "
                  f"where the interval excludes 0, within δ = {delta:g} points where it lies inside ±δ, else too few samples to tell, with the samples "
                  f"that would settle it at the same share and spread.", "",
                  _wide(differences, differences=True), ""]
    cells = scores[scores["task"] != MEAN_TASK]
    table = cells.assign(score=[_cell(e, lo, hi) for e, lo, hi in zip(cells["estimate"], cells["low"], cells["high"])])
    lines += ["Per cell: score, and how its samples were labelled.", "",
              table[["model", "task", "length", "score", "exact", "generated", "predicted"]].to_markdown(index=False), ""]
    return lines


def rounds_markdown(until: dict, rounds: list[dict]) -> list[str]:
    """How an `--until` run sampled: the target, the rounds and what each answered."""
    target = f"a verdict (δ = {until['delta']:g} points)" if until["half_width"] is None else f"a half-width of {until['half_width']:g} points"
    if until.get("looks") == "sequence":
        lines = [f"Sampled until {target} per task and length, at most {until['max_samples']} samples each, in batches of {until['round_size']}; "
                 f"each look reads a {until['confidence']:.0%} betting confidence sequence, valid at every look at once (a variant stops at the "
                 "first batch that decides it; the first model runs while a variant of its cell is open).", ""]
    else:
        lines = [f"Sampled until {target} per task and length, at most {until['max_samples']} samples each, in rounds of {until['round_size']}; "
                 f"each look at {until['confidence']:.2%} confidence (Bonferroni over {until['rounds']} rounds).", ""]
    for r in rounds:
        closed = ", ".join(f"{t} at {n}" for t, n in r["closed"]) or "none"
        left_out = f" (left out, closed: {_variants(r['skipped'])})" if r.get("skipped") else ""
        decided = f"; decided: {_variants(r['decided'])}" if r.get("decided") else ""
        futile = f"; the budget cannot decide: {_variants(r['futile'])}" if r.get("futile") else ""
        lines.append(f"- round {r['round']}: samples {r['first_sample']}–{r['first_sample'] + r['samples'] - 1} of {len(r['cells'])} cell(s){left_out}"
                     f"{decided}{futile}; answered: {closed}")
    still = [c for c in rounds[-1]["cells"] if c not in rounds[-1]["closed"]] if rounds else []
    if still:
        lines.append(f"- budget spent, not answered: {', '.join(f'{t} at {n}' for t, n in still)}")
    compute = rounds[-1].get("compute") if rounds else None
    return lines + ([""] + compute_markdown(compute, until["max_samples"]) if compute else []) + [""]


def compute_markdown(c: dict, budget: int) -> list[str]:
    """The run's compute against the fixed-n run of the same budget."""
    tokens = f" ({c['prompt_tokens']:,} prompt tokens against about {c['fixed_prompt_tokens']:,})" if c.get("prompt_tokens") is not None else ""
    return [f"Compute against the fixed-n run of the same budget ({budget} samples per task, length and model): {c['passes']} likelihood passes "
            f"against {c['fixed_passes']}{tokens}, {c['passes'] / c['fixed_passes']:.2f}x; {c['generations']} generations against about "
            f"{c['fixed_generations']:g} (each cell's unsettled share times {budget}), "
            f"{c['generations'] / c['fixed_generations'] if c['fixed_generations'] else 0:.2f}x."]


def _variants(variants: list[list]) -> str:
    """(model, task, length) triples as 'model on task at length'."""
    return ", ".join(f"{m} on {t} at {n}" for m, t, n in variants)
