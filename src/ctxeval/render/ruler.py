"""results.md of a RULER run: the paired differences against the first model (where variants
share its prompts), the models side by side, then scores per task and length, effective lengths,
and how often the two scorings agree."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from ctxeval.render import figures, intervals
from ctxeval.render.headline import Headline
from ctxeval.render.renderer import Renderer
from ctxeval.render.ruler_ppi import ppi_headlines, ppi_markdown
from ctxeval.render.views import Arm, RunView, header
from ctxeval.results.ruler import MEAN_TASK, PLOT_FILE, RulerResult
from ctxeval.render.verdicts import VERDICT_RULE, verdict_words


SCORINGS = {"generation": "by generation (RULER's string_match_all on the greedy output)",
            "likelihood": "by likelihood (the answers inside the greedy prefix of the teacher-forced reference)"}


def headline(table: pd.DataFrame, lengths: dict[str, dict[str, dict]], threshold: float) -> Headline:
    """One row per model, one column per length: its score (the mean over tasks where there are
    several) with its interval, and its effective length; the scoring and the interval's level and method named."""
    tasks = [t for t in dict.fromkeys(table["task"]) if t != MEAN_TASK]
    rows_of = table[table["task"] == (MEAN_TASK if len(tasks) > 1 else tasks[0])]
    grid = sorted(set(rows_of["length"]))
    scorings = list(dict.fromkeys(rows_of["scored_by"]))
    rows = []
    for model, part in rows_of.groupby("model", sort=False):
        cells = {int(r["length"]): intervals.cell(r, "score", 1, bound_digits=0) for _, r in part.iterrows()}
        scored = (part["scored_by"].iloc[0],) if len(scorings) > 1 else ()
        rows.append((str(model), *scored, *(cells.get(length, "—") for length in grid), _length_text(lengths[str(model)][MEAN_TASK if len(tasks) > 1 else tasks[0]], int(part["length"].min()))))
    what = f"mean of {len(tasks)} tasks ({', '.join(tasks)})" if len(tasks) > 1 else tasks[0]
    scoring = f"scored {SCORINGS[scorings[0]]}" if len(scorings) == 1 else "scored as the column says: " + "; ".join(f"{k} {SCORINGS[k]}" for k in scorings)
    return Headline(f"RULER, {what}", f"percent, {scoring}; {intervals.table_header(rows_of, 'score')} interval; by length in tokens",
                    ("model", *(("scored by",) if len(scorings) > 1 else ()), *(str(length) for length in grid), f"effective length (≥ {threshold:g})"), tuple(rows))


def _verdict(row: pd.Series, name: str, delta: float) -> str:
    """A verdict cell of the verdict row `name` ("score_diff", "logp_diff"; a lower variant is
    worse), worded by render.verdicts."""
    return verdict_words(row[f"{name}.outcome"], row[f"{name}.low"], row[f"{name}.high"], delta, row[f"{name}.samples_needed"], worse="lower")


def _flips(row: pd.Series) -> str:
    """Samples right in the reference and wrong in the variant, the reverse, and differing partial-credit pairs."""
    if pd.isna(row.get("flips_lost")):
        return "not recorded (an older run)"
    return f"{int(row['flips_lost'])} / {int(row['flips_gained'])} / {int(row['flips_partial'])}"


def _mcnemar(row: pd.Series) -> str:
    """McNemar's exact p with its mid-p, or why there is none."""
    if pd.isna(row.get("mcnemar_p")):
        return "none: partial credit" if row.get("mcnemar_reason") else "not recorded (an older run)"
    return f"{_p(row['mcnemar_p'])} ({_p(row['mcnemar_midp'])})"


def _p(value: float) -> str:
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


# the paired table's columns: (header of the table, cell of a paired row and the run's paired settings); a later estimator adds its own here
PAIRED_COLUMNS: tuple[tuple[Callable[[pd.DataFrame], str], Callable[[pd.Series, dict], str]], ...] = (
    (lambda t: "variant", lambda r, s: str(r["model"])),
    (lambda t: "length", lambda r, s: str(int(r["length"]))),
    (lambda t: "task", lambda r, s: str(r["task"])),
    (lambda t: "n", lambda r, s: str(int(r["n"]))),
    (lambda t: f"score Δ, points [{intervals.table_header(t, 'score_diff', with_method=False)}]", lambda r, s: intervals.cell(r, "score_diff", 1, signed=True)),
    (lambda t: "score verdict", lambda r, s: _verdict(r, "score_diff", s["score_delta"])),
    (lambda t: "flips 1→0 / 0→1 / partial", lambda r, s: _flips(r)),
    (lambda t: "McNemar p, exact (mid-p)", lambda r, s: _mcnemar(r)),
    (lambda t: f"answer log p Δ, nats [{intervals.table_header(t, 'logp_diff', with_method=False)}]", lambda r, s: intervals.cell(r, "logp_diff", 3, signed=True)),
    (lambda t: "log p verdict", lambda r, s: _verdict(r, "logp_diff", s["logp_delta"])),
)


def paired_headline(paired: pd.DataFrame, settings: dict, scored_by: str) -> Headline:
    """The paired differences of every variant against the first model, on the same prompts:
    per length the mean over tasks first, then each task; unpaired variants in the notes."""
    reference = str(paired["reference"].iloc[0])
    tasks = [t for t in dict.fromkeys(paired["task"]) if t != MEAN_TASK]
    shown = paired[paired["paired"].astype(bool)]
    rows = tuple(tuple(cell(row, settings) for _, cell in PAIRED_COLUMNS) for _, row in shown.iterrows())
    notes = []
    if len(tasks) > 1:
        notes.append(f"{mean_label(len(tasks))}: the samples of every task pooled (equal samples per task: the mean of the task differences).")
    for model, part in paired[~paired["paired"].astype(bool)].groupby("model", sort=False):
        notes.append(f"{model}: {part['note'].iloc[-1]} on {len(part)} cell(s); compare its scores through their own intervals.")
    notes.append(f"Verdict: {VERDICT_RULE}.")
    notes.append("Flips: samples right in the reference and wrong in the variant, the reverse, and differing partial-credit pairs. McNemar's exact "
                 "p is conservative with few flips: 4 against 0 give p 0.125 (mid-p 0.062) where the score interval, which the verdict reads, excludes 0.")
    detail = (f"candidate − {reference} on the same prompts, per length; score {SCORINGS[scored_by]}, in points with the "
              f"{intervals.table_header(shown, 'score_diff')} interval (partial credit as a fraction of a sample), δ = {settings['score_delta']:g} points; "
              f"answer log p (mean per answer token) in nats with the {intervals.table_header(shown, 'logp_diff')} interval "
              f"over samples ({settings['replicates']} replicates, seed {settings['seed']}), δ = {settings['logp_delta']:g} nats")
    return Headline(f"RULER, paired differences against {reference}", detail, tuple(h(shown) for h, _ in PAIRED_COLUMNS), rows, tuple(notes))


def ranking_headline(ranking: pd.DataFrame, pairs: pd.DataFrame, scored_by: str, ppi: bool) -> Headline:
    """The models in order per length (the mean over tasks where there are several, else the one
    task), with their difference to the top, simultaneous intervals, rank intervals and groups;
    the pairs Holm's step-down tells apart though their simultaneous interval reaches 0, named."""
    tasks = [t for t in dict.fromkeys(ranking["task"]) if t != MEAN_TASK]
    task = MEAN_TASK if len(tasks) > 1 else tasks[0]
    shown = ranking[ranking["task"] == task]
    ranked = shown[shown["ranked"].astype(bool)]
    what = mean_label(len(tasks)) if len(tasks) > 1 else tasks[0]
    rows = tuple(_ranking_row(row) for _, row in ranked.iterrows())
    notes = [f"{int(length)}: " + "; ".join(f"{letter}: {', '.join(members)}" for letter, members in _groups(part).items())
             for length, part in ranked.groupby("length", sort=False)]
    stepped = pairs[(pairs["task"] == task) & pairs["apart"].astype(bool) & (pairs["diff.low"] <= 0) & (pairs["diff.high"] >= 0)]
    if len(stepped):
        notes.append("Told apart by Holm's step-down though the simultaneous interval reaches 0: "
                     + ", ".join(f"{r['higher']} and {r['lower']} at {int(r['length'])}" for _, r in stepped.iterrows()) + ".")
    notes += [f"{row['model']} at {int(row['length'])}: {row['note']}." for _, row in shown[~shown["ranked"].astype(bool)].iterrows()]
    if ppi:
        notes.append(f"Ranked by the records' scores ({SCORINGS[scored_by]}), not by the prediction-powered estimates above.")
    family = intervals.level(_family(ranked))
    detail = (f"{what}, per length: the models in order of score (percent, {SCORINGS[scored_by]}), each against the top one on the same prompts; "
              f"intervals: {intervals.table_header(ranked, 'to_best')} (simultaneous {family}); ranks and groups "
              f"from Holm-adjusted score tests over all pairs: models sharing a letter cannot be told apart ({family} family-wise)")
    return Headline("RULER, which variants are tied", detail,
                    ("length", "#", "model", "score, %", f"Δ to the top, points [simultaneous {family}]", f"rank [simultaneous {family}]", "group"), rows, tuple(notes))


def _family(ranked: pd.DataFrame) -> float:
    """The family-wise confidence of a ranking: its Bonferroni intervals' 1 − α/m, back to 1 − α."""
    return 1 - (1 - float(ranked["to_best.confidence"].iloc[0])) * int(ranked["pairs"].iloc[0])


def _ranking_row(row: pd.Series) -> tuple[str, ...]:
    to_top = "— (the top)" if row["order"] == 1 else intervals.cell(row, "to_best", 1, signed=True)
    ranks = str(int(row["rank.low"])) if row["rank.low"] == row["rank.high"] else f"{int(row['rank.low'])}–{int(row['rank.high'])}"
    return (str(int(row["length"])), str(int(row["order"])), str(row["model"]), f"{row['score']:.1f}", to_top, ranks, str(row["groups"]))


def _groups(part: pd.DataFrame) -> dict[str, list[str]]:
    """Each letter with its models, in order."""
    out: dict[str, list[str]] = {}
    for _, row in part.iterrows():
        for letter in row["groups"]:
            out.setdefault(letter, []).append(str(row["model"]))
    return dict(sorted(out.items()))


def ranking_markdown(ranking: pd.DataFrame, pairs: pd.DataFrame) -> list[str]:
    """results.md's ranking per task and length, and every pair's simultaneous interval and Holm test."""
    ranked = ranking[ranking["ranked"].astype(bool)]
    cells = ranked.assign(**{"task": [mean_label(ranked["task"].nunique() - 1) if t == MEAN_TASK else t for t in ranked["task"]]})
    family = intervals.level(_family(ranked))
    table = pd.DataFrame([(t, *_ranking_row(r)) for t, (_, r) in zip(cells["task"], ranked.iterrows())],
                         columns=["task", "length", "#", "model", "score, %", f"Δ to the top, points [simultaneous {family}]", f"rank [simultaneous {family}]", "group"])
    pair_table = pd.DataFrame({"task": pairs["task"], "length": pairs["length"], "higher": pairs["higher"], "lower": pairs["lower"], "n": pairs["n"],
                               f"lower − higher, points [simultaneous {family}]": [intervals.cell(r, "diff", 1, signed=True) for _, r in pairs.iterrows()],
                               "p": [_p(p) for p in pairs["p"]], "Holm p": [_p(p) for p in pairs["p_holm"]],
                               "told apart": ["yes" if a else "no" for a in pairs["apart"]]})
    return ["## Which variants are tied, per task", "", "Per task and length, as the first table: the models in order, each against the top with a "
            "simultaneous interval, its rank interval and its groups.", "", table.to_markdown(index=False), "",
            f"Every pair: the difference with its simultaneous interval ({intervals.table_header(pairs, 'diff')}), the score test's p and its "
            f"Holm adjustment over the pairs of the same task and length (told apart where ≤ {1 - _family(ranked):g}).", "", pair_table.to_markdown(index=False), ""]


def _scoring(table: pd.DataFrame) -> str:
    """The paired tables' scoring: the run's one, or likelihood where some cells were not generated."""
    return str(table["scored_by"].iloc[0]) if table["scored_by"].nunique() == 1 else "likelihood"


def first_headline(r: RulerResult, ranking: bool = True) -> Headline:
    """The answer a RULER run gives first: which variants are tied where three or more share the
    first model's prompts (unless `ranking` is False), else the paired differences where variants
    share them, else every model's score by length."""
    if ranking and not r.ranking.empty:
        return ranking_headline(r.ranking, r.ranking_pairs, _scoring(r.table), r.ppi is not None)
    if not r.paired.empty and r.paired["paired"].astype(bool).any():
        return paired_headline(r.paired, r.paired_settings, _scoring(r.table))
    return headline(r.table, r.effective_lengths, r.threshold)


def results_markdown(r: RulerResult) -> str:
    """results.md: the paired differences against the first model (where variants share its
    prompts), the scores of every model by length, then per model the mean and per-task scores
    by length, effective lengths, and agreement."""
    table, lengths, agree, threshold = r.table, r.effective_lengths, r.agreement, r.threshold
    # a prediction-powered run's PPI++ section says which are tied; its likelihood tables, another
    # measure, keep their ranking for the end, so they never open with a tie statement of their own
    lead_ranking = r.ppi is None and not r.ranking.empty
    first = first_headline(r, lead_ranking)
    scores = headline(table, lengths, threshold)
    lines = ["# RULER synthetic tasks", "", *first.markdown(), ""]
    if lead_ranking:  # the ranking leads: the paired table against the first model follows it
        lines += [*paired_headline(r.paired, r.paired_settings, _scoring(table)).markdown(), ""]
    lines += [] if first == scores else [*scores.markdown(), ""]
    for model, part in table.groupby("model", sort=False):
        pivot = part.assign(cell=[intervals.cell(row, "score", 1, bound_digits=0) for _, row in part.iterrows()])
        wide = pivot.pivot(index="task", columns="length", values="cell")
        tasks = [t for t in dict.fromkeys(part["task"]) if t != MEAN_TASK]
        wide = wide.reindex([*tasks, MEAN_TASK])
        wide["effective length"] = [_length_text(lengths[str(model)][t], int(part["length"].min())) for t in wide.index]
        wide.index = [*tasks, mean_label(len(tasks))]
        wide.index.name = "task"
        lines += [f"## {model}", "", f"Score (percent, {_scored_by(set(part['scored_by']))}; {intervals.table_header(part, 'score')} interval) by length in tokens; "
                  f"effective length at ≥ {threshold:g}.", "", wide.reset_index().to_markdown(index=False), ""]
    if not r.ranking.empty:
        lines += ranking_markdown(r.ranking, r.ranking_pairs)
    if agree["samples"]:
        lines += [agreement_line(agree), ""]
    return "\n".join(lines)


def agreement_line(agree: dict) -> str:
    """How the two scorings compare on the samples with a generated score: equal, generation
    higher (answers written in another form than the reference), likelihood higher."""
    n = agree["samples"]

    def count(share: float) -> str:
        return f"{round(share * n)} ({share:.1%})"

    kinds = f" ({agree['settled']} settled by likelihood, which agree by construction; {agree['generated']} generated)" if "settled" in agree else ""
    return (f"Generation against likelihood, on the {n} samples with a generated score{kinds}: the two scores are equal on {count(agree['agree'])}; "
            f"generation is higher on {count(agree['answered_in_another_form'])}: it found answers that the teacher-forced reference left the model's "
            f"greedy choice before (the model wrote them in another form or order than the reference, so the likelihood score undercounts them); "
            f"likelihood is higher on {count(agree['likelihood_above_generation'])}.")


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


LIKELIHOOD_SECTION = ("# On the records as they are: another measure than the PPI++ scores above",
                      "A cell with predicted samples (not generated) is scored here by likelihood: the share of answers inside the greedy prefix of the "
                      "teacher-forced reference, which undercounts answers the model writes in another form. So the scores, paired verdicts, ties and "
                      "effective lengths below are likelihood's and may be lower than, or disagree with, the PPI++ section's; the PPI++ score above "
                      "estimates what generating every sample would give, and is the run's answer.")


def ppi_section(r: RulerResult) -> list[str]:
    """A prediction-powered run's first lines: its PPI++ tables (for an `--until` run, its rounds first)."""
    assert r.ppi is not None and r.ppi_differences is not None
    return ppi_markdown(r.ppi, r.ppi_differences, r.paired_settings["score_delta"], r.manifest.config.get("until"), (r.manifest.plan or {}).get("rounds"))


def first_lines(r: RulerResult) -> str:
    """What `ruler` prints: a prediction-powered run's PPI++ section alone (the likelihood-scored
    tables, another measure, stay in results.md), else results.md."""
    return r.markdown if r.ppi is None else "\n".join(ppi_section(r)).rstrip() + "\n\nThe tables scored on the records as they are (by likelihood where a cell has predicted samples: another measure) are in results.md."


def texts(r: RulerResult) -> RulerResult:
    """results.md, from the scores, the effective lengths and the scorings' agreement; a
    prediction-powered run's PPI++ section first, the rest under a heading naming it another measure."""
    body = results_markdown(r)
    if r.ppi is None:
        return replace(r, markdown=body)
    return replace(r, markdown="\n".join([*ppi_section(r), LIKELIHOOD_SECTION[0], "", LIKELIHOOD_SECTION[1], ""]) + "\n" + body.removeprefix("# RULER synthetic tasks\n\n"))


def view(result: RulerResult, label: str, first_arm: int) -> tuple[RunView, list[Arm]]:
    """A RULER run on the report page: its tables as its Markdown holds them (a
    prediction-powered run's PPI++ scores, differences and cells first, then the tables on the
    records as they are, titled as another measure), its score by length to chart, and every
    sample for the sample explorer."""
    manifest = result.manifest.to_json()
    paired = [paired_headline(result.paired, result.paired_settings, _scoring(result.table))] if not result.ranking.empty else []  # the ranking leads, the pairs follow
    records = list(dict.fromkeys([first_headline(result, result.ppi is None), *paired, headline(result.table, result.effective_lengths, result.threshold)]))
    if result.ppi is not None and not result.ranking.empty:  # likelihood's ranking last, as in results.md
        records.append(first_headline(result))
    if result.ppi is not None and result.ppi_differences is not None:
        tables = ppi_headlines(result.ppi, result.ppi_differences, result.paired_settings["score_delta"], result.manifest.config.get("until"))
        tables += [replace(h, title=f"{h.title}, on the records as they are (another measure: by likelihood where a cell has predicted samples)") for h in records]
    else:
        tables = records
    curves, what = score_curves(result)
    return RunView(label, result.run_dir, "ruler", manifest, header(manifest, "ruler"), answer=tables[0], more=tables[1:],
                   curves=curves, curves_title=f"{label}: RULER {what} by length", samples=sample_entries(result.samples)), []


def score_curves(r: RulerResult) -> tuple[pd.DataFrame, str]:
    """Each model's score by length (the mean over tasks where there are several, else the one
    task), with its interval: the PPI++ estimate of a prediction-powered run, else the table's
    score with its interval; and what the curves are, the intervals' level and method read from the rows."""
    tasks = [t for t in dict.fromkeys(r.table["task"]) if t != MEAN_TASK]
    task = MEAN_TASK if len(tasks) > 1 else tasks[0]
    what = f"mean of {len(tasks)} tasks" if len(tasks) > 1 else task
    if r.ppi is not None:
        rows = r.ppi[r.ppi["task"] == task]
        number = {k: pd.to_numeric(rows[k]).astype(float) for k in ("score", "score.low", "score.high")}  # a column all null reads back as None
        frame = pd.DataFrame({"series": rows["model"].astype(str), "length": rows["length"].astype(int), "score": number["score"],
                              "low": number["score.low"].clip(lower=0), "high": number["score.high"].clip(upper=100)})
        return frame, f"{what}, PPI++ score ({intervals.table_header(rows, 'score')} interval)"
    rows = r.table[r.table["task"] == task]
    scoring = "by generation" if set(rows["scored_by"]) == {"generation"} else "by likelihood" if set(rows["scored_by"]) == {"likelihood"} else "scored as its table says"
    frame = pd.DataFrame({"series": rows["model"].astype(str), "length": rows["length"].astype(int), "score": rows["score"], "low": rows["score.low"], "high": rows["score.high"]})
    return frame, f"{what}, score {scoring} ({intervals.table_header(rows, 'score')} interval)"


KINDS = {"generation path": "settled", "greedy generation": "generated", "predicted (not drawn for generation)": "predicted",
         "likelihood only (no generation)": "likelihood only"}  # a record's method as the page names it


def sample_entries(samples: pd.DataFrame) -> list[dict]:
    """What the sample explorer shows of each sample: where it is, how it was scored, the end
    of its prompt (None in runs that did not keep it), the reference answers, the generated
    text (None where the sample was not generated), both scores, the answer's log p and its
    tokens' ranks (None in runs that did not keep them), and how far the model's greedy choice
    follows the teacher-forced reference (which the likelihood score reads)."""
    def number(value: object) -> float | None:
        return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)  # type: ignore[arg-type]

    out = []
    for r in samples.itertuples(index=False):
        kind = KINDS.get(str(r.method), str(r.method))
        tail, ranks = getattr(r, "prompt_tail", None), getattr(r, "answer_ranks", None)
        out.append({"model": str(r.model), "task": str(r.task), "length": int(r.length), "sample": int(r.sample), "kind": kind,
                    "prompt_tail": tail if isinstance(tail, str) else None, "answers": [str(a) for a in r.answers],
                    "generated": str(r.prediction) if kind == "generated" else None,
                    "generation_score": number(r.generation_score), "likelihood_score": number(r.likelihood_score),
                    "answer_logprob": number(r.answer_logprob), "mean_logprob": number(r.mean_logprob), "answer_tokens": int(r.answer_tokens),
                    "answer_ranks": [int(x) for x in ranks] if isinstance(ranks, (list, tuple, np.ndarray)) else None, "first_rank": int(r.first_rank),
                    "greedy_prefix": int(r.greedy_prefix), "reference_tokens": int(r.reference_tokens)})
    return out


def draw(r: RulerResult, out: Path) -> None:
    figures.plot_ruler(r.table, out / PLOT_FILE, r.threshold, mean_label)


RENDERER = Renderer(texts, view, draw)
