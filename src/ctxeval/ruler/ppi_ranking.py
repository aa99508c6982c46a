"""Which variants of a `ruler --generate-share` run are tied, from the prediction-powered estimates.

The records' likelihood scores of a cell with predicted samples are another measure than the
score generation would give, so a ranking on them (ruler/ranking.py) does not answer which
variants generation would tell apart. Here, per length, for the headline task (the mean over
tasks where the run has several, else its one task), every pair of models on the same prompts
gets its paired PPI++ difference (`difference` per task: `ruler.ppi`'s, `stats.ppi.mean_of` over
tasks) at confidence 1 − α/m, Bonferroni over the m = k(k − 1)/2 pairs, so all m intervals
cover together with probability ≥ 1 − α. A pair is told apart where its interval excludes 0;
the groups are the compact letter display of those decisions (stats/multiple.letter_groups):
models sharing a letter cannot be told apart, family-wise at 1 − α. Where some pair has no
interval yet (too few generated samples), the groups cannot be told: the rows say why.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np
import pandas as pd

from ctxeval.results.ruler import MEAN_TASK
from ctxeval.stats.defaults import DEFAULT_CONFIDENCE
from ctxeval.stats.interval import Interval
from ctxeval.stats.multiple import letter_groups
from ctxeval.stats.ppi import PPIEstimate, mean_of

MIN_RANKED = 3


Difference = Callable[[pd.DataFrame, float], PPIEstimate]  # one task's paired PPI++ difference at a confidence (ruler.ppi)


def ppi_ranking(scored: pd.DataFrame, scores: pd.DataFrame, difference: Difference, confidence: float = DEFAULT_CONFIDENCE) -> pd.DataFrame:
    """Per length, the models in order of their PPI++ score (`scores`: `tables_of_predicted`'s
    scores, percent) with each one's difference to the top (points) at simultaneous confidence,
    its letters, and `tied_reason` where the groups cannot be told; empty below MIN_RANKED
    models. `scored`: the samples with their cross-fitted predictions (`ruler.ppi.with_predictions`)."""
    models = list(dict.fromkeys(scored["model"]))
    if len(models) < MIN_RANKED:
        return pd.DataFrame()
    tasks = list(dict.fromkeys(scored["task"]))
    task = MEAN_TASK if len(tasks) > 1 else tasks[0]
    pairs = len(models) * (len(models) - 1) // 2
    joint = 1 - (1 - confidence) / pairs
    rows = []
    for length in dict.fromkeys(int(n) for n in scored["length"]):
        shown = scores[(scores["task"] == task) & (scores["length"] == length)].set_index("model")
        order = sorted(models, key=lambda m: -shown.at[m, "score"] if m in shown.index and not math.isnan(shown.at[m, "score"]) else math.inf)
        at_length = scored[scored["length"] == length]
        differences: dict[tuple[str, str], PPIEstimate] = {}
        reason = ""
        for higher, lower in itertools.combinations(order, 2):
            estimate = _pair(at_length, higher, lower, joint, difference).scaled(100)
            differences[(higher, lower)] = estimate
            if not reason and not estimate.has_interval:
                reason = f"{lower} against {higher} has no interval yet ({estimate.reason or 'too few labelled pairs'})"
        apart = np.zeros((len(order), len(order)), bool)
        for (higher, lower), d in differences.items():
            i, j = order.index(higher), order.index(lower)
            apart[i, j] = apart[j, i] = d.has_interval and (d.low > 0 or d.high < 0)
        letters = letter_groups(apart) if not reason else [""] * len(order)
        for k, model in enumerate(order):
            to_top = differences.get((order[0], model))
            rows.append({"task": task, "length": length, "order": k + 1, "model": model,
                         **(_negated(to_top) if to_top is not None else Interval(math.nan, n=0, confidence=joint)).columns("to_top"),
                         "groups": letters[k], "pairs": pairs, "simultaneous_confidence": joint, "tied_reason": reason})
    return pd.DataFrame(rows)


def _negated(d: Interval) -> Interval:
    """top − model from model's pair (higher − lower), as the table reads it."""
    return Interval(-d.estimate, -d.high, -d.low, d.se, d.n, d.confidence, d.method, d.reason)


def _pair(scored: pd.DataFrame, higher: str, lower: str, confidence: float, difference: Difference) -> PPIEstimate:
    """higher − lower, paired on the same samples per task, the mean over tasks where several;
    cells whose prompts differ are left out (as the differences table leaves them)."""
    keys = ["task", "length", "sample"]
    merged = scored[scored["model"] == higher].merge(scored[scored["model"] == lower], on=keys, suffixes=("_v", "_r"))
    cells = [difference(part, confidence) for _, part in merged.groupby("task", sort=False)
             if (part["prompt_sha256_v"] == part["prompt_sha256_r"]).all()]
    if not cells:
        return PPIEstimate(math.nan, n=0, confidence=confidence, reason="no cell on the same prompts", exact=0, generated=0, predicted=0, df=math.nan)
    return cells[0] if len(cells) == 1 else mean_of(cells, confidence)
