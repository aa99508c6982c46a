"""Sequential looks at a paired difference: the chance that a later look decides it.

Futility by stochastic curtailment (Lan, Simon and Halperin 1982): if the true difference were
today's estimate, how likely is the look at the budget to give a verdict? A variant the budget
is unlikely to decide is closed early; closing it claims nothing, so it costs no coverage."""

from __future__ import annotations

import math

from ctxeval.stats.interval import quantile


def conditional_power(estimate: float, half_width: float, samples: int, budget: int, delta: float, confidence: float, se: float | None = None) -> float:
    """The chance that the look at `budget` samples gives a verdict if the true difference is the
    current estimate (stochastic curtailment): the interval narrows at 1/√n to h = half_width ·
    √(samples / budget), and the final estimate, the current one averaged with budget − samples
    new ones, is normal around it with sd = se · √samples · √(budget − samples) / budget (se from
    the half-width at `confidence`, or `se` where the interval is not z·se wide, as a confidence
    sequence's is not); a verdict is |final| > h (hurts or gains) or |final| ≤ δ − h."""
    from scipy import stats  # imported when used: scipy is a third of the CLI's start-up

    z = quantile(confidence)
    at_budget = half_width * math.sqrt(samples / budget)
    spread = (half_width / z if se is None else se) * math.sqrt(samples) * math.sqrt(budget - samples) / budget
    final = stats.norm(estimate, spread)
    excludes_zero = final.sf(at_budget) + final.cdf(-at_budget)
    inside = final.cdf(delta - at_budget) - final.cdf(at_budget - delta) if delta > at_budget else 0.0
    return float(excludes_zero + inside)
