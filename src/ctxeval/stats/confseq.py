"""A confidence sequence for the mean of bounded values: an interval valid at every sample count
at once, so a sequential rule may look after every batch and stop whenever it likes.

Why a confidence sequence: `ruler --until` looks at its intervals again and again and stops on
the first that decides. A fixed-n interval read that way misses more often than its level says
(every look is another chance to stop on a miss); Bonferroni over a fixed number of looks keeps
the level but forces looks into rounds and widens each one. A confidence sequence C_1, C_2, ...
holds P(∀t: μ ∈ C_t) ≥ 1 − α, so the interval at any stopping time, however chosen, covers μ
with probability ≥ 1 − α (Howard, Ramdas, McAuliffe and Sekhon 2021, "Time-uniform,
nonparametric, nonasymptotic confidence sequences", Ann. Statist. 49(2)).

The construction is the betting one of Waudby-Smith and Ramdas (2024), "Estimating means of
bounded random variables by betting", JRSS-B 86(1), section 4 and appendix: for values
x_i ∈ [0, 1] and a candidate mean m, the hedged capital process

    K_t(m) = max(θ ∏ (1 + λ⁺_i(m)(x_i − m)),  (1 − θ) ∏ (1 − λ⁻_i(m)(x_i − m))),  θ = 1/2,

is a nonnegative martingale when μ = m for any bets λ^±_i(m) chosen before x_i is seen, so by
Ville's inequality P(∃t: K_t(μ) ≥ 1/α) ≤ α and {m : K_t(m) < 1/α} is a (1 − α) confidence
sequence (their Theorem 3). The bets are their predictable plug-in ones (PrPl, eq. 26–27):
λ_i = √(2 log(2/α) / (σ̂²_{i−1} n*)), from the regularised predictable mean and variance
μ̂_t = (1/2 + Σx) / (t + 1), σ̂²_t = (1/4 + Σ(x − μ̂)²) / (t + 1), truncated to c / m and
c / (1 − m) (c = TRUNCATION). Any predictable bets give a valid sequence; n* only sets where it
is tightest. WSR take n* = t log(1 + t) for a sequence meant to run forever and n* = n for a
fixed-n interval; `--until` has a budget N, so `horizon` = N tunes the bets for the looks it can
make (still valid at every t). Chosen on a 200-run comparison of paired differences in
{−1, 0, 1} at a 40-sample budget, made while writing this and not kept as a script: PrPl at
n* = N with c = 0.9 decided 25–37.5-point losses in 60–85 % of runs where aGRAPA (their
growth-rate adaptive bets) and n* = t log(1 + t) decided 46–74 %, at about the same samples for
45–60-point losses; bench/until_sequence_simulation.py measures the chosen one in `--until`.
The set is computed on a grid of candidate means and reported as its
hull, rounded outwards to the grid, and intersected over time (a running intersection of a
confidence sequence is one), so the bounds never move out.
"""

from __future__ import annotations

import numpy as np

from ctxeval.stats.defaults import DEFAULT_CONFIDENCE

GRID = 2001  # candidate means on [0, 1]: bounds to 0.0005 of the range (0.1 points of a [-1, 1] difference)
TRUNCATION = 0.9  # c: a bet never stakes more than this share of the capital a value at the far end could lose (WSR 2024 use 1/2–3/4; see betting_bounds)
HEDGE = 0.5  # θ: the capital split between betting the mean is above m and below it


def betting_bounds(x: np.ndarray, confidence: float = DEFAULT_CONFIDENCE, low: float = 0.0, high: float = 1.0, horizon: int | None = None,
                   grid: int = GRID, truncation: float = TRUNCATION) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) after each of the values `x` (in order, each in [low, high]): the betting
    confidence sequence for their mean at `confidence`, running-intersected, so entry t − 1 is
    the interval after t values, valid at every t at once. `horizon`: the sample count n* the
    bets are tuned for (the budget); None tunes them for every t (n* = t log(1 + t)).

    A truncation c below 1 keeps every factor 1 ± λ(x − m) at least 1 − c, so one value at the
    far end costs at most that share of the capital; WSR's defaults (1/2, 3/4) suit long
    sequences, where the loss from capping is small, but at RULER's 10–40 samples the cap sets
    how fast a clear difference is found: with every pair a loss the hedged capital grows by at
    most 1 + c a pair, so reaching 1/α = 20 takes at least 10 pairs at c = 1/2 (1.5^t ≥ 40) and
    6 at c = 0.9 (the plug-in bets start below the cap: 8, tests/test_ruler_until.py)."""
    x = np.asarray(x, dtype=float)
    if x.ndim != 1:
        raise ValueError("x must be one sequence of values")
    if not high > low:
        raise ValueError("high must exceed low")
    if len(x) and (np.nanmin(x) < low - 1e-12 or np.nanmax(x) > high + 1e-12 or np.isnan(x).any()):
        raise ValueError(f"every value must lie in [{low}, {high}]")
    if not 0 < confidence < 1 or not 0 < truncation < 1:
        raise ValueError("confidence and truncation must lie in (0, 1)")
    n = len(x)
    if n == 0:
        return np.empty(0), np.empty(0)
    unit = np.clip((x - low) / (high - low), 0.0, 1.0)
    t = np.arange(1, n + 1)
    mean = (0.5 + np.cumsum(unit)) / (t + 1)
    var = (0.25 + np.cumsum((unit - mean) ** 2)) / (t + 1)
    var_before = np.concatenate([[0.25], var[:-1]])[:, None]  # predictable: what was known before x_t
    m = np.linspace(0.0, 1.0, grid)[None, :]
    inner = np.clip(m, 1e-12, 1 - 1e-12)
    tuned = (t * np.log1p(t) if horizon is None else np.full(n, float(horizon)))[:, None]
    bet = np.sqrt(2 * np.log(2 / (1 - confidence)) / (var_before * tuned))
    up = np.minimum(bet, truncation / inner)
    down = np.minimum(bet, truncation / (1 - inner))
    step = unit[:, None] - m
    with np.errstate(divide="ignore"):
        log_up = np.cumsum(np.log(np.maximum(1 + up * step, 0.0)), axis=0)
        log_down = np.cumsum(np.log(np.maximum(1 - down * step, 0.0)), axis=0)
    log_capital = np.maximum(np.log(HEDGE) + log_up, np.log(1 - HEDGE) + log_down)
    rejected = np.logical_or.accumulate(log_capital >= np.log(1 / (1 - confidence)), axis=0)
    kept = ~rejected
    points = m[0]
    any_kept = kept.any(axis=1)
    first = np.where(any_kept, kept.argmax(axis=1), grid - 1)
    last = np.where(any_kept, grid - 1 - kept[:, ::-1].argmax(axis=1), 0)
    lower = points[np.maximum(first - 1, 0)]  # outwards: the true bound lies between the last rejected point and the first kept one
    upper = points[np.minimum(last + 1, grid - 1)]
    empty = (x.cumsum() / t - low) / (high - low)  # no candidate kept (a chance of at most α): the hull is read as the running mean
    lower, upper = np.where(any_kept, lower, empty), np.where(any_kept, upper, empty)
    return low + (high - low) * lower, low + (high - low) * upper


def regularised_sd(x: np.ndarray, low: float, high: float) -> np.ndarray:
    """One value's spread as the bets see it after each of the values `x` (in their own unit):
    √σ̂²_t, which the pseudo-values at each end keep above zero where every value so far is equal."""
    unit = (np.asarray(x, dtype=float) - low) / (high - low)
    t = np.arange(1, len(unit) + 1)
    mean = (0.5 + np.cumsum(unit)) / (t + 1)
    return np.sqrt((0.25 + np.cumsum((unit - mean) ** 2)) / (t + 1)) * (high - low)
