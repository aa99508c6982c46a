"""The `comparison` result of `ctxeval compare`: compare.json (the paired report) and compare.md."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxeval.results.base import Result
from ctxeval.results.io import Json, Text, derived, folder
from ctxeval.stats.interval import Interval

COMPARE_JSON = "compare.json"
COMPARE_MD = "compare.md"


def gate_failures(found: dict) -> list[str]:
    """Why a report's gates failed, as its JSON lists them (empty: passed)."""
    return list(found["report"]["gates"]["failures"])


@dataclass
class Comparison(Result):
    """A paired comparison: the report, where it was written, and why a profile failed it."""

    KIND = "comparison"
    VERSION = 2
    READS = (1,)  # before 2 an interval was its bounds alone (`ci`, `display_ci`; `migrate`)
    FILES = (Json(COMPARE_JSON, "report", default=float), Text(COMPARE_MD, "markdown"))

    report: dict
    out: Path = folder()
    failures: list[str] = derived(gate_failures)
    markdown: str = ""  # what compare.md holds

    @classmethod
    def migrate(cls, found: dict[str, Any], version: int, folder: Path) -> dict[str, Any]:
        """Version 1 of a comparison of two scoring runs: the perplexity ratio's interval as its
        bounds alone, on the log scale (`ci`) and exponentiated (`display_ci`; a length's only
        that), a rank score's as `ci`, at the level and by the method its bootstrap names; here as
        the rows this version writes (no standard error: version 1 kept none). A half's or a
        length's interval rests on its windows where the comparison resampled windows; where it
        resampled documents, n is 0 (version 1 did not count a part's documents) and the method
        the whole comparison's. A length's reason, which version 1 did not keep, is null. A
        comparison of per-sample runs wrote rows already."""
        report = found["report"]
        if report.get("kind") == "samples":
            return found
        stats = report["dataset"]["windows"]["stats"]
        boot, summary, old = stats["bootstrap"], stats["paired_delta_summary"], report["primary_metric"]
        level = {"confidence": float(boot["confidence"]), "method": boot["method"]}
        by_windows = boot["resampling_unit"] == "window"

        def part(windows: int) -> dict:
            return level | {"n": windows if by_windows else 0}

        whole = level | {"n": boot["resampling_units"]}
        status = _status(old["interval"], summary["degenerate"], summary["reason"])
        primary = _ratio_rows(old["delta_log_nll"], old["ci"], old["ratio"], old["display_ci"], status, whole)
        drift = {name: None if h is None else _ratio_rows(math.log(h["ratio"]), h["ci"], h["ratio"], h["display_ci"], _status(h["interval"], h["degenerate"], h["reason"]),
                                                          part(h["windows"])) | {"windows": h["windows"]}
                 for name, h in old["drift"].items()}
        report["primary_metric"] = {"kind": old["kind"], "definition": old["definition"], **primary, "preview": old["preview"], "final": old["final"], "drift": drift}
        report["secondary_metrics"] = {
            name: {"difference": _interval(m["difference"], m["ci"], m["reason"], whole).to_row() | _status(m["interval"], m["degenerate"], m["reason"]),
                   "definition": m["definition"]}
            for name, m in report["secondary_metrics"].items()}
        report["by_length"] = [{"nominal_len": r["nominal_len"], "windows": r["windows"], **_length_rows(r, part(r["windows"]))} for r in report["by_length"]]
        return found


def _interval(estimate: float, bounds: list[float] | None, reason: str | None, facts: dict) -> Interval:
    """A version-1 interval (`bounds` None: none) at the confidence, by the method and on the n
    of `facts`."""
    low, high = bounds or (math.nan, math.nan)
    return Interval(estimate, low, high, math.nan, int(facts["n"]), float(facts["confidence"]), facts["method"], reason or "")


def _status(interval: str, degenerate: bool, reason: str | None) -> dict:
    """How a version-1 interval came out, as `stats.gates.paired_row` writes it beside the row."""
    return {"interval": interval, "degenerate": degenerate, "reason": reason or None}


def _ratio_rows(log: float, log_bounds: list[float] | None, ratio: float, bounds: list[float] | None, status: dict, facts: dict) -> dict:
    """A version-1 perplexity ratio on both scales as `stats.gates.ratio_rows` writes it."""
    return {"ratio": _interval(ratio, bounds, status["reason"], facts).to_row(),
            "delta_log_nll": _interval(log, log_bounds, status["reason"], facts).to_row() | status}


def _length_rows(old: dict, facts: dict) -> dict:
    """A version-1 length's ratio (its exponentiated bounds alone) as both rows; whether its
    interval was none, degenerate or BCa read from its bounds."""
    bounds = old["display_ci"]
    interval = "none" if bounds is None else ("degenerate" if bounds[0] == bounds[1] else "bca")
    log_bounds = None if bounds is None else [math.log(b) for b in bounds]
    return _ratio_rows(math.log(old["ratio"]), log_bounds, old["ratio"], bounds, _status(interval, interval == "degenerate", None), facts)


def window_label(window: dict) -> str:
    """A paired window as the report names it: its id, or both arms' ids where they differ."""
    return window["a"] if window["a"] == window["b"] else f"{window['a']}/{window['b']}"
