"""Rank-based scores of the thesis (section 3.1.1): each in [0, 1], 1 for a target ranked first.

`cutoff` is l, the length of the ranking: a target ranked beyond it scores 0. The thesis used
l = 20 (the API's top-20); `None` means the full vocabulary (l = vocab size).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def _ranks_and_mask(ranks: np.ndarray, cutoff: int) -> tuple[np.ndarray, np.ndarray]:
    ranks = np.asarray(ranks, dtype=np.float64)
    if np.any(ranks < 1):
        raise ValueError("ranks are 1-based")
    return ranks, ranks <= cutoff


def linear_scores(ranks: np.ndarray, cutoff: int) -> np.ndarray:
    """s_i = (l - r_i + 1) / l inside the ranking, else 0 (eq. 4)."""
    r, inside = _ranks_and_mask(ranks, cutoff)
    return np.where(inside, (cutoff - r + 1) / cutoff, 0.0)


def reciprocal_scores(ranks: np.ndarray, cutoff: int) -> np.ndarray:
    """s_i = 1 / r_i inside the ranking, else 0 (eq. 6)."""
    r, inside = _ranks_and_mask(ranks, cutoff)
    return np.where(inside, 1.0 / r, 0.0)


def nonlinear_scores(ranks: np.ndarray, cutoff: int, alpha: float) -> np.ndarray:
    """s_i = exp(-alpha (r_i - 1)) inside the ranking, else 0 (eq. 8)."""
    r, inside = _ranks_and_mask(ranks, cutoff)
    return np.where(inside, np.exp(-alpha * (r - 1)), 0.0)


def token_scores(ranks: np.ndarray, cutoff: int, alphas: Sequence[float]) -> dict[str, np.ndarray]:
    """Per target, every score that enters the thesis's AVG: `lin`, `rp` and `a<alpha>` per alpha
    (with alphas (0.1, 0.3) the thesis's four scores); the one place that list is defined."""
    scores = {"lin": linear_scores(ranks, cutoff), "rp": reciprocal_scores(ranks, cutoff)}
    for alpha in alphas:
        scores[alpha_key(alpha)] = nonlinear_scores(ranks, cutoff, alpha)
    return scores


def rank_scores(ranks: np.ndarray, cutoff: int, alphas: Sequence[float]) -> dict[str, float]:
    """Mean of each of `token_scores`, and their average (the thesis's AVG).

    Keys: `lin`, `rp`, `a<alpha>` per alpha (e.g. `a0.1`), `avg` = mean of all of them, which
    with alphas (0.1, 0.3) is the thesis's average of four scores.
    """
    ranks = np.asarray(ranks)
    if ranks.size == 0:
        keys = ["lin", "rp", *(alpha_key(a) for a in alphas), "avg"]
        return {k: math.nan for k in keys}
    scores = {name: float(values.mean()) for name, values in token_scores(ranks, cutoff, alphas).items()}
    scores["avg"] = float(np.mean(list(scores.values())))
    return scores


def alpha_key(alpha: float) -> str:
    """Column name of a non-linear score, e.g. 0.1 -> `a0.1`."""
    return f"a{alpha:g}"
