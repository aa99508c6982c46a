"""Cross-model rank correlations equal scipy's; intervals come from resampling models."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ctxeval.stats.rank_correlation import MIN_MODELS, rank_correlation


def test_values_equal_scipy_on_the_same_table():
    rng = np.random.default_rng(3)
    x = rng.normal(size=12)
    y = x + rng.normal(scale=0.8, size=12)
    y[3] = y[5]  # a tie
    rho = rank_correlation(x, y, "spearman", replicates=300)
    tau = rank_correlation(x, y, "kendall", replicates=300)
    assert rho.estimate == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-15)
    assert rho.p_value == pytest.approx(stats.spearmanr(x, y).pvalue, abs=1e-15)
    assert tau.estimate == pytest.approx(stats.kendalltau(x, y, variant="b").statistic, abs=1e-15)
    assert rho.low < rho.estimate < rho.high and tau.low < tau.estimate < tau.high


def test_interval_is_a_percentile_bootstrap_over_models():
    x = np.array([1.0, 2, 3, 4, 5, 6])
    y = np.array([2.0, 1, 4, 3, 6, 5])
    result = rank_correlation(x, y, "spearman", replicates=500, seed=7)
    draws = np.random.default_rng(7).integers(0, 6, size=(500, 6))
    values = [stats.spearmanr(x[d], y[d]).statistic for d in draws if np.ptp(x[d]) > 0 and np.ptp(y[d]) > 0]
    assert result.low == pytest.approx(np.quantile(values, 0.025))
    assert result.high == pytest.approx(np.quantile(values, 0.975))
    assert result.undefined_share == pytest.approx(1 - len(values) / 500)


def test_fewer_than_four_models_give_no_interval():
    result = rank_correlation([1, 2, 3], [1, 3, 2], "kendall")
    assert result.estimate == pytest.approx(stats.kendalltau([1, 2, 3], [1, 3, 2]).statistic)
    assert math.isnan(result.low) and math.isnan(result.high) and not result.has_interval
    assert f"at least {MIN_MODELS}" in result.reason and result.n == 3 and result.method == "percentile bootstrap over models"


def test_a_constant_measure_has_no_coefficient():
    result = rank_correlation([1, 2, 3, 4, 5], [0, 0, 0, 0, 0], "spearman")
    assert math.isnan(result.estimate) and not result.has_interval
    assert result.to_row()["estimate"] is None and result.to_row()["low"] is None


def test_mostly_constant_resamples_give_no_interval():
    # each measure sets one model apart: a resample without it leaves that side constant
    # (probability 1 - (3/4)^4 - (3/4)^4 + (1/2)^4, about 57 %)
    result = rank_correlation([0, 0, 0, 1], [1, 0, 0, 0], "spearman", replicates=400)
    assert not result.has_interval and "resamples" in result.reason
