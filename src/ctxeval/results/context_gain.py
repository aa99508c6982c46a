"""The `context-gain` result: summary.json, gain_by_distance.csv, context_gain.md and the plot.

It holds, beside what those files say, the run's records and, per (model, text), the gain
table with each target's key-token flag and the evaluator's key spans per text: what the
explorer pages through and `diff --key-tokens` maps onto its own tokens, so no reader
recomputes the key tokens from the records by itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from ctxeval.metrics.gain import LONG_METHOD, key_tables
from ctxeval.results.base import Result
from ctxeval.results.manifest import Manifest, read_manifest
from ctxeval.results.records import read_records
from ctxeval.results.rows import frame

SUMMARY_JSON = "summary.json"
DISTANCE_CSV = "gain_by_distance.csv"
REPORT_MD = "context_gain.md"
PLOT_FILE = "context_gain.png"


@dataclass
class ContextGainResult(Result):
    """A finished context-gain run: per (model, text) summaries and the gain-by-distance table."""

    KIND: ClassVar[str] = "context-gain"
    VERSION: ClassVar[int] = 1
    FILES: ClassVar[tuple[str, ...]] = (SUMMARY_JSON, DISTANCE_CSV, REPORT_MD, PLOT_FILE)

    run_dir: Path
    manifest: Manifest
    records: pd.DataFrame = field(repr=False)  # the run's records, as loaded where the result was built
    summary: dict  # what summary.json holds
    by_distance: pd.DataFrame
    tables: dict[tuple[str, str], pd.DataFrame] = field(repr=False)  # (model, text) -> gain table with `key`
    key_spans: dict[str, np.ndarray] = field(repr=False)  # text -> the evaluator's key-token character spans
    markdown: str = ""  # what context_gain.md holds

    @property
    def key_tokens(self) -> dict[str, Any]:
        """How the key tokens were picked: evaluator, alpha, beta (and the rule, in words)."""
        return self.summary["key_tokens"]

    def long_rows(self, model: str, text_id: str) -> pd.DataFrame:
        """The records of one model and text scored with the full context, in target order."""
        r = self.records
        return r[(r["model"] == model) & (r["text_id"] == text_id) & (r["method"] == LONG_METHOD)].sort_values("target_pos", kind="stable")

    def paths(self) -> dict[str, Path]:
        """What the run wrote beside its records, by role."""
        d = self.run_dir
        return {"summary": d / SUMMARY_JSON, "report": d / REPORT_MD, "plot": d / PLOT_FILE, "by_distance": d / DISTANCE_CSV}

    def to_json(self) -> dict[str, Any]:
        return self.summary

    @classmethod
    def from_json(cls, data: dict[str, Any], run_dir: Path, manifest: Manifest, records: pd.DataFrame) -> ContextGainResult:
        """The result summary.json describes, around the run's manifest and records."""
        rule = data["key_tokens"]
        tables, spans = key_tables(records, data["models"], list(data["texts"]), rule["evaluator"], rule["alpha"], rule["beta"])
        by_distance = frame(data["gain_by_distance"])
        return cls(Path(run_dir), manifest, records, data, by_distance, tables, spans)

    def write_files(self, out: Path) -> None:
        (out / SUMMARY_JSON).write_text(json.dumps(self.summary, indent=2))
        self.by_distance.to_csv(out / DISTANCE_CSV, index=False)
        (out / REPORT_MD).write_text(self.markdown)

    @classmethod
    def read_files(cls, out: Path, version: int) -> ContextGainResult:
        out = Path(out)
        result = cls.from_json(json.loads((out / SUMMARY_JSON).read_text()), out, read_manifest(out), read_records(out))
        return replace(result, by_distance=pd.read_csv(out / DISTANCE_CSV), markdown=(out / REPORT_MD).read_text())
