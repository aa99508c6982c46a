"""Paired differences of a RULER run: every variant against the first model, on the same prompts.

Variants of one model (presses, KV types, a context limit) answer the same prompts when they
share the tokenizer and the seed: sample k of a cell is then the same text for each, and the
difference of their scores on it is a paired difference. Paired, the answer log p tells a
strong press from the full cache in a few samples where two separate Wilson intervals overlap
for dozens (docs/agreement.md). Per cell (task, length) and for the mean over the run's tasks:

- the score difference (candidate − reference, points) with Tango's score interval for paired
  0/1 outcomes (stats/paired_binary.py; partial credit as a fraction of a sample);
- the answer log p difference (mean log p per answer token, nats) with a paired BCa interval
  over samples (stats/paired.py, seed 001's method);
- each with the three-outcome verdict (stats/verdict.py) against a stated δ, and the samples
  that would settle an undecided one;
- the flips (stats/mcnemar.py): samples right in the reference and wrong in the variant, the
  reverse, and pairs with partial credit that differ, counted apart; with McNemar's exact and
  mid-p p-values where every score of the cell is 0 or 1 (None, with the reason, elsewhere).

A cell is paired only where every sample's prompt (its sha256) is the reference's; a model with
another tokenizer (or prompts that differ otherwise) gets no paired row for that cell, and the
note says why: its scores are compared with the reference's only through their own intervals.
The per-cell function `paired_cell` is the API a later estimator (a prediction-powered
difference) builds on: it takes the two models' aligned samples of one cell.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ctxeval.results.ruler import MEAN_TASK
from ctxeval.stats.defaults import DEFAULT_CONFIDENCE, DEFAULT_REPLICATES, DEFAULT_SEED
from ctxeval.stats.interval import Interval
from ctxeval.stats.mcnemar import flips, mcnemar_exact
from ctxeval.stats.paired import paired_bca
from ctxeval.stats.paired_binary import paired_proportions
from ctxeval.stats.verdict import verdict

DEFAULT_SCORE_DELTA = 5.0  # points of RULER score: a loss smaller than this is "within δ"
DEFAULT_LOGP_DELTA = 0.1  # nats of mean answer log p per token (StreamingLLM at 512 on SmolLM2 moved it by 0.25 and lost 53 points)
KEYS = ["task", "length", "sample"]


@dataclass(frozen=True)
class PairedSettings:
    """The verdicts' margins and the bootstrap of the log p interval."""

    score_delta: float = DEFAULT_SCORE_DELTA
    logp_delta: float = DEFAULT_LOGP_DELTA
    replicates: int = DEFAULT_REPLICATES
    seed: int = DEFAULT_SEED
    confidence: float = DEFAULT_CONFIDENCE


def aligned(reference: pd.DataFrame, candidate: pd.DataFrame) -> pd.DataFrame:
    """The two models' samples side by side on (task, length, sample): columns `*_ref`, `*_cand`."""
    return reference.merge(candidate, on=KEYS, suffixes=("_ref", "_cand"), validate="one_to_one")


def paired_cell(pairs: pd.DataFrame, score: str, settings: PairedSettings) -> dict:
    """The paired differences of one cell (or of the pooled cells of a length): `pairs` holds
    `aligned` rows of the same prompts, `score` names the score column (generation_score or
    likelihood_score). Scores in points, log p in nats per answer token."""
    n = len(pairs)
    reference, candidate = pairs[f"{score}_ref"].to_numpy(), pairs[f"{score}_cand"].to_numpy()
    diff = paired_proportions(reference, candidate, settings.confidence)
    score_verdict = verdict(diff.scaled(100), settings.score_delta, worse="lower")
    logp = (pairs["mean_logprob_cand"] - pairs["mean_logprob_ref"]).to_numpy(dtype=np.float64)
    if np.isfinite(logp).all():
        est = paired_bca(logp, np.ones(n), settings.replicates, settings.seed, settings.confidence, unit="sample")
        logp_verdict = verdict(est if est.interval == "none" else replace(est, reason=""), settings.logp_delta, worse="lower")
        logp_interval = est.interval
    else:
        logp_verdict = verdict(Interval(math.nan, n=n, confidence=settings.confidence), settings.logp_delta, worse="lower", reason="a log p is unknown")
        logp_interval = "none"
    return {"n": n, **score_verdict.columns("score_diff"), "score_gained": diff.gained, "score_lost": diff.lost,
            **logp_verdict.columns("logp_diff"), "logp_interval": logp_interval, **flip_columns(reference, candidate)}


def flip_columns(reference: np.ndarray, candidate: np.ndarray) -> dict:
    """The paired table's flip columns of one cell: right → wrong, wrong → right, partial pairs
    that differ, and McNemar's exact p and mid-p where every score is 0 or 1."""
    counted = flips(reference, candidate)
    exact, mid = mcnemar_exact(counted.lost, counted.gained) if counted.binary else (None, None)
    return {"flips_lost": counted.lost, "flips_gained": counted.gained, "flips_partial": counted.partial, "mcnemar_p": exact, "mcnemar_midp": mid,
            "mcnemar_reason": "" if counted.binary else "partial credit: McNemar's test needs scores of 0 or 1"}


def paired_table(samples: pd.DataFrame, score: str, settings: PairedSettings = PairedSettings()) -> pd.DataFrame:
    """One row per (variant, task or the mean, length): each model after the first against the
    first, on the same prompts. An unpaired cell has `paired` False and its `note`; the mean
    over tasks is given where the run has several tasks and every one of them is paired."""
    models = list(dict.fromkeys(samples["model"]))
    if len(models) < 2:
        return pd.DataFrame()
    columns = [*KEYS, "prompt_sha256", score, "mean_logprob"]
    reference = samples[samples["model"] == models[0]][columns]
    tasks = list(dict.fromkeys(samples["task"]))
    rows = []
    for model in models[1:]:
        pairs = aligned(reference, samples[samples["model"] == model][columns])
        for length in dict.fromkeys(pairs["length"]):
            at = pairs[pairs["length"] == length]
            cells = []
            for task in tasks:
                cell = at[at["task"] == task]
                if not len(cell):  # the variant left this task out (a round of `--until verdict` after closing it there)
                    continue
                same = bool((cell["prompt_sha256_ref"] == cell["prompt_sha256_cand"]).all())
                head = {"model": model, "reference": models[0], "task": task, "length": int(length)}
                if same:
                    cells.append({**head, "paired": True, "note": "", **paired_cell(cell, score, settings)})
                else:
                    cells.append({**head, "paired": False, "n": len(cell),
                                  "note": f"not paired: its prompts differ from {models[0]}'s (another tokenizer or template)"})
            if len(tasks) > 1 and len(cells) == len(tasks):  # the mean over tasks only where the variant ran every task
                head = {"model": model, "reference": models[0], "task": MEAN_TASK, "length": int(length)}
                if all(c["paired"] for c in cells):
                    rows.append({**head, "paired": True, "note": "", **paired_cell(at, score, settings)})
                else:
                    rows.append({**head, "paired": False, "n": len(at), "note": "not paired: some of its tasks' prompts differ from the reference's"})
            rows += cells
    return pd.DataFrame(rows)
