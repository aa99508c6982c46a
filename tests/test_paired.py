"""Paired BCa of the token-weighted mean difference, against scipy and by simulation."""

import numpy as np
import pytest
from scipy import stats

from ctxeval.stats.paired import paired_bca, weighted_mean


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


def test_degenerate_differences_collapse_the_interval():
    est = paired_bca(np.full(10, 0.2), np.arange(1, 11), replicates=500)
    assert est.degenerate and est.low == est.high == pytest.approx(0.2)
    assert "equal" in est.reason


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
