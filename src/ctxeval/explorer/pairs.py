"""A−B: two arms' windows paired exactly as `compare` pairs them, per token and per length.

Per token, Δ = log p_A − log p_B = loss_B − loss_A on tokens scoring the same characters of a
paired window, so the token-weighted mean of Δ over a window is compare's Δ_i. Per context
length, the ratio and its interval come from `build_report` on that length's paired windows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ctxeval.metrics.config import MetricConfig
from ctxeval.errors import UserError
from ctxeval.results.manifest import Manifest
from ctxeval.metrics.registry import rank_keys
from ctxeval.pairing import pair_windows
from ctxeval.report.compare import build_report, window_table
from ctxeval.render.views import Arm

COMPARE_REPLICATES = 2000  # `ctxeval compare`'s defaults, so the numbers match its compare.json
COMPARE_SEED = 0


@dataclass
class ArmPair:
    """Arm B against arm A: Δ per token of A (NaN where B has no token on the same characters),
    and compare's report over all paired windows and per nominal length."""

    a: Arm
    b: Arm
    delta: np.ndarray
    overall: dict
    by_length: pd.DataFrame  # nominal_len, windows, ratio, lo, hi (display CI)


def _table(arm: Arm, label: str) -> pd.DataFrame:
    manifest = Manifest.from_json(arm.manifest)
    return window_table(arm.records, manifest, manifest.metrics, arm.model, None, label)


def pair_arms(a: Arm, b: Arm) -> ArmPair | None:
    """None when the two arms share no window (different texts, lengths or spans)."""
    try:
        table_a, table_b = _table(a, "A"), _table(b, "B")
    except UserError:
        return None  # e.g. both context modes in one run: compare needs one chosen per arm
    pairing = pair_windows(table_a, table_b)
    if pairing.paired.empty:
        return None
    metrics = MetricConfig.from_dict(a.manifest["config"]["metrics"])
    scores = rank_keys(metrics)
    labels = (f"{a.run} · {a.model}", f"{b.run} · {b.model}")
    overall = build_report(pairing, labels, COMPARE_REPLICATES, COMPARE_SEED, False, scores)
    rows = []
    for length in sorted(table_a["nominal_len"].unique()):
        part = pair_windows(table_a[table_a["nominal_len"] == length], table_b[table_b["nominal_len"] == length])
        if part.paired.empty:
            continue
        report = build_report(part, labels, COMPARE_REPLICATES, COMPARE_SEED, False, scores)
        pm = report["primary_metric"]
        rows.append({"nominal_len": int(length), "windows": len(part.paired), "ratio": pm["ratio"], **dict(zip(("lo", "hi"), pm["display_ci"] or (float("nan"),) * 2))})
    return ArmPair(a, b, token_delta(a, b, pairing.paired), overall, pd.DataFrame(rows))


def token_delta(a: Arm, b: Arm, paired: pd.DataFrame) -> np.ndarray:
    """log p_A − log p_B per row of A's records, matched on (paired window, character span)."""
    ra = a.records.assign(row=np.arange(len(a.records)))[["row", "window_id", "char_start", "char_end", "logprob"]]
    ra = ra.rename(columns={"window_id": "window_id_a", "logprob": "logprob_a"})
    rb = b.records[["window_id", "char_start", "char_end", "logprob"]].rename(columns={"window_id": "window_id_b", "logprob": "logprob_b"})
    joined = ra.merge(paired[["window_id_a", "window_id_b"]], on="window_id_a").merge(rb, on=["window_id_b", "char_start", "char_end"])
    delta = np.full(len(a.records), np.nan)
    delta[joined["row"].to_numpy()] = joined["logprob_a"].to_numpy() - joined["logprob_b"].to_numpy()
    return delta


def all_pairs(arms: list[Arm], limit: int = 6) -> list[ArmPair]:
    """Every pair of language-modelling arms (sweep/score) that shares windows, in arm order,
    at most `limit` (each costs bootstraps)."""
    lm = [arm for arm in arms if arm.kind in ("sweep", "score")]
    out = []
    for i, a in enumerate(lm):
        for b in lm[i + 1 :]:
            if len(out) >= limit:
                return out
            pair = pair_arms(a, b)
            if pair is not None:
                out.append(pair)
    return out
