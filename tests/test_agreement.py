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


def test_per_item_tau_skips_and_counts_constant_items():
    items = [([1, 2, 3], [1, 2, 3]), ([1, 2, 3], [3, 2, 1]), ([1, 1, 1], [1, 2, 3]), ([1, 2, 3], [5, 5, 5])]
    result = ag.per_item_tau(items)
    assert result.items_used == 2 and result.items_skipped == 2
    assert result.mean_tau == pytest.approx(0.0)
    assert result.taus == pytest.approx([1.0, -1.0])


def test_random_baseline_choice_of_zero_is_explicit():
    # n = 3: taus of the 6 permutations are 1, 1/3, 1/3, -1/3, -1/3, -1 -> all positive kept: mean 5/9
    assert ag.random_ranking_baseline(3, samples=60000, keep="positive") == pytest.approx(5 / 9, abs=0.01)
    assert ag.random_ranking_baseline(3, samples=60000, keep="all") == pytest.approx(0.0, abs=0.01)
    # n = 4 has tau = 0 permutations: keeping them lowers the mean
    assert ag.random_ranking_baseline(4, samples=60000, keep="nonnegative") < ag.random_ranking_baseline(4, samples=60000, keep="positive")


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
