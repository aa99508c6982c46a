"""A−B: two arms' tokens paired as `compare` paired their windows, per token and per length.

The numbers are a `Comparison` that compare's task computed with its own defaults (the report
command hands the explorer that task, `Compare`); the explorer only ties them to the tokens. Per
token, Δ = log p_A − log p_B = loss_B − loss_A on tokens scoring the same characters of a paired
window, so the token-weighted mean of Δ over a window is compare's Δ_i.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ctxeval.errors import UserError
from ctxeval.render.views import Arm, TokenPair
from ctxeval.results.comparison import Comparison
from ctxeval.stats.interval import Interval

# compare's task on one model of each of two runs (run A, model A, run B, model B); UserError
# where the two cannot be compared
Compare = Callable[[Path, str, Path, str], Comparison]


@dataclass
class ArmPair(TokenPair):
    """Arm B against arm A of two runs: Δ per token of A and the comparison of B against A over
    all their paired windows."""

    comparison: Comparison

    @property
    def by_length(self) -> pd.DataFrame:
        """nominal_len, windows, ratio and the bounds of its interval (lo, hi; NaN: none) per nominal length."""
        rows = []
        for r in self.comparison.report["by_length"]:
            ratio = Interval.from_row(r["ratio"])
            rows.append({"nominal_len": r["nominal_len"], "windows": r["windows"], "ratio": ratio.estimate, "lo": ratio.low, "hi": ratio.high})
        return pd.DataFrame(rows, columns=["nominal_len", "windows", "ratio", "lo", "hi"])


def pair_arms(a: Arm, b: Arm, compare: Compare) -> ArmPair | None:
    """None when `compare` cannot compare the two arms (no shared window, several context modes)."""
    try:
        comparison = compare(a.run_dir, a.model, b.run_dir, b.model)
    except UserError:
        return None
    paired = pd.DataFrame(comparison.report["paired_windows"], columns=["a", "b"]).rename(columns={"a": "window_id_a", "b": "window_id_b"})
    return ArmPair(a, b, token_delta(a, b, paired), comparison)


def token_delta(a: Arm, b: Arm, paired: pd.DataFrame) -> np.ndarray:
    """log p_A − log p_B per row of A's records, matched on (paired window, character span)."""
    ra = a.records.assign(row=np.arange(len(a.records)))[["row", "window_id", "char_start", "char_end", "logprob"]]
    ra = ra.rename(columns={"window_id": "window_id_a", "logprob": "logprob_a"})
    rb = b.records[["window_id", "char_start", "char_end", "logprob"]].rename(columns={"window_id": "window_id_b", "logprob": "logprob_b"})
    joined = ra.merge(paired[["window_id_a", "window_id_b"]], on="window_id_a").merge(rb, on=["window_id_b", "char_start", "char_end"])
    delta = np.full(len(a.records), np.nan)
    delta[joined["row"].to_numpy()] = joined["logprob_a"].to_numpy() - joined["logprob_b"].to_numpy()
    return delta


def all_pairs(arms: list[Arm], compare: Compare, limit: int = 6) -> list[ArmPair]:
    """Every pair of language-modelling arms (sweep/score) that `compare` can compare, in arm
    order, at most `limit` (each costs bootstraps)."""
    lm = [arm for arm in arms if arm.kind in ("sweep", "score")]
    out = []
    for i, a in enumerate(lm):
        for b in lm[i + 1 :]:
            if len(out) >= limit:
                return out
            pair = pair_arms(a, b, compare)
            if pair is not None:
                out.append(pair)
    return out
