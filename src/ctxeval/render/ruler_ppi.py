"""The prediction-powered section of a `ruler --generate-share` run's results.md: scores and
paired differences with their intervals and verdicts, then how each cell's samples were labelled.

Intervals are clipped to what a score can be (0 to 100 points, a difference −100 to +100) where
stats/ppi.py builds them, and again where they are shown (a ppi.json written otherwise)."""

from __future__ import annotations

import math

import pandas as pd

from ctxeval.render import intervals
from ctxeval.render.headline import Headline
from ctxeval.render.verdicts import VERDICT_RULE, verdict_words
from ctxeval.results.ruler import MEAN_TASK
from ctxeval.stats.interval import Interval
from ctxeval.stats.ppi import MIN_GENERATED


FLAGS = {"samples": "--samples", "generate_share": "--generate-share", "generate_count": "--generate"}  # a remedy's options as the CLI spells them


def remedy_text(options: list[dict]) -> str:
    """The run options that would give an interval (ruler.ppi.remedy), as flags: '--samples 112,
    or --generate-share 1'."""
    return ", or ".join(" ".join(f"{FLAGS[k]} {v:g}" for k, v in option.items()) for option in options)


def _name(row: pd.Series) -> str:
    """The interval a row of ppi.json holds: a difference's `diff`, a score's `score`."""
    return "diff" if "diff" in row else "score"


def _missing(row: pd.Series, what: str) -> str:
    """Why a row has no interval (or no estimate) and what would give one."""
    reason = row.get(f"{_name(row)}.reason") or ""
    options = row.get("remedy")
    fix = f"; {remedy_text(options)} would give one" if isinstance(options, list) and options else ""
    return f"{what}{': ' + reason if reason else ''}{fix}"


def _cell(row: pd.Series, sign: bool = False) -> str:
    """A score (or a difference, `sign`) with its interval clipped to what it can be; without
    one, why and what would give one."""
    name = _name(row)
    estimate, low, high = _num(row[name]), _num(row[f"{name}.low"]), _num(row[f"{name}.high"])
    plus = "+" if sign else ""
    if math.isnan(estimate):
        return _missing(row, "no estimate")
    if math.isnan(low):
        return f"{estimate:{plus}.1f}, {_missing(row, 'no interval')}"
    floor = -100.0 if sign else 0.0
    return intervals.numbers(Interval(estimate, max(low, floor), min(high, 100.0)), 1, signed=sign)


def _num(value: object) -> float:
    """A number of a row read back from ppi.json (null, where a column is all null, is None)."""
    return math.nan if value is None else float(value)  # type: ignore[arg-type]


def _short(row: pd.Series) -> str:
    """A score whose reason the table above gives already (a run of one task)."""
    if math.isnan(_num(row["score"])):
        return "no estimate"
    return _cell(row) if not math.isnan(_num(row["score.low"])) else f"{row['score']:.1f} (no interval)"


def _difference_cell(row: pd.Series, delta: float) -> str:
    """A paired difference with its stored verdict at δ = `delta` points; an undecided one with
    the samples that would settle it at the same share and spread (the interval's standard error
    scaled as 1/√n)."""
    if math.isnan(_num(row["diff"])):
        return _cell(row, sign=True)
    words = verdict_words(row["diff.outcome"], row["diff.low"], row["diff.high"], delta, row["diff.samples_needed"], worse="lower")
    return f"{_cell(row, sign=True)}; {words}" if math.isnan(_num(row["diff.low"])) else f"{_cell(row, sign=True)} {words}"


def _headline_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The mean over tasks where a model has several, else its one task."""
    tasks = [t for t in dict.fromkeys(table["task"]) if t != MEAN_TASK]
    return table[table["task"] == (MEAN_TASK if len(tasks) > 1 else tasks[0])]


def _wide_rows(table: pd.DataFrame, delta: float | None = None) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """The headline rows by length: (lengths, one row per model of its cells); `delta`: a table of
    differences, whose cells carry their verdicts at that δ."""
    shown = _headline_rows(table)
    lengths = sorted(set(int(n) for n in shown["length"]))
    cells = {(str(r["model"]), int(r["length"])): _difference_cell(r, delta) if delta is not None else _cell(r) for _, r in shown.iterrows()}
    models = list(dict.fromkeys(str(m) for m in shown["model"]))
    return tuple(str(n) for n in lengths), tuple((m, *(cells.get((m, n), "—") for n in lengths)) for m in models)


SETTLED_WORD = "settled"  # the one word for a sample greedy decoding answers with the reference (exact, not generated)


def ppi_headlines(scores: pd.DataFrame, differences: pd.DataFrame, delta: float, until: dict | None = None) -> list[Headline]:
    """The section's tables: scores by length, differences against the first model with their
    verdicts at δ = `delta` points (an `--until verdict` run's own δ), how each cell's samples
    were labelled."""
    where = ("" if not until else " (a look before the budget stopped a cell: its confidence sequence, valid at every look of --until; "
             "the budget reached: full generation's interval)" if until.get("looks") == "sequence" else " (each look of --until)")
    level = f"intervals: {intervals.table_header(scores, 'score')}{where}"
    tasks = [t for t in dict.fromkeys(scores["task"]) if t != MEAN_TASK]
    what = f"mean of {len(tasks)} tasks" if len(tasks) > 1 else tasks[0]
    generated, predicted, exact = (int(scores.loc[scores["task"] != MEAN_TASK, k].sum()) for k in ("generated", "predicted", "exact"))
    missing = [f"No interval: fewer than {MIN_GENERATED} of a cell's unsettled samples were generated; the options named would give one "
               f"(in expectation: which samples are drawn is a seeded draw)."] if scores["score.low"].isna().any() or (
        not differences.empty and differences["diff.low"].isna().any()) else []
    lengths, rows = _wide_rows(scores)
    out = [tied_headline(scores)] if "groups" in scores and scores["order"].notna().any() else []
    out += [Headline("RULER, prediction-powered (PPI++)",
                    f"score ({what}, percent) that generating every sample would give, by length in tokens; {level}. Of {exact + generated + predicted} samples: "
                    f"{exact} {SETTLED_WORD} by likelihood (greedy decoding produces the reference: exact, not generated), {generated} generated, "
                    f"{predicted} predicted from their likelihood numbers (cross-fitted calibration)",
                    ("model", *lengths), rows, tuple(missing))]
    if not differences.empty:
        reference = differences["reference"].iloc[0]
        delta = until["delta"] if until and until.get("delta") is not None else delta
        lengths, rows = _wide_rows(differences, delta)
        out.append(Headline(f"RULER, prediction-powered paired differences against {reference}",
                            f"points, variant − reference on the same samples; intervals: {intervals.table_header(differences, 'diff')}{where}; verdict at δ = {delta:g} points: "
                            f"{VERDICT_RULE} (at the same share)", ("variant", *lengths), rows, tuple(missing)))
    cells = scores[scores["task"] != MEAN_TASK]
    out.append(Headline("Per cell", f"the PPI++ score and how its samples were labelled ({SETTLED_WORD}: exact, not generated)",
                        ("model", "task", "length", "score", SETTLED_WORD, "generated", "predicted"),
                        tuple((str(r["model"]), str(r["task"]), str(int(r["length"])), _cell(r) if len(tasks) > 1 else _short(r), str(int(r["exact"])), str(int(r["generated"])),
                               str(int(r["predicted"]))) for _, r in cells.iterrows())))
    return out


def tied_headline(scores: pd.DataFrame) -> Headline:
    """Which variants are tied, from the PPI++ estimates (`ruler.ppi_ranking`): per length the
    models in order, each against the top with its simultaneous interval, and the groups; or, per
    length, why they cannot be told apart yet."""
    ranked = scores[scores["order"].notna()].sort_values(["length", "order"])
    first = ranked.iloc[0]
    level = float(first["simultaneous_confidence"])
    rows = []
    for _, r in ranked.iterrows():
        to_top = "— (the top)" if int(r["order"]) == 1 else intervals.cell(r, "to_top", 1, signed=True)
        rows.append((str(int(r["length"])), str(int(r["order"])), str(r["model"]), _cell(r), to_top, str(r["groups"]) or "—"))
    notes = [f"{int(n)}: cannot tell yet: {part['tied_reason'].iloc[0]}." for n, part in ranked.groupby("length", sort=False) if part["tied_reason"].iloc[0]]
    what = "mean of tasks" if first["task"] == MEAN_TASK else str(first["task"])
    return Headline("RULER, prediction-powered: which variants are tied",
                    f"{what}, per length: the models in order of their PPI++ score (percent), each against the top on the same samples with its "
                    f"paired PPI++ difference at {intervals.level(level)} (Bonferroni over the {int(first['pairs'])} pairs: simultaneous "
                    f"{intervals.level(1 - (1 - level) * int(first['pairs']))}); models sharing a letter are not told apart (no pair's simultaneous interval "
                    f"excludes 0)", ("length", "#", "model", "score, %", "Δ to the top, points [simultaneous]", "group"), tuple(rows), tuple(notes))


def ppi_markdown(scores: pd.DataFrame, differences: pd.DataFrame, delta: float, until: dict | None = None, rounds: list[dict] | None = None) -> list[str]:
    """Lines of the section: for an `--until` run, its rounds first and each look's confidence;
    then the tables of `ppi_headlines`."""
    lines = ["# RULER, prediction-powered (PPI++)", "", *(rounds_markdown(until, rounds or []) if until else [])]
    for headline in ppi_headlines(scores, differences, delta, until):
        lines += [*headline.markdown(), ""]
    if "flips_lost" in differences:  # ppi.json of a run before flips were recorded has none
        lines += flips_markdown(differences)
    return lines


def flips_markdown(differences: pd.DataFrame) -> list[str]:
    """Per variant, task and length: the flips of the pairs whose generated scores are both known,
    and McNemar's exact p (mid-p) where they are 0 or 1."""
    def p(value: float | None) -> str:
        return "none: partial credit" if value is None or pd.isna(value) else ("< 0.001" if value < 0.001 else f"{value:.3f}")

    table = pd.DataFrame({"variant": differences["model"], "task": differences["task"], "length": differences["length"],
                          "labelled pairs": differences["labelled_pairs"],
                          "flips 1→0 / 0→1 / partial": [f"{a} / {b} / {c}" for a, b, c in zip(differences["flips_lost"], differences["flips_gained"], differences["flips_partial"])],
                          "McNemar p, exact (mid-p)": [p(e) if pd.isna(e) else f"{p(e)} ({p(m)})" for e, m in zip(differences["mcnemar_p"], differences["mcnemar_midp"])]})
    return ["Flips on the labelled pairs (both generated scores known: settled or generated on each side): right in the reference and wrong in "
            "the variant, the reverse, and differing partial-credit pairs, with McNemar's exact p (mid-p) where every score is 0 or 1; the "
            "estimate above extends them to every pair through the predictions.", "", table.to_markdown(index=False), ""]


def rounds_markdown(until: dict, rounds: list[dict]) -> list[str]:
    """How an `--until` run sampled: the target, the rounds and what each answered."""
    target = f"a verdict (δ = {until['delta']:g} points)" if until["half_width"] is None else f"a half-width of {until['half_width']:g} points"
    lines = [family_line(until), ""]
    if until.get("looks") == "sequence":
        early = until.get("early_confidence", until["confidence"])
        lines += [f"Sampled until {target} per task and length, at most {until['max_samples']} samples each, in batches of {until['round_size']}; "
                 f"each look before the budget reads a {early:.1%} betting confidence sequence, valid at every look at once (a variant stops at the "
                 f"first batch that decides it; the first model runs while a variant of its cell is open); the look at the budget reads full "
                 f"generation's {until['confidence']:.0%} interval on the same samples, so an open variant ends with the fixed-n run's verdict.", ""]
    else:
        lines += [f"Sampled until {target} per task and length, at most {until['max_samples']} samples each, in rounds of {until['round_size']}; "
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


def family_line(until: dict) -> str:
    """The level an `--until` run's stopping intervals hold at, and for which family: each
    (variant, task, length) on its own, with the union bound for all of them at once, or all at
    once where the run split its error over them (`--until-simultaneous`). The run's level is
    read back from its looks' (`until`'s confidence, split over the rounds and the family)."""
    cells = int(until.get("cells", 1))
    what = "verdict" if until["half_width"] is None else "score"
    unit = "variant" if what == "verdict" else "model"
    sequence = until.get("looks") == "sequence"
    alpha = (1 - until["confidence"]) * (cells if until.get("simultaneous") else 1) * (1 if sequence else int(until["rounds"]))
    level = intervals.level(1 - alpha)
    if until.get("simultaneous"):
        return (f"Level: {level} for all {cells} {what}s at once ({unit}s × tasks × lengths; --until-simultaneous split the {intervals.level(alpha)} error "
                f"over them, Bonferroni), each look below at its share of it.")
    early = 1 - until.get("early_confidence", until["confidence"])
    own = level if not sequence else (f"{level} as simulated ({intervals.level(1 - early - alpha)} by the union bound of the sequence's "
                                      f"{intervals.level(early)} and the last look's {intervals.level(alpha)})")
    joint = max(0.0, 1 - alpha * cells)
    return (f"Level: {own} for each {what} on its own ({unit}, task and length), as a fixed-n run's; all {cells} at once at least "
            f"{100 * joint:.0f} % (union bound){'' if cells == 1 else f'; --until-simultaneous makes it {level} for all at once'}.")


def compute_markdown(c: dict, budget: int) -> list[str]:
    """The run's compute against the fixed-n run of the same budget."""
    tokens = f" ({c['prompt_tokens']:,} prompt tokens against about {c['fixed_prompt_tokens']:,})" if c.get("prompt_tokens") is not None else ""
    generated = (f"; {c['generated_tokens']:,} generated tokens against about {c['fixed_generated_tokens']:,} (at each cell's mean per generation), "
                 f"{c['generated_tokens'] / c['fixed_generated_tokens'] if c['fixed_generated_tokens'] else 0:.2f}x") if c.get("generated_tokens") is not None else ""
    return [f"Compute against the fixed-n run of the same budget ({budget} samples per task, length and model): {c['passes']} likelihood passes "
            f"against {c['fixed_passes']}{tokens}, {c['passes'] / c['fixed_passes']:.2f}x; {c['generations']} generations against about "
            f"{c['fixed_generations']:g} (each cell's unsettled share times {budget}), "
            f"{c['generations'] / c['fixed_generations'] if c['fixed_generations'] else 0:.2f}x{generated}."]


def _variants(variants: list[list]) -> str:
    """(model, task, length) triples as 'model on task at length'."""
    return ", ".join(f"{m} on {t} at {n}" for m, t, n in variants)
