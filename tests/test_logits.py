"""The blocked logits scorer against a naive float64 full log-softmax."""

import numpy as np
import pytest

from ctxeval.backends.logits import score_block


def naive(logits: np.ndarray, targets: np.ndarray, k: int, temperature: float = 1.0):
    z = logits.astype(np.float64) / temperature
    lsm = z - z.max(axis=1, keepdims=True)
    lsm -= np.log(np.exp(lsm).sum(axis=1, keepdims=True))
    rows = np.arange(len(targets))
    target_logit = logits[rows, targets]
    rank = 1 + (logits > target_logit[:, None]).sum(axis=1)
    order = np.argsort(-logits.astype(np.float64), axis=1, kind="stable")[:, :k]
    return lsm[rows, targets], rank, order, np.take_along_axis(lsm, order, axis=1)


@pytest.mark.parametrize("vocab", [1000, 4096 + 7, 6000, 32000, 65536])
def test_matches_naive_full_softmax(vocab):
    rng = np.random.default_rng(vocab)
    n = 37
    logits = (rng.standard_normal((n, vocab)) * 4).astype(np.float32)
    targets = rng.integers(0, vocab, n)
    targets[:5] = logits[:5].argmax(axis=1)
    got = score_block(logits, targets, top_k=20, temperatures=(0.5, 1.0, 1.5))
    lp, rank, ids, top_lp = naive(logits, targets, 20)
    assert np.abs(got.logprob - lp).max() < 1e-6
    assert np.array_equal(got.rank, rank)
    assert np.array_equal(got.topk_ids, ids)
    assert np.abs(got.topk_logprobs - top_lp).max() < 1e-5
    assert np.array_equal(got.greedy_id, logits.argmax(axis=1))
    for j, t in enumerate((0.5, 1.0, 1.5)):
        assert np.abs(got.temp_logprobs[:, j] - naive(logits, targets, 1, t)[0]).max() < 1e-6
    # ranks do not move with temperature; log-probabilities do
    assert not np.allclose(got.temp_logprobs[:, 0], got.temp_logprobs[:, 2])


def test_ties_count_for_the_target_and_top_k_breaks_ties_by_id():
    logits = np.zeros((1, 600), dtype=np.float32)
    logits[0, [5, 300, 599]] = 2.0
    got = score_block(logits, np.array([300]), top_k=4)
    assert got.rank[0] == 1  # two other tokens tie with it: none strictly larger
    assert got.topk_ids[0].tolist() == [5, 300, 599, 0]
    got = score_block(logits, np.array([7]), top_k=4)
    assert got.rank[0] == 4


def test_top_k_larger_than_group_count_falls_back_to_sorting():
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((3, 300)).astype(np.float32)
    got = score_block(logits, np.array([0, 1, 2]), top_k=50)
    _, _, ids, _ = naive(logits, np.array([0, 1, 2]), 50)
    assert np.array_equal(got.topk_ids, ids)


def test_many_rows_split_over_threads_keep_row_order():
    rng = np.random.default_rng(2)
    logits = rng.standard_normal((100, 2048)).astype(np.float32)
    targets = rng.integers(0, 2048, 100)
    got = score_block(logits, targets, top_k=5)
    lp, rank, ids, _ = naive(logits, targets, 5)
    assert np.abs(got.logprob - lp).max() < 1e-6
    assert np.array_equal(got.rank, rank)
    assert np.array_equal(got.topk_ids, ids)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_logits_are_refused(bad):
    logits = np.zeros((1, 512), dtype=np.float32)
    logits[0, 3] = bad
    with pytest.raises(FloatingPointError):
        score_block(logits, np.array([1]), top_k=2)
