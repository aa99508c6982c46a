"""How every renderer words a verdict (stats/verdict.py): its outcome with the qualifiers the
interval gives it ("excludes 0" on a *within δ* verdict, "by more than δ" on a *hurts* or
*gains* one), the smallest margin it would be within ("within ±X", so a reader with another δ
needs no rerun), and the samples that would settle an undecided one, so diff, effective-length,
ruler, PPI and `--until` say it alike."""

from __future__ import annotations

import math

from ctxeval.stats.verdict import UNDECIDED, WITHIN, Direction, beyond_delta, excludes_zero, margin


def _number(value: object) -> float | None:
    """A stored bound or count as a float; None where it is missing (None, NaN: no interval)."""
    if value is None:
        return None
    number = float(value)  # type: ignore[arg-type]
    return None if math.isnan(number) else number


def would_settle(samples_needed: int, unit: str = "") -> str:
    """'about N windows would settle it' (`unit` "window"), or 'about N would settle it' with no unit."""
    return f"about {int(samples_needed)} {unit + 's ' if unit else ''}would settle it"


def verdict_words(outcome: str, low: object, high: object, delta: float, samples_needed: object = None, unit: str = "", worse: Direction = "higher") -> str:
    """A verdict in one cell, from its stored fields: 'within δ (excludes 0: a real loss smaller
    than δ; within ±2.4)', 'hurts, by more than δ (within ±30)', 'too few samples to tell (within
    ±8; about 120 would settle it)'. `worse`: "higher" when a positive difference is a loss, as
    in `stats.verdict.verdict`; `unit`: what `samples_needed` counts."""
    lo, hi, needed = _number(low), _number(high), _number(samples_needed)
    head, notes = outcome, []
    if outcome == WITHIN and excludes_zero(lo, hi):
        loss = (lo > 0) == (worse == "higher")  # type: ignore[operator]
        notes.append(f"excludes 0: a real {'loss' if loss else 'gain'} smaller than δ")
    if outcome in ("hurts", "gains") and beyond_delta(lo, hi, delta):
        head += ", by more than δ"
    if lo is not None and hi is not None:
        notes.append(f"within ±{margin(lo, hi):.3g}")
    if outcome == UNDECIDED and needed is not None:
        notes.append(would_settle(int(needed), unit))
    return f"{head} ({'; '.join(notes)})" if notes else head


# the verdict rule, in the words every table's note uses
VERDICT_RULE = ("within δ where the interval lies inside ±δ (saying so where it also excludes 0: a real difference smaller than δ); "
                "hurts or gains where it excludes 0 and is not inside ±δ (by more than δ where it lies wholly beyond); else too few samples to tell, "
                "with the paired samples that would settle it at the observed spread; 'within ±X': the smallest δ the interval lies inside")
