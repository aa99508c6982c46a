"""Slopes against scipy.stats.linregress; leave-one-out outliers by hand."""

import math

import numpy as np
import pytest
from scipy import stats

from ctxeval.stats.trends import loo_outliers, slope


def test_slope_se_p_and_ci_match_linregress_and_t_interval():
    x = np.array([32, 64, 128, 256, 512, 1024, 2048, 4096], dtype=float)
    y = np.array([0.33, 0.51, 0.40, 0.51, 0.53, 0.51, 0.31, 0.28])  # thesis Table 1, text 1, GPT-3.5-turbo
    got = slope(x, y)
    ref = stats.linregress(x, y)
    assert got["slope"] == pytest.approx(ref.slope)
    assert got["stderr"] == pytest.approx(ref.stderr)
    assert got["p_value"] == pytest.approx(ref.pvalue)
    half = stats.t.ppf(0.975, 6) * ref.stderr
    assert (got["ci_low"], got["ci_high"]) == pytest.approx((ref.slope - half, ref.slope + half))
    # the thesis reports -4.608e-5 +- 2.355e-5, p = 0.10 for this series
    assert got["slope"] == pytest.approx(-4.608e-5, rel=0.01)
    assert got["stderr"] == pytest.approx(2.355e-5, rel=0.01)
    assert round(got["p_value"], 2) == 0.10


def test_slope_by_hand_on_a_line_and_undefined_cases():
    assert slope([1, 2, 3], [2, 4, 6])["slope"] == pytest.approx(2.0)
    two = slope([1, 2], [1, 3])
    assert two["slope"] == pytest.approx(2.0) and math.isnan(two["stderr"]) and math.isnan(two["p_value"])
    assert math.isnan(slope([5, 5, 5], [1, 2, 3])["slope"])


def test_leave_one_out_outliers():
    values = np.array([0.50, 0.51, 0.49, 0.50, 0.30])
    assert loo_outliers(values).tolist() == [False, False, False, False, True]
    assert not loo_outliers(np.array([1.0, 5.0])).any()
