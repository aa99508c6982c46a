"""Cells where likelihood settles most samples: every sample settled, every right answer settled,
every sample labelled (`--generate-share 1`), the split's MOVER interval by hand, every bound
inside its quantity's range, and the mean over tasks of unequal size, one mostly settled."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

pytest.importorskip("ppi_py")

from ctxeval.stats.ppi import mean_of, stratified_ppi  # noqa: E402
from ctxeval.stats.pseudo_labels import pseudo_label_interval  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import coverage_grid  # noqa: E402


def test_the_issues_minimal_case_contains_09_and_ends_at_1():
    """n = 20 samples of a task whose accuracy is 0.9, every right answer settled, all 20 right:
    the full-generation interval on the 20 labels, Agresti and Coull's centre 22/24 with t on
    19 df, clipped at 1."""
    y = np.ones(20); exact = np.ones(20, bool); gen = np.zeros(20, bool)  # noqa: E702
    e = stratified_ppi(y, np.ones(20), exact, gen)
    centre = 22 / 24
    half = stats.t.ppf(0.975, 19) * math.sqrt(centre * (1 - centre) / 23)
    assert e.estimate == 1.0 and e.high == 1.0 and e.low <= 0.9
    assert e.low == pytest.approx(centre - half, abs=1e-12) and e.confidence == 0.95 and e.method
    assert (e.exact, e.generated, e.predicted, e.df) == (20, 0, 0, 19)


def test_every_sample_labelled_always_gets_the_full_generation_interval():
    """`--generate-share 1`: every unsettled sample generated, whatever the settled share and n ≥ 2
    (even 1 unsettled sample, or none): the interval is `pseudo_label_interval` of all the
    labels; one sample: its mean, no interval."""
    rng = np.random.default_rng(4)
    for n in (2, 3, 5, 20, 60):
        for settled_share in (0.0, 0.5, 0.95, 1.0):
            y = (rng.random(n) < 0.85).astype(float)
            exact = (y == 1) & (rng.random(n) < settled_share)
            for label_range, labels in (((0.0, 1.0), y), ((-1.0, 1.0), y - (rng.random(n) < 0.5))):
                cell = stratified_ppi(labels, rng.random(n), exact & (labels == labels.max()), ~(exact & (labels == labels.max())),
                                      label_range=label_range)
                full = pseudo_label_interval(labels, label_range=label_range)
                assert cell.has_interval and (cell.estimate, cell.low, cell.high) == pytest.approx((full.estimate, full.low, full.high), abs=1e-12)
    one = stratified_ppi(np.ones(1), np.ones(1), np.ones(1, bool), np.zeros(1, bool))
    assert one.estimate == 1.0 and not one.has_interval and one.reason == "one sample"


def test_the_split_interval_is_mover_of_the_stratum_and_the_composition_by_hand():
    """A constant prediction (λ = 0): the unsettled stratum's PPI++ mean is its labels' mean, its
    interval Agresti and Coull's (2 pseudo-labels at each end, Bessel, t on m − 1 df), clipped;
    the composition's half-width t(n − 1)·√(w_e² var_e + w_e w_u (mean_e − mean_u)² / n); the
    bounds the estimate ∓ the root of the two parts' squared distances on that side."""
    n, n_e, m = 40, 16, 12
    y = np.full(n, np.nan)
    y[:n_e] = 1.0
    y[n_e:n_e + m] = np.array([1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0], float)
    exact, generated = np.arange(n) < n_e, (np.arange(n) >= n_e) & (np.arange(n) < n_e + m)
    cell = stratified_ppi(y, np.full(n, 0.4), exact, generated)
    w_e, w_u = n_e / n, (n - n_e) / n
    mean_u = 2 / 12
    aug = np.concatenate([y[n_e:n_e + m], [0, 0, 1, 1]])
    centre_u, se_u = aug.mean(), aug.std() / math.sqrt(len(aug))  # ppi_py's classical se (ddof 0), Bessel-corrected below
    half_u = stats.t.ppf(0.975, m - 1) * se_u * math.sqrt(16 / 15)
    low_u, high_u = max(centre_u - half_u, 0.0), centre_u + half_u
    var_e = (np.concatenate([np.ones(n_e), [0.0, 1.0]]).var(ddof=1)) / (n_e + 2)  # the floor under equal settled labels
    composition = stats.t.ppf(0.975, n - 1) * math.sqrt(w_e**2 * var_e + w_e * w_u * (1 - mean_u) ** 2 / n)
    estimate = w_e + w_u * mean_u
    assert cell.estimate == pytest.approx(estimate, abs=1e-12)
    assert cell.low == pytest.approx(estimate - math.hypot(composition, w_u * (mean_u - low_u)), abs=1e-9)
    assert cell.high == pytest.approx(estimate + math.hypot(composition, w_u * (high_u - mean_u)), abs=1e-9)


def test_every_bound_lies_inside_its_quantitys_range():
    """Random cells near the ends (scores of 0.95-1, paired differences near ±1): every bound in
    [0, 1] for a score, [-1, 1] for a difference; the mean over tasks too."""
    rng = np.random.default_rng(9)
    for _ in range(200):
        n = int(rng.integers(12, 80))
        for label_range in ((0.0, 1.0), (-1.0, 1.0)):
            lo, hi = label_range
            y = np.where(rng.random(n) < rng.uniform(0.9, 1.0), hi, lo)
            exact = (y == hi) & (rng.random(n) < rng.uniform(0, 1))
            generated = ~exact & (rng.random(n) < rng.uniform(0.3, 1.0))
            cell = stratified_ppi(np.where(exact | generated, y, np.nan), rng.random(n), exact, generated, label_range=label_range)
            if cell.has_interval:
                assert lo <= cell.low <= cell.high <= hi
    cells = [stratified_ppi(np.ones(k), np.ones(k), np.ones(k, bool), np.zeros(k, bool)) for k in (20, 300)]
    mean = mean_of(cells)
    assert mean.has_interval and 0.0 <= mean.low <= mean.high <= 1.0 and mean.high == 1.0


def test_the_mean_over_tasks_of_unequal_size_one_mostly_settled_has_an_interval_whenever_its_cells_do():
    """Three tasks of 300, 20 and 60 samples, the first 99 % accurate with every right answer
    settled, the others at 0.5 and 0.3 with nothing settled, at shares 0.5 and 1: wherever every
    cell has an interval the mean has one, inside [0, 1], and MOVER's bounds by hand."""
    rng = np.random.default_rng(2)
    for share in (0.5, 1.0):
        for _ in range(30):
            cells = []
            for n, p, settles in ((300, 0.99, True), (20, 0.5, False), (60, 0.3, False)):
                y = (rng.random(n) < p).astype(float)
                exact = (y == 1) & settles
                generated = ~exact & (rng.random(n) < share)
                cells.append(stratified_ppi(np.where(exact | generated, y, np.nan), rng.random(n), exact, generated))
            mean = mean_of(cells)
            assert mean.has_interval == all(c.has_interval for c in cells)
            if share == 1.0:
                assert mean.has_interval
            if mean.has_interval:
                e = np.array([c.estimate for c in cells])
                assert mean.low == pytest.approx(e.mean() - math.sqrt(sum((c.estimate - c.low) ** 2 for c in cells)) / 3, abs=1e-12)
                assert 0.0 <= mean.low <= mean.high <= 1.0


def test_every_right_answer_settled_covers_where_the_additive_rule_did_not():
    """The issue's second population (accuracy 0.3, n 300, share 0.2, every right answer settled,
    so the unsettled samples are all wrong), 2,000 cells of the bench's mirror (equal to
    `stratified_ppi`, tests/test_coverage_grid.py): the additive pseudo-labelled interval's
    misses fall on one side; the MOVER split covers 0.95 or more."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(2000, 300))
    side = coverage_grid.draw_side(rng, x, coverage_grid.answer_uniforms(rng, x.shape, "binary"), 0.3, "binary", 1.0, "uninformative")
    generated = (rng.random(x.shape) < 0.2) & ~side.exact
    point = coverage_grid.ppi_cells(side.y, side.f, side.exact, generated)["unsettled"]
    after = coverage_grid.ppi_cells(side.y, side.f, side.exact, generated, pseudo=2, point=point)
    before = coverage_grid.ppi_cells(side.y, side.f, side.exact, generated, pseudo=2, point=point, rule="additive")
    cover = lambda c: np.nanmean(np.where(np.isnan(c["low"]), np.nan, (c["low"] <= 0.3) & (0.3 <= c["high"])))  # noqa: E731
    assert cover(after) >= 0.95 and cover(before) < cover(after)
    assert np.mean(before["low"] > 0.3) > 10 * np.mean(before["high"] < 0.3)  # the additive rule's misses: above
