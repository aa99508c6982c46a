"""A finished scoring run's result: its summaries under the metric settings asked for."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ctxeval.metrics.config import MetricConfig
from ctxeval.report.corpus_summary import corpus_summary
from ctxeval.report.outputs import compute
from ctxeval.results.manifest import Manifest
from ctxeval.results.records import read_records
from ctxeval.results.rows import wide_ints
from ctxeval.results.scoring import RunResult


def scoring_result(run_dir: Path, manifest: Manifest, metrics: MetricConfig, records: pd.DataFrame | None = None, *, corpus: bool = True) -> RunResult:
    """A finished run's result under `metrics` (its records read unless given); `corpus`: with
    the corpus-level rows when it scored several documents (intervals that resample documents)."""
    run_dir = Path(run_dir)
    records = read_records(run_dir) if records is None else records
    found = compute(run_dir, manifest, records, metrics)
    pooled = corpus_summary(records, metrics, manifest.vocab_sizes, manifest.temperatures) if corpus and records["text_id"].nunique() > 1 else None
    return RunResult(run_dir, manifest, records, wide_ints(found.summary), wide_ints(found.approx_vs_exact), metrics,
                     corpus=None if pooled is None else wide_ints(pooled))
