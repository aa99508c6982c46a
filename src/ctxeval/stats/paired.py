"""Paired comparison of two arms over the same windows: token-weighted mean difference and
its BCa bootstrap interval.

theta = sum(t_i * d_i) / sum(t_i) over windows i with token counts t_i and per-window
differences d_i. Units (windows, or whole documents for a cluster bootstrap) are drawn uniformly
as pairs (d, t) and the ratio of sums recomputed ("windows", the default), or drawn with
probability proportional to their tokens and the plain mean of d taken ("tokens", paper 001's
weighting). A replicate is a function of the draw's multiplicities only, summed in unit order,
so a draw of every unit once equals theta to the last bit and cannot tilt the bias correction
where units are few.

`PairedEstimate.interval` is "bca"; "degenerate" (paper 001: all paired differences equal within
float rounding, the interval collapsed to [theta, theta]); or "none" (fewer than two resampling
units, or replicates too one-sided for BCa to correct: no interval, bounds NaN, never a zero-width
one). Why each choice, and what `bench/bench_compare_coverage.py` measured: docs/design.md,
"Paired comparison".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ctxeval.stats.defaults import DEFAULT_CONFIDENCE, DEFAULT_REPLICATES, DEFAULT_SEED
from ctxeval.stats.interval import Interval, quantile

RESAMPLE_SCHEMES = ("windows", "tokens")
INTERVALS = ("bca", "degenerate", "none")
# relative tolerance of "equal within float rounding" (differences, and a bound against theta)
ROUNDING = 1e-12


@dataclass(frozen=True, kw_only=True)
class PairedEstimate(Interval):
    """A paired estimate with its interval and the bootstrap facts that produced it.

    `n` counts the resampling units (windows, or clusters); `method` is "BCa" or "BCa-cluster",
    the bootstrap that was (or would have been) run; `interval` is "bca", "degenerate" or "none"
    (see the module docstring); `degenerate` is paper 001's flag (interval == "degenerate");
    `reason` says why there is no BCa interval. With "none", `low` and `high` are NaN."""

    replicates: int
    seed: int
    resample: str  # "windows" or "tokens"
    z0: float | None
    acceleration: float | None
    interval: str  # "bca", "degenerate" or "none"
    degenerate: bool

    @property
    def units(self) -> int:
        return self.n

    @property
    def bounds(self) -> list[float] | None:
        """[low, high], or None when there is no interval."""
        return None if self.interval == "none" else [self.low, self.high]

    def as_dict(self) -> dict:
        """The estimate as the result files write it: its interval's row (`Interval.to_row`;
        a missing reason null) with the bootstrap's facts."""
        return self.to_row() | {"reason": self.reason or None, "replicates": self.replicates, "seed": self.seed, "resample": self.resample,
                                "units": self.n, "z0": self.z0, "acceleration": self.acceleration, "interval": self.interval,
                                "degenerate": self.degenerate}


def all_equal(values: np.ndarray) -> bool:
    """Whether all values are equal within float rounding, relative to their magnitude (a
    difference computed as 0.7 in one window and 0.7000000000000001 in another is equal)."""
    values = np.asarray(values, dtype=np.float64)
    return bool(np.ptp(values) <= ROUNDING * max(1.0, float(np.max(np.abs(values)))))


def weighted_mean(delta: np.ndarray, tokens: np.ndarray) -> float:
    """sum(t * d) / sum(t): the token-weighted mean difference."""
    delta, tokens = np.asarray(delta, dtype=np.float64), np.asarray(tokens, dtype=np.float64)
    return float((tokens * delta).sum() / tokens.sum())


def bca_levels(z0: float, accel: float, confidence: float) -> tuple[float, float]:
    """Percentile levels (in [0, 1]) of the BCa bounds: Phi(z0 + w / (1 - a w)), w = z0 + z.

    The map w -> w / (1 - a w) rises to a pole at w = 1/a; past it the formula wraps round to
    the other tail (a lower bound's level would land above the upper's). The monotone
    continuation past the pole is the tail the pole runs to: level 1 for w > 0, 0 for w < 0."""
    from scipy.special import ndtr, ndtri  # imported when used: scipy is a third of the CLI's start-up
    alpha = (1.0 - confidence) / 2.0
    levels = []
    for z in (ndtri(alpha), ndtri(1.0 - alpha)):
        w = z0 + z
        denom = 1.0 - accel * w
        levels.append(float(ndtr(z0 + w / denom)) if denom > 0 else (1.0 if w > 0 else 0.0))
    return levels[0], levels[1]


def paired_bca(
    delta: np.ndarray,
    tokens: np.ndarray,
    replicates: int = DEFAULT_REPLICATES,
    seed: int = DEFAULT_SEED,
    confidence: float = DEFAULT_CONFIDENCE,
    clusters: np.ndarray | None = None,
    resample: str = "windows",
    unit: str | None = None,
) -> PairedEstimate:
    """BCa interval of the token-weighted mean of `delta`.

    `clusters` (one label per window) switches to a cluster bootstrap: whole clusters are the
    resampling units. `resample` picks the scheme (see the module docstring). `unit` names a
    resampling unit in the reason of "none" (default "window", or "document" with clusters)."""
    from scipy.special import ndtri  # imported when used: scipy is a third of the CLI's start-up
    delta = np.asarray(delta, dtype=np.float64)
    tokens = np.asarray(tokens, dtype=np.float64)
    _check_inputs(delta, tokens, replicates, resample)
    num, den = _unit_sums(delta, tokens, clusters)
    method, unit = ("BCa", unit or "window") if clusters is None else ("BCa-cluster", unit or "document")
    n_units = len(num)
    theta = float(_ratio(np.ones((1, n_units)), num, den)[0])
    spread = unit_sd(delta, tokens, clusters)
    se = spread / math.sqrt(n_units) if spread is not None else math.nan

    def without(interval: str, reason: str, z0: float | None = None, accel: float | None = None) -> PairedEstimate:
        bound = theta if interval == "degenerate" else math.nan
        return PairedEstimate(
            estimate=theta, low=bound, high=bound, se=se, n=n_units, confidence=confidence, method=method, reason=reason, replicates=replicates, seed=seed,
            resample=resample, z0=z0, acceleration=accel, interval=interval, degenerate=interval == "degenerate",
        )

    if len(delta) > 1 and all_equal(delta):
        return without("degenerate", "all paired differences are equal; the interval is collapsed to the point")
    if n_units < 2:
        return without("none", f"no interval (one {unit}): a single resampling unit has no spread to resample")
    boot, accel = _bootstrap(num, den, theta, resample, replicates, seed)
    # bias correction: mid-rank of theta among the replicates
    z0 = float(ndtri((np.sum(boot < theta) + np.sum(boot <= theta)) / (2.0 * replicates)))
    # |z0| >= z_(1-alpha/2): more than 1 - alpha/2 of the replicates lie on one side of theta
    # (an atom of replicates that almost never draw a low-weight unit), and every BCa level then
    # lies on that side too, so the "interval" would exclude its own estimate
    edge = quantile(confidence)
    if not abs(z0) < edge:
        share = max(np.mean(boot < theta), np.mean(boot > theta))
        return without("none", f"no interval: {100 * share:.1f} % of the bootstrap replicates fell on one side of the estimate, "
                               f"more than a {100 * confidence:g} % BCa interval can correct for (too few or too unequal resampling units)", z0=z0, accel=accel)
    low, high = (float(b) for b in np.percentile(boot, [100.0 * level for level in bca_levels(z0, accel, confidence)]))
    # a bound beside theta by float rounding only is theta
    tolerance = ROUNDING * max(1.0, abs(theta))
    low = theta if theta < low <= theta + tolerance else low
    high = theta if theta - tolerance <= high < theta else high
    return PairedEstimate(
        estimate=theta, low=low, high=high, se=se, n=n_units, confidence=confidence, method=method, replicates=replicates, seed=seed,
        resample=resample, z0=z0, acceleration=accel, interval="bca", degenerate=False,
    )


def _check_inputs(delta: np.ndarray, tokens: np.ndarray, replicates: int, resample: str) -> None:
    """Refuse what no paired bootstrap can use, before any draw."""
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


def _unit_sums(delta: np.ndarray, tokens: np.ndarray, clusters: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Per resampling unit (a window, or a cluster of windows) sum(t * d) and sum(t): every
    replicate and theta are ratios of their sums."""
    if clusters is None:
        return tokens * delta, tokens
    _, index = np.unique(np.asarray(clusters), return_inverse=True)
    return np.bincount(index, weights=tokens * delta), np.bincount(index, weights=tokens)


def _bootstrap(num: np.ndarray, den: np.ndarray, theta: float, resample: str, replicates: int, seed: int) -> tuple[np.ndarray, float]:
    """The replicates of the scheme `resample` and BCa's acceleration for that scheme."""
    n_units = len(num)
    if resample == "windows":
        boot = ratio_replicates(num, den, replicates, seed)
        # acceleration: jackknife of the same ratio-of-sums statistic
        jack = (num.sum() - num) / (den.sum() - den)
        u = (n_units - 1) * (jack.mean() - jack)
        denom = np.sum(u**2) ** 1.5
        return boot, float(np.sum(u**3) / (6.0 * denom)) if denom > 0 else 0.0
    means, weights = num / den, den / den.sum()
    boot = token_replicates(means, weights, replicates, seed)
    # acceleration: skewness of the influence values u_i = d_i - theta under the
    # distribution with masses p_i, for a mean of n draws (equals the jackknife formula
    # above when every p_i = 1/n); unbounded when a low-weight unit has an extreme d,
    # which is where bca_levels' pole matters
    u = means - theta
    denom = np.sqrt(n_units) * np.sum(weights * u**2) ** 1.5
    return boot, float(np.sum(weights * u**3) / (6.0 * denom)) if denom > 0 else 0.0


def ratio_replicates(num: np.ndarray, den: np.ndarray, replicates: int, seed: int) -> np.ndarray:
    """Bootstrap replicates of sum(num) / sum(den) over units drawn uniformly with replacement."""
    num, den = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    return _replicates(len(num), replicates, seed, lambda rng, shape: rng.integers(0, len(num), size=shape),
                       lambda counts: _ratio(counts, num, den))


def token_replicates(means: np.ndarray, weights: np.ndarray, replicates: int, seed: int) -> np.ndarray:
    """Bootstrap replicates of the plain mean of `means` over n units drawn with replacement
    with probabilities `weights` (summing to 1). Each replicate row is one
    `Generator.choice(n, n, p=weights)` call's worth of draws."""
    means = np.asarray(means, dtype=np.float64)
    n = len(means)
    return _replicates(n, replicates, seed, lambda rng, shape: rng.choice(n, size=shape, p=weights),
                       lambda counts: (counts * means).sum(axis=1) / n)


def _ratio(counts: np.ndarray, num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """sum_i c_i num_i / sum_i c_i den_i per row of multiplicities, summed in unit order."""
    return (counts * num).sum(axis=1) / (counts * den).sum(axis=1)


def _replicates(n_units: int, replicates: int, seed: int, draw: Callable, statistic: Callable) -> np.ndarray:
    """`statistic` of each row of multiplicities (how often each unit was drawn) of the unit
    indices `draw` gives; the index matrix is drawn in batches of about 2M entries so memory
    stays bounded (the same draws as one call per batch)."""
    rng = np.random.default_rng(seed)
    boot = np.empty(replicates)
    batch = max(1, 2_000_000 // n_units)
    for lo in range(0, replicates, batch):
        hi = min(lo + batch, replicates)
        idx = draw(rng, (hi - lo, n_units))
        rows = np.arange(hi - lo)[:, None] * n_units
        counts = np.bincount((idx + rows).ravel(), minlength=(hi - lo) * n_units).reshape(hi - lo, n_units)
        boot[lo:hi] = statistic(counts.astype(np.float64))
    return boot


def unit_sd(delta: np.ndarray, tokens: np.ndarray, clusters: np.ndarray | None = None) -> float | None:
    """The spread of one resampling unit's contribution to the token-weighted mean of `delta`:
    the standard deviation of the units' influence values (t_u / t̄)(Δ_u − Δ̄), Δ_u a unit's
    token mean, so the mean's standard error is about unit_sd / √units (the verdict's samples
    needed). None with fewer than two units."""
    num, den = np.asarray(delta, dtype=np.float64) * tokens, np.asarray(tokens, dtype=np.float64)
    if clusters is not None:
        _, index = np.unique(clusters, return_inverse=True)
        num, den = np.bincount(index, weights=num), np.bincount(index, weights=den)
    if len(num) < 2:
        return None
    influence = (num - num.sum() / den.sum() * den) / den.mean()
    return float(np.std(influence, ddof=1))
