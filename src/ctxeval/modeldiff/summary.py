"""Summaries of diff records, by context-position bucket: pure functions of the records.

Per bucket (tokens whose context length lies in [lo, hi)) and over all tokens:
- mean KL(P_ref || P_cand) with a BCa interval over windows (or whole documents, when there
  are enough of them to resample), and its percentiles and maximum as `llama-perplexity
  --kl-divergence` reports them (linear interpolation between order statistics);
- same-top-1 % (the two argmaxes agree) with its interval;
- paper 001's perplexity ratio CAND/REF, exp of the token-weighted mean difference of
  per-window mean log-loss: its interval on the log scale (`delta_log_nll`) and exponentiated
  (`ratio`);
- mean and RMS of dP = P_cand(target) - P_ref(target), and the mean top-k overlap.

Each metric is written as its interval's row (`Interval.to_row`: estimate, low, high, se, n,
confidence, method, reason) with how it came out (`stats.gates.paired_row`) and its own extras (percentiles).
Every interval is `stats.paired.paired_bca` of a per-window mean weighted by the window's
tokens in the bucket, so the point estimate is the plain token mean. Windows or whole
documents are resampled by the rule `compare` uses (`report.compare.resampling_unit`, measured
by bench/bench_compare_coverage.py), and the summary says which, why, and when the interval is
known to under-cover or could not be drawn (one window).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ctxeval.errors import FieldError, UserError
from ctxeval.options import replicates_option, shared
from ctxeval.stats.gates import check_ratio_invariants, paired_row, ratio_rows, resampling_unit
from ctxeval.stats.defaults import DEFAULT_CONFIDENCE, DEFAULT_SEED
from ctxeval.stats.paired import PairedEstimate, paired_bca, unit_sd

PERCENTILES = (50.0, 90.0, 95.0, 99.0, 99.9)
FIRST_BUCKET = 512


@dataclass(frozen=True)
class Bootstrap:
    """How intervals are drawn."""

    replicates: int = replicates_option()
    seed: int = field(default=DEFAULT_SEED, metadata=shared("seed"))  # the command's --seed
    confidence: float = DEFAULT_CONFIDENCE


def bucket_edges(window: int, edges: tuple[int, ...] | None = None) -> list[int]:
    """Bucket edges of context lengths: `edges` as given (closed by the window), or 0, 512,
    1K, 2K, ... doubling up to the window."""
    if edges:
        if list(edges) != sorted(set(edges)) or edges[0] != 0:
            raise FieldError("buckets", f"must start at 0 and increase, got {','.join(map(str, edges))}")
        if edges[-1] >= window:
            raise FieldError("buckets", f"edges must lie below {{window}} {window}, got {edges[-1]}")
        return [*edges, window]
    out = [0]
    hi = FIRST_BUCKET
    while hi < window:
        out.append(hi)
        hi *= 2
    return [*out, window]


def bucket_label(lo: int, hi: int) -> str:
    return f"{_short(lo)}–{_short(hi)}"


def _short(n: int) -> str:
    return f"{n // 1024}K" if n >= 1024 and n % 1024 == 0 else str(n)


def summarize(records: pd.DataFrame, edges: list[int], bootstrap: Bootstrap = Bootstrap()) -> dict:
    """All tokens and each bucket: the fields described in the module docstring."""
    if records.empty:
        raise UserError("the diff has no scored tokens")
    cells = [{"bucket": "all", "lo": 0, "hi": edges[-1], **summarize_tokens(records, bootstrap)}]
    for lo, hi in zip(edges[:-1], edges[1:]):
        part = records[(records["context_len"] >= lo) & (records["context_len"] < hi)]
        cells.append({"bucket": bucket_label(lo, hi), "lo": lo, "hi": hi, **(summarize_tokens(part, bootstrap) if len(part) else {"tokens": 0})})
    return {"all": cells[0], "buckets": cells[1:]}


def summarize_tokens(records: pd.DataFrame, bootstrap: Bootstrap) -> dict:
    """The summary of one set of token records (one bucket)."""
    per_window = _window_table(records)
    n_documents = int(per_window["text_id"].nunique())
    by_document, reason, warning = resampling_unit(n_documents, None)
    clusters = per_window["text_id"].to_numpy() if by_document else None
    tokens = per_window["tokens"].to_numpy(dtype=float)

    def interval(column: str) -> PairedEstimate:
        return paired_bca(per_window[column].to_numpy(), tokens, bootstrap.replicates, bootstrap.seed, bootstrap.confidence, clusters)

    kl_values = records["kl"].to_numpy()
    kl = interval("kl")
    same = interval("same_top1")
    ratio = interval("delta_loss")
    dp = interval("delta_p")
    spread = unit_sd(per_window["delta_loss"].to_numpy(), tokens, clusters)
    out = {
        "tokens": len(records),
        "windows": len(per_window),
        "documents": n_documents,
        "resampling_unit": "document" if by_document else "window",
        "resampling_units": kl.units,
        "resampling_reason": reason,
        "warning": warning,
        # "none" with a single resampling unit (one window, or one document resampled); each
        # metric's own "interval" may also be "degenerate" (all its window means equal)
        "interval": "none" if kl.units < 2 else "bca",
        "interval_note": kl.reason if kl.units < 2 else None,
        "kl": paired_row(kl) | percentiles(kl_values),
        "same_top1": paired_row(same.scaled(100)),  # percent of tokens
        "ppl_ratio": ppl_ratio(ratio, records) | {"unit_sd": spread},
        "delta_p": paired_row(dp) | {"rms": float(np.sqrt(np.mean(records["delta_p"].to_numpy() ** 2)))},
        "topk_overlap": float(records["topk_overlap"].mean()),
    }
    if records["kl_reverse"].notna().all():
        rev = interval("kl_reverse")
        out["kl_reverse"] = paired_row(rev) | percentiles(records["kl_reverse"].to_numpy())
    return out


def percentiles(values: np.ndarray) -> dict[str, float]:
    """Median, 90/95/99/99.9 % points and the maximum (`p99_9` for 99.9 %)."""
    points = np.percentile(values, PERCENTILES)
    out = {f"p{p:g}".replace(".", "_"): float(v) for p, v in zip(PERCENTILES, points)}
    return out | {"max": float(np.max(values))}


def ppl_ratio(estimate: PairedEstimate, records: pd.DataFrame) -> dict:
    """Paper 001's primary fields for CAND against REF (ratio > 1: CAND's perplexity is higher)."""
    out = ratio_rows(estimate) | {
        "ppl_ref": math.exp(-float(records["ref_logprob"].mean())),
        "ppl_cand": math.exp(-float(records["cand_logprob"].mean())),
    }
    check_ratio_invariants(out)
    return out


def _window_table(records: pd.DataFrame) -> pd.DataFrame:
    """Per window: tokens and the mean of each per-token quantity (delta_loss = CAND's log-loss
    minus REF's), in plan order."""
    frame = records.assign(
        delta_loss=records["ref_logprob"] - records["cand_logprob"],
        same_top1=records["same_top1"].astype(float),
    )
    columns = ["kl", "same_top1", "delta_loss", "delta_p", "kl_reverse"]
    grouped = frame.groupby("pass_index", sort=True)
    table = grouped[columns].mean()
    table["tokens"] = grouped.size()
    table["text_id"] = grouped["text_id"].first()
    return table.reset_index()
