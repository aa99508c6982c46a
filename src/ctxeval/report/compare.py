"""The paired-comparison report (`compare.json`, `compare.md`, written by results/comparison.py):
fields of the paired-evaluation note and invariants checked on write (the ci/release gates
and the choice of resampling unit are statistics: stats/gates.py)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from ctxeval.metrics.config import MetricConfig
from ctxeval.errors import FieldError, UserError
from ctxeval.results.manifest import Manifest
from ctxeval.pairing import KEY, Pairing, pair_windows
from ctxeval.report.summary import window_metrics
from ctxeval.results.comparison import Comparison, window_label
from ctxeval.stats.paired import PairedEstimate, all_equal, paired_bca, weighted_mean
from ctxeval.stats.defaults import MIN_CLUSTERS
from ctxeval.stats.gates import check_ratio_invariants, paired_row, ratio_rows, resampling_unit

NAN_POLICIES = ("exclude", "error")
_NAN_REASON = "loss is NaN in at least one arm (a target without a log-probability, e.g. a reference outside an API's top-k)"


def window_table(records: pd.DataFrame, manifest: Manifest, metrics: MetricConfig, model: str | None, context_mode: str | None, label: str) -> pd.DataFrame:
    """One row per window, in plan order: key, window id, tokens t, mean log-loss (`loss`) and
    the window's metrics, including the rank scores."""
    df = records
    models = df["model"].unique().tolist()
    if model is not None:
        df = df[df["model"] == model]
        if df.empty:
            raise UserError(f"run {label} has no records of model {model!r} (it has {', '.join(models)})")
    elif len(models) > 1:
        raise FieldError(f"model_{label.lower()}", f"run {label} holds several models ({', '.join(models)}); choose one with {{name}}")
    if context_mode is not None:
        df = df[df["context_mode"] == context_mode]
        if df.empty:
            raise UserError(f"run {label} has no records in context mode {context_mode!r}")
    if df.empty:
        raise UserError(f"run {label} has no records to compare")
    per_window = window_metrics(df, metrics, manifest.vocab_sizes, manifest.temperatures)
    table = per_window.rename(columns={"n": "tokens", "nll": "loss"})
    table["text_sha256"] = table["text_id"].map(manifest.text_sha256)
    duplicated = table.duplicated(KEY, keep=False)
    if duplicated.any():
        modes = sorted(df["context_mode"].unique())
        raise FieldError(f"context_mode_{label.lower()}", f"run {label} scored the same span in several windows (context modes {', '.join(modes)}); choose one with {{name}}")
    return table


def finite_losses(pairing: Pairing) -> tuple[pd.DataFrame, list[dict]]:
    """Paired windows whose loss is finite in both arms, and the others as {a, b, nan_in} rows."""
    p = pairing.paired
    bad_a, bad_b = ~np.isfinite(p["loss_a"].to_numpy(dtype=float)), ~np.isfinite(p["loss_b"].to_numpy(dtype=float))
    bad = bad_a | bad_b
    excluded = [
        {"a": a, "b": b, "nan_in": "A and B" if in_a and in_b else ("A" if in_a else "B")}
        for a, b, in_a, in_b in zip(p["window_id_a"][bad], p["window_id_b"][bad], bad_a[bad], bad_b[bad])
    ]
    return p[~bad], excluded


def nan_error(excluded: list[dict]) -> UserError:
    """The one-line error of `--nan-windows error`, naming the windows."""
    shown = ", ".join(window_label(w) for w in excluded[:10])
    more = f" and {len(excluded) - 10} more" if len(excluded) > 10 else ""
    return FieldError("nan_windows", f"{len(excluded)} paired windows have a NaN loss ({shown}{more}); pass {{name}} exclude to leave them out (they are listed in the report)")


def build_report(
    pairing: Pairing,
    runs: tuple[str, str],
    replicates: int,
    seed: int,
    cluster_by_text: bool | None,
    rank_scores: list[str],
    nan_windows: str = "exclude",
    resample: str = "windows",
    minima: tuple[int | None, int | None] = (None, None),
) -> dict:
    """All numbers of a paired comparison of arm B against arm A, over the paired windows whose
    loss is finite in both arms (`nan_windows="error"` refuses any other). `cluster_by_text`
    None resamples whole documents when at least MIN_CLUSTERS are compared, windows otherwise;
    `resample` picks the bootstrap scheme (stats/paired.py); `minima` are the compared windows
    and tokens each arm must hold, recorded in `coverage`."""
    p, excluded = finite_losses(pairing)
    if excluded and nan_windows == "error":
        raise nan_error(excluded)
    if p.empty:
        raise UserError(f"no paired window has a finite loss in both runs ({len(excluded)} have a NaN loss)")
    n_documents = int(p["text_sha256"].nunique())
    by_text, unit_reason, unit_warning = resampling_unit(n_documents, cluster_by_text)
    tokens = p["tokens_a"].to_numpy(dtype=float)
    delta = p["loss_b"].to_numpy() - p["loss_a"].to_numpy()
    clusters = p["text_sha256"].to_numpy() if by_text else None
    primary = paired_bca(delta, tokens, replicates, seed, clusters=clusters, resample=resample)
    halves = _halves(p["position_a"].to_numpy(), pairing.n_a)
    report = {
        "runs": {"a": runs[0], "b": runs[1]},
        "primary_metric": {
            "kind": "ppl_ratio",
            "definition": "exp(sum_i t_i (loss_i(B) - loss_i(A)) / sum_i t_i), loss = mean per-token NLL of window i, t_i = its tokens",
            **ratio_rows(primary),
            "preview": math.exp(weighted_mean(p["loss_a"].to_numpy(), tokens)),
            "final": math.exp(weighted_mean(p["loss_b"].to_numpy(), tokens)),
            "drift": {name: _half(delta[s], tokens[s], replicates, seed, clusters[s] if clusters is not None else None, resample) for name, s in halves.items()},
        },
        "secondary_metrics": {
            name: _difference(p[f"{name}_b"].to_numpy() - p[f"{name}_a"].to_numpy(), tokens, replicates, seed, clusters, resample)
            for name in rank_scores
        },
        "dataset": {"windows": {"stats": {
            **_pairing_stats(pairing, len(p), n_documents, excluded, nan_windows),
            "paired_delta_summary": _delta_summary(delta, primary),
            "bootstrap": _bootstrap_facts(primary, replicates, seed, by_text, unit_reason, unit_warning),
            "coverage": {
                "preview": arm_coverage(pairing.n_a, pairing.tokens_a, len(p), int(p["tokens_a"].sum()), minima),
                "final": arm_coverage(pairing.n_b, pairing.tokens_b, len(p), int(p["tokens_b"].sum()), minima),
            },
        }}},
    }
    violations = check_invariants(report, delta)
    report["invariants"] = {"holds": not violations, "violations": violations}
    return report


def _pairing_stats(pairing: Pairing, compared_windows: int, compared_documents: int, excluded: list[dict], nan_windows: str) -> dict:
    """How the two runs' windows paired, and which paired windows the comparison left out."""
    return {
        "window_match_fraction": pairing.match_fraction,
        "window_overlap_fraction": pairing.overlap_fraction,
        "paired_windows": len(pairing.paired),
        "compared_windows": compared_windows,
        "paired_documents": int(pairing.paired["text_sha256"].nunique()),
        "compared_documents": compared_documents,
        "documents_a": pairing.n_documents_a,
        "documents_b": pairing.n_documents_b,
        "windows_a": pairing.n_a,
        "windows_b": pairing.n_b,
        "window_ids_equal_fraction": pairing.ids_equal_fraction,
        "token_count_mismatches": pairing.token_mismatches,
        "excluded_windows": {"policy": nan_windows, "reason": _NAN_REASON, "count": len(excluded), "windows": excluded},
    }


def _delta_summary(delta: np.ndarray, primary: PairedEstimate) -> dict:
    """The paired differences' mean and spread beside the interval drawn from them."""
    return {
        "mean": float(np.mean(delta)),
        "std": float(delta.std(ddof=1)) if len(delta) > 1 else 0.0,
        "degenerate": bool(primary.degenerate),
        "interval": primary.interval,
        "reason": primary.reason or None,
    }


def _bootstrap_facts(primary: PairedEstimate, replicates: int, seed: int, by_text: bool, unit_reason: str, unit_warning: str | None) -> dict:
    """What reproduces the primary interval: the bootstrap's settings, its unit and why, and BCa's corrections."""
    return {
        "replicates": replicates,
        "seed": seed,
        "method": primary.method,
        "resample": primary.resample,
        "resampling_unit": "text" if by_text else "window",
        "resampling_units": primary.units,
        "min_clusters": MIN_CLUSTERS,
        "unit_reason": unit_reason,
        "warning": unit_warning,
        "confidence": primary.confidence,
        "z0": primary.z0,
        "acceleration": primary.acceleration,
    }


def by_length(a: pd.DataFrame, b: pd.DataFrame, runs: tuple[str, str], replicates: int, seed: int, cluster_by_text: bool | None,
              rank_scores: list[str], resample: str = "windows") -> list[dict]:
    """Per nominal length (a sweep's context lengths; a score run's window) the perplexity ratio
    B/A over that length's paired windows of window tables `a` and `b`, with its interval: the
    same report as the whole comparison's, on those windows only."""
    rows = []
    for length in sorted(a["nominal_len"].unique()):
        part = pair_windows(a[a["nominal_len"] == length], b[b["nominal_len"] == length])
        if part.paired.empty:
            continue
        pm = build_report(part, runs, replicates, seed, cluster_by_text, rank_scores, resample=resample)["primary_metric"]
        rows.append({"nominal_len": int(length), "windows": len(part.paired), "ratio": pm["ratio"], "delta_log_nll": pm["delta_log_nll"]})
    return rows


def paired_ids(pairing: Pairing) -> list[dict]:
    """The windows a comparison paired, as {a, b} window ids in A's order: what ties its numbers
    to each arm's tokens (the report's per-token A − B)."""
    p = pairing.paired
    return [{"a": a, "b": b} for a, b in zip(p["window_id_a"], p["window_id_b"])]


def arm_coverage(windows: int, tokens: int, compared_windows: int, compared_tokens: int, minima: tuple[int | None, int | None]) -> dict:
    """One arm's windows and tokens (in its run, and compared) against the minima: None when
    no minimum is set."""
    min_windows, min_tokens = minima
    met = None
    if min_windows is not None or min_tokens is not None:
        met = compared_windows >= (min_windows or 0) and compared_tokens >= (min_tokens or 0)
    return {
        "windows": windows,
        "tokens": tokens,
        "compared_windows": compared_windows,
        "compared_tokens": compared_tokens,
        "min_windows": min_windows,
        "min_tokens": min_tokens,
        "minima_met": met,
    }


def _halves(position_a: np.ndarray, n_a: int) -> dict[str, np.ndarray]:
    """Masks of the paired windows in the first floor(n/2) and the rest of A's run order: a
    drift check (in a sweep, short against long contexts)."""
    first = position_a < n_a // 2
    return {"first_half": first, "second_half": ~first}


def _half(delta: np.ndarray, tokens: np.ndarray, replicates: int, seed: int, clusters, resample: str) -> dict | None:
    if len(delta) == 0:
        return None
    if clusters is not None and len(np.unique(clusters)) < MIN_CLUSTERS:
        clusters = None  # the half holds too few documents to resample them
    est = paired_bca(delta, tokens, replicates, seed, clusters=clusters, resample=resample)
    rows = ratio_rows(est)
    check_ratio_invariants(rows)
    return rows | {"windows": len(delta)}


def _difference(delta: np.ndarray, tokens: np.ndarray, replicates: int, seed: int, clusters, resample: str) -> dict:
    est = paired_bca(delta, tokens, replicates, seed, clusters=clusters, resample=resample)
    return {"difference": paired_row(est), "definition": "token-weighted mean score of B minus that of A"}


def check_invariants(report: dict, delta: np.ndarray) -> list[str]:
    """The runtime contract of the paired-evaluation note. Returns the data's violations
    (pairing below 1.0, overlapping windows), in every profile; raises AssertionError on a
    violation only a bug can cause (`stats.gates.check_ratio_invariants`: the ratio's interval
    not exp(the log interval), a degenerate interval not collapsed to [mean, mean], the estimate
    outside its interval, a zero-width interval for none).
    "Equal" is within float rounding: the token-weighted mean of 0.7 may be 0.6999999999999998."""
    pm = report["primary_metric"]
    stats = report["dataset"]["windows"]["stats"]
    summary = stats["paired_delta_summary"]
    if summary["degenerate"] != (len(delta) > 1 and all_equal(delta)):
        raise AssertionError("degenerate must mean that all paired differences are equal")
    check_ratio_invariants(pm)
    log = pm["delta_log_nll"]
    if summary["degenerate"] and not (log["low"] == log["high"] == log["estimate"] and all_equal([log["estimate"], summary["mean"]])):
        raise AssertionError("degenerate deltas must collapse the interval to [mean, mean]")
    violations = []
    if stats["window_match_fraction"] != 1.0:
        violations.append(f"window_match_fraction is {stats['window_match_fraction']:.4f}, not 1.0 ({stats['paired_windows']} of {stats['windows_a']} / {stats['windows_b']} windows paired)")
    if stats["window_overlap_fraction"] != 0.0:
        violations.append(f"window_overlap_fraction is {stats['window_overlap_fraction']:.4f}, not 0.0 (paired windows share scored text)")
    return violations


def comparison_result(report: dict, out: Path) -> Comparison:
    """The comparison a report makes, and the failures its gates recorded (render/ adds its Markdown)."""
    return Comparison(report, Path(out), list(report["gates"]["failures"]))
