"""One shape for every interval the tool reports, and the quantiles they are built from.

Every interval function (paired BCa, Tango's paired proportions, PPI++, a cell's pseudo-label
interval, MOVER's mean over tasks) returns an `Interval` or a subclass of it that adds the
facts of its method (a bootstrap's replicates, a stratified mean's strata), so a verdict, a table
or a sequential rule reads one shape: estimate, bounds, standard error, samples, confidence,
method, and why there is no interval where there is none. As scipy.stats' result objects carry
their own `confidence_interval`, an Interval carries its confidence: nothing downstream assumes a
module's constant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Self

from ctxeval.stats.defaults import DEFAULT_CONFIDENCE


@dataclass(frozen=True)
class Interval:
    """An estimate with its two-sided interval at `confidence`.

    `low`/`high` are NaN where there is no interval (`reason` says why); `se` is the estimate's
    standard error (NaN where the method gives none), `n` the samples (or resampling units) it
    rests on, so `sd` = se·√n is one sample's spread, from which the samples that would settle an
    undecided verdict are estimated."""

    estimate: float
    low: float = math.nan
    high: float = math.nan
    se: float = math.nan
    n: int = 0
    confidence: float = DEFAULT_CONFIDENCE
    method: str = ""
    reason: str = ""

    @property
    def has_interval(self) -> bool:
        return math.isfinite(self.low) and math.isfinite(self.high)

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    @property
    def sd(self) -> float | None:
        """One sample's spread, se·√n; None where the standard error is unknown."""
        return self.se * math.sqrt(self.n) if math.isfinite(self.se) and self.n > 0 else None

    def scaled(self, factor: float) -> Self:
        """The same interval in another unit (shares to percent)."""
        return replace(self, estimate=self.estimate * factor, low=self.low * factor, high=self.high * factor, se=self.se * factor)

    def without_interval(self, reason: str) -> Self:
        """The estimate alone, its bounds dropped, saying why."""
        return replace(self, low=math.nan, high=math.nan, reason=reason)


def quantile(confidence: float = DEFAULT_CONFIDENCE, df: float | None = None) -> float:
    """The two-sided quantile of a `confidence` interval: the normal's, or Student's t with `df`
    degrees of freedom (the one helper every interval and sample-size formula calls)."""
    from scipy import special, stats  # imported when used: scipy is a third of the CLI's start-up

    level = 0.5 + confidence / 2
    return float(special.ndtri(level)) if df is None else float(stats.t.ppf(level, df))
