"""Paired comparison of two arms over the same windows: token-weighted mean difference and
its BCa bootstrap interval.

The statistic is theta = sum(t_i * d_i) / sum(t_i) over windows i with token counts t_i and
per-window differences d_i (e.g. of mean log-loss). Two resampling schemes estimate its
spread; both have theta as their expectation:

- "windows" (default): units (windows, or whole documents for a cluster bootstrap) are drawn
  uniformly with replacement as pairs (d, t) and theta is recomputed as a ratio of sums.
- "tokens": units are drawn with probability proportional to their tokens and the statistic is
  the plain mean of the drawn units' d (paper 001's "resampled with weights proportional to
  t_i").

`bench/bench_compare_coverage.py` measures the coverage of both. The bias correction z0 is the
mid-rank of theta among the replicates; the acceleration comes from the jackknife of the ratio
of sums ("windows") or from the influence values of the token-weighted distribution
("tokens"), as in Efron & Tibshirani 14.3/15.4 (`scipy.stats.bootstrap(method="BCa")`).
All-equal differences are degenerate (paper 001): the interval collapses to [d, d].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr, ndtri

RESAMPLE_SCHEMES = ("windows", "tokens")


@dataclass(frozen=True)
class PairedEstimate:
    """A paired estimate with its interval and the bootstrap facts that produced it.

    `degenerate` is paper 001's flag (all paired differences equal); `reason` says why the
    interval was collapsed to the point, for that or any other cause (a single resampling unit)."""

    estimate: float
    low: float
    high: float
    confidence: float
    replicates: int
    seed: int
    method: str  # "BCa", "BCa-cluster", "degenerate" or "collapsed"
    resample: str  # "windows" or "tokens"
    units: int  # resampling units: windows, or clusters
    z0: float | None
    acceleration: float | None
    degenerate: bool
    reason: str | None


def weighted_mean(delta: np.ndarray, tokens: np.ndarray) -> float:
    """sum(t * d) / sum(t): the token-weighted mean difference."""
    delta, tokens = np.asarray(delta, dtype=np.float64), np.asarray(tokens, dtype=np.float64)
    return float((tokens * delta).sum() / tokens.sum())


def paired_bca(
    delta: np.ndarray,
    tokens: np.ndarray,
    replicates: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    clusters: np.ndarray | None = None,
    resample: str = "windows",
) -> PairedEstimate:
    """BCa interval of the token-weighted mean of `delta`.

    `clusters` (one label per window) switches to a cluster bootstrap: whole clusters are the
    resampling units. `resample` picks the scheme (see the module docstring)."""
    delta = np.asarray(delta, dtype=np.float64)
    tokens = np.asarray(tokens, dtype=np.float64)
    if delta.ndim != 1 or delta.shape != tokens.shape:
        raise ValueError("delta and tokens must be 1-D arrays of the same length")
    if len(delta) == 0:
        raise ValueError("no paired windows to compare")
    if np.any(tokens <= 0):
        raise ValueError("every window needs at least one token")
    if replicates < 100:
        raise ValueError("at least 100 bootstrap replicates are needed for a BCa interval")
    if resample not in RESAMPLE_SCHEMES:
        raise ValueError(f"resample must be one of {RESAMPLE_SCHEMES}, got {resample!r}")
    # per-unit sums: a unit is a window, or a cluster of windows
    if clusters is None:
        num, den = tokens * delta, tokens
        method = "BCa"
    else:
        _, index = np.unique(np.asarray(clusters), return_inverse=True)
        num = np.bincount(index, weights=tokens * delta)
        den = np.bincount(index, weights=tokens)
        method = "BCa-cluster"
    n_units = len(num)

    def collapsed(theta: float, method: str, reason: str, degenerate: bool = False, accel: float | None = None) -> PairedEstimate:
        return PairedEstimate(
            estimate=theta, low=theta, high=theta, confidence=confidence, replicates=replicates, seed=seed, method=method,
            resample=resample, units=n_units, z0=None, acceleration=accel, degenerate=degenerate, reason=reason,
        )

    if np.ptp(delta) == 0.0:
        return collapsed(float(delta[0]), "degenerate", "all paired differences are equal; the interval is collapsed to the point", degenerate=True)
    theta = weighted_mean(delta, tokens)
    if n_units < 2:
        return collapsed(theta, "collapsed", "a single resampling unit; no interval can be estimated")
    if resample == "windows":
        boot = ratio_replicates(num, den, replicates, seed)
        # acceleration: jackknife of the same ratio-of-sums statistic
        jack = (num.sum() - num) / (den.sum() - den)
        u = (n_units - 1) * (jack.mean() - jack)
        denom = np.sum(u**2) ** 1.5
        accel = float(np.sum(u**3) / (6.0 * denom)) if denom > 0 else 0.0
    else:
        means, weights = num / den, den / den.sum()
        boot = token_replicates(means, weights, replicates, seed)
        # acceleration: skewness of the influence values u_i = d_i - theta under the
        # distribution with masses p_i, for a mean of n draws (equals the jackknife formula
        # above when every p_i = 1/n)
        u = means - theta
        denom = np.sqrt(n_units) * np.sum(weights * u**2) ** 1.5
        accel = float(np.sum(weights * u**3) / (6.0 * denom)) if denom > 0 else 0.0
    # bias correction: mid-rank of theta among the replicates
    z0 = float(ndtri((np.sum(boot < theta) + np.sum(boot <= theta)) / (2.0 * replicates)))
    if not np.isfinite(z0):
        return collapsed(theta, "collapsed", "every bootstrap replicate fell on one side of the estimate", accel=accel)
    alpha = (1.0 - confidence) / 2.0
    levels = []
    for z in (ndtri(alpha), ndtri(1.0 - alpha)):
        levels.append(float(ndtr(z0 + (z0 + z) / (1.0 - accel * (z0 + z)))))
    low, high = np.percentile(boot, [100.0 * levels[0], 100.0 * levels[1]])
    return PairedEstimate(
        estimate=theta, low=float(low), high=float(high), confidence=confidence, replicates=replicates, seed=seed, method=method,
        resample=resample, units=n_units, z0=z0, acceleration=accel, degenerate=False, reason=None,
    )


def ratio_replicates(num: np.ndarray, den: np.ndarray, replicates: int, seed: int) -> np.ndarray:
    """Bootstrap replicates of sum(num) / sum(den) over units drawn uniformly with replacement."""
    return _replicates(len(num), replicates, seed, lambda rng, shape: rng.integers(0, len(num), size=shape),
                       lambda idx: num[idx].sum(axis=1) / den[idx].sum(axis=1))


def token_replicates(means: np.ndarray, weights: np.ndarray, replicates: int, seed: int) -> np.ndarray:
    """Bootstrap replicates of the plain mean of `means` over n units drawn with replacement
    with probabilities `weights` (summing to 1). Each replicate row is one
    `Generator.choice(n, n, p=weights)` call's worth of draws."""
    return _replicates(len(means), replicates, seed, lambda rng, shape: rng.choice(len(means), size=shape, p=weights),
                       lambda idx: means[idx].mean(axis=1))


def _replicates(n_units: int, replicates: int, seed: int, draw, statistic) -> np.ndarray:
    """`statistic` of each row of unit indices `draw` gives; the index matrix is drawn in batches
    of about 2M entries so memory stays bounded (the same draws as one call per batch)."""
    rng = np.random.default_rng(seed)
    boot = np.empty(replicates)
    batch = max(1, 2_000_000 // n_units)
    for lo in range(0, replicates, batch):
        hi = min(lo + batch, replicates)
        boot[lo:hi] = statistic(draw(rng, (hi - lo, n_units)))
    return boot
