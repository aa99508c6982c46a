"""The difference of two paired proportions (two variants scored 0/1 on the same samples) with
Tango's asymptotic score interval.

Why Tango's: a paired 0/1 difference depends on the discordant samples only (b: the candidate
right where the reference is wrong; c: the reverse), and with the handful of samples a RULER
cell holds, b and c are often 0. The Wald interval then collapses to a point, a bootstrap of
9 samples has the same trouble, and both cover badly; the score interval of Tango (1998,
Statistics in Medicine 17:891), recommended for paired proportions by Fagerland, Lydersen and
Laake (2014, Statistical Methods in Medical Research 24:224), keeps a width with no discordant
sample (9 identical samples: about [-30, +30] points) and covers close to its level at small n.

The interval is {Δ : |T(Δ)| ≤ z} with T(Δ) = (b − c − NΔ) / sqrt(N (2 p̃ + Δ(1 − Δ))), where p̃
is the maximum-likelihood estimate of the reverse discordant probability under Δ (the root of
a quadratic); T falls monotonically in Δ, so each bound is one root, found by bisection.

Scores with partial credit (RULER's multi-answer tasks give a share of the answers) enter as a
fraction of a sample, as the Wilson interval of one cell counts them: a pair (r, c) is split
into its concordant part min(r, c) or 1 − max(r, c) and its discordant part |c − r|, so equal
scores are always concordant and 0/1 scores give the ordinary 2×2 table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ctxeval.stats.defaults import DEFAULT_CONFIDENCE
from ctxeval.stats.interval import Interval, quantile

_BISECTIONS = 200  # far past float precision on [-1, 1]


@dataclass(frozen=True, kw_only=True)
class PairedProportions(Interval):
    """A paired difference of proportions, candidate − reference, with Tango's interval
    (proportions in [0, 1]; `se` is the per-sample differences' standard deviation over √n,
    what the samples that would settle a verdict are estimated from)."""

    gained: float  # b: the candidate right, the reference wrong (fractions with partial credit)
    lost: float  # c: the reference right, the candidate wrong


def discordant(reference: np.ndarray, candidate: np.ndarray) -> tuple[float, float]:
    """(b, c) of paired scores in [0, 1]: the candidate's gains and losses over the reference,
    a pair counting |candidate − reference| on its side (1 for a 0/1 pair that differs)."""
    diff = np.asarray(candidate, dtype=np.float64) - np.asarray(reference, dtype=np.float64)
    return float(diff[diff > 0].sum()), float(-diff[diff < 0].sum())


def tango_statistic(delta: float, gained: float, lost: float, n: float) -> float:
    """Tango's score statistic T(Δ) for the difference `delta` (T > 0: the data lie above Δ)."""
    a = 2.0 * n
    b = -gained - lost + (2.0 * n - gained + lost) * delta
    c = -lost * delta * (1.0 - delta)
    p = (math.sqrt(max(0.0, b * b - 4.0 * a * c)) - b) / (2.0 * a)
    variance = n * (2.0 * p + delta * (1.0 - delta))
    if variance <= 0:  # only at Δ = ±1 with no discordance the other way: the data sit exactly there or not at all
        return 0.0 if gained - lost - n * delta == 0 else math.copysign(math.inf, gained - lost - n * delta)
    return (gained - lost - n * delta) / math.sqrt(variance)


def tango_interval(gained: float, lost: float, n: float, confidence: float = DEFAULT_CONFIDENCE) -> tuple[float, float]:
    """Tango's score interval of (gained − lost) / n: the Δ in [−1, 1] whose |T(Δ)| ≤ z."""
    if n <= 0:
        raise ValueError("no paired samples")
    if gained < 0 or lost < 0 or gained + lost > n + 1e-9:
        raise ValueError(f"discordant counts {gained}, {lost} do not fit {n} samples")
    z = quantile(confidence)
    estimate = (gained - lost) / n
    low = -1.0 if estimate <= -1.0 else _root(lambda d: tango_statistic(d, gained, lost, n) - z, -1.0, estimate)
    high = 1.0 if estimate >= 1.0 else _root(lambda d: tango_statistic(d, gained, lost, n) + z, estimate, 1.0)
    return low, high


def _root(f, lo: float, hi: float) -> float:
    """The root of a falling `f` on [lo, hi] by bisection (f(lo) ≥ 0 ≥ f(hi), else the end it misses)."""
    if f(lo) <= 0:
        return lo
    if f(hi) >= 0:
        return hi
    for _ in range(_BISECTIONS):
        mid = (lo + hi) / 2.0
        if mid in (lo, hi):
            break
        lo, hi = (mid, hi) if f(mid) > 0 else (lo, mid)
    return (lo + hi) / 2.0


def paired_proportions(reference: np.ndarray, candidate: np.ndarray, confidence: float = DEFAULT_CONFIDENCE) -> PairedProportions:
    """candidate − reference of paired scores in [0, 1] (sample i of both is the same prompt),
    with Tango's score interval."""
    reference, candidate = np.asarray(reference, dtype=np.float64), np.asarray(candidate, dtype=np.float64)
    if reference.shape != candidate.shape or reference.ndim != 1 or len(reference) == 0:
        raise ValueError("paired scores must be two 1-D arrays of the same, non-zero length")
    if reference.min() < 0 or reference.max() > 1 or candidate.min() < 0 or candidate.max() > 1:
        raise ValueError("paired scores must lie in [0, 1]")
    n = len(reference)
    gained, lost = discordant(reference, candidate)
    low, high = tango_interval(gained, lost, n, confidence)
    diff = candidate - reference
    se = float(diff.std(ddof=1)) / math.sqrt(n) if n > 1 else math.nan
    return PairedProportions((gained - lost) / n, low, high, se, n, confidence, "Tango score", gained=gained, lost=lost)
