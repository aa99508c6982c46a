"""Fitting a synthetic prompt to a length in a model's tokens: the largest size that fits."""

from __future__ import annotations

from collections.abc import Callable


def largest_fitting(fits: Callable[[int], bool], low: int) -> int | None:
    """The largest size from `low` up for which `fits` holds (it must hold for every smaller size
    and fail for some larger one), by doubling then bisecting: about 2 log2(size) calls; None when
    `low` itself does not fit."""
    if not fits(low):
        return None
    high = 2 * low
    while fits(high):
        low, high = high, 2 * high
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low


def largest_fitting_between(fits: Callable[[int], bool], low: int, high: int) -> int | None:
    """RULER's bisection (common_words_extraction.py): the largest size in [low, high] for which
    `fits` holds, given it holds below some size and fails above it; None when `low` does not fit."""
    best = None
    while low <= high:
        middle = (low + high) // 2
        if fits(middle):
            best, low = middle, middle + 1
        else:
            high = middle - 1
    return best
