"""What a RULER run's samples report: cells per (model, task, length) with intervals, the mean
over tasks per length, RULER's effective length per task and for the mean, how often the two
scorings agree, the paired differences of every variant against the first model
(ruler/paired.py), and the run's result built from them."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ctxeval.ruler.generation import Generation
from ctxeval.ruler.paired import PairedSettings, paired_table
from ctxeval.ruler.ppi import ppi_tables, with_remedies
from ctxeval.ruler.ranking import ranking_tables
from ctxeval.ruler.until import Until, look_tables
from ctxeval.results.manifest import Manifest
from ctxeval.results.ruler import MEAN_TASK, RulerResult, read_samples
from ctxeval.stats.defaults import DEFAULT_CONFIDENCE
from ctxeval.stats.pseudo_labels import mover_mean, pseudo_label_interval

RULER_THRESHOLD = 85.6  # Llama-2-7B's mean at 4K; RULER underlines scores at or above it


def score_column(samples: pd.DataFrame) -> str:
    """The task score: generation (RULER's) where the run generated, else likelihood."""
    return "generation_score" if samples["generation_score"].notna().all() else "likelihood_score"


def cell_table(samples: pd.DataFrame) -> pd.DataFrame:
    """Per (model, task, length): RULER's score (percent) with its interval (pseudo-labels and Student's t,
    `stats.pseudo_labels.pseudo_label_interval`), the likelihood
    score, how often the two agree, and the continuous likelihood numbers."""
    rows = []
    for (model, task, length), part in samples.groupby(["model", "task", "length"], sort=False):
        n = len(part)
        generated = part["generation_score"].notna().all()
        score = part["generation_score"] if generated else part["likelihood_score"]
        # the pseudo-label t interval, not Wilson's: Wilson's covers as little as 0.838 at these n (stats/pseudo_labels.py)
        interval = pseudo_label_interval(score.to_numpy(float)).scaled(100)
        rows.append({
            "model": model, "task": task, "length": int(length), "n": n, **interval.columns("score"),
            "scored_by": "generation" if generated else "likelihood",
            "likelihood": 100 * float(part["likelihood_score"].mean()),
            "agree": float((part["generation_score"] == part["likelihood_score"]).mean()) if generated else None,
            "mean_logprob": float(part["mean_logprob"].mean()), "mean_log2_rank": float(part["mean_log2_rank"].mean()),
            "top1_first": float((part["first_rank"] == 1).mean()), "generated": int((part["method"] == "greedy generation").sum()),
            "prompt_tokens": float(part["prompt_tokens"].mean()),
        })
    return pd.DataFrame(rows)


def mean_table(cells: pd.DataFrame) -> pd.DataFrame:
    """Per (model, length): the mean over the run's tasks of the task scores (RULER averages its 13; 11 are offered), with the
    MOVER interval of that mean from the tasks' intervals, and the same means of the likelihood numbers."""
    rows = []
    for (model, length), part in cells.groupby(["model", "length"], sort=False):
        n = int(part["n"].sum())
        # MOVER over the tasks' intervals (stats/pseudo_labels.mover_mean): a proportion pooled over all the
        # length's samples is the sample-weighted mean, not this mean of task scores, where tasks differ in size
        mean = mover_mean(part["score"].tolist(), part["score.low"].tolist(), part["score.high"].tolist(), float(part["score.confidence"].iloc[0]))
        rows.append({"model": model, "task": MEAN_TASK, "length": int(length), "n": n, **mean.columns("score"),
                     "scored_by": part["scored_by"].iloc[0], "likelihood": float(part["likelihood"].mean()),
                     "agree": float(part["agree"].mean()) if part["agree"].notna().all() else None,
                     "mean_logprob": float(part["mean_logprob"].mean()), "mean_log2_rank": float(part["mean_log2_rank"].mean()),
                     "top1_first": float(part["top1_first"].mean()), "generated": int(part["generated"].sum()), "prompt_tokens": float(part["prompt_tokens"].mean())})
    return pd.DataFrame(rows)


def effective_length(scores: pd.Series, threshold: float = RULER_THRESHOLD) -> dict:
    """RULER's rule on one curve (score by length): the longest length whose score, and every
    shorter length's, is at or above `threshold`; None when the shortest is below it."""
    scores = scores.sort_index()
    passing = (scores >= threshold).cummin()
    value = int(scores.index[passing.to_numpy()].max()) if passing.any() else None
    return {"value": value, "at_least": bool(passing.all()), "threshold": threshold}


def effective_lengths(table: pd.DataFrame, threshold: float = RULER_THRESHOLD) -> dict[str, dict[str, dict]]:
    """Per model and task (the mean included): RULER's effective length."""
    out: dict[str, dict[str, dict]] = {}
    for (model, task), part in table.groupby(["model", "task"], sort=False):
        out.setdefault(str(model), {})[str(task)] = effective_length(part.set_index("length")["score"], threshold)
    return out


def agreement(samples: pd.DataFrame) -> dict:
    """How often generation and likelihood score a sample alike, and what the other samples are."""
    generated = samples[samples["generation_score"].notna()]
    if generated.empty:
        return {"samples": 0, "agree": None}
    same = generated["generation_score"] == generated["likelihood_score"]
    other_form = generated["generation_score"] > generated["likelihood_score"]
    return {"samples": len(generated), "settled": int((generated["method"] == "generation path").sum()),
            "generated": int((generated["method"] == "greedy generation").sum()), "agree": float(same.mean()),
            "answered_in_another_form": float(other_form.mean()),  # generation found answers the reference's greedy prefix did not hold
            "likelihood_above_generation": float((generated["generation_score"] < generated["likelihood_score"]).mean())}


def ruler_result(run_dir: Path, manifest: Manifest, threshold: float, paired: PairedSettings = PairedSettings()) -> RulerResult:
    """A finished run's result, from its recorded samples; `paired`: the margins and bootstrap
    of the paired differences against the first model; a --generate-share or --generate run's
    with its prediction-powered scores and differences."""
    samples = read_samples(run_dir)
    cells = cell_table(samples)
    table = pd.concat([cells, mean_table(cells)], ignore_index=True)
    lengths = effective_lengths(table, threshold)
    agree = agreement(samples)
    settings = {"score_delta": paired.score_delta, "logp_delta": paired.logp_delta, "replicates": paired.replicates, "seed": paired.seed,
                "confidence": paired.confidence}
    until = Until.from_config(manifest.config)
    confidence, delta = (DEFAULT_CONFIDENCE, paired.score_delta) if until is None else (until.confidence, until.verdict_delta)
    generation = Generation.from_config(manifest.config)
    ppi, differences = ((None, None) if not generation.prediction_powered
                        else ppi_tables(samples, int(manifest.config["seed"]), confidence=confidence, delta=delta) if until is None
                        else look_tables(samples, int(manifest.config["seed"]), until))  # what its looks read: the run's result is the interval it stopped on
    if ppi is not None:  # a cell without an interval: the samples or share that would give one
        ppi, differences = with_remedies(ppi, generation), with_remedies(differences, generation)
    score = score_column(samples)
    return RulerResult(Path(run_dir), manifest, threshold, table, lengths, agree, paired_table(samples, score, paired), settings,
                       *ranking_tables(samples, score, paired.confidence), samples, ppi=ppi, ppi_differences=differences)
