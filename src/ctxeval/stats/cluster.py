"""Intervals for a token-weighted mean that resample whole clusters (documents, or windows).

Tokens of one document are not independent: a document that is hard for the model is hard
from its first window to its last. An interval that resamples windows (or tokens) treats a
corpus of 30 documents cut into 300 windows as 300 independent draws and is too narrow; the
cluster bootstrap resamples documents, the units that were actually drawn, with all their
tokens. The statistic is the ratio of sums Σ_c s_c / Σ_c n_c (token-weighted mean), so a
long document weighs what its tokens weigh. docs/corpora.md reports the coverage of both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ctxeval.stats.defaults import DEFAULT_CONFIDENCE, DEFAULT_REPLICATES, DEFAULT_SEED
from ctxeval.stats.interval import Interval
from ctxeval.stats.paired import ratio_replicates


METHOD = "cluster percentile bootstrap"


@dataclass(frozen=True, kw_only=True)
class ClusterInterval(Interval):
    """A token-weighted mean with its percentile-bootstrap interval (`n`: the clusters resampled)
    and the bootstrap that produced it."""

    replicates: int
    seed: int


def cluster_bootstrap(values: np.ndarray, clusters: np.ndarray, replicates: int = DEFAULT_REPLICATES, seed: int = DEFAULT_SEED, confidence: float = DEFAULT_CONFIDENCE) -> ClusterInterval:
    """Percentile interval of the mean of per-token `values`, resampling whole `clusters`
    (one label per token) uniformly with replacement. Fewer than two clusters, or a non-finite
    value, give NaN bounds (nothing to resample, or nothing to average)."""
    values = np.asarray(values, dtype=np.float64)
    clusters = np.asarray(clusters)
    if values.ndim != 1 or values.shape != clusters.shape:
        raise ValueError("values and clusters must be 1-D arrays of the same length")
    if replicates < 1:
        raise ValueError("replicates must be positive")
    labels, index = np.unique(clusters, return_inverse=True)
    n_clusters = len(labels)
    estimate = float(values.mean()) if len(values) else math.nan
    facts = dict(n=n_clusters, confidence=confidence, method=METHOD, replicates=replicates, seed=seed)
    if n_clusters < 2 or not np.isfinite(values).all():
        return ClusterInterval(estimate, reason="fewer than two clusters" if n_clusters < 2 else "a value is not finite", **facts)
    sums = np.bincount(index, weights=values, minlength=n_clusters)
    counts = np.bincount(index, minlength=n_clusters).astype(np.float64)
    boot = ratio_replicates(sums, counts, replicates, seed)
    alpha = 100 * (1 - confidence) / 2
    low, high = np.percentile(boot, [alpha, 100 - alpha])
    return ClusterInterval(estimate, float(low), float(high), **facts)
