"""Paired BCa of the token-weighted mean difference, against scipy and by simulation."""

import numpy as np
import pytest
from scipy import stats
from scipy.special import ndtr, ndtri

from ctxeval.stats.paired import bca_levels, paired_bca, ratio_replicates, token_replicates, weighted_mean


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
    assert (est.interval, est.method, est.reason) == ("degenerate", "BCa", "all paired differences are equal; the interval is collapsed to the point")


def test_differences_equal_within_rounding_are_degenerate_and_the_point_is_inside():
    # 0.7 computed as loss_b - loss_a in each window differs in the last bits; the weighted mean
    # of 0.7 over these tokens is 0.6999999999999998, not 0.7
    loss_a = np.array([2.1, 3.3, 1.7, 2.9])
    delta = (loss_a + 0.7) - loss_a
    assert np.ptp(delta) > 0  # not bit-equal
    est = paired_bca(delta, np.array([3.0, 7.0, 11.0, 13.0]), replicates=500)
    assert (est.interval, est.degenerate) == ("degenerate", True)
    assert est.low == est.high == est.estimate == pytest.approx(0.7, rel=1e-12)


def test_a_single_cluster_has_no_interval_and_is_not_degenerate():
    # the differences vary, so paper 001's flag stays false; no zero-width interval either
    est = paired_bca(np.array([0.1, 0.3, 0.2]), np.array([1.0, 1.0, 2.0]), replicates=500, clusters=np.array(["d", "d", "d"]))
    assert (est.interval, est.degenerate, est.units, est.bounds) == ("none", False, 1, None)
    assert np.isnan(est.low) and np.isnan(est.high) and est.estimate == pytest.approx(0.2)
    assert est.reason == "no interval (one document): a single resampling unit has no spread to resample"


def test_a_single_window_has_no_interval_not_a_degenerate_one():
    est = paired_bca(np.array([0.47289]), np.array([256.0]), replicates=500)
    assert (est.interval, est.degenerate, est.estimate, est.bounds) == ("none", False, 0.47289, None)
    assert est.reason.startswith("no interval (one window)")


def test_bca_levels_past_the_pole_take_the_tail_the_pole_runs_to():
    z = ndtri(0.975)
    # a = -0.425 (the short window's acceleration), z0 = -0.5: the lower bound's w = z0 - 1.96 is
    # past the pole 1/a = -2.35; the textbook formula wraps its level round to ~1 (above the upper)
    w_low, w_high = -0.5 - z, -0.5 + z
    assert 1 + 0.425 * w_low < 0 and ndtr(-0.5 + w_low / (1 + 0.425 * w_low)) > 0.99
    low, high = bca_levels(-0.5, -0.425, 0.95)
    assert low == 0.0 and high == pytest.approx(ndtr(-0.5 + w_high / (1 + 0.425 * w_high)), rel=1e-15)
    # a = 0.5, z0 = 0.5: the upper bound is past the pole 1/a = 2 and takes level 1
    low, high = bca_levels(0.5, 0.5, 0.95)
    assert high == 1.0 and low == pytest.approx(ndtr(0.5 + (0.5 - z) / (1 - 0.5 * (0.5 - z))), rel=1e-15)
    # away from the pole: the textbook levels
    low, high = bca_levels(0.1, 0.05, 0.9)
    assert (low, high) == tuple(pytest.approx(ndtr(0.1 + (0.1 + q) / (1 - 0.05 * (0.1 + q))), rel=1e-15) for q in (ndtri(0.05), ndtri(0.95)))


def fuzz_cases(kind, rng):
    n = int(rng.integers(2, 7))
    if kind == "uniform tokens":
        tokens, delta = rng.integers(1, 65, n).astype(float), rng.normal(0, 1, n)
    elif kind == "lognormal tokens":
        tokens = np.round(np.exp(rng.normal(4.5, 1.2, n))) + 1
        delta = 0.05 + rng.normal(0, 1, n) * 3 / np.sqrt(tokens)
    else:  # one short window, heavy-tailed differences (the --max-tokens 131 case: 32, 32, 32, 32, 3)
        tokens = np.full(n, 32.0)
        tokens[-1] = rng.integers(1, 8)
        delta = rng.standard_t(2, n)
    return delta, tokens


@pytest.mark.parametrize("resample", ["windows", "tokens"])
def test_fuzz_of_two_to_six_windows_keeps_the_estimate_inside_an_ordered_interval(resample):
    z = ndtri(0.975)
    poles = none = 0
    for kind in ("uniform tokens", "lognormal tokens", "short window"):
        rng = np.random.default_rng(28)
        for case in range(500):
            delta, tokens = fuzz_cases(kind, rng)
            est = paired_bca(delta, tokens, replicates=999, seed=case, resample=resample)
            if est.interval == "none":  # |z0| >= 1.96: every BCa level on one side of theta
                assert abs(est.z0) >= z and est.reason.startswith("no interval: ") and np.isnan(est.low) and np.isnan(est.high)
                none += 1
                continue
            assert est.interval == "bca" and est.low <= est.estimate <= est.high, (kind, case, est)
            poles += min(1 - est.acceleration * (est.z0 - z), 1 - est.acceleration * (est.z0 + z)) <= 0
    assert none <= 15  # at most 1 % of the cases
    if resample == "tokens":
        assert poles >= 50  # the fuzz reaches past the pole, where the textbook levels cross


def scipy_bca_levels(data, boot, confidence):
    """scipy's own BCa levels (z0 from its mid-rank, a from its jackknife of np.mean) for our replicates."""
    resampling = pytest.importorskip("scipy.stats._resampling")
    from scipy._lib._array_api import array_namespace

    alpha = (1 - confidence) / 2
    low, high, accel = resampling._bca_interval((data,), np.mean, -1, alpha, boot, None, array_namespace(data))
    return float(np.asarray(low).squeeze()), float(np.asarray(high).squeeze()), float(np.asarray(accel).squeeze())


@pytest.mark.parametrize("resample", ["windows", "tokens"])
def test_plain_mean_intervals_equal_scipys_bca_on_the_same_replicates(resample):
    rng = np.random.default_rng(5)
    for case in range(40):
        n = int(rng.integers(2, 30))
        delta = rng.exponential(1.0, n) * rng.choice([-1, 1])
        ones = np.ones(n)
        est = paired_bca(delta, ones, replicates=999, seed=case, resample=resample)
        boot = ratio_replicates(delta, ones, 999, case) if resample == "windows" else token_replicates(delta, ones / n, 999, case)
        low, high, accel = scipy_bca_levels(delta, boot, 0.95)
        assert est.acceleration == pytest.approx(accel, rel=1e-9, abs=1e-15)
        assert (est.low, est.high) == tuple(pytest.approx(b, rel=1e-12) for b in np.percentile(boot, [100 * low, 100 * high]))


def test_tokens_acceleration_is_scipys_jackknife_of_the_token_expanded_sample_scaled_to_n_draws():
    # the tokens scheme's distribution puts mass t_i / T on d_i: the sample with window i
    # repeated t_i times. Its jackknife acceleration is skew / (6 sqrt(T)); n draws give skew / (6 sqrt(n))
    delta, tokens = np.array([0.3, -0.1, 2.5, 0.05, 0.2]), np.array([32.0, 32.0, 3.0, 32.0, 32.0])
    expanded = np.repeat(delta, tokens.astype(int))
    _, _, accel = scipy_bca_levels(expanded, np.linspace(-1, 1, 101), 0.95)
    est = paired_bca(delta, tokens, replicates=999, resample="tokens")
    assert est.acceleration == pytest.approx(accel * np.sqrt(tokens.sum() / len(delta)), rel=1e-9)


def document_corpus(rng, n_docs, per_doc=32, tau=0.1):
    labels = np.repeat(np.arange(n_docs), per_doc)
    tokens = np.round(np.exp(rng.normal(4.5, 1.2, n_docs * per_doc))) + 1
    delta = 0.05 + rng.normal(0.0, 1.0, n_docs * per_doc) / np.sqrt(tokens) * 3
    return delta + rng.normal(0.0, tau, n_docs)[labels], tokens, labels


def test_a_replicate_drawing_every_document_once_is_theta_to_the_last_bit():
    delta, tokens, labels = document_corpus(np.random.default_rng(1), 3)
    num = np.bincount(labels, weights=tokens * delta)
    den = np.bincount(labels, weights=tokens).astype(float)
    est = paired_bca(delta, tokens, replicates=2000, seed=4, clusters=labels)
    draws = np.random.default_rng(4).integers(0, 3, size=(2000, 3))  # the replicates' draws
    boot = ratio_replicates(num, den, 2000, 4)
    every_once = np.array([sorted(row) == [0, 1, 2] for row in draws])
    assert every_once.sum() > 300 and np.all(boot[every_once] == est.estimate)  # all 6 orders
    # two documents: half the replicates draw each once and tie with theta, so the mid-rank is
    # (2 * #(both the lower document) + #(one of each)) / 2R, about 1/2, and z0 about 0
    delta, tokens, labels = document_corpus(np.random.default_rng(2), 2)
    est = paired_bca(delta, tokens, replicates=2000, seed=9, clusters=labels)
    draws = np.random.default_rng(9).integers(0, 2, size=(2000, 2))
    doc_means = np.bincount(labels, weights=tokens * delta) / np.bincount(labels, weights=tokens)
    lower = int(np.argmin(doc_means))
    both_lower, mixed = int(np.sum(draws.sum(axis=1) == 2 * lower)), int(np.sum(draws[:, 0] != draws[:, 1]))
    assert est.z0 == pytest.approx(ndtri((2 * both_lower + mixed) / 4000), rel=1e-12) and abs(est.z0) < 0.1


def test_two_document_cluster_coverage_is_not_set_by_rounding():
    # 1000 corpora of 2 documents x 32 windows, document sd 0.1 (bench/bench_compare_coverage.py's
    # cell): with z0 flipped to +-0.7 by a rounding step it was 36 %, with exact ties it is 49 %
    rng = np.random.default_rng(7)
    hits, z0s = 0, []
    for sim in range(1000):
        delta, tokens, labels = document_corpus(rng, 2)
        est = paired_bca(delta, tokens, replicates=999, seed=sim, clusters=labels)
        hits += est.low <= 0.05 <= est.high
        z0s.append(est.z0)
    assert np.max(np.abs(z0s)) < 0.15
    assert 0.45 <= hits / 1000 <= 0.54


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
