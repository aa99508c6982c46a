"""The `effective-length` result: summary.json (each model's curve, gains per doubling and L*),
curve.csv, targets.parquet (every target at every length: its context, log-probability, exact
rank, AVG and key-token flag), effective_length.md and the plot.

It holds the per-model target tables beside the summary, so the report and probe-report read
the curve and L* from here and never rebuild them from the records.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from ctxeval.config import MetricConfig
from ctxeval.pipeline.manifest import Manifest, read_manifest
from ctxeval.pipeline.records import read_records
from ctxeval.probes.effective_length import EstimatorSettings, add_avg, mark_key_tokens, summarize, target_table
from ctxeval.probes.effective_length_report import curve_frame, plot_curves, render_markdown
from ctxeval.results.base import Result

SUMMARY_JSON = "summary.json"
CURVE_CSV = "curve.csv"
TARGETS_FILE = "targets.parquet"
REPORT_MD = "effective_length.md"
PLOT_FILE = "effective_length.png"


@dataclass
class EffectiveLengthResult(Result):
    """A finished effective-length run: per model the curve, its gains and L* with intervals."""

    KIND: ClassVar[str] = "effective-length"
    VERSION: ClassVar[int] = 1
    FILES: ClassVar[tuple[str, ...]] = (SUMMARY_JSON, CURVE_CSV, TARGETS_FILE, REPORT_MD, PLOT_FILE)

    run_dir: Path
    manifest: Manifest
    summary: dict  # what summary.json holds
    targets: pd.DataFrame = field(repr=False)  # every model's target table (targets.parquet)
    markdown: str = ""  # what effective_length.md holds

    @property
    def curve(self) -> pd.DataFrame:
        """One row per (model, length): what curve.csv holds."""
        return curve_frame(self.summary)

    def effective_length(self, model: str) -> dict:
        """L* of `model`: value, interval and flags (`at_least`, `no_gain`)."""
        return self.summary["models"][model]["effective_length"]

    def paths(self) -> dict[str, Path]:
        """What the run wrote beside its records, by role."""
        d = self.run_dir
        return {"summary": d / SUMMARY_JSON, "curve": d / CURVE_CSV, "targets": d / TARGETS_FILE, "report": d / REPORT_MD, "plot": d / PLOT_FILE}

    def to_json(self) -> dict[str, Any]:
        return self.summary

    def write_files(self, out: Path) -> None:
        (out / SUMMARY_JSON).write_text(json.dumps(self.summary, indent=2))
        self.curve.to_csv(out / CURVE_CSV, index=False)
        self.targets.to_parquet(out / TARGETS_FILE, index=False)
        (out / REPORT_MD).write_text(self.markdown)
        plot_curves(self.summary, out / PLOT_FILE)

    @classmethod
    def read_files(cls, out: Path, version: int) -> EffectiveLengthResult:
        out = Path(out)
        return cls(out, read_manifest(out), json.loads((out / SUMMARY_JSON).read_text()), pd.read_parquet(out / TARGETS_FILE), (out / REPORT_MD).read_text())


def effective_length_result(run_dir: Path, manifest: Manifest, metrics: MetricConfig, settings: EstimatorSettings) -> EffectiveLengthResult:
    """A finished run's result: each model's target table (AVG under `metrics`, key tokens by
    `settings.evaluator`), its curve and L*."""
    records = read_records(run_dir)
    lengths = tuple(manifest.config["lengths"])
    caps = {m["name"]: m.get("max_context") for m in manifest.models}
    vocab = manifest.vocab_sizes
    tables = {name: add_avg(target_table(records, name, lengths, caps[name]), metrics, vocab[name]) for name in manifest.model_names}
    tables = mark_key_tokens(tables, settings.evaluator, settings.alpha, settings.beta)
    summary = summarize(tables, lengths, settings, caps) | {"run_id": manifest.run_id}
    return EffectiveLengthResult(Path(run_dir), manifest, summary, pd.concat(tables.values(), ignore_index=True), render_markdown(summary))
