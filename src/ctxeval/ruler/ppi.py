"""Prediction-powered RULER scores (`ruler --generate-share P`): every sample scored by likelihood,
a seeded share of the unsettled ones generated, the rest predicted.

Each sample is one of three (its record's `method`): *settled* ("generation path": greedy
decoding produces the reference, so its generated score is known exactly, at no cost),
*generated* ("greedy generation": drawn for generation, which RULER's scorer reads), or
*predicted* (not drawn: only its likelihood numbers). Whether an unsettled sample is drawn is
a pure function of (seed, task, length, sample), so every variant of a run draws the same
samples and a variant's paired difference against the first model is labelled on exactly the
pairs drawn.

The prediction is P(correct generation) from the likelihood numbers (mean answer log p, log2 of
the first answer token's rank, the greedy verdict) and the task, a logistic calibration fitted
on the generated samples of the whole run, pooled across its cells, cross-fitted in K folds by
sample identity (`stats/crossfit.py`). Pooled, because one cell holds a handful of generated
samples, too few to fit four numbers on; the validity of PPI does not depend on the prediction
being right for a cell (a poor one only widens the interval), while a prediction fitted on its
own label would narrow it falsely, which the folds rule out.
"""

from __future__ import annotations

import functools
import math
from dataclasses import replace

import numpy as np
import pandas as pd

from ctxeval.ruler.paired import DEFAULT_SCORE_DELTA, flip_columns
from ctxeval.ruler.ppi_ranking import ppi_ranking
from ctxeval.ruler.samples import sample_rng
from ctxeval.results.ruler import MEAN_TASK
from ctxeval.stats.crossfit import FOLDS, cross_fit
from ctxeval.stats.defaults import DEFAULT_CONFIDENCE
from ctxeval.stats.interval import Interval
from ctxeval.ruler.generation import Generation
from ctxeval.stats.ppi import MIN_GENERATED, PPIEstimate, mean_of, stratified_ppi
from ctxeval.stats.verdict import Verdict, verdict

GENERATED = "greedy generation"
SETTLED = "generation path"
PREDICTED = "predicted (not drawn for generation)"


def _uniform(seed: int, task: str, length: int, sample: int) -> float:
    """The seeded uniform of a sample's draw for generation, by its identity."""
    return sample_rng(seed, "generate-share", task, length, sample).random()


def drawn(seed: int, task: str, length: int, sample: int, share: float) -> bool:
    """Whether an unsettled sample is generated: a seeded uniform draw below the share, the same
    for every model of the run (so paired differences are labelled on the same samples)."""
    return _uniform(seed, task, length, sample) < share


def drawn_of_count(seed: int, task: str, length: int, sample: int, count: int, samples: int) -> bool:
    """Whether a sample is among the `count` of its cell's `samples` drawn for generation
    (`--generate N`): those whose seeded uniforms, the ones `drawn` compares with a share, are
    smallest, so the same samples are drawn for every model and a simple random sample of the
    cell is labelled."""
    return sample in _smallest_draws(seed, task, length, count, samples)


@functools.lru_cache(maxsize=1024)
def _smallest_draws(seed: int, task: str, length: int, count: int, samples: int) -> frozenset[int]:
    uniforms = [_uniform(seed, task, length, k) for k in range(samples)]
    return frozenset(sorted(range(samples), key=uniforms.__getitem__)[:count])


def fold_of(seed: int, task: str, length: int, sample: int, k: int = FOLDS) -> int:
    """The cross-fitting fold of a sample, by its identity: both sides of a pair share it."""
    return sample_rng(seed, "ppi-fold", task, length, sample).randrange(k)


def features(samples: pd.DataFrame) -> np.ndarray:
    """The calibration's inputs: mean answer log p, log2 of the first answer token's rank (an
    unknown rank counts as 1), the greedy verdict (share of answers inside the greedy prefix),
    and one indicator per task."""
    tasks = sorted(set(samples["task"]))
    numeric = np.column_stack([samples["mean_logprob"].to_numpy(float), np.log2(np.maximum(samples["first_rank"].to_numpy(float), 1)),
                               samples["likelihood_score"].to_numpy(float)])
    indicators = np.column_stack([(samples["task"] == t).to_numpy(float) for t in tasks[1:]]) if len(tasks) > 1 else np.empty((len(samples), 0))
    return np.concatenate([numeric, indicators], axis=1)


def with_predictions(samples: pd.DataFrame, seed: int, k: int = FOLDS) -> pd.DataFrame:
    """The samples with `exact`, `generated` and `prediction` (cross-fitted P(correct generation))."""
    out = samples.reset_index(drop=True).copy()
    out["exact"] = out["method"] == SETTLED
    out["generated"] = out["method"] == GENERATED
    folds = np.array([fold_of(seed, t, int(n), int(s), k) for t, n, s in zip(out["task"], out["length"], out["sample"])])
    labels = out["generation_score"].fillna(0.0).to_numpy(float)
    out["prediction"] = cross_fit(features(out), labels, out["generated"].to_numpy(), folds, k)
    return out


def _estimate(part: pd.DataFrame, confidence: float) -> PPIEstimate:
    y = part["generation_score"].to_numpy(float)
    return stratified_ppi(y, part["prediction"].to_numpy(float), part["exact"].to_numpy(), part["generated"].to_numpy(), confidence)


def _difference(pairs: pd.DataFrame, confidence: float) -> PPIEstimate:
    """The paired difference variant − reference: exact where both sides are, labelled where
    both labels are known, else the difference of predictions (an exact side's label standing
    for its prediction)."""
    def side(suffix: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        exact = pairs[f"exact{suffix}"].to_numpy()
        known = exact | pairs[f"generated{suffix}"].to_numpy()
        y = pairs[f"generation_score{suffix}"].to_numpy(float)
        return np.where(known, y, np.nan), np.where(exact, y, pairs[f"prediction{suffix}"].to_numpy(float)), known

    y_v, f_v, known_v = side("_v")
    y_r, f_r, known_r = side("_r")
    exact = pairs["exact_v"].to_numpy() & pairs["exact_r"].to_numpy()
    return stratified_ppi(y_v - y_r, f_v - f_r, exact, known_v & known_r & ~exact, confidence, label_range=(-1.0, 1.0))


def _row(model: str, task: str, length: int, estimate: PPIEstimate, **extra: object) -> dict:
    """A row of ppi.json's scores: the estimate as interval `score` (percent) and how its samples were labelled."""
    return {"model": model, "task": task, "length": length, **extra, **estimate.scaled(100).columns("score"), "samples": estimate.n,
            "exact": estimate.exact, "generated": estimate.generated, "predicted": estimate.predicted, "df": estimate.df}


def labelled_flips(pairs: pd.DataFrame) -> dict:
    """The flips of the pairs whose two generated scores are known (each side settled or
    generated), with McNemar's p where they are 0 or 1: what the labels show, beside the
    estimate that the predictions extend to every pair."""
    known = (pairs["exact_v"] | pairs["generated_v"]) & (pairs["exact_r"] | pairs["generated_r"])
    labelled = pairs[known.to_numpy()]
    return {"labelled_pairs": len(labelled),
            **flip_columns(labelled["generation_score_r"].to_numpy(float), labelled["generation_score_v"].to_numpy(float))}


def difference_verdict(estimate: PPIEstimate, delta: float) -> Verdict:
    """The verdict of a variant's PPI++ difference against the first model (points; a lower
    variant score is a loss): the one place it is decided, stored in ppi.json and read by the
    report, `--until` and bench/."""
    return verdict(estimate.scaled(100), delta, worse="lower")


def difference_row(model: str, task: str, length: int, estimate: PPIEstimate, reference: str, delta: float) -> dict:
    decided = difference_verdict(estimate, delta)
    # without an interval the spread says nothing of the samples a verdict needs: the remedy
    # (`with_remedies`, the samples or share that give an interval) says what would
    needed = decided.samples_needed if estimate.has_interval else None
    counts = {"samples": estimate.n, "exact": estimate.exact, "generated": estimate.generated, "predicted": estimate.predicted, "df": estimate.df}
    return {"model": model, "task": task, "length": length, "reference": reference, **replace(decided, samples_needed=needed).columns("diff"), **counts}


def ppi_tables(samples: pd.DataFrame, seed: int, k: int = FOLDS, confidence: float = DEFAULT_CONFIDENCE,
               delta: float = DEFAULT_SCORE_DELTA) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(scores, differences) in percent: per model, task and length (and the mean over tasks
    per length) the PPI++ score with its interval (95 %, or `confidence`: `--until`'s per look); per variant after the first model, its
    paired difference against the first on the same samples with its verdict at δ = `delta`
    points (cells whose prompts differ, as across tokenizers, are left out)."""
    return tables_of_predicted(with_predictions(samples, seed, k), confidence, delta)


def tables_of_predicted(scored: pd.DataFrame, confidence: float = DEFAULT_CONFIDENCE, delta: float = DEFAULT_SCORE_DELTA) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`ppi_tables` on samples that already carry their cross-fitted predictions
    (`with_predictions`), for a caller that needs the predictions too."""
    cells: dict[tuple[str, int], dict[str, PPIEstimate]] = {}
    rows = []
    for (model, task, length), part in scored.groupby(["model", "task", "length"], sort=False):
        estimate = _estimate(part, confidence)
        cells.setdefault((str(model), int(length)), {})[str(task)] = estimate
        rows.append(_row(str(model), str(task), int(length), estimate))
    for (model, length), by_task in cells.items():
        if len(by_task) > 1:
            rows.append(_row(model, MEAN_TASK, length, mean_of(list(by_task.values()), confidence)))
    models = list(dict.fromkeys(scored["model"]))
    diffs = []
    keys = ["task", "length", "sample"]
    reference = scored[scored["model"] == models[0]]
    for model in models[1:]:
        pairs = scored[scored["model"] == model].merge(reference, on=keys, suffixes=("_v", "_r"))
        by_length: dict[int, list[tuple[PPIEstimate, pd.DataFrame]]] = {}
        for (task, length), part in pairs.groupby(["task", "length"], sort=False):
            if not (part["prompt_sha256_v"] == part["prompt_sha256_r"]).all():
                continue
            estimate = _difference(part, confidence)
            by_length.setdefault(int(length), []).append((estimate, part))
            diffs.append(difference_row(str(model), str(task), int(length), estimate, models[0], delta) | labelled_flips(part))
        for length, cells in by_length.items():
            if len(cells) > 1:
                estimate = mean_of([e for e, _ in cells], confidence)
                diffs.append(difference_row(str(model), MEAN_TASK, length, estimate, models[0], delta) | labelled_flips(pd.concat([p for _, p in cells])))
    return with_ranking(pd.DataFrame(rows), scored, confidence), pd.DataFrame(diffs)


def with_ranking(scores: pd.DataFrame, scored: pd.DataFrame, confidence: float) -> pd.DataFrame:
    """The scores with, on the headline task's rows of a run of three or more models, their order,
    difference to the top at simultaneous confidence and tie groups (`ruler.ppi_ranking`)."""
    ranking = ppi_ranking(scored, scores, _difference, confidence)
    if ranking.empty:
        return scores
    columns = ["order", *Interval(math.nan).columns("to_top"), "groups", "pairs", "simultaneous_confidence", "tied_reason"]
    ranking = ranking[["model", "task", "length", *columns]]
    return scores.merge(ranking, on=["model", "task", "length"], how="left")


def remedy(samples: int, unsettled: int, generation: Generation) -> list[dict[str, float | int]]:
    """What would give a cell (or a pair's cell) with `samples` samples, `unsettled` of them not
    settled by likelihood, an interval: each entry a set of the run's options (by their field
    names: `samples`, `generate_share`, `generate_count`). At the run's own share first, the
    samples at which, in expectation, at least MIN_GENERATED unsettled samples are generated;
    then a larger share at these samples where enough are unsettled, else every unsettled sample
    generated (share 1: every sample labelled, which always gives an interval); a `--generate N`
    run, the smaller of the N reaching MIN_GENERATED in expectation and the N that draws every
    sample. The unsettled share is the one these samples show. Where the run's own settings reach
    MIN_GENERATED in expectation (the draw fell short by chance), no option repeats them: share 1
    at these samples, which always gives an interval."""
    if samples < 2 and unsettled == 0:
        return [{"samples": 2}]
    if unsettled == 0:
        return []
    def up(x: float) -> int:  # the least whole number reaching x (a product of decimal shares lands a hair above a whole one)
        return math.ceil(x - 1e-9)

    if generation.mode == "count":
        return [{"generate_count": min(up(MIN_GENERATED * samples / unsettled), max(samples, MIN_GENERATED))}]
    share = generation.share if generation.share is not None else 1.0
    needed = up(MIN_GENERATED * samples / (share * unsettled))
    options: list[dict[str, float | int]] = [{"samples": needed}] if needed > samples else []
    larger = up(100 * MIN_GENERATED / unsettled) / 100 if unsettled >= MIN_GENERATED else 1.0
    if share < 1:
        options.append({"generate_share": larger if larger > share else 1.0})
    return options


def with_remedies(table: pd.DataFrame, generation: Generation) -> pd.DataFrame:
    """`ppi_tables`' scores or differences with `remedy` on every row without an interval (the
    mean over tasks: its worst task's, the one needing the most samples); an empty list where
    there is an interval."""
    if table.empty:
        return table.assign(remedy=[])
    out = table.copy()
    name = "diff" if "reference" in out else "score"
    own = [remedy(int(r["samples"]), int(r["generated"]) + int(r["predicted"]), generation) if math.isnan(r[f"{name}.low"]) else []
           for _, r in out.iterrows()]
    out["remedy"] = own
    unit = "pairs" if "reference" in out else "samples"
    for i, r in out.iterrows():  # the counts behind "too few generated", as this table counts them
        if r["task"] != MEAN_TASK and math.isnan(r[f"{name}.low"]) and r["samples"] >= 2 and r["generated"] < MIN_GENERATED:
            verb = "labelled by generation" if unit == "pairs" else "generated"
            out.at[i, f"{name}.reason"] = f"{int(r['generated'])} of its {int(r['generated'] + r['predicted'])} unsettled {unit} {verb}, an interval needs {MIN_GENERATED}"
    for i, r in out.iterrows():
        if r["task"] == MEAN_TASK and math.isnan(r[f"{name}.low"]):
            same = (out["model"] == r["model"]) & (out["length"] == r["length"]) & (out["task"] != MEAN_TASK)
            worst = [o for o in out.loc[same, "remedy"] if o]
            out.at[i, "remedy"] = max(worst, key=_cost) if worst else []
    return out


def _cost(options: list[dict[str, float | int]]) -> float:
    """How far a remedy reaches: the samples (or generations) its first option asks for."""
    return float(options[0].get("samples", options[0].get("generate_count", 0))) if options else 0.0
