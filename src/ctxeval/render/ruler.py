"""results.md of a RULER run: the models side by side, then scores per task and length,
effective lengths, and how often the two scorings agree."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd

from ctxeval.render import figures
from ctxeval.render.headline import Headline
from ctxeval.render.renderer import Renderer
from ctxeval.render.ruler_ppi import ppi_markdown
from ctxeval.render.views import Arm, RunView, header
from ctxeval.results.ruler import MEAN_TASK, PLOT_FILE, RulerResult


SCORINGS = {"generation": "by generation (RULER's string_match_all on the greedy output)",
            "likelihood": "by likelihood (the answers inside the greedy prefix of the teacher-forced reference)"}


def headline(table: pd.DataFrame, lengths: dict[str, dict[str, dict]], threshold: float) -> Headline:
    """One row per model, one column per length: its score (the mean over tasks where there are
    several) with its Wilson interval, and its effective length; the scoring named."""
    tasks = [t for t in dict.fromkeys(table["task"]) if t != MEAN_TASK]
    rows_of = table[table["task"] == (MEAN_TASK if len(tasks) > 1 else tasks[0])]
    grid = sorted(set(rows_of["length"]))
    scorings = list(dict.fromkeys(rows_of["scored_by"]))
    rows = []
    for model, part in rows_of.groupby("model", sort=False):
        cells = {int(r.length): f"{r.score:.1f} [{r.low:.0f}, {r.high:.0f}]" for r in part.itertuples()}
        scored = (part["scored_by"].iloc[0],) if len(scorings) > 1 else ()
        rows.append((str(model), *scored, *(cells.get(length, "—") for length in grid), _length_text(lengths[str(model)][MEAN_TASK if len(tasks) > 1 else tasks[0]], int(part["length"].min()))))
    what = f"mean of {len(tasks)} tasks ({', '.join(tasks)})" if len(tasks) > 1 else tasks[0]
    scoring = f"scored {SCORINGS[scorings[0]]}" if len(scorings) == 1 else "scored as the column says: " + "; ".join(f"{k} {SCORINGS[k]}" for k in scorings)
    return Headline(f"RULER, {what}", f"percent, {scoring}; 95 % Wilson interval; by length in tokens",
                    ("model", *(("scored by",) if len(scorings) > 1 else ()), *(str(length) for length in grid), f"effective length (≥ {threshold:g})"), tuple(rows))


def results_markdown(table: pd.DataFrame, lengths: dict[str, dict[str, dict]], agree: dict, threshold: float) -> str:
    """results.md: the headline (every model's score by length), then per model the mean and
    per-task scores by length, effective lengths, and agreement."""
    lines = ["# RULER synthetic tasks", "", *headline(table, lengths, threshold).markdown(), ""]
    for model, part in table.groupby("model", sort=False):
        pivot = part.assign(cell=[f"{s:.1f} [{lo:.0f}, {hi:.0f}]" for s, lo, hi in zip(part["score"], part["low"], part["high"])])
        wide = pivot.pivot(index="task", columns="length", values="cell")
        tasks = [t for t in dict.fromkeys(part["task"]) if t != MEAN_TASK]
        wide = wide.reindex([*tasks, MEAN_TASK])
        wide["effective length"] = [_length_text(lengths[str(model)][t], int(part["length"].min())) for t in wide.index]
        wide.index = [*tasks, mean_label(len(tasks))]
        wide.index.name = "task"
        lines += [f"## {model}", "", f"Score (percent, {_scored_by(set(part['scored_by']))}; 95 % Wilson interval) by length in tokens; "
                  f"effective length at ≥ {threshold:g}.", "", wide.reset_index().to_markdown(index=False), ""]
    if agree["samples"]:
        lines += [f"Generation and likelihood agree on {agree['agree']:.1%} of {agree['samples']} samples; on {agree['answered_in_another_form']:.1%} generation found answers "
                  f"that the likelihood pass's greedy prefix did not hold (another order or form); likelihood above generation on {agree['likelihood_above_generation']:.1%}.", ""]
    return "\n".join(lines)


def mean_label(tasks: int) -> str:
    """How the mean row is named: of the run's tasks, which are not RULER's 13 (its QA tasks are not offered)."""
    return f"mean of {tasks} task{'s' if tasks != 1 else ''} (RULER has 13)"


def _scored_by(kinds: set[str]) -> str:
    """Which scoring a model's numbers are: RULER's on generated text, or likelihood where its samples were not generated."""
    generated = "RULER's string_match_all on the greedy generation"
    if kinds == {"generation"}:
        return generated
    likelihood = "by likelihood, not generated: the share of answers inside the teacher-forced greedy prefix"
    return likelihood if kinds == {"likelihood"} else f"{generated}; cells without generation {likelihood}"


def _length_text(entry: dict, shortest: int) -> str:
    if entry["value"] is None:
        return f"below the shortest (< {shortest})"
    return f"≥ {entry['value']}" if entry["at_least"] else str(entry["value"])


def texts(r: RulerResult) -> RulerResult:
    """results.md, from the scores, the effective lengths and the scorings' agreement."""
    body = results_markdown(r.table, r.effective_lengths, r.agreement, r.threshold)
    if r.ppi is None:
        return replace(r, markdown=body)
    section = ppi_markdown(r.ppi, r.ppi_differences, r.manifest.config.get("until"), (r.manifest.plan or {}).get("rounds"))
    return replace(r, markdown="\n".join(section) + "\n" + body)


def view(result: RulerResult, label: str, first_arm: int) -> tuple[RunView, list[Arm]]:
    """A RULER run: every model's score by length, and its manifest."""
    manifest = result.manifest.to_json()
    return RunView(label, result.run_dir, "ruler", manifest, header(manifest, "ruler"),
                   answer=headline(result.table, result.effective_lengths, result.threshold)), []


def draw(r: RulerResult, out: Path) -> None:
    figures.plot_ruler(r.table, out / PLOT_FILE, r.threshold, mean_label)


RENDERER = Renderer(texts, view, draw)
