"""Does a model use distant context? Long vs short context scores of the same targets.

Every target is scored twice: with its full preceding context inside a chunk of W tokens
(`chunked`) and with only about the last k of those tokens (`truncated`, see
`windows.truncated`). The per-token gain g = log p_long - log p_short is what the distant
tokens contribute; perplexity alone hides it (paper 002: a 4K-window model matched
long-context models' perplexity on 76K-token books).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ctxeval.metrics.gain import bin_gain, ppl_ratio
from ctxeval.metrics.keytokens import tokens_within
from ctxeval.stats.defaults import DEFAULT_CONFIDENCE
from ctxeval.stats.paired import paired_bca

GAIN_QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


def summarize_text(table: pd.DataFrame, spans: np.ndarray, block: int, replicates: int, seed: int) -> dict:
    """ppl_long, ppl_short, the mean gain with its paired BCa interval and the perplexity ratio
    long/short with the same interval mapped through exp(-g) (each the row every interval writes,
    `Interval.to_row`; the gain's adds the bootstrap's facts), gain quantiles and LongPPL."""
    long_lp, short_lp, gain = (table[c].to_numpy(dtype=np.float64) for c in ("logprob_long", "logprob_short", "gain"))
    n_bytes = table["n_bytes"].to_numpy(dtype=np.float64).sum()
    distant = table["distant"].to_numpy()
    key = tokens_within(table["char_start"].to_numpy(), table["char_end"].to_numpy(), spans)
    # resampling units: blocks of `block` consecutive targets (neighbouring tokens are not independent)
    units = (table["target_pos"].to_numpy() // block).astype(np.int64)
    _, unit_index = np.unique(units, return_inverse=True)
    unit_tokens = np.bincount(unit_index).astype(np.float64)
    unit_gain = np.bincount(unit_index, weights=gain) / unit_tokens
    ci = paired_bca(unit_gain, unit_tokens, replicates=replicates, seed=seed, unit=f"block of {block} targets")
    quantiles = np.quantile(gain[distant], GAIN_QUANTILES) if distant.any() else [math.nan] * len(GAIN_QUANTILES)
    return {
        "n_tokens": int(len(table)),
        "n_distant": int(distant.sum()),
        "ppl_long": math.exp(-long_lp.mean()),
        "ppl_short": math.exp(-short_lp.mean()),
        "bpb_long": float(-long_lp.sum() / math.log(2) / n_bytes),
        "bpb_short": float(-short_lp.sum() / math.log(2) / n_bytes),
        "mean_gain": ci.as_dict() | {"unit": f"blocks of {block} targets"},
        "ppl_ratio_long_over_short": ppl_ratio(ci).to_row(),
        "mean_gain_distant": float(gain[distant].mean()) if distant.any() else None,
        "share_gain_positive_distant": float((gain[distant] > 0).mean()) if distant.any() else None,
        "gain_quantiles_distant": {f"p{round(q * 100)}": _finite(v) for q, v in zip(GAIN_QUANTILES, quantiles)},
        "top1_long": float((table["rank_long"] == 1).mean()),
        "top1_short": float((table["rank_short"] == 1).mean()),
        "n_key": int(key.sum()),
        "key_fraction": float(key.mean()),
        "longppl": math.exp(-long_lp[key].mean()) if key.any() else None,
        "longppl_short": math.exp(-short_lp[key].mean()) if key.any() else None,
    }


def gain_by_distance(table: pd.DataFrame, short: int, window: int, confidence: float = DEFAULT_CONFIDENCE) -> pd.DataFrame:
    """Mean gain per long-context bin [short, 2 short), [2 short, 4 short), ... up to the window,
    with its interval at `confidence` (`bin_gain`; the columns `Interval.columns` writes)."""
    edges = [0, short]
    while edges[-1] < window:
        edges.append(min(edges[-1] * 2, window))
    rows = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        part = table[(table["context_long"] >= lo) & (table["context_long"] < hi)]
        if part.empty:
            continue
        gains = part["gain"].to_numpy(dtype=np.float64)
        rows.append({"context_from": lo, "context_to": hi, "n": len(gains), **bin_gain(gains, confidence).columns("mean_gain"),
                     "mean_logprob_long": float(part["logprob_long"].mean()), "mean_logprob_short": float(part["logprob_short"].mean())})
    return pd.DataFrame(rows)


def _finite(value: float) -> float | None:
    return None if not math.isfinite(float(value)) else float(value)
