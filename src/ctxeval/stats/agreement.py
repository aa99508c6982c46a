"""Agreement between a method's judgements and human labels or rankings."""

from __future__ import annotations
from ctxeval.stats.defaults import DEFAULT_SEED

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

TAU_VARIANTS = ("a", "b")
BASELINE_KEEP = ("nonnegative", "positive", "all")
EXACT_BASELINE_MAX_ITEMS = 8  # 8! = 40,320 permutations; beyond, Monte Carlo
BASELINE_DRAWS = 100_000  # the PPLqa paper's "100K repetitions"


def kendall_tau_a(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's tau-a, the PPLqa paper's eq. 4: (concordant − discordant) / C(n, 2) over *all*
    pairs, so a pair tied on either side counts 0 and a constant ranking gives 0, not NaN."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(a) != len(b):
        raise ValueError("an item has rankings of different lengths")
    if len(a) < 2:
        return math.nan
    return float(_tau_a_rows(a[None, :], b)[0])


def _tau_a_rows(rows: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Tau-a of each row of `rows` against `reference`: (C − D) / C(n, 2) over all pairs."""
    i, j = np.triu_indices(len(reference), k=1)
    return (np.sign(rows[:, i] - rows[:, j]) * np.sign(reference[i] - reference[j])).sum(axis=1) / len(i)


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Kendall's tau-b (ties corrected) and its two-sided p-value; NaN when a side is constant."""
    from scipy import stats  # imported when used: scipy is a third of the CLI's start-up
    result = stats.kendalltau(x, y, variant="b")
    return float(result.statistic), float(result.pvalue)


@dataclass(frozen=True)
class PerItemTau:
    """Kendall tau per item (e.g. per question over its answers), averaged over items."""

    variant: str  # "a" (eq. 4, the paper's) or "b"
    mean_tau: float
    taus: list[float]
    p_values: list[float]  # scipy's test of independence on C − D (NaN for a constant side)
    sizes: list[int]  # ranking size of each used item
    items_used: int
    items_skipped: int  # fewer than two answers; with tau-b also a constant ranking
    items_constant: int  # a constant ranking on either side: tau-a = 0, skipped by tau-b


def _is_constant(values: Sequence[float]) -> bool:
    return bool(np.ptp(np.asarray(values, dtype=float)) == 0)


def per_item_tau(items: Sequence[tuple[Sequence[float], Sequence[float]]], variant: str = "a") -> PerItemTau:
    """Average Kendall tau over items (the PPLqa paper's eq. 3).

    `variant="a"` (default) is eq. 4 as written: every item with two or more answers counts,
    and one whose ranking is constant (all ties) counts as tau = 0. `variant="b"` is tau-b,
    undefined on a constant ranking, so such items are skipped (and counted)."""
    if variant not in TAU_VARIANTS:
        raise ValueError(f"tau variant must be one of {', '.join(TAU_VARIANTS)}")
    taus, pvals, sizes, skipped, constant = [], [], [], 0, 0
    for x, y in items:
        if len(x) != len(y):
            raise ValueError("an item has rankings of different lengths")
        if len(x) < 2:
            skipped += 1
            continue
        flat = _is_constant(x) or _is_constant(y)
        constant += flat
        if flat and variant == "b":
            skipped += 1
            continue
        tau_b, p = kendall_tau_b(x, y) if not flat else (math.nan, math.nan)
        taus.append(kendall_tau_a(x, y) if variant == "a" else tau_b)
        pvals.append(p)
        sizes.append(len(x))
    mean = float(np.mean(taus)) if taus else math.nan
    return PerItemTau(variant, mean, taus, pvals, sizes, len(taus), skipped, constant)


def _keep(taus: np.ndarray, keep: str) -> np.ndarray:
    if keep == "nonnegative":
        return taus[taus >= 0]
    if keep == "positive":
        return taus[taus > 0]
    return taus


def _check_baseline(n_items: int, keep: str) -> None:
    if n_items < 2:
        raise ValueError("a ranking needs at least two items")
    if keep not in BASELINE_KEEP:
        raise ValueError(f"keep must be one of {', '.join(BASELINE_KEEP)}")


def exact_ranking_baseline(n_items: int, keep: str = "nonnegative") -> float:
    """The random baseline computed over all n! rankings (each equally likely)."""
    _check_baseline(n_items, keep)
    perms = np.array(list(itertools.permutations(range(n_items))))
    return float(_keep(_tau_a_rows(perms, np.arange(n_items)), keep).mean())


def monte_carlo_ranking_baseline(n_items: int, keep: str = "nonnegative", samples: int = BASELINE_DRAWS, seed: int = DEFAULT_SEED) -> float:
    """The random baseline estimated from `samples` seeded random rankings, as the paper did."""
    _check_baseline(n_items, keep)
    if samples < 1:
        raise ValueError("samples must be positive")
    perms = np.random.default_rng(seed).permuted(np.tile(np.arange(n_items), (samples, 1)), axis=1)
    return float(_keep(_tau_a_rows(perms, np.arange(n_items)), keep).mean())


def random_ranking_baseline(n_items: int, keep: str = "nonnegative", samples: int = BASELINE_DRAWS, seed: int = DEFAULT_SEED) -> float:
    """The PPLqa paper's random baseline: mean tau between two random rankings of n_items
    (no ties) among the draws it keeps. The paper "discard[s] all values less than 0", so tau = 0
    is kept (`keep="nonnegative"`, the default); its 0.31 for four items is exactly 14/45 this
    way (14/27 = 0.52 with `"positive"`, tau > 0). `"all"` gives 0.

    Exact, by enumerating all n! rankings, for n_items <= 8; beyond, Monte Carlo with `samples`
    seeded draws (the paper ran 100,000). Tau-a and tau-b agree here: random rankings have no ties.
    """
    if n_items <= EXACT_BASELINE_MAX_ITEMS:
        return exact_ranking_baseline(n_items, keep)
    return monte_carlo_ranking_baseline(n_items, keep, samples, seed)


def confusion(y_true: Sequence, y_pred: Sequence, labels: Sequence) -> np.ndarray:
    """Confusion matrix, rows = true label, columns = predicted label, in `labels` order."""
    index = {label: k for k, label in enumerate(labels)}
    matrix = np.zeros((len(labels), len(labels)), dtype=np.int64)
    for t, p in zip(y_true, y_pred, strict=True):
        matrix[index[t], index[p]] += 1
    return matrix


def accuracy(y_true: Sequence, y_pred: Sequence) -> float:
    y_true, y_pred = list(y_true), list(y_pred)
    if not y_true:
        return math.nan
    return sum(t == p for t, p in zip(y_true, y_pred, strict=True)) / len(y_true)


def f1_per_label(y_true: Sequence, y_pred: Sequence, labels: Sequence) -> dict:
    """Precision, recall and F1 per label (0 where undefined, as scikit-learn's zero_division=0)."""
    m = confusion(y_true, y_pred, labels)
    out = {}
    for k, label in enumerate(labels):
        tp, predicted, actual = m[k, k], m[:, k].sum(), m[k, :].sum()
        precision = tp / predicted if predicted else 0.0
        recall = tp / actual if actual else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        out[label] = {"precision": float(precision), "recall": float(recall), "f1": float(f1), "support": int(actual)}
    return out


def mcc(y_true: Sequence, y_pred: Sequence, labels: Sequence) -> float:
    """Matthews correlation coefficient (multi-class form of Gorodkin); 0 when undefined."""
    m = confusion(y_true, y_pred, labels).astype(float)
    n = m.sum()
    correct = np.trace(m)
    pred, true = m.sum(axis=0), m.sum(axis=1)
    num = correct * n - pred @ true
    den = math.sqrt(n**2 - pred @ pred) * math.sqrt(n**2 - true @ true)
    return float(num / den) if den else 0.0
