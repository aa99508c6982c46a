"""Percentile bootstrap of classification agreement (accuracy, MCC, per-label P/R/F1).

Items are resampled uniformly with one seeded index matrix, so every method evaluated on the
same items with the same seed sees the same resamples (their intervals are paired). The
statistics come from stats/agreement.py. Percentile rather than BCa: MCC and F1 are bounded,
non-smooth statistics whose jackknife acceleration is unstable on small sets.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ctxeval.stats.defaults import DEFAULT_CONFIDENCE, DEFAULT_REPLICATES, DEFAULT_SEED
from ctxeval.stats.agreement import accuracy, f1_per_label, mcc
from ctxeval.stats.interval import Interval, percentile_method

METHOD = percentile_method("item")


def classification_metrics(y_true: Sequence[int], y_pred: Sequence[int], labels: Sequence[int], all_labels: Sequence[int]) -> dict[str, float]:
    """Flat dict: accuracy, mcc, and precision/recall/f1 per label in `labels`."""
    out = {"accuracy": accuracy(y_true, y_pred), "mcc": mcc(y_true, y_pred, all_labels)}
    per_label = f1_per_label(y_true, y_pred, all_labels)
    for label in labels:
        for key in ("precision", "recall", "f1"):
            out[f"{key}_{label}"] = per_label[label][key]
    return out


def bootstrap_classification(
    y_true: Sequence[int],
    y_pred: Sequence[int],
    labels: Sequence[int],
    all_labels: Sequence[int],
    replicates: int = DEFAULT_REPLICATES,
    seed: int = DEFAULT_SEED,
    confidence: float = DEFAULT_CONFIDENCE,
) -> dict[str, Interval]:
    """Every metric of `classification_metrics` on all items with its percentile interval over
    resampled items (`n` the items); none with fewer than two items."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    n = len(y_true)
    if n < 2 or replicates < 1:
        return {}
    point = classification_metrics(y_true.tolist(), y_pred.tolist(), labels, all_labels)
    idx = np.random.default_rng(seed).integers(0, n, size=(replicates, n))
    draws: dict[str, list[float]] = {}
    for row in idx:
        for key, value in classification_metrics(y_true[row].tolist(), y_pred[row].tolist(), labels, all_labels).items():
            draws.setdefault(key, []).append(value)
    alpha = 100 * (1 - confidence) / 2
    return {k: Interval(float(point[k]), float(np.percentile(v, alpha)), float(np.percentile(v, 100 - alpha)), n=n, confidence=confidence, method=METHOD)
            for k, v in draws.items()}
