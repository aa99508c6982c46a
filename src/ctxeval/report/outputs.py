"""A finished scoring run's records and the summaries computed from them (results/scoring.py
holds them as the run's `scoring` result and writes them)."""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ctxeval.config import MetricConfig
from ctxeval.errors import FieldError, UserError
from ctxeval.pipeline.manifest import SCORING_COMMANDS, Manifest, read_manifest, require_command
from ctxeval.pipeline.records import RECORDS_FILE, read_records
from ctxeval.report.numerics import run_markdown
from ctxeval.report.summary import approx_vs_exact, summarize
from ctxeval.report.tables import markdown_tables


@dataclass
class Summaries:
    """What a run's records give under one metric setting."""

    summary: pd.DataFrame  # one row per model × document × setting × length
    approx_vs_exact: pd.DataFrame  # `--context-mode both`: how far the one-pass scores are off
    tables: str  # the Markdown tables, the run's numerics below them


def load_run(run_dir: Path, reader: str, accepted: Collection[str] = SCORING_COMMANDS) -> tuple[Manifest, pd.DataFrame]:
    """Manifest and records of a complete run of an `accepted` command, or a UserError saying
    why not (`reader`: the command that asks, named in the message)."""
    manifest = require_command(read_manifest(run_dir), run_dir, reader, accepted)
    require_complete(run_dir, manifest)
    return manifest, read_records(run_dir)


def require_complete(run_dir: Path, manifest: Manifest) -> None:
    """A UserError unless the run finished (its records merged)."""
    if manifest.status != "complete" or not (Path(run_dir) / RECORDS_FILE).is_file():
        raise UserError(f"the run in {run_dir} is not complete; re-run its command to finish it")


def compute(run_dir: Path, manifest: Manifest, records: pd.DataFrame, metrics: MetricConfig) -> Summaries:
    """Summaries of `records` (the run in `run_dir`) under `metrics`."""
    if metrics.approx_k > manifest.top_k:
        raise FieldError("approx_k", f"{metrics.approx_k} exceeds the top-k stored by this run ({manifest.top_k})")
    summary = summarize(records, metrics, manifest.vocab_sizes, manifest.temperatures)
    versus = approx_vs_exact(records)
    return Summaries(summary, versus, markdown_tables(summary, metrics, versus) + "\n" + run_markdown(manifest))


def json_rows(df: pd.DataFrame) -> list[dict]:
    """DataFrame rows as JSON-ready dicts, NaN written as null."""
    rows = df.to_dict(orient="records")
    return [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()} for row in rows]
