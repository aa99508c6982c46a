"""Paired BCa of the token-weighted mean difference, against scipy and by simulation."""

import numpy as np
import pytest
from scipy import stats
from scipy.special import ndtr, ndtri

from ctxeval.stats.paired import paired_bca, token_replicates, weighted_mean


def data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    tokens = np.round(np.exp(rng.normal(4.5, 1.0, n))) + 1
    delta = 0.05 + rng.normal(0, 1, n) / np.sqrt(tokens) * 2
    return delta, tokens


def test_point_estimate_is_the_ratio_of_sums_and_ratio_is_exp_of_mean_difference():
    rng = np.random.default_rng(3)
    tokens = rng.integers(10, 500, 25).astype(float)
    loss_a = rng.uniform(2, 4, 25)
    loss_b = loss_a + rng.normal(0.1, 0.2, 25)
    est = weighted_mean(loss_b - loss_a, tokens)
    assert est == pytest.approx(np.sum(tokens * (loss_b - loss_a)) / tokens.sum())
    # exp of the difference of token-weighted mean log-losses == ratio of the two perplexities
    ppl_a = np.exp(np.sum(tokens * loss_a) / tokens.sum())
    ppl_b = np.exp(np.sum(tokens * loss_b) / tokens.sum())
    assert np.exp(est) == pytest.approx(ppl_b / ppl_a)


def test_bca_agrees_with_scipy_paired_bca_on_the_same_statistic():
    delta, tokens = data()
    ours = paired_bca(delta, tokens, replicates=20000, seed=1)

    def statistic(d, t, axis=-1):
        return (d * t).sum(axis=axis) / t.sum(axis=axis)

    ref = stats.bootstrap((delta, tokens), statistic, paired=True, vectorized=True, method="BCa", n_resamples=20000, random_state=2)
    width = ref.confidence_interval.high - ref.confidence_interval.low
    # different random streams: endpoints agree to a few percent of the width, whatever the seeds
    assert abs(ours.low - ref.confidence_interval.low) < 0.05 * width
    assert abs(ours.high - ref.confidence_interval.high) < 0.05 * width
    assert ours.low < ours.estimate < ours.high


def test_acceleration_matches_scipy_jackknife_formula():
    delta, tokens = data(n=15, seed=5)
    ours = paired_bca(delta, tokens, replicates=1000, seed=0)
    jack = np.array([weighted_mean(np.delete(delta, i), np.delete(tokens, i)) for i in range(15)])
    u = jack.mean() - jack
    assert ours.acceleration == pytest.approx(np.sum(u**3) / (6 * np.sum(u**2) ** 1.5))


def test_coverage_of_nominal_95_is_within_93_to_97_with_strongly_varying_tokens():
    rng = np.random.default_rng(2024)
    true = 0.05
    hits, n_sim = 0, 600
    for sim in range(n_sim):
        n = 50
        tokens = np.round(np.exp(rng.normal(4.5, 1.2, n))) + 1  # 2 ... thousands of tokens
        delta = true + rng.normal(0, 1, n) / np.sqrt(tokens) * 3
        est = paired_bca(delta, tokens, replicates=999, seed=sim)
        hits += est.low <= true <= est.high
    assert 0.93 <= hits / n_sim <= 0.97


def test_degenerate_differences_collapse_the_interval_to_their_mean():
    delta = np.full(10, 0.2)
    est = paired_bca(delta, np.arange(1, 11), replicates=500)
    assert est.degenerate and est.low == est.high == est.estimate == np.mean(delta)  # paper 001: [mu, mu], mu = mean(delta)
    assert est.method == "degenerate" and "equal" in est.reason


def test_a_single_cluster_collapses_the_interval_without_being_degenerate():
    # the differences vary, so paper 001's flag stays false; the reason says why there is no interval
    est = paired_bca(np.array([0.1, 0.3, 0.2]), np.array([1.0, 1.0, 2.0]), replicates=500, clusters=np.array(["d", "d", "d"]))
    assert not est.degenerate and est.method == "collapsed" and est.units == 1
    assert est.low == est.high == est.estimate == pytest.approx(0.2) and "single resampling unit" in est.reason


def naive_tokens_bca(delta, tokens, replicates, seed, confidence=0.95):
    """Paper 001's scheme by plain loops: each replicate draws n windows with probability
    t_i / sum(t), one `choice` call per replicate, and takes the plain mean of their delta; BCa
    with the mid-rank z0 and the acceleration of a mean of n draws from the distribution with
    masses p_i (influence u_i = d_i - theta)."""
    rng = np.random.default_rng(seed)
    n = len(delta)
    p = tokens / tokens.sum()
    boot = []
    for _ in range(replicates):
        drawn = rng.choice(n, n, p=p)
        boot.append(sum(delta[j] for j in drawn) / n)
    boot = np.array(boot)
    theta = sum(t * d for t, d in zip(tokens, delta)) / sum(tokens)
    below = sum(b < theta for b in boot) + sum(b <= theta for b in boot)
    z0 = ndtri(below / (2 * replicates))
    m2 = sum(pi * (d - theta) ** 2 for pi, d in zip(p, delta))
    m3 = sum(pi * (d - theta) ** 3 for pi, d in zip(p, delta))
    accel = m3 / (6 * np.sqrt(n) * m2**1.5)
    alpha = (1 - confidence) / 2
    levels = [ndtr(z0 + (z0 + z) / (1 - accel * (z0 + z))) for z in (ndtri(alpha), ndtri(1 - alpha))]
    return boot, theta, accel, np.percentile(boot, [100 * levels[0], 100 * levels[1]])


def test_tokens_scheme_draws_windows_in_proportion_to_tokens_and_averages_delta_plainly():
    delta, tokens = data(n=12, seed=4)
    boot, theta, accel, (low, high) = naive_tokens_bca(delta, tokens, 3000, seed=11)
    ours = token_replicates(delta, tokens / tokens.sum(), 3000, seed=11)
    np.testing.assert_allclose(ours, boot, rtol=1e-12)  # the same draws, in batches
    est = paired_bca(delta, tokens, replicates=3000, seed=11, resample="tokens")
    assert est.resample == "tokens" and est.units == 12
    assert est.estimate == pytest.approx(theta, rel=1e-12)
    assert est.acceleration == pytest.approx(accel, rel=1e-9)
    assert (est.low, est.high) == (pytest.approx(low, rel=1e-12), pytest.approx(high, rel=1e-12))


def test_tokens_scheme_replicates_have_the_analytic_mean_and_variance():
    # a draw is window i with probability p_i = t_i / sum(t): a replicate (mean of n draws) has
    # expectation sum(p d) = the token-weighted mean and variance sum(p (d - theta)^2) / n
    delta, tokens = np.array([0.0, 1.0, 2.0, 5.0]), np.array([10.0, 20.0, 30.0, 40.0])
    theta = (0 * 10 + 1 * 20 + 2 * 30 + 5 * 40) / 100  # 2.8
    var = (0.1 * 2.8**2 + 0.2 * 1.8**2 + 0.3 * 0.8**2 + 0.4 * 2.2**2) / 4  # 0.74
    boot = token_replicates(delta, tokens / tokens.sum(), 200_000, seed=0)
    assert boot.mean() == pytest.approx(theta, abs=5 * np.sqrt(var / 200_000))
    assert boot.var() == pytest.approx(var, rel=0.02)


def test_tokens_acceleration_equals_the_jackknife_one_when_every_window_has_the_same_tokens():
    delta, _ = data(n=20, seed=6)
    tokens = np.full(20, 50.0)
    by_tokens = paired_bca(delta, tokens, 500, resample="tokens")
    by_windows = paired_bca(delta, tokens, 500, resample="windows")
    assert by_tokens.acceleration == pytest.approx(by_windows.acceleration, rel=1e-9)


def test_unknown_resample_scheme_is_refused():
    with pytest.raises(ValueError, match="resample"):
        paired_bca(np.array([0.1, 0.2]), np.array([1.0, 2.0]), resample="bytes")


def test_cluster_bootstrap_resamples_documents():
    delta, tokens = data(n=30)
    docs = np.repeat(np.arange(6), 5)
    est = paired_bca(delta, tokens, replicates=2000, clusters=docs)
    assert est.method == "BCa-cluster" and est.low < est.estimate < est.high


@pytest.mark.parametrize(
    "delta,tokens",
    [(np.array([]), np.array([])), (np.array([0.1, 0.2]), np.array([1.0])), (np.array([0.1, 0.2]), np.array([0.0, 3.0]))],
)
def test_bad_inputs_are_refused(delta, tokens):
    with pytest.raises(ValueError):
        paired_bca(delta, tokens)


def test_seeded_results_are_reproducible():
    delta, tokens = data()
    assert paired_bca(delta, tokens, seed=7) == paired_bca(delta, tokens, seed=7)
