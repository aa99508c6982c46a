"""Rank-based scores of the thesis (section 3.1.1): each in [0, 1], 1 for a target ranked first.

`cutoff` is l, the length of the ranking: a target ranked beyond it scores 0. The thesis used
l = 20 (the API's top-20); `None` means the full vocabulary (l = vocab size). Eq. 4 defines l as
the number of log-probabilities received, so a target whose rank was read from a shorter list
(an API that returned 5 alternatives when 20 were asked) is scored with l = that length: a
cutoff may be one l per target (`ranking_lengths`).
"""

from __future__ import annotations

import numpy as np


Cutoff = int | np.ndarray  # l, for all targets or one per target


def ranking_lengths(cutoff: int, returned: np.ndarray | None) -> Cutoff:
    """l per target: the cutoff, or the length of the list the target's rank was read from where
    that is shorter (eq. 4: l is the number of log-probabilities received). `returned` holds
    that length per target, NaN where the rank is over the full vocabulary (no list); an empty
    list (0) ranks nothing."""
    if returned is None:
        return cutoff
    returned = np.asarray(returned, dtype=np.float64)
    if not np.isfinite(returned).any():
        return cutoff
    return np.fmin(returned, cutoff).astype(np.int64)  # fmin: NaN (no list) gives the cutoff


def short_lists(cutoff: int, returned: np.ndarray | None) -> int:
    """How many targets were scored with an l below the cutoff: their server returned fewer
    alternatives than the cutoff (what a summary reports beside the scores)."""
    if returned is None:
        return 0
    return int(np.sum(np.asarray(returned, dtype=np.float64) < cutoff))  # NaN (no list) compares False


def _ranks_and_mask(ranks: np.ndarray, cutoff: Cutoff) -> tuple[np.ndarray, np.ndarray]:
    ranks = np.asarray(ranks, dtype=np.float64)
    if np.any(ranks < 1):
        raise ValueError("ranks are 1-based")
    return ranks, ranks <= cutoff


def linear_scores(ranks: np.ndarray, cutoff: Cutoff) -> np.ndarray:
    """s_i = (l - r_i + 1) / l inside the ranking, else 0 (eq. 4)."""
    r, inside = _ranks_and_mask(ranks, cutoff)
    return np.where(inside, (cutoff - r + 1) / np.maximum(cutoff, 1), 0.0)  # l = 0 (empty list): nothing inside


def reciprocal_scores(ranks: np.ndarray, cutoff: Cutoff) -> np.ndarray:
    """s_i = 1 / r_i inside the ranking, else 0 (eq. 6)."""
    r, inside = _ranks_and_mask(ranks, cutoff)
    return np.where(inside, 1.0 / r, 0.0)


def nonlinear_scores(ranks: np.ndarray, cutoff: Cutoff, alpha: float) -> np.ndarray:
    """s_i = exp(-alpha (r_i - 1)) inside the ranking, else 0 (eq. 8)."""
    r, inside = _ranks_and_mask(ranks, cutoff)
    return np.where(inside, np.exp(-alpha * (r - 1)), 0.0)


def alpha_key(alpha: float) -> str:
    """Column name of a non-linear score, e.g. 0.1 -> `a0.1`."""
    return f"a{alpha:g}"
