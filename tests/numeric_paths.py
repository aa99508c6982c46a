"""Comparisons between two numeric paths (another decode batch shape or block of output rows,
batched vs one pass at a time, packed vs unpacked, another dtype, another CPU's kernels): the
bounds the tests use, relative to the values compared, and checks of ranks, argmaxes and top-k
ids that a near-tie flipped by rounding cannot fail (docs/numerics.md)."""

from __future__ import annotations

import numpy as np

# Two float32 numeric paths agree to float32 rounding relative to the values compared, not to a
# fixed number of nats: KL values near 8.8 nats differed by up to 4.6e-6 (relative 7.6e-7) on an
# AMD EPYC with AVX-512 (docs/numerics.md). rtol 1e-5 is 13x that; atol covers values near 0.
FLOAT32_PATHS = {"rtol": 1e-5, "atol": 1e-6}

# A whole float32 forward against a float64 one (rounding accumulates through the layers): the
# tiny test models' log-probabilities (|values| 5-18 nats) differed by up to relative 5.1e-6 over
# 512 tokens, 1.9e-6 over 60, on an AMD EPYC with AVX-512 (docs/numerics.md); rtol 5e-5 is ~10x.
FLOAT32_FORWARD = {"rtol": 5e-5, "atol": 1e-6}


def _tolerance(values: np.ndarray, bounds: dict) -> np.ndarray:
    return bounds["atol"] + bounds["rtol"] * np.abs(values)


def assert_same_top_k(got_ids: np.ndarray, got_logprobs: np.ndarray, log_softmax: np.ndarray, bounds: dict = FLOAT32_PATHS) -> None:
    """The recorded top-k against a naive float64 sort of `log_softmax`, robust to near-ties that
    another path may order the other way: the recorded values are the reference's values at the
    recorded ids, in descending order, and equal the reference's k largest."""
    got_ids = np.asarray(got_ids)
    k = got_ids.shape[1]
    at_got = np.take_along_axis(log_softmax, got_ids, axis=1)
    np.testing.assert_allclose(got_logprobs, at_got, **bounds)
    assert np.all(np.diff(got_logprobs, axis=1) <= 0)
    largest = -np.sort(-log_softmax, axis=1)[:, :k]
    np.testing.assert_allclose(at_got, largest, **bounds)
    assert all(len(set(row)) == k for row in got_ids.tolist())


def top1_margin(rows: np.ndarray) -> np.ndarray:
    """Per row, the gap between the largest and the second-largest value."""
    top2 = -np.sort(-np.asarray(rows), axis=1)[:, :2]
    return top2[:, 0] - top2[:, 1]


def assert_same_argmax_where_clear(got: np.ndarray, rows: np.ndarray, bounds: dict = FLOAT32_PATHS, min_compared: float = 0.9) -> None:
    """`got` (argmaxes from another path) equals the argmax of the reference `rows` wherever the
    reference's top-1 margin exceeds the paths' rounding; most rows must be compared."""
    rows = np.asarray(rows)
    clear = top1_margin(rows) > 2 * _tolerance(rows.max(axis=1), bounds)
    np.testing.assert_array_equal(np.asarray(got)[clear], rows.argmax(axis=1)[clear])
    assert clear.mean() >= min_compared, f"only {clear.mean():.0%} of rows have a clear top-1"


def assert_rank_within_rounding(got_rank: np.ndarray, rows: np.ndarray, targets: np.ndarray, bounds: dict = FLOAT32_PATHS) -> None:
    """`got_rank` (1 + the number of logits above the target's, from another path) against the
    reference `rows`: exact where no other logit lies within the paths' rounding of the target's,
    otherwise anywhere between counting none and all of those neighbours as above it. At least
    half the ranks must be exact-checked (no neighbour within rounding)."""
    rows = np.asarray(rows, dtype=np.float64)
    target = rows[np.arange(len(rows)), np.asarray(targets)]
    tol = _tolerance(np.abs(rows).max(axis=1), bounds)[:, None]
    lowest = 1 + np.count_nonzero(rows > target[:, None] + tol, axis=1)
    highest = np.count_nonzero(rows > target[:, None] - tol, axis=1)  # the target itself counts once
    got_rank = np.asarray(got_rank)
    bad = (got_rank < lowest) | (got_rank > highest)
    assert not bad.any(), f"ranks {got_rank[bad]} outside [{lowest[bad]}, {highest[bad]}]"
    assert np.mean(lowest == highest) >= 0.5


EPS_F32 = 2.0**-23  # float32 machine epsilon: twice the unit roundoff, so also a bound for truncating adders


def head_reference(hidden, weight):
    """float64 logits of half-precision hidden rows [n, d] and head weights [vocab, d] (torch
    tensors, on any device), and per logit the worst-case error of a float32 accumulation of the
    same products in any order: d * EPS_F32 * sum_i |h_i w_ji| (each product of two bf16/fp16
    numbers is exact in float32; each of the d - 1 additions rounds by at most EPS_F32 relative to
    a partial sum bounded by sum |h_i w_ji|), plus 2 * EPS_F32 * |z_j| for the final cast."""
    h, w = hidden.double(), weight.double()
    logits = h @ w.T
    bound = h.shape[1] * EPS_F32 * (h.abs() @ w.abs().T) + 2 * EPS_F32 * logits.abs()
    return logits, bound


def assert_scores_match_reference(scores, logits, bound, targets, temperatures: tuple[float, ...], logprob_atol: float = 1e-4) -> np.ndarray:
    """BlockScores from float32 logits against float64 `logits` [n, vocab] with per-logit error
    `bound` (numpy): log-probabilities within `logprob_atol` nats (scaled by 1/T at temperature T < 1);
    each rank between counting none and all of the logits within the two bounds of the target's as
    above it (so exactly equal where there are none); top-k ids equal where the reference's top k+1
    values are separated by more than their bounds, else equal by value within the bounds.
    Returns which rows had their rank checked exactly."""
    rows = np.arange(len(targets))
    target, target_bound = logits[rows, targets], bound[rows, targets]
    for j, temperature in enumerate((1.0, *temperatures)):
        z = logits / temperature
        lse = z.max(axis=1) + np.log(np.exp(z - z.max(axis=1, keepdims=True)).sum(axis=1))
        got = scores.logprob if j == 0 else scores.temp_logprobs[:, j - 1]
        np.testing.assert_allclose(got, target / temperature - lse, rtol=0, atol=logprob_atol * max(1.0, 1.0 / temperature))
    gap = logits - target[:, None]
    slack = bound + target_bound[:, None]
    others = np.ones_like(logits, dtype=bool)
    others[rows, targets] = False
    lowest = 1 + np.count_nonzero(others & (gap > slack), axis=1)
    highest = 1 + np.count_nonzero(others & (gap >= -slack), axis=1)
    bad = (scores.rank < lowest) | (scores.rank > highest)
    assert not bad.any(), f"ranks {scores.rank[bad]} outside [{lowest[bad]}, {highest[bad]}]"
    lse = logits.max(axis=1) + np.log(np.exp(logits - logits.max(axis=1, keepdims=True)).sum(axis=1))
    k = scores.topk_ids.shape[1]
    np.testing.assert_allclose(scores.topk_logprobs, np.take_along_axis(logits, scores.topk_ids.astype(np.int64), axis=1) - lse[:, None], rtol=0, atol=logprob_atol)
    order = _top_ids(logits, k + 1)
    top_vals, top_bounds = np.take_along_axis(logits, order, axis=1), np.take_along_axis(bound, order, axis=1)
    separated = np.all(top_vals[:, :-1] - top_vals[:, 1:] > top_bounds[:, :-1] + top_bounds[:, 1:], axis=1)
    np.testing.assert_array_equal(scores.topk_ids[separated], order[separated, :k])
    at_got = np.take_along_axis(logits, scores.topk_ids.astype(np.int64), axis=1)
    assert np.all(np.abs(at_got - top_vals[:, :k]) <= 2 * bound.max(axis=1, keepdims=True))
    assert all(len(set(row)) == k for row in scores.topk_ids.tolist())
    return lowest == highest


def _top_ids(rows: np.ndarray, m: int) -> np.ndarray:
    """Ids of the m largest values of each row, by value descending then id ascending (ties
    included exactly), sorting only the candidates at or above each row's m-th largest value."""
    m = min(m, rows.shape[1])
    kth = np.partition(rows, rows.shape[1] - m, axis=1)[:, rows.shape[1] - m]
    out = np.empty((len(rows), m), dtype=np.int64)
    for i, (row, threshold) in enumerate(zip(rows, kth)):
        cand = np.nonzero(row >= threshold)[0]
        out[i] = cand[np.lexsort((cand, -row[cand]))[:m]]
    return out
