"""The three-outcome verdict (stats/verdict.py) on constructed paired intervals, in the field's
order (inside ±δ first, then excludes 0), and how every renderer words it (render/verdicts.py)."""

from __future__ import annotations

import math

import pytest

from ctxeval.render.verdicts import verdict_words, would_settle
from ctxeval.stats.interval import Interval
from ctxeval.stats.verdict import samples_to_settle, verdict


def test_an_interval_above_zero_on_the_loss_side_hurts():
    v = verdict(Interval(0.05, 0.01, 0.09, se=0.1 / math.sqrt(30), n=30), delta=0.02, worse="higher")
    assert v.outcome == "hurts" and v.settled and v.samples_needed is None


def test_a_score_that_drops_hurts_and_one_that_rises_gains():
    assert verdict(Interval(-12.0, -20.0, -4.0, n=40), delta=5.0, worse="lower").outcome == "hurts"
    assert verdict(Interval(12.0, 4.0, 20.0, n=40), delta=5.0, worse="lower").outcome == "gains"


def test_an_interval_inside_delta_is_within_delta():
    v = verdict(Interval(0.001, -0.004, 0.006, se=0.02 / math.sqrt(200), n=200), delta=0.01)
    assert v.outcome == "within δ" and v.settled


def test_an_interval_across_zero_and_past_delta_is_too_few_and_says_how_many():
    # estimate 0.01, sd 0.1, δ 0.05: clearing 0 needs (1.96·0.1/0.01)² ≈ 385, fitting inside δ
    # needs (1.96·0.1/0.04)² ≈ 24.01 → 25: the nearer line wins
    v = verdict(Interval(0.01, -0.03, 0.05 + 1e-9, se=0.1 / math.sqrt(10), n=10), delta=0.05)
    assert v.outcome == "too few samples to tell" and not v.settled
    assert v.samples_needed == math.ceil((1.959963984540054 * 0.1 / 0.04) ** 2) == 25
    assert would_settle(v.samples_needed, "sample") == "about 25 samples would settle it"  # as every renderer words it


def test_no_interval_is_too_few_with_the_reason():
    v = verdict(Interval(0.2, n=1), delta=0.05)
    assert v.outcome == "too few samples to tell" and v.reason == "no interval" and v.samples_needed is None


def test_samples_to_settle_needs_a_spread():
    assert samples_to_settle(0.1, 0.05, None) is None and samples_to_settle(0.1, 0.05, 0.0) is None
    assert samples_to_settle(0.05, 0.05, 0.1) == math.ceil((1.959963984540054 * 0.1 / 0.05) ** 2)


@pytest.mark.parametrize("delta", [0, -1, float("nan")])
def test_a_margin_that_is_not_positive_is_refused(delta):
    with pytest.raises(ValueError, match="delta"):
        verdict(Interval(0.0, -1.0, 1.0, n=3), delta=delta)


def test_the_verdict_reads_the_intervals_own_confidence_and_spread():
    """An interval at 99 % says how many samples would settle it at 99 %, from its se·√n."""
    at_99 = verdict(Interval(0.01, -0.03, 0.05 + 1e-9, se=0.1 / math.sqrt(10), n=10, confidence=0.99), delta=0.05)
    assert at_99.samples_needed == math.ceil((2.5758293035489004 * 0.1 / 0.04) ** 2)


def test_an_intervals_own_reason_travels_and_the_callers_overrides_it():
    bare = Interval(0.2, n=2, reason="2 windows: fewer than 3 paired units decide nothing")
    assert verdict(bare, delta=0.05).reason == bare.reason
    assert verdict(bare, delta=0.05, reason="no effect").reason == "no effect"


# (low, high) of a score difference (candidate − reference, points; a loss is negative) at δ = 5:
# the outcome, whether the interval excludes 0, whether it lies wholly beyond δ
DONE_WHEN = [((-2.4, -0.1), "within δ", True, False),
             ((-8.0, -2.0), "hurts", True, False),
             ((-30.0, -10.0), "hurts", True, True),
             ((-8.0, 3.0), "too few samples to tell", False, False)]


@pytest.mark.parametrize("worse", ["lower", "higher"])
@pytest.mark.parametrize("bounds, outcome, excludes_zero, beyond_delta", DONE_WHEN)
def test_inside_delta_reads_within_delta_first_in_either_orientation(worse, bounds, outcome, excludes_zero, beyond_delta):
    """A loss oriented "lower" (a score) or "higher" (its negation, as a Δ log-loss) reads the same."""
    low, high = bounds if worse == "lower" else (-bounds[1], -bounds[0])
    v = verdict(Interval((low + high) / 2, low, high, se=3.0, n=40), delta=5.0, worse=worse)
    assert (v.outcome, v.excludes_zero, v.beyond_delta) == (outcome, excludes_zero, beyond_delta)
    assert v.margin == max(abs(low), abs(high))
    assert (v.samples_needed is None) == v.settled


@pytest.mark.parametrize("worse", ["lower", "higher"])
def test_a_gain_mirrors_a_loss(worse):
    sign = 1 if worse == "lower" else -1
    gains = [verdict(Interval(sign * m, *sorted((sign * lo, sign * hi)), n=40), delta=5.0, worse=worse) for m, lo, hi in ((1.0, 0.1, 2.4), (5.0, 2.0, 8.0), (20.0, 10.0, 30.0))]
    assert [g.outcome for g in gains] == ["within δ", "gains", "gains"] and [g.beyond_delta for g in gains] == [False, False, True]


def test_a_verdict_without_an_interval_has_no_margin():
    v = verdict(Interval(0.2, n=1), delta=0.05)
    assert math.isnan(v.margin) and not v.excludes_zero and not v.beyond_delta


def test_every_renderer_words_the_qualifiers_and_the_margin():
    assert verdict_words("within δ", -2.4, -0.1, 5.0, worse="lower") == "within δ (excludes 0: a real loss smaller than δ; within ±2.4)"
    assert verdict_words("within δ", 0.1, 2.4, 5.0, worse="lower") == "within δ (excludes 0: a real gain smaller than δ; within ±2.4)"
    assert verdict_words("within δ", 0.001, 0.004, 0.01) == "within δ (excludes 0: a real loss smaller than δ; within ±0.004)"
    assert verdict_words("within δ", -1.0, 2.0, 5.0, worse="lower") == "within δ (within ±2)"
    assert verdict_words("hurts", -8.0, -2.0, 5.0, worse="lower") == "hurts (within ±8)"
    assert verdict_words("hurts", -30.0, -10.0, 5.0, worse="lower") == "hurts, by more than δ (within ±30)"
    assert verdict_words("too few samples to tell", -8.0, 3.0, 5.0, 120, "sample", worse="lower") == \
        "too few samples to tell (within ±8; about 120 samples would settle it)"
    assert verdict_words("too few samples to tell", None, float("nan"), 5.0, None) == "too few samples to tell"
