"""results.md of a RULER run: the paired differences against the first model (where variants
share its prompts), the models side by side, then scores per task and length, effective lengths,
and how often the two scorings agree."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pandas as pd

from ctxeval.render import figures
from ctxeval.render.headline import Headline
from ctxeval.render.renderer import Renderer
from ctxeval.render.ruler_ppi import ppi_markdown
from ctxeval.render.views import Arm, RunView, header
from ctxeval.results.ruler import MEAN_TASK, PLOT_FILE, RulerResult
from ctxeval.render.verdicts import would_settle


SCORINGS = {"generation": "by generation (RULER's string_match_all on the greedy output)",
            "likelihood": "by likelihood (the answers inside the greedy prefix of the teacher-forced reference)"}


def headline(table: pd.DataFrame, lengths: dict[str, dict[str, dict]], threshold: float) -> Headline:
    """One row per model, one column per length: its score (the mean over tasks where there are
    several) with its 95 % interval, and its effective length; the scoring named."""
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
    return Headline(f"RULER, {what}", f"percent, {scoring}; 95 % interval (pseudo-labels, Student's t; the mean over tasks by MOVER); by length in tokens",
                    ("model", *(("scored by",) if len(scorings) > 1 else ()), *(str(length) for length in grid), f"effective length (≥ {threshold:g})"), tuple(rows))


def _signed(value: float, low: float, high: float, digits: int) -> str:
    """An estimate with its interval, signed; "no interval" where there is none."""
    if value != value:
        return "unknown"
    interval = "no interval" if low != low else f"[{low:+.{digits}f}, {high:+.{digits}f}]"
    return f"{value:+.{digits}f} {interval}"


def _verdict(outcome: str, needed: float | None) -> str:
    """A verdict cell: the outcome, and the samples that would settle an undecided one."""
    if outcome == "too few samples to tell" and needed is not None and not (isinstance(needed, float) and math.isnan(needed)):
        return f"{outcome} ({would_settle(needed)})"
    return outcome


# the paired table's columns: (header, cell of a paired row); a later estimator adds its own here
PAIRED_COLUMNS: tuple[tuple[str, Callable[[pd.Series], str]], ...] = (
    ("variant", lambda r: str(r["model"])),
    ("length", lambda r: str(int(r["length"]))),
    ("task", lambda r: str(r["task"])),
    ("n", lambda r: str(int(r["n"]))),
    ("score Δ, points [95 %]", lambda r: _signed(r["score_diff"], r["score_low"], r["score_high"], 1)),
    ("score verdict", lambda r: _verdict(r["score_outcome"], r["score_samples_needed"])),
    ("answer log p Δ, nats [95 %]", lambda r: _signed(r["logp_diff"], r["logp_low"], r["logp_high"], 3)),
    ("log p verdict", lambda r: _verdict(r["logp_outcome"], r["logp_samples_needed"])),
)


def paired_headline(paired: pd.DataFrame, settings: dict, scored_by: str) -> Headline:
    """The paired differences of every variant against the first model, on the same prompts:
    per length the mean over tasks first, then each task; unpaired variants in the notes."""
    reference = str(paired["reference"].iloc[0])
    tasks = [t for t in dict.fromkeys(paired["task"]) if t != MEAN_TASK]
    shown = paired[paired["paired"].astype(bool)]
    rows = tuple(tuple(cell(row) for _, cell in PAIRED_COLUMNS) for _, row in shown.iterrows())
    notes = []
    if len(tasks) > 1:
        notes.append(f"{mean_label(len(tasks))}: the samples of every task pooled (equal samples per task: the mean of the task differences).")
    for model, part in paired[~paired["paired"].astype(bool)].groupby("model", sort=False):
        notes.append(f"{model}: {part['note'].iloc[-1]} on {len(part)} cell(s); compare its scores through their own intervals.")
    notes.append("Verdict: hurts or gains where the interval excludes 0; within δ where it lies inside ±δ; else too few samples to tell, "
                 "with the paired samples that would settle it at the observed spread.")
    detail = (f"candidate − {reference} on the same prompts, per length; score {SCORINGS[scored_by]}, in points with Tango's score interval for "
              f"paired 0/1 outcomes, δ = {settings['score_delta']:g} points; answer log p (mean per answer token) in nats with a paired BCa interval "
              f"over samples ({settings['replicates']} replicates, seed {settings['seed']}), δ = {settings['logp_delta']:g} nats")
    return Headline(f"RULER, paired differences against {reference}", detail, tuple(h for h, _ in PAIRED_COLUMNS), rows, tuple(notes))


def first_headline(r: RulerResult) -> Headline:
    """The answer a RULER run gives first: the paired differences where variants share the
    first model's prompts, else every model's score by length."""
    if not r.paired.empty and r.paired["paired"].astype(bool).any():
        scored_by = str(r.table["scored_by"].iloc[0]) if r.table["scored_by"].nunique() == 1 else "likelihood"
        return paired_headline(r.paired, r.paired_settings, scored_by)
    return headline(r.table, r.effective_lengths, r.threshold)


def results_markdown(r: RulerResult) -> str:
    """results.md: the paired differences against the first model (where variants share its
    prompts), the scores of every model by length, then per model the mean and per-task scores
    by length, effective lengths, and agreement."""
    table, lengths, agree, threshold = r.table, r.effective_lengths, r.agreement, r.threshold
    first = first_headline(r)
    scores = headline(table, lengths, threshold)
    lines = ["# RULER synthetic tasks", "", *first.markdown(), ""] + ([] if first == scores else [*scores.markdown(), ""])
    for model, part in table.groupby("model", sort=False):
        pivot = part.assign(cell=[f"{s:.1f} [{lo:.0f}, {hi:.0f}]" for s, lo, hi in zip(part["score"], part["low"], part["high"])])
        wide = pivot.pivot(index="task", columns="length", values="cell")
        tasks = [t for t in dict.fromkeys(part["task"]) if t != MEAN_TASK]
        wide = wide.reindex([*tasks, MEAN_TASK])
        wide["effective length"] = [_length_text(lengths[str(model)][t], int(part["length"].min())) for t in wide.index]
        wide.index = [*tasks, mean_label(len(tasks))]
        wide.index.name = "task"
        lines += [f"## {model}", "", f"Score (percent, {_scored_by(set(part['scored_by']))}; 95 % interval, pseudo-labels and Student's t) by length in tokens; "
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
    body = results_markdown(r)
    if r.ppi is None:
        return replace(r, markdown=body)
    section = ppi_markdown(r.ppi, r.ppi_differences, r.paired_settings["score_delta"], r.manifest.config.get("until"), (r.manifest.plan or {}).get("rounds"))
    return replace(r, markdown="\n".join(section) + "\n" + body)


def view(result: RulerResult, label: str, first_arm: int) -> tuple[RunView, list[Arm]]:
    """A RULER run: every model's score by length, and its manifest."""
    manifest = result.manifest.to_json()
    return RunView(label, result.run_dir, "ruler", manifest, header(manifest, "ruler"),
                   answer=first_headline(result)), []


def draw(r: RulerResult, out: Path) -> None:
    figures.plot_ruler(r.table, out / PLOT_FILE, r.threshold, mean_label)


RENDERER = Renderer(texts, view, draw)
