"""The three-outcome verdict (stats/verdict.py) on constructed paired intervals."""

from __future__ import annotations

import math

import pytest

from ctxeval.render.verdicts import would_settle
from ctxeval.stats.verdict import samples_to_settle, verdict


def test_an_interval_above_zero_on_the_loss_side_hurts():
    v = verdict(0.05, 0.01, 0.09, delta=0.02, n=30, sd=0.1, worse="higher")
    assert v.outcome == "hurts" and v.settled and v.samples_needed is None


def test_a_score_that_drops_hurts_and_one_that_rises_gains():
    assert verdict(-12.0, -20.0, -4.0, delta=5.0, n=40, worse="lower").outcome == "hurts"
    assert verdict(12.0, 4.0, 20.0, delta=5.0, n=40, worse="lower").outcome == "gains"


def test_an_interval_inside_delta_is_within_delta():
    v = verdict(0.001, -0.004, 0.006, delta=0.01, n=200, sd=0.02)
    assert v.outcome == "within δ" and v.settled


def test_an_interval_across_zero_and_past_delta_is_too_few_and_says_how_many():
    # estimate 0.01, sd 0.1, δ 0.05: clearing 0 needs (1.96·0.1/0.01)² ≈ 385, fitting inside δ
    # needs (1.96·0.1/0.04)² ≈ 24.01 → 25: the nearer line wins
    v = verdict(0.01, -0.03, 0.05 + 1e-9, delta=0.05, n=10, sd=0.1)
    assert v.outcome == "too few samples to tell" and not v.settled
    assert v.samples_needed == math.ceil((1.959963984540054 * 0.1 / 0.04) ** 2) == 25
    assert would_settle(v.samples_needed, "sample") == "about 25 samples would settle it"  # as every renderer words it


def test_no_interval_is_too_few_with_the_reason():
    v = verdict(0.2, float("nan"), float("nan"), delta=0.05, n=1)
    assert v.outcome == "too few samples to tell" and v.reason == "no interval" and v.samples_needed is None


def test_samples_to_settle_needs_a_spread():
    assert samples_to_settle(0.1, 0.05, None) is None and samples_to_settle(0.1, 0.05, 0.0) is None
    assert samples_to_settle(0.05, 0.05, 0.1) == math.ceil((1.959963984540054 * 0.1 / 0.05) ** 2)


@pytest.mark.parametrize("delta", [0, -1, float("nan")])
def test_a_margin_that_is_not_positive_is_refused(delta):
    with pytest.raises(ValueError, match="delta"):
        verdict(0.0, -1.0, 1.0, delta=delta, n=3)
