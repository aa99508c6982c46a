"""The Wilson score interval of a proportion (Wilson 1927): never degenerate at 0 or n, and close
to its level at the handful of samples a RULER cell holds, where the Wald interval collapses."""

from __future__ import annotations

import math

from ctxeval.stats.defaults import DEFAULT_CONFIDENCE
from ctxeval.stats.interval import Interval, quantile


def wilson(successes: float, n: int, confidence: float = DEFAULT_CONFIDENCE) -> Interval:
    """Wilson score interval of `successes` of `n` (a share in [0, 1]). A multi-answer task's
    partial credit counts as a fraction of a success (exact for one-answer tasks)."""
    if n == 0:
        return Interval(math.nan, n=0, confidence=confidence, method="Wilson", reason="no samples")
    z = quantile(confidence)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return Interval(p, max(0.0, centre - half), min(1.0, centre + half), math.sqrt(p * (1 - p) / n), n, confidence, "Wilson")
