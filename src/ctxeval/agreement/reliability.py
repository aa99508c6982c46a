"""How well generated RULER can be agreed with at all: its split-half reliability over a run's
models, the yardstick a cheap measure's ρ is read against.

A RULER score from n samples is itself noisy: rerun on other samples, the models' order moves.
The split-half reliability r is estimated from the run's own samples: the samples of each
(task, length) are split at random into two halves, the same split for every model (their
prompts are the same), each model's score is taken on each half, and the Spearman ρ of the two
halves over the models is averaged over `SPLITS` seeded splits, then stepped up to the full n
by Spearman–Brown, r = 2ρ_half / (1 + ρ_half). A measure that ordered the models exactly as
their true scores do would correlate with this noisy RULER at about √r (the attenuation of a
correlation by one side's unreliability): a cheap measure's ρ near √r is as good as the
task measure can show, and more samples, not a better measure, would raise it.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from ctxeval.results.ruler import RulerResult

SPLITS = 200
MIN_MODELS = 3  # a ρ over two models is ±1 whatever the scores


def split_half(samples: pd.DataFrame, splits: int = SPLITS) -> dict[str, float] | None:
    """Split-half ρ, Spearman–Brown r and the ceiling √r of one length's generated scores over
    the models (mean over tasks); None where fewer than three models, fewer than two samples a
    cell, or no split gives a defined ρ (a half where every model scores alike)."""
    models = list(dict.fromkeys(samples["model"]))
    if len(models) < MIN_MODELS:
        return None
    wide = samples.pivot_table(index=["task", "sample"], columns="model", values="generation_score")[models].dropna()
    cells = [part.to_numpy() for _, part in wide.groupby(level="task", sort=False)]
    if not cells or min(len(c) for c in cells) < 2:
        return None
    rng = np.random.default_rng(SPLITS)  # seeded: the same splits, so the same r, on every reading
    rhos = []
    for _ in range(splits):
        halves = [[], []]
        for cell in cells:
            order = rng.permutation(len(cell))
            cut = len(cell) // 2
            halves[0].append(cell[order[:cut]].mean(axis=0))
            halves[1].append(cell[order[cut:]].mean(axis=0))
        a, b = np.mean(halves[0], axis=0), np.mean(halves[1], axis=0)
        if np.ptp(a) > 0 and np.ptp(b) > 0:
            rhos.append(float(stats.spearmanr(a, b).statistic))
    if not rhos:
        return None
    half = float(np.mean(rhos))
    full = 2 * half / (1 + half) if half > -1 else -1.0
    return {"split_half": half, "reliability": full, "ceiling": math.sqrt(max(full, 0.0))}


def ruler_reliability(result: RulerResult) -> dict[str, dict[str, float]]:
    """Per task measure "RULER score at N" of a generating run: its split-half reliability over
    the run's models and the ceiling √r; lengths where it is undefined are left out."""
    samples = result.samples
    out = {}
    for length, part in samples.groupby("length", sort=True):
        if part["generation_score"].notna().all():
            found = split_half(part)
            if found is not None:
                out[f"RULER score at {int(length)}"] = found
    return out


def with_ceilings(pairs: pd.DataFrame, measures: pd.DataFrame, reliability: dict[str, dict[str, dict[str, float]]]) -> pd.DataFrame:
    """The correlation table with each task measure's reliability r and ceiling √r, where one
    RULER run gives that measure for every model of the pair (`reliability`: per run folder, per
    task measure); NaN elsewhere (retrieval, effective length, or a measure pooled from runs)."""
    runs = measures.groupby("measure")["run"].agg(lambda r: set(r))
    found = [reliability.get(next(iter(runs[t])), {}).get(t) if len(runs[t]) == 1 else None for t in pairs["task"]]
    return pairs.assign(task_reliability=[f["reliability"] if f else math.nan for f in found],
                        ceiling=[f["ceiling"] if f else math.nan for f in found])
