"""The press study's analysis (docs/agreement.md): per cheap measure, how well it orders KV-cache
variants as RULER's generated score does, what it costs per variant, and how many samples it
needs to tell a press from the full cache.

The correlations are agreement's own (`correlations`: Spearman and Kendall tau-b over the variants
with a percentile bootstrap over variants). The samples needed are from a paired t interval: with
per-sample differences d_i = press − full (same samples on both sides), mean d̄ and SD s, the 95 %
interval d̄ ± t(0.975, n−1)·s/√n excludes 0 once n is the smallest n ≥ 2 with
t(0.975, n−1)·s/√n < |d̄| — the observed mean and SD taken as the truth.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ctxeval.agreement.analysis import correlations
from ctxeval.agreement.measures import CHEAP
from ctxeval.stats.defaults import DEFAULT_CONFIDENCE

CONFIDENCE = DEFAULT_CONFIDENCE
MAX_SAMPLES = 1_000_000  # beyond this, "more than" is the answer


def samples_to_separate(differences: Sequence[float], confidence: float = CONFIDENCE) -> int | None:
    """Smallest n whose paired t interval around the observed mean difference excludes 0, taking
    the observed mean and SD as the truth; None when the mean difference is 0 (no n separates)
    or when it needs more than MAX_SAMPLES."""
    from scipy import stats  # imported when used: scipy is a third of the CLI's start-up

    d = np.asarray(differences, dtype=float)
    if len(d) < 2:
        raise ValueError("samples_to_separate needs at least two paired differences")
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    if mean == 0:
        return None
    if sd == 0:
        return 2
    def separates(n: int) -> bool:
        return stats.t.ppf(0.5 + confidence / 2, n - 1) * sd / math.sqrt(n) < abs(mean)
    # the t quantile falls with n, so the condition is monotone: bisect between 2 and MAX_SAMPLES
    if not separates(MAX_SAMPLES):
        return None
    low, high = 1, MAX_SAMPLES  # separates(high) holds, separates(low) does not (n=1 has no interval)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if separates(mid) else (mid, high)
    return high


def separation(per_sample: pd.DataFrame, reference: str, confidence: float = CONFIDENCE) -> pd.DataFrame:
    """Per (measure, variant): the paired differences variant − reference over the samples both
    have, their mean and SD, the samples observed and the samples needed at `confidence`.
    `per_sample` has columns measure, variant, sample (a key pairing the two sides) and value."""
    rows = []
    for measure, part in per_sample.groupby("measure", sort=False):
        wide = part.pivot_table(index="sample", columns="variant", values="value", aggfunc="first")
        if reference not in wide:
            continue
        for variant in (v for v in dict.fromkeys(part["variant"]) if v != reference):
            d = (wide[variant] - wide[reference]).dropna().to_numpy()
            if len(d) < 2:
                continue
            rows.append({"measure": measure, "variant": variant, "mean_difference": float(d.mean()), "sd": float(d.std(ddof=1)),
                         "samples": len(d), "samples_needed": samples_to_separate(d, confidence)})
    return pd.DataFrame(rows, columns=["measure", "variant", "mean_difference", "sd", "samples", "samples_needed"])


def press_study_table(table: pd.DataFrame, task: str, replicates: int, seed: int) -> pd.DataFrame:
    """Per cheap measure, its Spearman and Kendall with the task measure `task` over the variants
    that have both (agreement's `correlations`, bootstrap over variants) and its cost: the mean over
    those variants of the seconds per model of the runs it came from. `table` is agreement's
    measure table (model, measure, kind, direction, value, run, seconds_per_model)."""
    pairs = correlations(table, replicates, seed)
    pairs = pairs[pairs["task"] == task].reset_index(drop=True)
    cheap = table[table["kind"] == CHEAP]
    task_models = set(table.loc[table["measure"] == task, "model"])
    cost = {m: part.loc[part["model"].isin(task_models), "seconds_per_model"].mean() for m, part in cheap.groupby("measure")}
    task_cost = table.loc[table["measure"] == task, "seconds_per_model"].mean()
    pairs["seconds_per_variant"] = pairs["cheap"].map(cost)
    pairs["task_seconds_per_variant"] = task_cost
    pairs["cost_share"] = pairs["seconds_per_variant"] / task_cost
    return pairs.sort_values("spearman", ascending=False, na_position="last").reset_index(drop=True)


def compressed_kl(records: pd.DataFrame, min_context: int) -> pd.DataFrame:
    """Per diff pass whose every target follows at least `min_context` tokens (a pressed model
    compresses the tokens before a pass's first target, so these are the passes scored against a
    compressed cache; a text's first sliding window starts at position 0 and compresses nothing):
    text, pass, targets and mean KL. `records` are a diff run's per-token records."""
    passes = records.groupby(["text_id", "pass_index"], sort=True).agg(first_context=("context_len", "min"), targets=("kl", "size"), kl=("kl", "mean"))
    return passes[passes["first_context"] >= min_context].reset_index()
