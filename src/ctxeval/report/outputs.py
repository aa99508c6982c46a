"""The summaries a finished scoring run's records give (results/scoring.py holds them as the
run's `scoring` result)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ctxeval.metrics.config import MetricConfig
from ctxeval.errors import FieldError
from ctxeval.results.manifest import Manifest
from ctxeval.report.summary import approx_vs_exact, summarize


@dataclass
class Summaries:
    """What a run's records give under one metric setting."""

    summary: pd.DataFrame  # one row per model × document × setting × length
    approx_vs_exact: pd.DataFrame  # `--context-mode both`: how far the one-pass scores are off


def compute(run_dir: Path, manifest: Manifest, records: pd.DataFrame, metrics: MetricConfig) -> Summaries:
    """Summaries of `records` (the run in `run_dir`) under `metrics`."""
    if metrics.approx_k > manifest.top_k:
        raise FieldError("approx_k", f"{metrics.approx_k} exceeds the top-k stored by this run ({manifest.top_k})")
    summary = summarize(records, metrics, manifest.vocab_sizes, manifest.temperatures)
    versus = approx_vs_exact(records)
    return Summaries(summary, versus)
