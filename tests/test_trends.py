"""Slopes against scipy.stats.linregress; leave-one-out outliers by hand."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ctxeval.report.trends import trend_table

from ctxeval.results.trends import ALL_TEXTS
from ctxeval.stats.trends import loo_outliers, mean_interval, slope


def test_slope_se_p_and_ci_match_linregress_and_t_interval():
    x = np.array([32, 64, 128, 256, 512, 1024, 2048, 4096], dtype=float)
    y = np.array([0.33, 0.51, 0.40, 0.51, 0.53, 0.51, 0.31, 0.28])  # thesis Table 1, text 1, GPT-3.5-turbo
    got = slope(x, y)
    ref = stats.linregress(x, y)
    assert got.estimate == pytest.approx(ref.slope)
    assert got.se == pytest.approx(ref.stderr)
    assert got.p_value == pytest.approx(ref.pvalue)
    half = stats.t.ppf(0.975, 6) * ref.stderr
    assert (got.low, got.high, got.confidence, got.n) == (pytest.approx(ref.slope - half), pytest.approx(ref.slope + half), 0.95, 8)
    # the thesis reports -4.608e-5 +- 2.355e-5, p = 0.10 for this series
    assert got.estimate == pytest.approx(-4.608e-5, rel=0.01)
    assert got.se == pytest.approx(2.355e-5, rel=0.01)
    assert round(got.p_value, 2) == 0.10


def test_slope_by_hand_on_a_line_and_undefined_cases():
    assert slope([1, 2, 3], [2, 4, 6]).estimate == pytest.approx(2.0)
    two = slope([1, 2], [1, 3])
    assert two.estimate == pytest.approx(2.0) and math.isnan(two.se) and math.isnan(two.p_value) and not two.has_interval
    assert math.isnan(slope([5, 5, 5], [1, 2, 3]).estimate)


def test_leave_one_out_outliers():
    values = np.array([0.50, 0.51, 0.49, 0.50, 0.30])
    assert loo_outliers(values).tolist() == [False, False, False, False, True]
    assert not loo_outliers(np.array([1.0, 5.0])).any()


# Thesis appendix A/B, GPT-3.5-turbo and GPT-4o: AVG and approximate PPL per length, texts 1 and 2
LENGTHS = [32, 64, 128, 256, 512, 1024, 2048, 4096]
THESIS = {
    ("gpt-3.5-turbo", "text1"): ([0.33, 0.51, 0.40, 0.51, 0.53, 0.51, 0.31, 0.28], [696.57, 106.17, 179.40, 112.75, 77.59, 66.28, 407.93, 341.37]),
    ("gpt-3.5-turbo", "text2"): ([0.37, 0.48, 0.37, 0.35, 0.52, 0.54, 0.50, 0.52], [273.44, 88.62, 258.43, 379.70, 90.66, 109.12, 82.55, 60.60]),
    ("gpt-4o", "text1"): ([0.46, 0.52, 0.47, 0.55, 0.58, 0.53, 0.55, 0.45], [194.43, 155.90, 138.41, 80.68, 30.15, 67.16, 47.24, 107.70]),
    ("gpt-4o", "text2"): ([0.45, 0.45, 0.45, 0.41, 0.65, 0.70, 0.54, 0.66], [219.54, 127.05, 248.72, 214.31, 24.02, 21.22, 57.39, 20.33]),
}


def thesis_points() -> pd.DataFrame:
    rows = [
        {"model": m, "text_id": t, "method": "sweep", "context_mode": "exact", "nominal_len": n, "avg": a, "approx_ppl": p}
        for (m, t), (avg, ppl) in THESIS.items()
        for n, a, p in zip(LENGTHS, avg, ppl)
    ]
    return pd.DataFrame(rows)


def fit(table: pd.DataFrame, model: str, text: str, metric: str) -> pd.Series:
    row = table[(table["model"] == model) & (table["text_id"] == text) & (table["metric"] == metric) & (table["x"] == "length")]
    assert len(row) == 1
    return row.iloc[0]


def test_combined_texts_fit_pools_every_window_and_matches_the_thesis():
    table = trend_table(thesis_points(), ["avg", "approx_ppl"])
    points = thesis_points()
    for model in ("gpt-3.5-turbo", "gpt-4o"):
        mine = points[points["model"] == model]
        for metric in ("avg", "approx_ppl"):
            ref = stats.linregress(mine["nominal_len"].to_numpy(float), mine[metric].to_numpy(float))
            got = fit(table, model, ALL_TEXTS, metric)
            assert got["slope.n"] == 16
            assert (got["slope"], got["slope.se"], got["p_value"]) == pytest.approx((ref.slope, ref.stderr, ref.pvalue))
    # the thesis's "both texts combined" slopes (section 5): GPT-3.5-turbo AVG -7.75e-6 +- 1.77e-5, p = 0.67;
    # GPT-4o approximate PPL -0.0276 +- 0.0134, p = 0.06
    avg = fit(table, "gpt-3.5-turbo", ALL_TEXTS, "avg")
    assert (avg["slope"], avg["slope.se"], round(avg["p_value"], 2)) == (pytest.approx(-7.75e-6, rel=0.01), pytest.approx(1.77e-5, rel=0.01), 0.67)
    ppl = fit(table, "gpt-4o", ALL_TEXTS, "approx_ppl")
    assert (ppl["slope"], ppl["slope.se"], round(ppl["p_value"], 2)) == (pytest.approx(-0.0276, rel=0.01), pytest.approx(0.0134, rel=0.01), 0.06)
    # per-text fits are unchanged (appendix C: text 2, GPT-4o, PPL -0.04375 +- 0.02213)
    assert fit(table, "gpt-4o", "text2", "approx_ppl")["slope"] == pytest.approx(-0.04375, rel=1e-3)


def test_a_single_text_gets_no_combined_fit():
    one = thesis_points()
    table = trend_table(one[one["text_id"] == "text1"], ["avg"])
    assert ALL_TEXTS not in set(table["text_id"]) and len(table) == 2 * 2  # 2 models x 2 scales


def test_interval_over_repeated_starts_is_the_t_interval_of_window_means():
    rng = np.random.default_rng(3)
    values = rng.normal(2.0, 1.0, 90)
    windows = np.repeat(["r0", "r1", "r2"], 30)
    got = mean_interval(values, windows)
    means = values.reshape(3, 30).mean(axis=1)
    ref = stats.t.interval(0.95, 2, loc=means.mean(), scale=stats.sem(means))
    assert (got.low, got.high) == pytest.approx(ref) and got.method == "t over 3 windows"
    assert (got.estimate, got.se, got.n, got.confidence) == (pytest.approx(values.mean()), pytest.approx(stats.sem(means)), 3, 0.95)


def test_interval_of_a_single_start_bootstraps_its_targets_like_scipy():
    values = np.random.default_rng(4).exponential(2.0, 30)
    got = mean_interval(values, np.array(["w"] * 30), replicates=4000)
    low, high, kind = got.low, got.high, got.method
    ref = stats.bootstrap((values,), np.mean, method="percentile", n_resamples=20000, random_state=1).confidence_interval
    width = ref.high - ref.low
    assert low == pytest.approx(ref.low, abs=0.08 * width) and high == pytest.approx(ref.high, abs=0.08 * width)
    assert kind == "bootstrap over 30 targets"
    assert mean_interval(values, np.array(["w"] * 30)) == mean_interval(values, np.array(["w"] * 30))  # seeded
    assert not mean_interval(np.array([1.0, np.nan]), np.array(["a", "b"])).has_interval
