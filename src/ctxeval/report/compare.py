"""The paired-comparison report (`compare.json`, `compare.md`): fields of the paired-evaluation
note, invariants checked on write, and the gates of the ci/release profiles."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from ctxeval.config import MetricConfig
from ctxeval.errors import UserError
from ctxeval.pipeline.manifest import Manifest
from ctxeval.pairing import KEY, Pairing
from ctxeval.report.summary import window_metrics
from ctxeval.stats.paired import paired_bca, weighted_mean

PROFILES = {"dev": None, "ci": {"min_windows": 20, "min_tokens": 2000}, "release": {"min_windows": 100, "min_tokens": 20000}}


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
        raise UserError(f"run {label} holds several models ({', '.join(models)}); choose one with --model-{label.lower()}")
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
        raise UserError(f"run {label} scored the same span in several windows (context modes {', '.join(modes)}); choose one with --context-mode-{label.lower()}")
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
    shown = ", ".join(_label(w) for w in excluded[:10])
    more = f" and {len(excluded) - 10} more" if len(excluded) > 10 else ""
    return UserError(f"{len(excluded)} paired windows have a NaN loss ({shown}{more}); pass --nan-windows exclude to leave them out (they are listed in the report)")


def _label(window: dict) -> str:
    return window["a"] if window["a"] == window["b"] else f"{window['a']}/{window['b']}"


def build_report(pairing: Pairing, runs: tuple[str, str], replicates: int, seed: int, cluster_by_text: bool | None, rank_scores: list[str], nan_windows: str = "exclude") -> dict:
    """All numbers of a paired comparison of arm B against arm A, over the paired windows whose
    loss is finite in both arms (`nan_windows="error"` refuses any other). `cluster_by_text`
    None resamples whole documents when more than one is compared (windows of one document
    are not independent), windows otherwise."""
    p, excluded = finite_losses(pairing)
    if excluded and nan_windows == "error":
        raise nan_error(excluded)
    if p.empty:
        raise UserError(f"no paired window has a finite loss in both runs ({len(excluded)} have a NaN loss)")
    n_documents = int(p["text_sha256"].nunique())
    if cluster_by_text is None:
        cluster_by_text = n_documents > 1
    tokens = p["tokens_a"].to_numpy(dtype=float)
    delta = p["loss_b"].to_numpy() - p["loss_a"].to_numpy()
    clusters = p["text_sha256"].to_numpy() if cluster_by_text else None
    primary = paired_bca(delta, tokens, replicates, seed, clusters=clusters)
    halves = _halves(p["position_a"].to_numpy(), pairing.n_a)
    report = {
        "runs": {"a": runs[0], "b": runs[1]},
        "primary_metric": {
            "kind": "ppl_ratio",
            "definition": "exp(sum_i t_i (loss_i(B) - loss_i(A)) / sum_i t_i), loss = mean per-token NLL of window i, t_i = its tokens",
            "ratio": math.exp(primary.estimate),
            "ci": [primary.low, primary.high],
            "display_ci": [math.exp(primary.low), math.exp(primary.high)],
            "delta_log_nll": primary.estimate,
            "ppl_a": math.exp(weighted_mean(p["loss_a"].to_numpy(), tokens)),
            "ppl_b": math.exp(weighted_mean(p["loss_b"].to_numpy(), tokens)),
            **{name: _half(delta[s], tokens[s], replicates, seed, clusters[s] if clusters is not None else None) for name, s in halves.items()},
        },
        "secondary_metrics": {
            name: _difference(p[f"{name}_b"].to_numpy() - p[f"{name}_a"].to_numpy(), tokens, replicates, seed, clusters)
            for name in rank_scores
        },
        "dataset": {
            "windows": {
                "stats": {
                    "window_match_fraction": pairing.match_fraction,
                    "window_overlap_fraction": pairing.overlap_fraction,
                    "paired_windows": len(pairing.paired),
                    "compared_windows": len(p),
                    "paired_documents": int(pairing.paired["text_sha256"].nunique()),
                    "compared_documents": n_documents,
                    "documents_a": pairing.n_documents_a,
                    "documents_b": pairing.n_documents_b,
                    "windows_a": pairing.n_a,
                    "windows_b": pairing.n_b,
                    "window_ids_equal_fraction": pairing.ids_equal_fraction,
                    "token_count_mismatches": pairing.token_mismatches,
                    "excluded_windows": {"policy": nan_windows, "reason": _NAN_REASON, "count": len(excluded), "windows": excluded},
                    "paired_delta_summary": {
                        "mean": float(delta.mean()),
                        "std": float(delta.std(ddof=1)) if len(delta) > 1 else 0.0,
                        "degenerate": bool(primary.degenerate),
                        "reason": primary.reason,
                    },
                    "bootstrap": {
                        "replicates": replicates,
                        "seed": seed,
                        "method": primary.method,
                        "resampling_unit": "text" if cluster_by_text else "window",
                        "confidence": primary.confidence,
                        "z0": primary.z0,
                        "acceleration": primary.acceleration,
                    },
                    "coverage": {
                        name: {"windows": int(s.sum()), "tokens": int(tokens[s].sum()), "windows_a": arm_counts(pairing.n_a)[name], "windows_b": arm_counts(pairing.n_b)[name]}
                        for name, s in halves.items()
                    },
                }
            }
        },
    }
    check_invariants(report)
    return report


def arm_counts(n: int) -> dict[str, int]:
    """Windows of one run in its preview (first floor(n/2) in run order) and final half."""
    return {"preview": n // 2, "final": n - n // 2}


def _halves(position_a: np.ndarray, n_a: int) -> dict[str, np.ndarray]:
    """Masks of the paired windows in A's preview and final halves; they exist to show drift."""
    preview = position_a < arm_counts(n_a)["preview"]
    return {"preview": preview, "final": ~preview}


def _half(delta: np.ndarray, tokens: np.ndarray, replicates: int, seed: int, clusters) -> dict | None:
    if len(delta) == 0:
        return None
    if clusters is not None and len(np.unique(clusters)) < 2:
        clusters = None
    est = paired_bca(delta, tokens, replicates, seed, clusters=clusters)
    return {"ratio": math.exp(est.estimate), "ci": [est.low, est.high], "display_ci": [math.exp(est.low), math.exp(est.high)], "windows": len(delta), "degenerate": est.degenerate}


def _difference(delta: np.ndarray, tokens: np.ndarray, replicates: int, seed: int, clusters) -> dict:
    est = paired_bca(delta, tokens, replicates, seed, clusters=clusters)
    return {"difference": est.estimate, "ci": [est.low, est.high], "degenerate": est.degenerate, "definition": "token-weighted mean score of B minus that of A"}


def check_invariants(report: dict) -> None:
    """The runtime contract of the paired-evaluation note; a violation is a bug."""
    pm = report["primary_metric"]
    for log_bound, shown in zip(pm["ci"], pm["display_ci"]):
        if not math.isclose(math.exp(log_bound), shown, rel_tol=1e-12):
            raise AssertionError("display_ci != exp(ci)")
    summary = report["dataset"]["windows"]["stats"]["paired_delta_summary"]
    if summary["degenerate"] and pm["ci"][0] != pm["ci"][1]:
        raise AssertionError("degenerate deltas must collapse the interval")
    if not pm["ci"][0] <= pm["delta_log_nll"] <= pm["ci"][1]:
        raise AssertionError("the point estimate lies outside its interval")


def gate(report: dict, profile: str, min_windows: int | None, min_tokens: int | None, max_ratio: float | None) -> list[str]:
    """Reasons a ci/release comparison fails (empty: it passes). `dev` gates only on --max-ratio.

    The paired-evaluation note's gates: pairing 1.0, no overlap, and A and B holding the same
    number of windows in each of the preview and final halves (the halves may differ by one)."""
    stats = report["dataset"]["windows"]["stats"]
    failures = []
    limits = PROFILES[profile]
    if limits is not None:
        min_windows = limits["min_windows"] if min_windows is None else min_windows
        min_tokens = limits["min_tokens"] if min_tokens is None else min_tokens
        if stats["window_match_fraction"] < 1.0:
            failures.append(f"pairing is {stats['window_match_fraction']:.3f} < 1.0 ({stats['paired_windows']} of {stats['windows_a']} / {stats['windows_b']} windows paired)")
        if stats["token_count_mismatches"]:
            failures.append(f"token counts differ in {stats['token_count_mismatches']} paired windows")
        if stats["window_overlap_fraction"] > 0:
            failures.append(f"windows overlap (overlap fraction {stats['window_overlap_fraction']:.3f})")
        if stats["excluded_windows"]["count"]:
            failures.append(f"{stats['excluded_windows']['count']} paired windows were excluded for a NaN loss")
        tokens = sum(cov["tokens"] for cov in stats["coverage"].values())
        if stats["compared_windows"] < min_windows or tokens < min_tokens:
            failures.append(f"{stats['compared_windows']} windows / {tokens} tokens compared, below the minimum of {min_windows} / {min_tokens}")
        for half, cov in stats["coverage"].items():
            if cov["windows_a"] != cov["windows_b"]:
                failures.append(f"{half} half: A has {cov['windows_a']} windows, B has {cov['windows_b']}")
            if cov["windows"] < min_windows // 2 or cov["tokens"] < min_tokens // 2:
                failures.append(f"{half} half has {cov['windows']} windows / {cov['tokens']} tokens, below the minimum of {min_windows // 2} / {min_tokens // 2}")
    if max_ratio is not None and report["primary_metric"]["display_ci"][1] > max_ratio:
        failures.append(f"upper CI bound of the perplexity ratio {report['primary_metric']['display_ci'][1]:.4f} exceeds --max-ratio {max_ratio:g}")
    return failures


def write_report(report: dict, out: Path) -> str:
    """Write compare.json and compare.md; returns the Markdown."""
    out.mkdir(parents=True, exist_ok=True)
    markdown = render_markdown(report)
    (out / "compare.json").write_text(json.dumps(report, indent=2, default=float))
    (out / "compare.md").write_text(markdown)
    return markdown


def render_markdown(report: dict) -> str:
    pm = report["primary_metric"]
    st = report["dataset"]["windows"]["stats"]
    bs = st["bootstrap"]
    lines = [
        "# ctxeval paired comparison",
        "",
        f"A: `{report['runs']['a']}`  ",
        f"B: `{report['runs']['b']}`",
        "",
        f"**Perplexity ratio B/A = {pm['ratio']:.4f}**, {100 * bs['confidence']:.0f} % CI [{pm['display_ci'][0]:.4f}, {pm['display_ci'][1]:.4f}] "
        f"(PPL A {pm['ppl_a']:.3f}, B {pm['ppl_b']:.3f}; Δ log-NLL {pm['delta_log_nll']:+.5f}, CI [{pm['ci'][0]:+.5f}, {pm['ci'][1]:+.5f}])",
        "",
        "| half | windows (A / B) | ratio | CI |",
        "|---|---:|---:|---|",
    ]
    for name in ("preview", "final"):
        h = pm[name]
        if h:
            cov = st["coverage"][name]
            lines.append(f"| {name} | {h['windows']} ({cov['windows_a']} / {cov['windows_b']}) | {h['ratio']:.4f} | [{h['display_ci'][0]:.4f}, {h['display_ci'][1]:.4f}] |")
    lines += ["", "| rank score | B − A | CI |", "|---|---:|---|"]
    for name, m in report["secondary_metrics"].items():
        lines.append(f"| {name} | {m['difference']:+.4f} | [{m['ci'][0]:+.4f}, {m['ci'][1]:+.4f}] |")
    lines += [
        "",
        f"Pairing: {st['paired_documents']} documents paired (A {st['documents_a']}, B {st['documents_b']}); "
        f"{st['paired_windows']} windows paired (A {st['windows_a']}, B {st['windows_b']}), {st['compared_windows']} compared; match fraction {st['window_match_fraction']:.3f}, "
        f"overlap fraction {st['window_overlap_fraction']:.3f}, token-count mismatches {st['token_count_mismatches']}.",
        f"Bootstrap: {bs['method']} over {bs['resampling_unit']}s, {bs['replicates']} replicates, seed {bs['seed']}, z0 {bs['z0']}, acceleration {bs['acceleration']}.",
    ]
    excluded = st["excluded_windows"]
    if excluded["count"]:
        ids = ", ".join(f"{_label(w)} (NaN in {w['nan_in']})" for w in excluded["windows"])
        lines.append(f"Excluded: {excluded['count']} paired windows whose {excluded['reason']}: {ids}.")
    if st["paired_delta_summary"]["degenerate"]:
        lines.append(f"Degenerate: {st['paired_delta_summary']['reason']}.")
    return "\n".join(lines) + "\n"

