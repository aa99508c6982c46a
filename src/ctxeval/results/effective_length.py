"""The `effective-length` result: summary.json (each model's curve, gains per doubling and L*),
curve.csv, targets.parquet (every target at every length: its context, log-probability, exact
rank, AVG and key-token flag), effective_length.md and the plot; read back from its folder, the
run's records too (the report's explorer shows them).

It holds the per-model target tables beside the summary, so the report and probe-report read
the curve and L* from here and never rebuild them from the records; `describe_length` gives L*
in words, as the probe report's rows and every page print it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ctxeval.results.base import Result
from ctxeval.results.io import Csv, Figure, Json, Parquet, Text, folder, loaded, written
from ctxeval.results.manifest import Manifest, read_manifest
from ctxeval.results.probe_report import EFFECTIVE_LENGTH
from ctxeval.results.records import RECORDS_FILE, read_records
from ctxeval.stats.defaults import DEFAULT_CONFIDENCE
from ctxeval.stats.interval import Interval, percentile_method

SUMMARY_JSON = "summary.json"
CURVE_CSV = "curve.csv"
TARGETS_FILE = "targets.parquet"
REPORT_MD = "effective_length.md"
PLOT_FILE = "effective_length.png"


def _records_if_written(run_dir: Path) -> pd.DataFrame | None:
    return read_records(run_dir) if (run_dir / RECORDS_FILE).is_file() else None


@dataclass
class EffectiveLengthResult(Result):
    """A finished effective-length run: per model the curve, its gains and L* with intervals."""

    KIND = "effective-length"
    PROBE = (EFFECTIVE_LENGTH,)
    VERSION = 3  # 2: each comparison carries the share of the reference's gain kept; 3: L* and the share kept name their level and method
    READS = (2,)
    FILES = (Json(SUMMARY_JSON, "summary"), Csv(CURVE_CSV, written(lambda r: r.curve)), Parquet(TARGETS_FILE, "targets"), Text(REPORT_MD, "markdown"),
             Figure(PLOT_FILE))

    run_dir: Path = folder()
    manifest: Manifest = loaded(read_manifest)
    summary: dict  # what summary.json holds
    targets: pd.DataFrame = field(repr=False)  # every model's target table (targets.parquet)
    markdown: str = ""  # what effective_length.md holds
    # the run's records (every target at every length, with its top-k), as read from the folder:
    # what the report's explorer pages through (None in the result the task built, and in a
    # folder whose result was saved without the run's records)
    records: pd.DataFrame | None = loaded(_records_if_written, repr=False, compare=False, default=None)

    @property
    def curve(self) -> pd.DataFrame:
        """One row per (model, length): what curve.csv holds."""
        return curve_frame(self.summary)

    @classmethod
    def migrate(cls, found: dict, version: int, folder: Path) -> dict:
        """Version 2: L* and the share kept without their level and method, which its estimator
        settings name (the level, the resampling unit of their percentile bootstrap); the share
        kept without its standard error (none: a percentile interval) and samples (its units)."""
        summary = found["summary"]
        estimator = summary["estimator"]
        named = {"confidence": float(estimator.get("confidence", DEFAULT_CONFIDENCE)), "method": percentile_method(estimator["unit"])}
        for s in summary["models"].values():
            for key in ("effective_length", "key_effective_length"):
                if s.get(key) is not None:
                    s[key] |= named
        for c in summary["comparisons"]:
            c["share_kept"] |= named | {"se": None, "n": c["share_kept"]["units"]}
        return found

    def effective_length(self, model: str) -> dict:
        """L* of `model`: value, interval and flags (`at_least`, `no_gain`)."""
        return self.summary["models"][model]["effective_length"]

    def paths(self) -> dict[str, Path]:
        """What the run wrote beside its records, by role."""
        d = self.run_dir
        return {"summary": d / SUMMARY_JSON, "curve": d / CURVE_CSV, "targets": d / TARGETS_FILE, "report": d / REPORT_MD, "plot": d / PLOT_FILE}

    def probe_rows(self, run: Path) -> dict[str, pd.DataFrame]:
        """Its L* and key-token L* per model."""
        return {EFFECTIVE_LENGTH.key: effective_rows(run, self.summary)}


def curve_frame(summary: dict) -> pd.DataFrame:
    """One row per (model, length): mean log-probability and AVG, the gain over the shortest
    length as the interval `gain` (`gain`, `gain.low`, ..., stats.interval.column), and the key
    tokens' mean log-probability (curve.csv)."""
    rows = []
    for model, s in summary["models"].items():
        for point in s["curve"]:
            gain = (Interval.from_row(point["gain"]) if point["gain"] else
                    Interval(0.0, confidence=float(summary["estimator"].get("confidence", DEFAULT_CONFIDENCE)), reason="the shortest length: no gain over itself"))
            rows.append({"model": model, "length": point["length"], "mean_context": point["mean_context"], "logprob": point["logprob"], "avg": point["avg"],
                         **gain.columns("gain"), "gain_interval": (point["gain"] or {}).get("interval", "none"), "key_logprob": point["key_logprob"]})
    return pd.DataFrame(rows)


def describe_length(e: dict | None) -> str:
    """L* in words: `1024 [512, 2048]`, `≥ 4096`, `no interval`, or `not measurable at this
    size` where the reference's own gain does not exclude 0."""
    if e is None:
        return "no key tokens"
    if e.get("measurable") is False:
        return "not measurable at this size"
    value = f"≥ {e['value']}" if e["at_least"] else (f"≤ {e['value']} (no gain)" if e["no_gain"] else f"{e['value']}")
    if e["interval"] == "none":
        return f"{value}, no interval"
    high = f"≥ {e['high']}" if e.get("high_at_least") else f"{e['high']}"
    return f"{value} [{e['low']}, {high}]"


def effective_rows(run: Path, summary: dict) -> pd.DataFrame:
    """Effective-length rows of an effective-length run: L* and the key-token L* per model."""
    rows = []
    for model, s in summary["models"].items():
        for measure, e in (("effective length", s["effective_length"]), ("key-token effective length", s["key_effective_length"])):
            if e is not None:
                rows.append({"run": str(run), "model": model, "measure": measure, "max_context": s["max_context"], "value": e["value"], "low": e["low"], "high": e["high"],
                             "confidence": e["confidence"], "method": e["method"], "at_least": e["at_least"], "units": f"{e['units']} {e['unit']}s", "text": describe_length(e)})
    return pd.DataFrame(rows)
