"""Perplexity-family metrics over per-token natural-log probabilities."""

from __future__ import annotations

import math

import numpy as np

DEFAULT_PENALTY = 3.0  # thesis eq. 10: log p_k minus this for a token outside the top-k


def nll(logprobs: np.ndarray) -> float:
    """Token-weighted mean negative log-likelihood in nats."""
    logprobs = np.asarray(logprobs, dtype=np.float64)
    if logprobs.size == 0:
        return math.nan
    return float(-logprobs.mean())


def perplexity(logprobs: np.ndarray) -> float:
    """exp of the token-weighted mean NLL (thesis eq. 2)."""
    return math.exp(nll(logprobs))


def bits_per_byte(logprobs: np.ndarray, n_bytes: np.ndarray) -> float:
    """Total NLL in bits divided by the UTF-8 bytes of the scored tokens.

    Comparable across tokenizers because the denominator is the text, not the token count.
    """
    total_bytes = int(np.asarray(n_bytes).sum())
    if total_bytes == 0:
        return math.nan
    return float(-np.asarray(logprobs, dtype=np.float64).sum() / math.log(2) / total_bytes)


def approx_logprobs(
    logprobs: np.ndarray, ranks: np.ndarray, topk_logprobs: np.ndarray, k: int, penalty: float = DEFAULT_PENALTY
) -> np.ndarray:
    """Per-token log-probabilities as an API with only the top-k would give them (thesis eq. 10).

    A token ranked within the top k keeps its log-probability; one outside gets
    log p_l - penalty, where p_l is the lowest probability among the first k returned
    (thesis: "the lowest probability p_l in P"). An API can return fewer than k values
    (llama-cpp-python merges tokens with equal strings; NaN-padded in the records), and then
    p_l is the lowest one it did return; a row with none returned stays NaN. `topk_logprobs`
    is [n, >=k], sorted descending; computing this from exact data measures the truncation bias.
    """
    topk_logprobs = np.asarray(topk_logprobs, dtype=np.float64)
    if k < 1 or topk_logprobs.ndim != 2 or topk_logprobs.shape[1] < k:
        raise ValueError(f"approximate perplexity at k={k} needs at least k stored top log-probabilities")
    inside = np.asarray(ranks, dtype=np.float64) <= k  # an unknown rank (NaN) is outside
    return np.where(inside, np.asarray(logprobs, dtype=np.float64), _lowest_returned(topk_logprobs[:, :k]) - penalty)


def _lowest_returned(topk_logprobs: np.ndarray) -> np.ndarray:
    """Per row, the lowest non-NaN value (NaN for a row with no value at all)."""
    present = ~np.isnan(topk_logprobs)
    lowest = np.where(present, topk_logprobs, np.inf).min(axis=1, initial=np.inf)
    return np.where(present.any(axis=1), lowest, np.nan)


def approx_perplexity(
    logprobs: np.ndarray, ranks: np.ndarray, topk_logprobs: np.ndarray, k: int, penalty: float = DEFAULT_PENALTY
) -> float:
    """The thesis's approximate perplexity from top-k data only (eqs. 9-10)."""
    return perplexity(approx_logprobs(logprobs, ranks, topk_logprobs, k, penalty))


def top1_accuracy(ranks: np.ndarray) -> float:
    """Fraction of targets ranked first (the model's greedy choice, ties counted for the target)."""
    ranks = np.asarray(ranks)
    return float((ranks == 1).mean()) if ranks.size else math.nan
