"""The verdict on a variant, paired on the same samples: it is *within δ*, it *hurts* (or
*gains*), or there are *too few samples to tell* — and then how many samples would settle it.

A paired interval answers "how much does this press (KV type, context limit) hurt?" only when
it is read against two lines: ±δ (is the difference small enough not to matter?) and 0 (does
the variant differ at all?). The order is the field's (equivalence testing, TOSTER's
"statistically different from zero but statistically equivalent"; a non-inferiority margin):
an interval inside ±δ reads *within δ* even when it also excludes 0 (a real loss or gain
smaller than δ, which its wording says), so a verdict does not turn from *hurts* into *within
δ* as samples are added; an interval that excludes 0 and is not inside ±δ reads *hurts* or
*gains* ("by more than δ" where it lies wholly beyond δ); an interval that crosses 0 and reaches
past δ answers neither, and the honest outcome is "too few samples to tell", with the sample
count that would settle it from the observed paired spread (a normal approximation: n =
(z·sd / margin)², where the margin is the distance from the estimate to the line it would have
to clear). Every verdict also carries its `margin`, max(|low|, |high|): the smallest δ it would
be within, so a reader with another δ needs no rerun.

The difference is oriented by `worse`: "higher" when a larger difference is a loss (Δ log-loss,
KL), "lower" when a smaller one is (a task score's candidate − reference).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from collections.abc import Mapping
from typing import Literal

from ctxeval.stats.defaults import DEFAULT_CONFIDENCE
from ctxeval.stats.interval import ROW_KEYS, Interval, column, quantile, stored

UNDECIDED = "too few samples to tell"
WITHIN = "within δ"
OUTCOMES = ("hurts", "gains", WITHIN, UNDECIDED)
Direction = Literal["higher", "lower"]
VERDICT_KEYS = ("outcome", "delta", "margin", "samples_needed")  # what a verdict's row adds to its interval's


@dataclass(frozen=True)
class Verdict:
    """One variant's verdict against its reference: the paired `interval` it was read from
    (with its confidence and method), its `outcome` (one of OUTCOMES), `delta` the equivalence
    margin it was read against, in the difference's own unit, and `samples_needed` the paired
    samples (of the kind `n` counted) that would settle an undecided verdict at the observed
    spread, None when it is decided or the spread is unknown. It leaves memory as the interval's
    row with outcome, delta, margin and samples_needed added (`to_row`)."""

    interval: Interval
    outcome: str
    delta: float
    samples_needed: int | None
    reason: str = ""

    @property
    def estimate(self) -> float:
        return self.interval.estimate

    @property
    def low(self) -> float:
        return self.interval.low

    @property
    def high(self) -> float:
        return self.interval.high

    @property
    def n(self) -> int:
        return self.interval.n

    @property
    def margin(self) -> float:
        """The smallest δ the interval lies within: max(|low|, |high|) (NaN without an interval)."""
        return margin(self.low, self.high)

    @property
    def settled(self) -> bool:
        return self.outcome != UNDECIDED

    @property
    def excludes_zero(self) -> bool:
        """Whether the interval excludes 0: a real difference (said of a *within δ* verdict too)."""
        return excludes_zero(self.low, self.high)

    @property
    def beyond_delta(self) -> bool:
        """Whether the whole interval lies beyond ±δ: *hurts* or *gains* by more than δ."""
        return beyond_delta(self.low, self.high, self.delta)

    def to_row(self) -> dict:
        """The verdict as every result file writes it: its interval's row (`Interval.to_row`,
        the verdict's reason) with outcome, delta, margin and samples_needed."""
        return self.interval.to_row() | {"reason": self.reason, "outcome": self.outcome, "delta": float(self.delta),
                                         "margin": stored(float(self.margin)), "samples_needed": self.samples_needed}

    def columns(self, name: str) -> dict:
        """The verdict as a flat table's columns under `name` (`interval.column`)."""
        return {column(name, key): (math.nan if value is None and key != "samples_needed" else value) for key, value in self.to_row().items()}

    @classmethod
    def from_row(cls, row: Mapping) -> Verdict:
        """The Verdict a row (`to_row`'s keys) describes."""
        needed = row.get("samples_needed")
        return cls(Interval.from_row(row), str(row["outcome"]), float(row["delta"]), None if stored(needed) is None else int(needed), str(row.get("reason") or ""))

    @classmethod
    def from_columns(cls, row: Mapping, name: str) -> Verdict:
        """The Verdict stored as flat columns under `name` (`columns`)."""
        return cls.from_row({key: row.get(column(name, key)) for key in (*ROW_KEYS, *VERDICT_KEYS)})


def verdict(interval: Interval, delta: float, worse: Direction = "higher", reason: str = "") -> Verdict:
    """The verdict of a paired difference read from its `interval` (at the interval's own
    confidence; its `sd` estimates the samples that would settle it), against 0 and ±`delta`.

    Order: an interval that lies inside ±δ decides first (*within δ*, whether or not it also
    excludes 0); then one that excludes 0 (*hurts* or *gains*); else *too few samples*.
    `reason` overrides the interval's own reason for having no bounds."""
    if delta <= 0 or not math.isfinite(delta):
        raise ValueError(f"delta must be a positive number, not {delta}")
    if worse not in ("higher", "lower"):
        raise ValueError(f"worse must be 'higher' or 'lower', not {worse!r}")
    estimate, low, high = interval.estimate, interval.low, interval.high
    reason = reason or interval.reason
    has_interval = interval.has_interval
    if has_interval and inside_delta(low, high, delta):
        return Verdict(interval, WITHIN, delta, None, reason)
    if has_interval and excludes_zero(low, high):
        loss = (low > 0) == (worse == "higher")
        return Verdict(interval, "hurts" if loss else "gains", delta, None, reason)
    return Verdict(interval, UNDECIDED, delta, samples_to_settle(estimate, delta, interval.sd, interval.confidence),
                   reason or ("" if has_interval else "no interval"))


def in_the_fields_order(outcome: str, low: float | None, high: float | None, delta: float) -> str:
    """A verdict stored by an order that read "excludes 0" first (result versions before the
    field's order), read again in the field's: *hurts*/*gains* on an interval inside ±δ is *within
    δ*; no other outcome can differ between the two orders."""
    return WITHIN if outcome in ("hurts", "gains") and inside_delta(low, high, delta) else outcome


def _bounded(low: float | None, high: float | None) -> bool:
    return low is not None and high is not None and math.isfinite(low) and math.isfinite(high)


def inside_delta(low: float | None, high: float | None, delta: float) -> bool:
    """Whether the interval [low, high] lies inside ±δ (*within δ*)."""
    return _bounded(low, high) and -delta <= low and high <= delta  # type: ignore[operator]


def excludes_zero(low: float | None, high: float | None) -> bool:
    """Whether the interval [low, high] excludes 0 (a real difference)."""
    return _bounded(low, high) and (low > 0 or high < 0)  # type: ignore[operator]


def beyond_delta(low: float | None, high: float | None, delta: float) -> bool:
    """Whether the whole interval [low, high] lies beyond ±δ (a difference larger than δ)."""
    return _bounded(low, high) and (low > delta or high < -delta)  # type: ignore[operator]


def margin(low: float | None, high: float | None) -> float:
    """max(|low|, |high|): the smallest δ whose ±δ holds the interval ("within ±X"); NaN without one."""
    return max(abs(low), abs(high)) if _bounded(low, high) else math.nan  # type: ignore[arg-type]


def samples_to_settle(estimate: float, delta: float, sd: float | None, confidence: float = DEFAULT_CONFIDENCE) -> int | None:
    """Paired samples at which the interval, at the observed spread `sd`, would clear the nearer
    of its two lines: exclude 0 (margin |estimate|) or fit inside ±δ (margin δ − |estimate|).
    Either gives a verdict (an undecided interval is one that does neither, whichever line the
    order reads first), so the nearer line is the one with the larger margin.
    None where the spread is unknown or zero, or the estimate sits on both lines."""
    if sd is None or not math.isfinite(sd) or sd <= 0 or not math.isfinite(estimate):
        return None
    z = quantile(confidence)
    margins = [m for m in (abs(estimate), delta - abs(estimate)) if m > 0]
    if not margins:
        return None
    return max(2, math.ceil((z * sd / max(margins)) ** 2))
