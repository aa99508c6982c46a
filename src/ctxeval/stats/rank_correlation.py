"""Rank correlation across models between two measures, with an interval from resampling models.

Spearman's rho and Kendall's tau-b are scipy's (`spearmanr`, `kendalltau`), so a value here
equals scipy's on the same table. The interval is a percentile bootstrap over *models*: models
are the units the question is about ("on another set of variants, would the order hold?"), so a
replicate draws models with replacement and recomputes the coefficient. A replicate whose draw
makes a side constant (every drawn model scores the same) has no coefficient; such replicates
are dropped and counted, and when more than `MAX_UNDEFINED` of them are, there is no interval.
With fewer than `MIN_MODELS` models a resample repeats one or two models so often that the
interval says nothing, so none is given.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ctxeval.stats.defaults import DEFAULT_CONFIDENCE, DEFAULT_REPLICATES, DEFAULT_SEED
from ctxeval.stats.interval import Interval, percentile_method

MIN_MODELS = 4
MAX_UNDEFINED = 0.5  # share of replicates without a coefficient beyond which no interval is given
COEFFICIENTS = ("spearman", "kendall")


METHOD = percentile_method("model")


@dataclass(frozen=True, kw_only=True)
class RankCorrelation(Interval):
    """One coefficient between two measures over the same models: `estimate` the coefficient
    (NaN when a side is constant), its percentile-bootstrap interval over the `n` models (NaN
    bounds: no interval, `reason` says why)."""

    coefficient: str  # "spearman" or "kendall" (tau-b)
    p_value: float  # scipy's test of independence
    undefined_share: float  # replicates whose draw made a side constant


def coefficient(name: str, x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """scipy's Spearman rho or Kendall tau-b and p-value; NaN for a constant side."""
    from scipy import stats  # imported when used: scipy is a third of the CLI's start-up
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan, math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = stats.spearmanr(x, y) if name == "spearman" else stats.kendalltau(x, y, variant="b")
    return float(result.statistic), float(result.pvalue)


def rank_correlation(x: Sequence[float], y: Sequence[float], name: str, replicates: int = DEFAULT_REPLICATES,
                     confidence: float = DEFAULT_CONFIDENCE, seed: int = DEFAULT_SEED) -> RankCorrelation:
    """`name` ("spearman" or "kendall") between paired measures `x` and `y` (one value per model)."""
    if name not in COEFFICIENTS:
        raise ValueError(f"coefficient must be one of {', '.join(COEFFICIENTS)}")
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(a) != len(b):
        raise ValueError("the two measures must cover the same models")
    value, p_value = coefficient(name, a, b) if len(a) >= 2 else (math.nan, math.nan)
    n = len(a)
    facts = dict(n=n, confidence=confidence, method=METHOD, coefficient=name, p_value=p_value)
    if n < 2:
        return RankCorrelation(value, reason=f"no coefficient: {n} model (a correlation needs at least 2)", undefined_share=0.0, **facts)
    if math.isnan(value):
        return RankCorrelation(value, reason="no coefficient: every model scores the same on one of the measures", undefined_share=0.0, **facts)
    if n < MIN_MODELS:
        return RankCorrelation(value, reason=f"no interval: {n} models (at least {MIN_MODELS} are needed)", undefined_share=0.0, **facts)
    draws = np.random.default_rng(seed).integers(0, n, size=(replicates, n))
    values = np.array([coefficient(name, a[d], b[d])[0] for d in draws])
    defined = values[~np.isnan(values)]
    undefined = 1 - len(defined) / replicates
    if undefined > MAX_UNDEFINED:
        return RankCorrelation(value, reason=f"no interval: {undefined:.0%} of resamples made a measure constant", undefined_share=undefined, **facts)
    tail = (1 - confidence) / 2
    low, high = np.quantile(defined, [tail, 1 - tail])
    return RankCorrelation(value, float(low), float(high), undefined_share=undefined, **facts)
