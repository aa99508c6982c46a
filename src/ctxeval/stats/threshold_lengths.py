"""RULER's effective length over a retrieval run's cells: the longest prompt size whose accuracy,
and every shorter size's, stays at or above a threshold."""

from __future__ import annotations

import pandas as pd

RETRIEVAL_THRESHOLD = 0.85  # RULER's: Llama-2-7B's mean score at 4K (85.6), rounded


def effective_lengths(cells: pd.DataFrame, threshold: float = RETRIEVAL_THRESHOLD) -> dict[str, dict]:
    """RULER-style effective length per model of a run sized in tokens (--tokens): the longest
    prompt size whose accuracy (over depths) and every shorter one's stay at or above
    `threshold`; None when the shortest already falls below it. Empty without --tokens."""
    if "tokens_target" not in cells or not cells["tokens_target"].notna().any():
        return {}
    out = {}
    for model, part in cells.groupby("model", sort=False):
        per_length = part.groupby("tokens_target").apply(lambda g: float((g["accuracy"] * g["n"]).sum() / g["n"].sum()), include_groups=False).sort_index()
        passing = (per_length >= threshold).cummin()
        value = int(per_length.index[passing.to_numpy()].max()) if passing.any() else None
        out[str(model)] = {"value": value, "threshold": threshold, "at_least": bool(passing.all()),
                           "accuracy": {str(int(k)): v for k, v in per_length.items()}}
    return out
