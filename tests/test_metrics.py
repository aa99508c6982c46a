"""Metric functions against values computed by hand."""

import math

import numpy as np
import pytest

from ctxeval.metrics.config import MetricConfig
from ctxeval.metrics import perplexity as ppl
from ctxeval.metrics import registry
from ctxeval.metrics.rank import linear_scores, nonlinear_scores, ranking_lengths, reciprocal_scores, short_lists


def rank_scores(ranks: np.ndarray, cutoff, alphas: tuple[float, ...]) -> dict[str, float]:
    """The declared rank scores and AVG of targets with these ranks (other columns are dummies)."""
    n = len(ranks)
    config = MetricConfig(alphas=alphas, approx_k=1)
    values = registry.values(registry.tokens(np.zeros(n), np.asarray(ranks), np.ones(n), np.zeros((n, 1)), cutoff, config))
    return {key: values[key] for key in registry.rank_keys(config)}


def test_perplexity_and_nll_by_hand():
    logprobs = np.log([0.5, 0.25, 0.125])
    # mean NLL = (ln2 + 2 ln2 + 3 ln2) / 3 = 2 ln 2 -> PPL = 4
    assert ppl.nll(logprobs) == pytest.approx(2 * math.log(2))
    assert ppl.perplexity(logprobs) == pytest.approx(4.0)


def test_bits_per_byte_by_hand():
    logprobs = np.log([0.5, 0.25])  # 1 bit + 2 bits
    assert ppl.bits_per_byte(logprobs, np.array([2, 4])) == pytest.approx(3 / 6)


def test_linear_reciprocal_nonlinear_by_hand_with_rank_beyond_cutoff():
    ranks = np.array([1, 2, 20, 21])
    l = 20
    assert linear_scores(ranks, l).tolist() == pytest.approx([1.0, 19 / 20, 1 / 20, 0.0])
    assert reciprocal_scores(ranks, l).tolist() == pytest.approx([1.0, 0.5, 1 / 20, 0.0])
    assert nonlinear_scores(ranks, l, 0.1).tolist() == pytest.approx([1.0, math.exp(-0.1), math.exp(-1.9), 0.0])
    assert nonlinear_scores(ranks, l, 0.3).tolist() == pytest.approx([1.0, math.exp(-0.3), math.exp(-5.7), 0.0])


def test_rank_scores_average_is_mean_of_lin_rp_and_each_alpha():
    ranks = np.array([1, 3, 50])
    scores = rank_scores(ranks, 20, (0.1, 0.3))
    lin = (1 + 18 / 20 + 0) / 3
    rp = (1 + 1 / 3 + 0) / 3
    a01 = (1 + math.exp(-0.2) + 0) / 3
    a03 = (1 + math.exp(-0.6) + 0) / 3
    assert scores["lin"] == pytest.approx(lin)
    assert scores["rp"] == pytest.approx(rp)
    assert scores["a0.1"] == pytest.approx(a01)
    assert scores["a0.3"] == pytest.approx(a03)
    assert scores["avg"] == pytest.approx((lin + rp + a01 + a03) / 4)


def test_thesis_appendix_average_is_mean_of_four_scores():
    # Appendix A, text 1, length 32, gpt-3.5-turbo: LIN .42 RP .25 A01 .38 A03 .27 -> AVG .33
    assert round((0.42 + 0.25 + 0.38 + 0.27) / 4, 2) == 0.33


def test_full_vocabulary_cutoff_never_scores_zero():
    ranks = np.array([1, 1000, 262144])
    assert np.all(linear_scores(ranks, 262144) > 0)
    assert linear_scores(ranks, 262144)[-1] == pytest.approx(1 / 262144)


def test_rank_scores_with_other_alpha_list():
    scores = rank_scores(np.array([2]), 20, (0.5,))
    assert set(scores) == {"lin", "rp", "a0.5", "avg"}
    assert scores["avg"] == pytest.approx((19 / 20 + 0.5 + math.exp(-0.5)) / 3)


def test_ranks_must_be_one_based():
    with pytest.raises(ValueError):
        linear_scores(np.array([0]), 20)


def test_approx_perplexity_uses_kth_logprob_minus_penalty_outside_top_k():
    logprobs = np.array([-0.1, -9.0])
    ranks = np.array([1, 30])
    topk = np.array([[-0.1, -2.0, -4.0], [-0.5, -1.5, -3.5]])
    # k = 3: token 1 inside -> -0.1; token 2 outside -> -3.5 - 3 = -6.5
    approx = ppl.approx_logprobs(logprobs, ranks, topk, k=3, penalty=3.0)
    assert approx.tolist() == pytest.approx([-0.1, -6.5])
    assert ppl.approx_perplexity(logprobs, ranks, topk, 3, 3.0) == pytest.approx(math.exp(3.3))
    # k = 2 truncates further: token 2 -> -1.5 - 3
    assert ppl.approx_logprobs(logprobs, ranks, topk, k=2, penalty=3.0)[1] == pytest.approx(-4.5)
    # a rank within k keeps the exact logprob even if it is the k-th
    assert ppl.approx_logprobs(np.array([-4.0]), np.array([3]), topk[:1], 3, 3.0)[0] == pytest.approx(-4.0)


def test_approx_perplexity_with_fewer_than_k_returned_uses_the_lowest_returned():
    """Thesis eq. 10 takes the lowest probability p_l actually returned; an API may return fewer
    than k (NaN-padded in the records) and the length must not become NaN for that."""
    nan = math.nan
    logprobs = np.array([-0.2, nan, -7.0])  # generation path: reference not returned -> NaN
    ranks = np.array([1, nan, nan])  # unknown ranks are null (NaN)
    topk = np.array([[-0.2, -1.0, -2.5], [-0.5, -1.5, nan], [-0.1, -4.0, nan]])
    # k = 3: row 2 has two values, lowest -1.5 -> -4.5; row 3 lowest -4.0 -> -7.0
    assert ppl.approx_logprobs(logprobs, ranks, topk, k=3, penalty=3.0).tolist() == pytest.approx([-0.2, -4.5, -7.0])
    assert ppl.approx_perplexity(logprobs, ranks, topk, 3, 3.0) == pytest.approx(math.exp((0.2 + 4.5 + 7.0) / 3))
    # only the first k columns count: k = 1 uses the top value of each row
    assert ppl.approx_logprobs(logprobs, ranks, topk, k=1, penalty=3.0).tolist() == pytest.approx([-0.2, -3.5, -3.1])
    # a row with nothing returned has no lowest value: that token stays unknown
    assert math.isnan(ppl.approx_logprobs(np.array([nan]), np.array([nan]), np.array([[nan, nan]]), k=2)[0])


def test_approx_perplexity_needs_enough_stored_top_k():
    with pytest.raises(ValueError):
        ppl.approx_logprobs(np.array([-1.0]), np.array([1]), np.array([[-1.0]]), k=2)


def test_top1_accuracy():
    assert ppl.top1_accuracy(np.array([1, 2, 1, 7])) == 0.5


def test_empty_inputs_give_nan_not_errors():
    assert math.isnan(ppl.nll(np.array([])))
    assert math.isnan(rank_scores(np.array([], dtype=int), 20, (0.1,))["avg"])


def test_rank_from_a_short_list_uses_the_returned_length_as_l():
    """Thesis eq. 4: l is the number of log-probabilities received. A server returned 5 when 20
    were asked and the target is 3rd: lin = (5 - 3 + 1) / 5 = 0.6 (not (20 - 3 + 1) / 20 = 0.9),
    rp = 1/3, a0.1 = e^-0.2 = 0.81873, a0.3 = e^-0.6 = 0.54881, AVG = (0.6 + 0.33333 + 0.81873
    + 0.54881) / 4 = 0.57522 (not 0.65022 with l = 20)."""
    l = ranking_lengths(20, np.array([5.0]))
    assert l.tolist() == [5]
    scores = rank_scores(np.array([3]), l, (0.1, 0.3))
    assert scores["lin"] == pytest.approx(0.6)
    assert scores["rp"] == pytest.approx(1 / 3)
    assert scores["a0.1"] == pytest.approx(0.81873, abs=1e-5) and scores["a0.3"] == pytest.approx(0.54881, abs=1e-5)
    assert scores["avg"] == pytest.approx(0.57522, abs=1e-5)
    # the same target scored with the cutoff as l gives the numbers a short list must not give
    assert rank_scores(np.array([3]), 20, (0.1, 0.3))["lin"] == pytest.approx(0.9)
    assert rank_scores(np.array([3]), 20, (0.1, 0.3))["avg"] == pytest.approx(0.65022, abs=1e-5)


def test_ranking_lengths_mix_lists_and_full_vocabulary_ranks():
    """Per target l = min(cutoff, returned); NaN (a rank over the full vocabulary) keeps the
    cutoff. Cutoff 10: lists of 5, 20, none, 0 -> l = 5, 10, 10, 0; rank 6 in the 5-list is
    outside (0), rank 6 in the 20-list scores (10 - 6 + 1) / 10 = 0.5, rank 6 exact the same,
    and an empty list ranks nothing. Two targets had a list shorter than the cutoff (5 and 0)."""
    returned = np.array([5.0, 20.0, np.nan, 0.0])
    l = ranking_lengths(10, returned)
    assert l.tolist() == [5, 10, 10, 0]
    assert linear_scores(np.array([6, 6, 6, np.nan]), l).tolist() == pytest.approx([0.0, 0.5, 0.5, 0.0])
    assert short_lists(10, returned) == 2
    assert ranking_lengths(10, np.array([np.nan, np.nan])) == 10 and short_lists(10, None) == 0
