"""Agreement statistics against scipy and scikit-learn, including ties and degenerate inputs."""

import math

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import accuracy_score, matthews_corrcoef, precision_recall_fscore_support

from ctxeval.stats import agreement as ag


@pytest.mark.parametrize(
    "x,y",
    [([1, 2, 3, 4, 5], [2, 1, 4, 3, 5]), ([1, 1, 2, 2, 3], [1, 2, 2, 3, 3]), ([3, 1, 2, 2], [1, 1, 2, 3])],
)
def test_kendall_tau_b_with_ties_matches_scipy(x, y):
    tau, p = ag.kendall_tau_b(x, y)
    ref = stats.kendalltau(x, y, variant="b")
    assert tau == pytest.approx(ref.statistic) and p == pytest.approx(ref.pvalue)


def test_kendall_tau_b_by_hand_with_a_tie():
    # x = [1,2,3], y = [1,1,2]: pairs (1,2) tie in y, (1,3) C, (2,3) C -> (2-0)/sqrt(3*2) = 0.8165
    tau, _ = ag.kendall_tau_b([1, 2, 3], [1, 1, 2])
    assert tau == pytest.approx(2 / math.sqrt(6))


def test_kendall_tau_a_by_hand():
    # x = [1,1,2,3], y = [1,2,3,4]: pair (0,1) tied in x counts 0, the other 5 concordant -> 5/6
    assert ag.kendall_tau_a([1, 1, 2, 3], [1, 2, 3, 4]) == pytest.approx(5 / 6)
    assert ag.kendall_tau_a([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert ag.kendall_tau_a([2, 2, 2], [1, 2, 3]) == 0.0  # constant: 0, where tau-b is NaN
    assert math.isnan(ag.kendall_tau_a([1], [1]))
    with pytest.raises(ValueError):
        ag.kendall_tau_a([1, 2], [1, 2, 3])


def _naive_tau_a(x, y):
    def sgn(v):
        return (v > 0) - (v < 0)

    n = len(x)
    net = sum(sgn(x[i] - x[j]) * sgn(y[i] - y[j]) for i in range(n) for j in range(i + 1, n))
    return net / (n * (n - 1) / 2)


def test_kendall_tau_a_matches_a_naive_loop_and_scipy_without_ties():
    rng = np.random.default_rng(5)
    for _ in range(20):
        x, y = rng.integers(0, 4, 7).tolist(), rng.integers(0, 4, 7).tolist()  # many ties
        assert ag.kendall_tau_a(x, y) == pytest.approx(_naive_tau_a(x, y))
    x, y = rng.permutation(9), rng.permutation(9)  # no ties: tau-a = tau-b
    assert ag.kendall_tau_a(x, y) == pytest.approx(stats.kendalltau(x, y).statistic)


TOY = [
    ([1, 2, 3, 4], [1, 2, 3, 4]),  # tau 1
    ([1, 2, 3, 4], [1, 2, 4, 3]),  # 5 C, 1 D: tau 2/3
    ([1, 1, 1, 1], [1, 2, 3, 4]),  # constant: tau-a 0, skipped by tau-b
    ([1, 1, 2, 3], [1, 2, 3, 4]),  # one tied pair: tau-a 5/6, tau-b 5/sqrt(5*6)
    ([7], [7]),  # one answer: no pair, skipped by both
]


def test_per_item_tau_a_averages_over_all_questions_by_hand():
    result = ag.per_item_tau(TOY)
    assert result.variant == "a"
    assert result.mean_tau == pytest.approx((1 + 2 / 3 + 0 + 5 / 6) / 4)  # 0.625
    assert (result.items_used, result.items_skipped, result.items_constant) == (4, 1, 1)
    assert result.sizes == [4, 4, 4, 4]
    assert math.isnan(result.p_values[2])  # no test of independence on a constant ranking


def test_per_item_tau_b_skips_constant_questions_and_matches_scipy():
    result = ag.per_item_tau(TOY, variant="b")
    usable = [TOY[0], TOY[1], TOY[3]]
    want = [stats.kendalltau(x, y, variant="b") for x, y in usable]
    assert result.taus == pytest.approx([w.statistic for w in want])
    assert result.p_values == pytest.approx([w.pvalue for w in want])
    assert result.mean_tau == pytest.approx(np.mean([w.statistic for w in want]))  # 0.860, vs 0.625 for tau-a
    assert (result.items_used, result.items_skipped, result.items_constant) == (3, 2, 1)


def test_per_item_tau_skips_and_counts_constant_items():
    items = [([1, 2, 3], [1, 2, 3]), ([1, 2, 3], [3, 2, 1]), ([1, 1, 1], [1, 2, 3]), ([1, 2, 3], [5, 5, 5])]
    result = ag.per_item_tau(items, variant="b")
    assert result.items_used == 2 and result.items_skipped == 2
    assert result.mean_tau == pytest.approx(0.0)
    assert result.taus == pytest.approx([1.0, -1.0])
    paper = ag.per_item_tau(items)
    assert paper.taus == pytest.approx([1.0, -1.0, 0.0, 0.0]) and paper.items_constant == 2
    with pytest.raises(ValueError):
        ag.per_item_tau(items, variant="c")


def _mahonian(n):
    """Number of permutations of n items with k inversions (independent of any enumeration)."""
    counts = [1]
    for m in range(2, n + 1):
        new = [0] * (len(counts) + m - 1)
        for k, c in enumerate(counts):
            for extra in range(m):
                new[k + extra] += c
        counts = new
    return counts


def _baseline_from_inversions(n, keep):
    pairs = n * (n - 1) // 2
    taus = np.array([1 - 2 * k / pairs for k in range(pairs + 1)])
    weights = np.array(_mahonian(n), dtype=float)
    mask = {"nonnegative": taus >= 0, "positive": taus > 0, "all": np.ones_like(taus, dtype=bool)}[keep]
    return float((taus[mask] * weights[mask]).sum() / weights[mask].sum())


def test_exact_baseline_by_hand_and_the_papers_031():
    # n = 4: inversions 0..6 occur 1, 3, 5, 6, 5, 3, 1 times; tau = 1 - k/3. tau >= 0 keeps
    # k <= 3: (1 + 3*2/3 + 5*1/3 + 6*0) / 15 = 14/45 = 0.311, the paper's 0.31
    assert ag.random_ranking_baseline(4) == pytest.approx(14 / 45, abs=1e-12)
    assert ag.exact_ranking_baseline(4, keep="positive") == pytest.approx(14 / 27, abs=1e-12)
    assert ag.exact_ranking_baseline(4, keep="all") == pytest.approx(0.0, abs=1e-12)
    # n = 3: taus 1, 1/3, 1/3, -1/3, -1/3, -1 (no zero): both rules give 5/9
    assert ag.exact_ranking_baseline(3) == ag.exact_ranking_baseline(3, keep="positive") == pytest.approx(5 / 9)
    for n in range(2, 9):
        for keep in ag.BASELINE_KEEP:
            assert ag.exact_ranking_baseline(n, keep) == pytest.approx(_baseline_from_inversions(n, keep), abs=1e-12)


def test_monte_carlo_baseline_agrees_with_the_exact_one():
    # 100,000 draws: the standard error of the conditional mean is about 0.0015
    assert ag.monte_carlo_ranking_baseline(4) == pytest.approx(14 / 45, abs=0.006)
    assert ag.monte_carlo_ranking_baseline(6) == pytest.approx(ag.exact_ranking_baseline(6), abs=0.006)
    # above 8 answers the dispatcher samples; the inversion-count distribution gives the exact value
    sampled = ag.random_ranking_baseline(10, seed=3)
    assert sampled == pytest.approx(_baseline_from_inversions(10, "nonnegative"), abs=0.006)
    assert sampled == ag.monte_carlo_ranking_baseline(10, seed=3)
    with pytest.raises(ValueError):
        ag.random_ranking_baseline(1)
    with pytest.raises(ValueError):
        ag.monte_carlo_ranking_baseline(4, keep="zero")


def test_random_baseline_tau_matches_scipy_on_a_draw():
    rng = np.random.default_rng(1)
    perm = rng.permutation(6)
    i, j = np.triu_indices(6, 1)
    assert np.sign(perm[j] - perm[i]).sum() / len(i) == pytest.approx(stats.kendalltau(np.arange(6), perm).statistic)


@pytest.mark.parametrize(
    "y_true,y_pred",
    [
        ([1, 2, 1, 1, 2, 2, 1], [1, 2, 2, 1, 1, 2, 1]),
        ([1, 1, 1, 1], [1, 1, 1, 1]),  # degenerate: one class only
        ([1, 2, 1, 2], [1, 1, 1, 1]),  # constant prediction
        (["a", "b", "tie", "a", "tie"], ["a", "tie", "tie", "b", "a"]),
    ],
)
def test_mcc_f1_accuracy_match_sklearn(y_true, y_pred):
    labels = sorted(set(y_true) | set(y_pred), key=str)
    assert ag.mcc(y_true, y_pred, labels) == pytest.approx(matthews_corrcoef(y_true, y_pred))
    assert ag.accuracy(y_true, y_pred) == pytest.approx(accuracy_score(y_true, y_pred))
    p, r, f, s = precision_recall_fscore_support(y_true, y_pred, labels=labels, zero_division=0)
    ours = ag.f1_per_label(y_true, y_pred, labels)
    for k, label in enumerate(labels):
        assert ours[label]["precision"] == pytest.approx(p[k])
        assert ours[label]["recall"] == pytest.approx(r[k])
        assert ours[label]["f1"] == pytest.approx(f[k])
        assert ours[label]["support"] == s[k]


def test_mismatched_lengths_are_refused():
    with pytest.raises(ValueError):
        ag.accuracy([1, 2], [1])
    with pytest.raises(ValueError):
        ag.per_item_tau([([1, 2], [1, 2, 3])])
