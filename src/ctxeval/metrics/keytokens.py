"""Key tokens (LongPPL, Fang et al., ICLR 2025) and their transfer between tokenizers.

A target is a key token when distant context helps it a lot *and* the model then predicts it
well: gain g = log p_long - log p_short > alpha and log p_long > beta. Key tokens are found by an
evaluator model and handed to any other model as character spans, so tokenizers need not match.
"""

from __future__ import annotations

import numpy as np

DEFAULT_ALPHA = 2.0
DEFAULT_BETA = -2.0


def key_token_mask(logprob_long: np.ndarray, logprob_short: np.ndarray, alpha: float = DEFAULT_ALPHA, beta: float = DEFAULT_BETA) -> np.ndarray:
    """True where g > alpha and log p_long > beta (both strict, as in LongPPL)."""
    long_, short = np.asarray(logprob_long, dtype=np.float64), np.asarray(logprob_short, dtype=np.float64)
    return ((long_ - short) > alpha) & (long_ > beta)


def merge_spans(char_starts: np.ndarray, char_ends: np.ndarray) -> np.ndarray:
    """Sorted [start, end) spans with touching or overlapping spans merged; shape [n, 2]."""
    starts, ends = np.asarray(char_starts, dtype=np.int64), np.asarray(char_ends, dtype=np.int64)
    if len(starts) == 0:
        return np.zeros((0, 2), dtype=np.int64)
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    merged: list[list[int]] = [[int(starts[0]), int(ends[0])]]
    for s, e in zip(starts[1:].tolist(), ends[1:].tolist()):
        if s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return np.asarray(merged, dtype=np.int64)


def tokens_within(char_starts: np.ndarray, char_ends: np.ndarray, spans: np.ndarray) -> np.ndarray:
    """True for tokens whose whole [start, end) lies inside one span (LongPPL's containment rule:
    a token that only overlaps a key span is not a key token). Empty tokens are never key tokens."""
    starts, ends = np.asarray(char_starts, dtype=np.int64), np.asarray(char_ends, dtype=np.int64)
    if len(spans) == 0:
        return np.zeros(len(starts), dtype=bool)
    i = np.searchsorted(spans[:, 0], starts, side="right") - 1
    valid = i >= 0
    span_end = np.where(valid, spans[np.maximum(i, 0), 1], -1)
    return valid & (ends <= span_end) & (ends > starts)
