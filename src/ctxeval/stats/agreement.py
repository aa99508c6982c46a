"""Agreement between a method's judgements and human labels or rankings."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Kendall's tau-b (ties corrected) and its two-sided p-value; NaN when a side is constant."""
    result = stats.kendalltau(x, y, variant="b")
    return float(result.statistic), float(result.pvalue)


@dataclass(frozen=True)
class PerItemTau:
    """Kendall tau-b per item (e.g. per question over its answers), averaged over items."""

    mean_tau: float
    taus: list[float]
    p_values: list[float]
    items_used: int
    items_skipped: int  # a ranking was constant (all ties): tau is undefined


def per_item_tau(items: Sequence[tuple[Sequence[float], Sequence[float]]]) -> PerItemTau:
    """Average tau-b over items; items whose method or human ranking is constant are skipped
    and counted (tau-b is undefined there, and counting them as 0 would bias the mean)."""
    taus, pvals, skipped = [], [], 0
    for x, y in items:
        if len(x) != len(y):
            raise ValueError("an item has rankings of different lengths")
        if len(x) < 2 or np.ptp(np.asarray(x, dtype=float)) == 0 or np.ptp(np.asarray(y, dtype=float)) == 0:
            skipped += 1
            continue
        tau, p = kendall_tau_b(x, y)
        taus.append(tau)
        pvals.append(p)
    mean = float(np.mean(taus)) if taus else math.nan
    return PerItemTau(mean, taus, pvals, len(taus), skipped)


def random_ranking_baseline(n_items: int, samples: int = 10000, seed: int = 0, keep: str = "nonnegative") -> float:
    """The PPLqa paper's Monte-Carlo baseline: mean tau of random rankings of n_items against a
    fixed ranking, keeping only some draws.

    The paper keeps non-negative taus; whether tau = 0 is kept is not stated, so it is a choice:
    `keep="nonnegative"` (tau >= 0, the default), `"positive"` (tau > 0) or `"all"` (mean ~ 0).
    """
    if n_items < 2:
        raise ValueError("a ranking needs at least two items")
    if keep not in ("nonnegative", "positive", "all"):
        raise ValueError("keep must be 'nonnegative', 'positive' or 'all'")
    rng = np.random.default_rng(seed)
    reference = np.arange(n_items)
    perms = rng.permuted(np.tile(reference, (samples, 1)), axis=1)
    # no ties: tau = (concordant - discordant) / C(n, 2)
    i, j = np.triu_indices(n_items, k=1)
    taus = np.sign(perms[:, j] - perms[:, i]).sum(axis=1) / len(i)
    if keep == "nonnegative":
        taus = taus[taus >= 0]
    elif keep == "positive":
        taus = taus[taus > 0]
    return float(taus.mean())


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
