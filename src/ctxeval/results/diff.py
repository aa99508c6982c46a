"""The `diff` result of `ctxeval diff`: diff.json (the report), diff.md and report.html.

The run's records (diff_records.parquet), pieces and manifest are not part of it (the engine
writes them; `token_records` reads the records back), nor is the noise floor's own run in `noise_floor/`; the result holds the
manifest, as read where it was built. Its Markdown and page are kept as the text they render
to (render/diff.py and render/diff_page.py render them), so this module imports neither.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from ctxeval.results.base import Result
from ctxeval.results.comparison import gate_failures
from ctxeval.results.io import Json, Text, derived, folder, loaded
from ctxeval.results.manifest import Manifest, read_manifest
from ctxeval.stats.verdict import Verdict, in_the_fields_order

RECORDS_FILE = "diff_records.parquet"  # the run's records (modeldiff/run.py writes them)
DIFF_JSON = "diff.json"
DIFF_MD = "diff.md"
REPORT_HTML = "report.html"


@dataclass
class DiffResult(Result):
    """A finished diff: its directory and manifest, the report (diff.json's content), diff.md,
    report.html, and why its gates failed (empty: passed)."""

    KIND = "diff"
    VERSION = 2
    READS = (1,)  # before 2 a metric's interval was its bounds alone (`ci`, `display_ci`, `kl_ci`; `migrate`)
    FILES = (Json(DIFF_JSON, "report", default=float), Text(DIFF_MD, "markdown"), Text(REPORT_HTML, "html"))

    run_dir: Path = folder()
    manifest: Manifest = loaded(read_manifest)
    report: dict
    markdown: str = ""  # what diff.md holds
    html: str = field(repr=False, default="")  # what report.html holds
    failures: list[str] = derived(gate_failures, default_factory=list)
    # what the page shows, as loaded where the result was built (no files of their own: None when
    # read back, and a result read back equals the one written)
    records: pd.DataFrame | None = field(repr=False, default=None, compare=False)
    pieces: dict[int, str] | None = field(repr=False, default=None, compare=False)  # token id -> text
    key_mask: np.ndarray | None = field(repr=False, default=None, compare=False)  # `--key-tokens`: which records are key tokens
    compressed_mask: np.ndarray | None = field(repr=False, default=None, compare=False)  # a pressed model: which records saw a compressed cache

    @classmethod
    def migrate(cls, found: dict[str, Any], version: int, folder: Path) -> dict[str, Any]:
        """Version 1: each metric's interval as its bounds alone (`ci`; the perplexity ratio's
        also exponentiated, `display_ci`; the noise floor's `kl_ci`), at the level its settings
        name, by the BCa bootstrap over its resampling unit; here as the row every interval writes
        (the verdict's too, an interval inside ±δ read as *within δ* first, as the field does)."""
        report = found["report"]
        confidence = float(report["settings"]["confidence"])
        summary = report["summary"]
        for cells in _cell_lists(summary):
            for cell in cells:
                if cell and cell.get("tokens"):
                    _cell_rows(cell, confidence)
        old = report.get("verdict")
        if old is not None:  # its interval's row at its level and by its method, read in the field's order (stats/verdict.py)
            log = summary["all"]["ppl_ratio"]["delta_log_nll"]
            row = old | {"se": log["se"], "confidence": confidence, "method": log["method"],
                         "outcome": in_the_fields_order(old["outcome"], old["low"], old["high"], old["delta"])}
            report["verdict"] = Verdict.from_row(row).to_row()
        floor = report.get("noise_floor")
        if floor is not None:
            for cell in floor["buckets"]:
                if cell.get("tokens"):
                    _cell_rows(cell, confidence)
            filled = [c for c in floor["buckets"] if c.get("tokens")]
            unit = filled[0]["resampling_unit"] if filled else "window"
            overall = {"resampling_unit": unit, "resampling_units": floor["windows"] if unit == "window" else max(c["documents"] for c in filled)}
            floor["kl"] = _row({"mean": floor["kl_mean"], "ci": floor.pop("kl_ci")}, overall, confidence, "mean")
        return found

    def token_records(self) -> pd.DataFrame:
        """One row per scored token with both models' numbers: the records the result was built
        with, else (a result read back) the run's records file."""
        return self.records if self.records is not None else pq.read_table(self.run_dir / RECORDS_FILE).to_pandas()

    def paths(self) -> dict[str, Path]:
        """The result's files by role."""
        d = self.run_dir
        return {"report": d / DIFF_JSON, "markdown": d / DIFF_MD, "html": d / REPORT_HTML}


def _cell_lists(summary: dict) -> list[list[dict | None]]:
    """Every list of summary cells a version-1 diff.json holds (all tokens and the buckets; the
    key tokens' too; a press's uncompressed targets)."""
    out = [[summary["all"], *summary["buckets"]]]
    if summary.get("key_tokens", {}).get("all"):
        out.append([summary["key_tokens"]["all"], *summary["key_tokens"]["buckets"]])
    if summary.get("compressed"):
        out.append([summary["compressed"]["uncompressed"]])
    return out


def _row(metric: dict, cell: dict, confidence: float, estimate: str, se: float | None = None) -> dict:
    """A version-1 metric (`estimate` its point, `ci` its bounds) as its interval's row, with its
    other fields after it."""
    bounds = metric.pop("ci") or [None, None]
    method = "BCa-cluster" if cell["resampling_unit"] == "document" else "BCa"
    row = {"estimate": metric.pop(estimate), "low": bounds[0], "high": bounds[1], "se": se, "n": int(cell["resampling_units"]),
           "confidence": confidence, "method": method, "reason": metric.pop("reason", None) or ""}
    return row | metric | {"reason": row["reason"] or None}


def _cell_rows(cell: dict, confidence: float) -> None:
    """A version-1 summary cell's metrics rewritten in place as version 2 writes them."""
    cell["kl"] = _row(cell["kl"], cell, confidence, "mean")
    cell["same_top1"] = _row(cell["same_top1"], cell, confidence, "percent")
    cell["delta_p"] = _row(cell["delta_p"], cell, confidence, "mean")
    if "kl_reverse" in cell:
        cell["kl_reverse"] = _row(cell["kl_reverse"], cell, confidence, "mean")
    old = cell["ppl_ratio"]
    shown = old.pop("display_ci") or [None, None]
    units, unit_sd = int(cell["resampling_units"]), old.get("unit_sd")
    se = unit_sd / math.sqrt(units) if unit_sd is not None and units > 0 else None
    ratio = old.pop("ratio")
    log = _row({key: old.pop(key) for key in ("delta_log_nll", "ci", "interval", "degenerate", "reason")}, cell, confidence, "delta_log_nll", se)
    shown = {"estimate": ratio, "low": shown[0], "high": shown[1], "se": None, "n": log["n"], "confidence": confidence, "method": log["method"],
             "reason": log["reason"] or ""}
    cell["ppl_ratio"] = {"ratio": shown, "delta_log_nll": log, **old}
