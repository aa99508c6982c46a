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
from typing import Literal

from ctxeval.stats.defaults import DEFAULT_CONFIDENCE
from ctxeval.stats.interval import Interval, quantile

UNDECIDED = "too few samples to tell"
WITHIN = "within δ"
OUTCOMES = ("hurts", "gains", WITHIN, UNDECIDED)
Direction = Literal["higher", "lower"]


@dataclass(frozen=True)
class Verdict:
    """One variant's verdict against its reference.

    `outcome` is one of OUTCOMES; `low`/`high` the paired interval (NaN where there is none);
    `delta` the equivalence margin it was read against, in the difference's own unit;
    `samples_needed` the paired samples (of the kind `n` counted) that would settle an
    undecided verdict at the observed spread, None when it is decided or the spread is unknown."""

    outcome: str
    estimate: float
    low: float
    high: float
    delta: float
    n: int
    samples_needed: int | None
    reason: str = ""

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

    @property
    def margin(self) -> float:
        """The smallest margin the verdict would be within: max(|low|, |high|); NaN without an interval."""
        return margin(self.low, self.high)

    def as_dict(self) -> dict:
        return {"outcome": self.outcome, "estimate": self.estimate, "low": self.low, "high": self.high, "delta": self.delta,
                "n": self.n, "samples_needed": self.samples_needed, "reason": self.reason}


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
    estimate, low, high, n = interval.estimate, interval.low, interval.high, interval.n
    reason = reason or interval.reason
    has_interval = interval.has_interval
    if has_interval and inside_delta(low, high, delta):
        return Verdict(WITHIN, estimate, low, high, delta, n, None, reason)
    if has_interval and excludes_zero(low, high):
        loss = (low > 0) == (worse == "higher")
        return Verdict("hurts" if loss else "gains", estimate, low, high, delta, n, None, reason)
    return Verdict(UNDECIDED, estimate, low, high, delta, n, samples_to_settle(estimate, delta, interval.sd, interval.confidence),
                   reason or ("" if has_interval else "no interval"))


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
