"""The three-outcome verdict (stats/verdict.py) on constructed paired intervals."""

from __future__ import annotations

import math

import pytest

from ctxeval.render.verdicts import would_settle
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
