"""The tables of an agreement result (agreement.md, and the rows its HTML page shows): the
headline (the cheap measures ranked by ρ, what was left out), the correlations with their
intervals, the models' measures, the runs' costs."""

from __future__ import annotations

import pandas as pd

from ctxeval.render import intervals
from ctxeval.render.headline import Headline


def _interval(row: pd.Series, name: str) -> str:
    """A coefficient with its interval; 'undefined' without a coefficient, the value alone without an interval."""
    text = intervals.cell(row, name, 2, signed=True)
    return "undefined" if text == "unknown" else text.replace(" (no interval)", "")


def correlation_rows(c: pd.DataFrame) -> pd.DataFrame:
    """The correlation table as it is shown: one row per pair, coefficients with intervals."""
    return pd.DataFrame({"task measure": c["task"], "cheap measure": c["cheap"], "models": c["models"],
                         f"Spearman ρ [{intervals.table_header(c, 'spearman', with_method=False)}]": [_interval(r, "spearman") for _, r in c.iterrows()],
                         f"Kendall τ-b [{intervals.table_header(c, 'kendall', with_method=False)}]": [_interval(r, "kendall") for _, r in c.iterrows()],
                         "ceiling √r": ["" if v != v else f"{v:.2f}" for v in c["ceiling"]] if "ceiling" in c else "",
                         "note": c["note"].astype(object).where(c["note"].notna(), "")})


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


def left_out(measures: pd.DataFrame, pairs: pd.DataFrame) -> list[str]:
    """Why a measure or a model is in no correlation: a correlation needs two models that have
    both a cheap and a task measure."""
    kinds = dict(zip(measures["measure"], measures["kind"]))
    having = {m: set(part["model"]) for m, part in measures.groupby("measure", sort=False)}
    paired = set(pairs["cheap"]) | set(pairs["task"])
    notes = []
    for m in dict.fromkeys(measures["measure"]):
        if m in paired:
            continue
        other = "task" if kinds[m] == "cheap" else "cheap"
        overlap = max((len(having[m] & having[p]) for p in having if kinds[p] != kinds[m]), default=0)
        notes.append(f"Left out: {m} ({kinds[m]}): {overlap} model(s) have it beside a {other} measure; a correlation needs 2.")
    in_pairs = set()
    for pair in pairs.itertuples():
        in_pairs |= having[pair.cheap] & having[pair.task]
    for model, part in measures.groupby("model", sort=False):
        if model in in_pairs:
            continue
        own = set(part["kind"])
        why = ("it has no task measure (RULER with generation, retrieval)" if "task" not in own else
               "it has no cheap measure (effective-length, diff, RULER likelihood)" if "cheap" not in own else
               "no other model has its cheap and task measures")
        notes.append(f"Left out: model {model}: {why}.")
    return notes


MIN_RANKED = 3  # two models give ρ = ±1 whatever the measures: a ranking by ρ needs three


def unranked_reason(models: int, spearman: float, note: str) -> str:
    """Why a pair is not ranked by its ρ ("" when it is): ρ undefined, or too few models for ρ to order anything."""
    if spearman != spearman:
        return f"not ranked: ρ undefined ({note.removeprefix('no coefficient: ') or 'a measure is constant'})"
    if models < MIN_RANKED:
        return f"not ranked: with {models} models ρ is ±1 whatever the measures (a ranking needs at least {MIN_RANKED})"
    return ""


def headline(measures: pd.DataFrame, pairs: pd.DataFrame, replicates: int) -> Headline:
    """The cheap measures ranked by their Spearman ρ with each task measure, with intervals; a
    pair whose ρ is undefined or cannot order (too few models) is listed unranked with the
    reason; and why any measure or model was left out."""
    spearman = pd.to_numeric(pairs["spearman"], errors="coerce").astype("float64")
    notes = pairs["note"].astype(object).where(pairs["note"].notna(), "").astype(str)
    why = [unranked_reason(int(m), float(r), n) for m, r, n in zip(pairs["models"], spearman, notes)]
    ranked = pairs.assign(spearman=spearman, note=notes, why=why, order=[r if not w else -2.0 for r, w in zip(spearman, why)])
    ranked = ranked.sort_values(["task", "order"], ascending=[True, False], kind="stable")
    ranked = ranked.set_index("task").loc[list(dict.fromkeys(pairs["task"]))].reset_index()  # task measures in the runs' order
    rows, rank, previous = [], 0, None
    for _, pair in ranked.iterrows():
        rank = rank + 1 if pair["task"] == previous else 1
        previous = pair["task"]
        rows.append((pair["task"], "—" if pair["why"] else str(rank), pair["cheap"], _interval(pair, "spearman"), str(pair["models"]),
                     pair["why"] or pair["note"]))
    return Headline("Which cheap measure orders the models as the task does", "cheap measures ranked by Spearman ρ with each task measure "
                    f"(values oriented so that higher is better; {intervals.table_header(pairs, 'spearman')}, {replicates} replicates)",
                    ("task measure", "rank", "cheap measure", f"Spearman ρ [{intervals.table_header(pairs, 'spearman', with_method=False)}]", "models", "note"), tuple(rows),
                    tuple(ceiling_notes(pairs) + left_out(measures, pairs)))


def ceiling_notes(pairs: pd.DataFrame) -> list[str]:
    """Per task measure with a reliability: how far any cheap measure's ρ could reach."""
    if "ceiling" not in pairs:
        return []
    notes = []
    for task, part in pairs.dropna(subset=["ceiling"]).groupby("task", sort=False):
        row = part.iloc[0]
        notes.append(f"{task}: split-half reliability r = {row['task_reliability']:.2f} over its models; a measure ordering them exactly as their "
                     f"true scores would reach about ρ = {row['ceiling']:.2f} against it (√r): a ρ near that is as good as these samples can show.")
    return notes


def agreement_markdown(measures: pd.DataFrame, pairs: pd.DataFrame, runs: int, replicates: int) -> str:
    """agreement.md: the headline (the ranking, what was left out), the correlations, the
    models' measures, the runs' costs."""
    models = len(dict.fromkeys(measures["model"]))
    methods = "; ".join(dict.fromkeys(method for _, method in intervals.kinds(pairs, "spearman"))) or "none"
    return "\n".join(["# Agreement across models", "", *headline(measures, pairs, replicates).markdown(), "",
                      f"{models} models from {runs} runs; values oriented so that higher is better; "
                      f"intervals: {methods} ({replicates} replicates).", "",
                      correlation_rows(pairs).to_markdown(index=False), "", "## Models and measures", "",
                      wide_measures(measures).to_markdown(index=False, floatfmt=".3g"), "", "## Cost", "", costs(measures).to_markdown(index=False), ""])
