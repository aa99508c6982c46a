"""Trends over context length and the spread between repeated starts."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ctxeval.stats.defaults import DEFAULT_CONFIDENCE, DEFAULT_REPLICATES, DEFAULT_SEED
from ctxeval.stats.interval import Interval


SLOPE_METHOD = "least squares, t with n − 2 df"


@dataclass(frozen=True, kw_only=True)
class Slope(Interval):
    """A least-squares slope (`estimate`, its standard error `se`, its t interval) with the fit's
    intercept, correlation and two-sided p-value (H0: slope 0)."""

    intercept: float
    r: float
    p_value: float


def slope(x: np.ndarray, y: np.ndarray, confidence: float = DEFAULT_CONFIDENCE) -> Slope:
    """Least-squares slope of y on x with its standard error, two-sided p-value (H0: slope 0,
    t with n-2 degrees of freedom, as in the thesis's appendix C) and a t confidence interval.
    With fewer than three points the uncertainty is undefined (NaN)."""
    from scipy import stats  # imported when used: scipy is a third of the CLI's start-up
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    n = len(x)
    facts = dict(n=n, confidence=confidence, method=SLOPE_METHOD)
    if n < 2 or np.ptp(x) == 0:
        return Slope(math.nan, intercept=math.nan, r=math.nan, p_value=math.nan, reason="fewer than two distinct lengths", **facts)
    fit = stats.linregress(x, y)
    line = dict(intercept=float(fit.intercept), r=float(fit.rvalue))
    if n < 3:
        return Slope(float(fit.slope), p_value=math.nan, reason="two points: no spread to estimate", **line, **facts)
    half = stats.t.ppf(0.5 + confidence / 2, n - 2) * fit.stderr
    return Slope(float(fit.slope), float(fit.slope - half), float(fit.slope + half), float(fit.stderr), p_value=float(fit.pvalue), **line, **facts)


def loo_outliers(values: np.ndarray, k: float = 2.0) -> np.ndarray:
    """Flags values lying more than k SDs from the mean of the *other* values (leave-one-out).

    Needs at least three values (two others to form an SD); fewer are never flagged. The thesis
    flagged repeats at length 128 against the mean and SD of the other measurements.
    """
    values = np.asarray(values, dtype=float)
    n = len(values)
    flags = np.zeros(n, dtype=bool)
    if n < 3:
        return flags
    for i in range(n):
        others = np.delete(values, i)
        sd = others.std(ddof=1)
        flags[i] = sd > 0 and abs(values[i] - others.mean()) > k * sd
    return flags


def mean_interval(values: np.ndarray, windows: np.ndarray, confidence: float = DEFAULT_CONFIDENCE, replicates: int = DEFAULT_REPLICATES, seed: int = DEFAULT_SEED) -> Interval:
    """The interval of the mean of per-target `values` at one context length (its `method`
    names the kind).

    With several windows (repeated starts) the noise that matters is where the start fell: a t
    interval over the per-window means, centred on the pooled mean (equal for the equal-size
    windows of a sweep). With one window only the n_c targets can be resampled: a seeded
    percentile bootstrap, which understates the noise (neighbouring targets are correlated
    and the start is fixed). NaN values give a NaN interval."""
    from scipy import stats  # imported when used: scipy is a third of the CLI's start-up
    values, windows = np.asarray(values, dtype=float), np.asarray(windows)
    labels = np.unique(windows)
    kind = f"t over {len(labels)} windows" if len(labels) > 1 else f"bootstrap over {len(values)} targets"
    if len(values) == 0 or not np.isfinite(values).all():
        return Interval(math.nan, n=len(values), confidence=confidence, method=kind, reason="no values" if len(values) == 0 else "a value is not finite")
    mean = float(values.mean())
    if len(labels) > 1:
        means = np.array([values[windows == w].mean() for w in labels])
        se = means.std(ddof=1) / math.sqrt(len(means))
        half = stats.t.ppf(0.5 + confidence / 2, len(means) - 1) * se
        return Interval(mean, mean - half, mean + half, float(se), len(means), confidence, kind)
    rng = np.random.default_rng(seed)
    n = len(values)
    boot = np.empty(replicates)
    batch = max(1, 2_000_000 // n)
    for lo in range(0, replicates, batch):
        hi = min(lo + batch, replicates)
        boot[lo:hi] = values[rng.integers(0, n, size=(hi - lo, n))].mean(axis=1)
    alpha = 100 * (1 - confidence) / 2
    low, high = np.percentile(boot, [alpha, 100 - alpha])
    return Interval(mean, float(low), float(high), float(boot.std(ddof=1)), n, confidence, kind)
