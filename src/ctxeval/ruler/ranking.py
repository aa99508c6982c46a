"""Which variants of a RULER run are best, and which cannot be told apart.

A run of k variants of one model (the full cache and presses, say) answers the same prompts
with each, so every pair of variants is a paired comparison on the same samples. Per length
(the mean over tasks: every task's samples pooled, as the paired table pools them) and per
task, the variants are ordered by score and every pair is compared:

- the test: Tango's score test of a zero difference (stats/mcnemar.py `score_p`: McNemar's
  asymptotic test, partial credit as fractions), its p-values Holm-adjusted over the
  k(k − 1)/2 pairs (stats/multiple.py): "told apart" where the adjusted p ≤ 1 − confidence, so
  the chance of any false "told apart" in the table is at most 5 %;
- the intervals: Tango's score interval of each pair's difference at confidence 1 − α/m
  (Bonferroni over the m pairs), simultaneous: all m cover together with probability ≥ 95 %.
  Each excludes 0 exactly where its pair's unadjusted p is below α/m, which Holm always calls
  "told apart"; Holm's step-down can also separate a pair whose interval still reaches 0.
  The table shows each variant's difference to the top variant with its simultaneous interval;
  every pair is in `ranking_pairs`.
- ranks and groups from Holm's decisions (stats/multiple.py): each variant's rank interval
  (Mogstad et al. 2024) and its letters (a compact letter display, Piepho 2004): variants that
  share a letter are not told apart.

Why not a bootstrap of ranks: the differences RULER cells show are counts of a few flips among
20 to 100 samples, where Tango's interval covers close to its level and a bootstrap of a
handful of discordant samples does not (stats/paired_binary.py); the pairwise route keeps the
one interval the paired table shows, at a stricter level.

A variant whose prompts differ from the first model's (another tokenizer) or that lacks some of
its samples is left out of the ranking of that cell, with a note. With fewer than three
variants ranked there is no ranking: the paired table is the whole comparison.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ctxeval.results.ruler import MEAN_TASK
from ctxeval.ruler.paired import KEYS
from ctxeval.stats.defaults import DEFAULT_CONFIDENCE
from ctxeval.stats.interval import Interval
from ctxeval.stats.mcnemar import score_p
from ctxeval.stats.multiple import holm, letter_groups, rank_intervals
from ctxeval.stats.paired_binary import discordant, tango_interval

SIMULTANEOUS_METHOD = "Tango's score interval, Bonferroni over {pairs} pairs"
RANK_METHOD = "simultaneous rank interval from Holm-adjusted score tests"  # the rank estimate: the model's place in score order
MIN_RANKED = 3


def _scores(samples: pd.DataFrame, models: list[str], score: str) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Per model, its scores on the first model's samples in their order; the models left out, with why."""
    keyed = samples.set_index(["model", *KEYS]).sort_index()
    reference = keyed.loc[models[0]]
    kept, left_out = {models[0]: reference[score].to_numpy(np.float64)}, {}
    for model in models[1:]:
        own = keyed.loc[model] if model in keyed.index.get_level_values(0) else reference.iloc[:0]
        if not own.index.equals(reference.index):
            left_out[model] = "left out: it lacks some of the first model's samples here"
        elif not (own["prompt_sha256"] == reference["prompt_sha256"]).all():
            left_out[model] = f"left out: its prompts differ from {models[0]}'s (another tokenizer or template)"
        else:
            kept[model] = own[score].to_numpy(np.float64)
    return kept, left_out


def rank_cell(scores: dict[str, np.ndarray], confidence: float = DEFAULT_CONFIDENCE) -> tuple[list[dict], list[dict]]:
    """The ranking of paired `scores` (model → scores in [0, 1] on the same samples): one row per
    variant, best first, and one per pair (the higher-ranked first)."""
    order = sorted(scores, key=lambda m: -float(scores[m].mean()))  # stable: equal scores keep the run's model order
    k, n = len(order), len(scores[order[0]])
    m = k * (k - 1) // 2
    alpha = 1 - confidence
    pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    tests = []
    for i, j in pairs:
        gained, lost = discordant(scores[order[i]], scores[order[j]])  # the lower-ranked against the higher
        low, high = tango_interval(gained, lost, n, 1 - alpha / m)
        tests.append((Interval((gained - lost) / n, low, high, n=n, confidence=1 - alpha / m, method=SIMULTANEOUS_METHOD.format(pairs=m)).scaled(100),
                      score_p(gained, lost, n)))
    adjusted = holm([t[1] for t in tests])
    apart = np.zeros((k, k), dtype=bool)
    pair_rows = []
    for (i, j), (diff, p), p_holm in zip(pairs, tests, adjusted):
        told = bool(p_holm <= alpha)
        apart[i, j] = apart[j, i] = told
        pair_rows.append({"higher": order[i], "lower": order[j], "n": n, **diff.columns("diff"), "p": p, "p_holm": float(p_holm), "apart": told})
    better = np.triu(apart)  # order is by score: a pair told apart has the higher-ranked better (equal scores have p = 1)
    ranks = rank_intervals(better)
    letters = letter_groups(apart)
    to_best = {pair_rows[index]["lower"]: tests[index][0] for index, (i, _) in enumerate(pairs) if i == 0}
    top = Interval(0.0, n=n, confidence=1 - alpha / m, method=SIMULTANEOUS_METHOD.format(pairs=m), reason="the top model")
    rows = []
    for position, model in enumerate(order):
        best = to_best.get(model)
        rows.append({"model": model, "order": position + 1, "ranked": True, "n": n, "score": 100 * float(scores[model].mean()),
                     **(best or top).columns("to_best"),
                     **Interval(float(position + 1), float(ranks[position][0]), float(ranks[position][1]), n=n, confidence=confidence, method=RANK_METHOD).columns("rank"),
                     "groups": letters[position], "pairs": m, "note": ""})
    return rows, pair_rows


def ranking_tables(samples: pd.DataFrame, score: str, confidence: float = DEFAULT_CONFIDENCE) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(variants, pairs): per length, for the mean over tasks (where the run has several) and each
    task, the ranking of the variants paired with the first model; empty with fewer than
    three ranked. `score` names the score column (generation_score or likelihood_score)."""
    models = list(dict.fromkeys(samples["model"]))
    if len(models) < MIN_RANKED:
        return pd.DataFrame(), pd.DataFrame()
    tasks = list(dict.fromkeys(samples["task"]))
    variants, pairs = [], []
    for length in dict.fromkeys(samples["length"]):
        at = samples[samples["length"] == length]
        cells = ([(MEAN_TASK, at)] if len(tasks) > 1 else []) + [(task, at[at["task"] == task]) for task in tasks]
        for task, part in cells:
            kept, left_out = _scores(part, models, score)
            if len(kept) < MIN_RANKED:
                continue
            head = {"task": task, "length": int(length)}
            rows, pair_rows = rank_cell(kept, confidence)
            variants += [head | row for row in rows] + [head | {"model": model, "ranked": False, "note": note} for model, note in left_out.items()]
            pairs += [head | row for row in pair_rows]
    return pd.DataFrame(variants), pd.DataFrame(pairs)
