"""One shape for every interval the tool reports, and the quantiles they are built from.

Every interval function (paired BCa, Tango's paired proportions, PPI++, a cell's pseudo-label
interval, MOVER's mean over tasks) returns an `Interval` or a subclass of it that adds the
facts of its method (a bootstrap's replicates, a stratified mean's strata), so a verdict, a table
or a sequential rule reads one shape: estimate, bounds, standard error, samples, confidence,
method, and why there is no interval where there is none. As scipy.stats' result objects carry
their own `confidence_interval`, an Interval carries its confidence: nothing downstream assumes a
module's constant.

An interval leaves memory as one row (`to_row`, read back by `from_row`): the keys of ROW_KEYS,
NaN written as null. A JSON file holds that row as an object under the interval's name; a flat
table (a DataFrame, Parquet) holds it as columns named by `column`: the estimate under the bare
name, every other key as `<name>.<key>` (`score`, `score.low`, `score.confidence`, ...).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Self

from ctxeval.stats.defaults import DEFAULT_CONFIDENCE

ROW_KEYS = ("estimate", "low", "high", "se", "n", "confidence", "method", "reason")
SEPARATOR = "."  # a flat table's column of an interval's key: f"{name}{SEPARATOR}{key}"


def percentile_method(unit: str) -> str:
    """The method a percentile bootstrap that resamples `unit`s names in its rows."""
    return f"percentile bootstrap over {unit}s"


def column(name: str, key: str) -> str:
    """The flat-table column of interval `name`'s `key`: the bare name holds the estimate."""
    return name if key == "estimate" else f"{name}{SEPARATOR}{key}"


def stored(value: Any) -> Any:
    """A value as a row stores it: a NaN float as None (JSON null), the rest as it is."""
    return None if isinstance(value, float) and math.isnan(value) else value


def _number(value: Any) -> float:
    """A stored number read back: None (JSON null) as NaN."""
    return math.nan if value is None else float(value)


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

    def to_row(self) -> dict[str, Any]:
        """The interval as every result file writes it: the keys of ROW_KEYS, NaN as None."""
        return {"estimate": stored(float(self.estimate)), "low": stored(float(self.low)), "high": stored(float(self.high)),
                "se": stored(float(self.se)), "n": int(self.n), "confidence": float(self.confidence), "method": self.method, "reason": self.reason}

    def columns(self, name: str) -> dict[str, Any]:
        """The interval as a flat table's columns under `name` (`column`); NaN stays NaN."""
        return {column(name, key): (math.nan if value is None else value) for key, value in self.to_row().items()}

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Interval:
        """The Interval a row (`to_row`'s keys; null read as NaN) describes."""
        return Interval(_number(row.get("estimate")), _number(row.get("low")), _number(row.get("high")), _number(row.get("se")),
                        int(row.get("n") or 0), float(row["confidence"]), str(row.get("method") or ""), str(row.get("reason") or ""))

    @classmethod
    def from_columns(cls, row: Mapping[str, Any], name: str) -> Interval:
        """The Interval stored as flat columns under `name` (`columns`)."""
        return cls.from_row({key: stored(row.get(column(name, key))) for key in ROW_KEYS})


def quantile(confidence: float = DEFAULT_CONFIDENCE, df: float | None = None) -> float:
    """The two-sided quantile of a `confidence` interval: the normal's, or Student's t with `df`
    degrees of freedom (the one helper every interval and sample-size formula calls)."""
    from scipy import special, stats  # imported when used: scipy is a third of the CLI's start-up

    level = 0.5 + confidence / 2
    return float(special.ndtri(level)) if df is None else float(stats.t.ppf(level, df))
