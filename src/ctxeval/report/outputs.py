"""Everything a finished run writes beside its records: summary JSON/CSV, tables, plot."""

from __future__ import annotations

import json
import math
from collections.abc import Collection
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from ctxeval.config import MetricConfig
from ctxeval.errors import UserError
from ctxeval.pipeline.manifest import SCORING_COMMANDS, Manifest, read_manifest, require_command
from ctxeval.pipeline.records import RECORDS_FILE, read_records
from ctxeval.report.corpus_summary import corpus_summary
from ctxeval.report.numerics import run_json, run_markdown
from ctxeval.report.plots import plot_scores
from ctxeval.report.summary import approx_vs_exact, summarize
from ctxeval.report.tables import markdown_tables

SUMMARY_JSON = "summary.json"
SUMMARY_CSV = "summary.csv"
TABLES_MD = "tables.md"
PLOT_FILE = "scores_vs_length.png"
CORPUS_JSON = "corpus_summary.json"
CORPUS_CSV = "corpus_summary.csv"


@dataclass
class RunResult:
    """A finished run: where it lives and what it found."""

    run_dir: Path
    manifest: Manifest
    records: pd.DataFrame
    summary: pd.DataFrame
    approx_vs_exact: pd.DataFrame
    tables: str = ""  # the Markdown tables (what tables.md holds once written)
    noise_floor: dict | None = None  # `--noise-floor`: the model on a second numeric path (noise_floor.json)

    def files(self) -> dict[str, Path]:
        """The run's files, by role."""
        d = self.run_dir
        files = {"records": d / RECORDS_FILE, "summary_json": d / SUMMARY_JSON, "summary_csv": d / SUMMARY_CSV, "tables": d / TABLES_MD, "plot": d / PLOT_FILE}
        if self.records["text_id"].nunique() > 1:  # write_outputs adds the corpus-level summary
            files |= {"corpus_json": d / CORPUS_JSON, "corpus_csv": d / CORPUS_CSV}
        return files


def load_run(run_dir: Path, reader: str, accepted: Collection[str] = SCORING_COMMANDS) -> tuple[Manifest, pd.DataFrame]:
    """Manifest and records of a complete run of an `accepted` command, or a UserError saying
    why not (`reader`: the command that asks, named in the message)."""
    manifest = require_command(read_manifest(run_dir), run_dir, reader, accepted)
    if manifest.status != "complete" or not (Path(run_dir) / RECORDS_FILE).is_file():
        raise UserError(f"the run in {run_dir} is not complete; re-run its command to finish it")
    return manifest, read_records(run_dir)


def write_outputs(run_dir: Path, manifest: Manifest, metrics: MetricConfig) -> RunResult:
    """(Re)compute summaries from the records and write them with tables and the plot."""
    run_dir = Path(run_dir)
    records = read_records(run_dir)
    result = compute(run_dir, manifest, records, metrics)
    result.summary.to_csv(run_dir / SUMMARY_CSV, index=False)
    payload = {
        "run_id": manifest.run_id,
        "metrics": asdict(metrics),
        "groups": json_rows(result.summary),
        "approx_vs_exact": json_rows(result.approx_vs_exact),
        "numerics": run_json(manifest),
    }
    (run_dir / SUMMARY_JSON).write_text(json.dumps(payload, indent=2))
    (run_dir / TABLES_MD).write_text(result.tables)
    plot_scores(result.summary, run_dir / PLOT_FILE)
    if result.records["text_id"].nunique() > 1:
        # several documents: the corpus-level rows, with intervals that resample documents
        corpus = corpus_summary(result.records, metrics, manifest.vocab_sizes, manifest.temperatures)
        corpus.to_csv(run_dir / CORPUS_CSV, index=False)
        (run_dir / CORPUS_JSON).write_text(json.dumps({"run_id": manifest.run_id, "metrics": asdict(metrics), "corpus": json_rows(corpus)}, indent=2))
    return result


def compute(run_dir: Path, manifest: Manifest, records: pd.DataFrame, metrics: MetricConfig) -> RunResult:
    """Summaries of `records` under `metrics`, without writing anything."""
    if metrics.approx_k > manifest.top_k:
        raise UserError(f"--approx-k {metrics.approx_k} exceeds the top-k stored by this run ({manifest.top_k})")
    summary = summarize(records, metrics, manifest.vocab_sizes, manifest.temperatures)
    versus = approx_vs_exact(records)
    return RunResult(run_dir, manifest, records, summary, versus, markdown_tables(summary, metrics, versus) + "\n" + run_markdown(manifest))


def json_rows(df: pd.DataFrame) -> list[dict]:
    """DataFrame rows as JSON-ready dicts, NaN written as null."""
    rows = df.to_dict(orient="records")
    return [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()} for row in rows]
