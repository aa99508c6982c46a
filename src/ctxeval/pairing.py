"""Pair the windows of two runs over the same text spans.

A window is keyed by (text content sha256, nominal length, repeat, first and last scored
character): windows of two runs pair when they scored the same stretch of the same text in
the same setting, whatever their ids (an exact and an approx sweep window pair, for example).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

KEY = ["text_sha256", "nominal_len", "repeat", "span_start", "span_end"]


@dataclass
class Pairing:
    """Paired windows of arms A and B, and how well the two runs matched."""

    paired: pd.DataFrame  # columns of both arms (and their run positions), suffixed _a and _b, in A's window order
    n_a: int
    n_b: int
    match_fraction: float
    overlap_fraction: float
    token_mismatches: int
    ids_equal_fraction: float
    n_documents_a: int  # documents (distinct text sha256s) with a window in each run
    n_documents_b: int
    tokens_a: int  # tokens over all windows of each run, paired or not
    tokens_b: int


def pair_windows(a: pd.DataFrame, b: pd.DataFrame) -> Pairing:
    """Inner-join windows on their key and measure match and overlap. `position_a`/`position_b`
    are each window's place in its run's order, on which the drift check's halves split."""
    a, b = a.assign(position=np.arange(len(a))), b.assign(position=np.arange(len(b)))
    paired = a.merge(b, on=KEY, suffixes=("_a", "_b"), how="inner", sort=False)
    union = len(pd.concat([a[KEY], b[KEY]]).drop_duplicates())
    n = len(paired)
    return Pairing(
        paired=paired,
        n_a=len(a),
        n_b=len(b),
        match_fraction=n / union if union else 0.0,
        overlap_fraction=overlap_fraction(paired),
        token_mismatches=int((paired["tokens_a"] != paired["tokens_b"]).sum()) if n else 0,
        ids_equal_fraction=float((paired["window_id_a"] == paired["window_id_b"]).mean()) if n else 0.0,
        n_documents_a=int(a["text_sha256"].nunique()),
        n_documents_b=int(b["text_sha256"].nunique()),
        tokens_a=int(a["tokens"].sum()),
        tokens_b=int(b["tokens"].sum()),
    )


def overlap_fraction(windows: pd.DataFrame) -> float:
    """Fraction of windows whose scored character span overlaps another window's in the same text.

    Overlapping windows share tokens, so they are not independent resampling units.
    """
    if windows.empty:
        return 0.0
    overlapping = 0
    for _, text in windows.groupby("text_sha256", sort=False):
        spans = text[["span_start", "span_end"]].to_numpy()
        order = np.argsort(spans[:, 0], kind="stable")
        starts, ends = spans[order, 0], spans[order, 1]
        running_end = np.maximum.accumulate(ends)
        hits = np.zeros(len(order), dtype=bool)
        hits[1:] |= starts[1:] < running_end[:-1]  # starts before an earlier window ends
        later_start = np.minimum.accumulate(starts[::-1])[::-1]
        hits[:-1] |= later_start[1:] < ends[:-1]  # a later window starts before this one ends
        overlapping += int(hits.sum())
    return overlapping / len(windows)
