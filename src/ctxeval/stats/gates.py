"""The ci/release gates of a paired comparison, the choice of its resampling unit and how a
paired estimate and a perplexity ratio are written (its interval's rows and their runtime
contract): statistics that `compare` and `diff` both apply (paper 001's release gates), kept
apart from rendering."""

from __future__ import annotations

import math

from ctxeval.stats.defaults import FEW_CLUSTERS, MIN_CLUSTERS, RELIABLE_CLUSTERS
from ctxeval.stats.interval import Interval
from ctxeval.stats.paired import PairedEstimate, all_equal

PROFILES = {"dev": None, "ci": {"min_windows": 20, "min_tokens": 2000}, "release": {"min_windows": 100, "min_tokens": 20000}}


def resolve_minima(profile: str, min_windows: int | None, min_tokens: int | None) -> tuple[int | None, int | None]:
    """The minimum compared windows and tokens each arm must hold: the profile's, or the
    overrides; in dev only the overrides (None: no minimum)."""
    limits = PROFILES[profile] or {}
    return (limits.get("min_windows") if min_windows is None else min_windows, limits.get("min_tokens") if min_tokens is None else min_tokens)


def resampling_unit(n_documents: int, cluster_by_text: bool | None) -> tuple[bool, str, str | None]:
    """Whether to resample whole documents, the reason (a sentence) and a warning when the
    interval is known to under-cover. By default documents are resampled from MIN_CLUSTERS
    documents on, windows below (a bootstrap over 2 documents reports the two document means)."""
    dependent = "windows of one document are not independent: if the documents differ, this interval is too narrow"
    few = FEW_CLUSTERS
    if cluster_by_text is None:
        if n_documents == 1:
            return False, "one document: windows are resampled", None
        if n_documents < MIN_CLUSTERS:
            return False, f"only {n_documents} documents are compared, fewer than the {MIN_CLUSTERS} a cluster bootstrap needs, so windows are resampled", dependent
        return True, f"{n_documents} documents are compared (at least {MIN_CLUSTERS}): whole documents are resampled", few if n_documents < RELIABLE_CLUSTERS else None
    if cluster_by_text:
        return True, "documents are resampled as requested (--cluster-by-text)", few if n_documents < RELIABLE_CLUSTERS else None
    return False, "windows are resampled as requested (--no-cluster-by-text)", dependent if n_documents > 1 else None


def _status(estimate: PairedEstimate) -> dict:
    """How an interval came out: "bca", "degenerate" (all window means equal, collapsed to
    the point) or "none" (no interval, and why)."""
    return {"interval": estimate.interval, "degenerate": estimate.degenerate, "reason": estimate.reason or None}


def paired_row(estimate: PairedEstimate) -> dict:
    """A paired estimate as compare.json and diff.json write it: its interval's row and how the
    interval came out."""
    return estimate.to_row() | _status(estimate)


def exponentiated(estimate: Interval) -> Interval:
    """The interval of a mean log-ratio as the ratio: estimate and bounds exponentiated, at the
    same level and by the same method (no standard error on that scale)."""
    return Interval(math.exp(estimate.estimate), math.exp(estimate.low), math.exp(estimate.high), math.nan, estimate.n, estimate.confidence,
                    estimate.method, estimate.reason)


def ratio_rows(estimate: PairedEstimate) -> dict:
    """A perplexity ratio from its mean log-ratio `estimate`: the interval exponentiated
    (`ratio`) and on the log scale (`delta_log_nll`, with how it came out)."""
    return {"ratio": exponentiated(estimate).to_row(), "delta_log_nll": paired_row(estimate)}


def check_ratio_invariants(ratio: dict) -> None:
    """The paired-evaluation note's runtime contract on `ratio_rows`' two rows; a violation is a
    bug. No interval is null bounds, never a zero-width one."""
    log, shown = ratio["delta_log_nll"], ratio["ratio"]
    if (log["low"] is None) != (log["interval"] == "none") or (shown["low"] is None) != (log["low"] is None):
        raise AssertionError("an estimate without an interval must have no bounds on either scale")
    if log["low"] is None:
        return
    for key in ("estimate", "low", "high"):
        if not math.isclose(math.exp(log[key]), shown[key], rel_tol=1e-12):
            raise AssertionError("the ratio's interval != exp(the log interval)")
    if log["degenerate"] and not (log["low"] == log["high"] and all_equal([log["low"], log["estimate"]])):
        raise AssertionError("degenerate deltas must collapse the interval")
    if not log["low"] <= log["estimate"] <= log["high"]:
        raise AssertionError("the point estimate lies outside its interval")


def gate(report: dict, profile: str, max_ratio: float | None) -> list[str]:
    """Reasons a ci/release comparison fails (empty: it passes). `dev` gates only on --max-ratio.

    The paired-evaluation note's gates: pairing 1.0, no overlap, and the two arms (preview = A,
    final = B) holding the same number of windows; plus equal token counts, no excluded window,
    and each arm's compared windows/tokens at the minima recorded in `coverage`."""
    stats = report["dataset"]["windows"]["stats"]
    failures = []
    if PROFILES[profile] is not None:
        if stats["window_match_fraction"] < 1.0:
            failures.append(f"pairing is {stats['window_match_fraction']:.3f} < 1.0 ({stats['paired_windows']} of {stats['windows_a']} / {stats['windows_b']} windows paired)")
        if stats["token_count_mismatches"]:
            failures.append(f"token counts differ in {stats['token_count_mismatches']} paired windows")
        if stats["window_overlap_fraction"] > 0:
            failures.append(f"windows overlap (overlap fraction {stats['window_overlap_fraction']:.3f})")
        if stats["excluded_windows"]["count"]:
            failures.append(f"{stats['excluded_windows']['count']} paired windows were excluded for a NaN loss")
        preview, final = stats["coverage"]["preview"], stats["coverage"]["final"]
        if preview["windows"] != final["windows"]:
            failures.append(f"preview/final window counts differ: A has {preview['windows']} windows, B has {final['windows']}")
        for arm, cov in (("preview (A)", preview), ("final (B)", final)):
            if not cov["minima_met"]:
                failures.append(f"{arm}: {cov['compared_windows']} windows / {cov['compared_tokens']} tokens compared, below the minimum of {cov['min_windows']} / {cov['min_tokens']}")
    ratio = report["primary_metric"]["ratio"]
    if max_ratio is not None and ratio["high"] is None:
        failures.append(f"--max-ratio {max_ratio:g} cannot be checked: {ratio['reason']}")
    elif max_ratio is not None and ratio["high"] > max_ratio:
        failures.append(f"upper CI bound of the perplexity ratio {ratio['high']:.4f} exceeds --max-ratio {max_ratio:g}")
    return failures


def diff_gate(summary: dict, profile: str, max_kl: float | None, min_same_top: float | None,
         min_windows: int | None = None, min_tokens: int | None = None) -> list[str]:
    """Reasons a diff fails its gates (empty: it passes), judged on all tokens by the interval
    bound on the unfavourable side: the upper bound of mean KL against `max_kl`, the lower bound
    of same-top-1 % against `min_same_top`. ci/release also need their minimum windows/tokens."""
    overall = summary["all"]
    failures = []
    limits = PROFILES[profile]
    if limits is not None:
        min_windows = limits["min_windows"] if min_windows is None else min_windows
        min_tokens = limits["min_tokens"] if min_tokens is None else min_tokens
        if overall["windows"] < min_windows or overall["tokens"] < min_tokens:
            failures.append(f"{overall['windows']} windows / {overall['tokens']} tokens compared, below the minimum of {min_windows} / {min_tokens}")
    for flag, limit, metric in (("--max-kl", max_kl, "kl"), ("--min-same-top", min_same_top, "same_top1")):
        if limit is not None and overall[metric]["low"] is None:
            failures.append(f"{flag} {limit:g} cannot be checked: {overall[metric]['reason']}")
    if max_kl is not None and overall["kl"]["high"] is not None and overall["kl"]["high"] > max_kl:
        failures.append(f"upper CI bound of the mean KL {overall['kl']['high']:.6f} exceeds --max-kl {max_kl:g}")
    if min_same_top is not None and overall["same_top1"]["low"] is not None and overall["same_top1"]["low"] < min_same_top:
        failures.append(f"lower CI bound of same-top-1 {overall['same_top1']['low']:.2f} % is below --min-same-top {min_same_top:g} %")
    return failures
