"""The `scoring` result: the summaries, tables and plot of a finished sweep or score run.

It owns summary.json/.csv, tables.md and scores_vs_length.png; corpus_summary.json/.csv when
the run scored several documents; noise_floor.json when `score --noise-floor` measured one.
The run's records and manifest are not part of it (the engine writes them); it holds them,
as read where it was built, so a reader needs no second trip to the run directory.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ctxeval.metrics.config import MetricConfig
from ctxeval.metrics.registry import panel_metrics
from ctxeval.results.base import Result
from ctxeval.results.io import Csv, Figure, Json, Text, Value, folder, loaded, rows, written
from ctxeval.results.manifest import Manifest, read_manifest
from ctxeval.results.probe_report import LANGUAGE_MODELLING
from ctxeval.results.records import RECORDS_FILE, read_records
from ctxeval.results.rows import interval_columns
from ctxeval.results.runs import require_complete
from ctxeval.stats.cluster import METHOD as CLUSTER_METHOD
from ctxeval.stats.interval import ROW_KEYS, column, quantile

SUMMARY_JSON = "summary.json"
SUMMARY_CSV = "summary.csv"
TABLES_MD = "tables.md"
PLOT_FILE = "scores_vs_length.png"
CORPUS_JSON = "corpus_summary.json"
CORPUS_CSV = "corpus_summary.csv"
NOISE_JSON = "noise_floor.json"


def _metrics(result: RunResult) -> dict[str, Any]:
    return asdict(result.metrics)


@dataclass
class RunResult(Result):
    """A finished run: where it lives and what it found."""

    KIND = "scoring"
    VERSION = 2
    READS = (1,)  # version 1 wrote a plotted metric's interval as <metric>_lo/_hi and its kind in one `interval` column (`migrate`)
    PROBE = (LANGUAGE_MODELLING,)
    FILES = (Json(SUMMARY_JSON, {"run_id": written(lambda r: r.manifest.run_id), "metrics": Value("metrics", _metrics, MetricConfig.from_dict),
                                 "groups": rows("summary"), "approx_vs_exact": rows("approx_vs_exact"), "numerics": written(lambda r: run_json(r.manifest))}),
             Csv(SUMMARY_CSV, written(lambda r: r.summary)), Text(TABLES_MD, "tables"), Figure(PLOT_FILE),
             # several documents: the corpus-level rows
             Json(CORPUS_JSON, {"run_id": written(lambda r: r.manifest.run_id), "metrics": written(_metrics), "corpus": rows("corpus")}, when="corpus"),
             Csv(CORPUS_CSV, written(lambda r: r.corpus), when="corpus"),
             Json(NOISE_JSON, "noise_floor", default=float, when="noise_floor"))

    run_dir: Path = folder()
    manifest: Manifest = loaded(read_manifest)
    records: pd.DataFrame = loaded(read_records, repr=False)  # the run's records, as loaded where the result was built
    summary: pd.DataFrame  # one row per model × document × setting × length; each plotted metric's interval as its columns (`Interval.columns`)
    approx_vs_exact: pd.DataFrame
    metrics: MetricConfig  # the settings the summaries were computed with
    tables: str = ""  # the Markdown tables (what tables.md holds once written)
    noise_floor: dict | None = None  # `--noise-floor`: the model on a second numeric path (noise_floor.json)
    corpus: pd.DataFrame | None = None  # several documents: the corpus-level rows (intervals resample documents)

    @classmethod
    def migrate(cls, found: dict[str, Any], version: int, folder: Path) -> dict[str, Any]:
        """Version 1: each plotted metric's interval as its bounds alone (`<metric>_lo`/`_hi`,
        a perplexity's exp of the mean NLL's) at 95 %, the method in one `interval` column of
        the row (the corpus rows': the cluster bootstrap over their documents); here as the row
        every interval writes."""
        summary = found["summary"]
        if not summary.empty:
            found["summary"] = v1_rows(summary, found["metrics"], summary["interval"])
        if found.get("corpus") is not None:
            found["corpus"] = v1_rows(found["corpus"], found["metrics"], CLUSTER_METHOD)
        return found

    def paths(self) -> dict[str, Path]:
        """The run's files by role, its records included (what the CLI lists)."""
        d = self.run_dir
        paths = {"records": d / RECORDS_FILE, "summary_json": d / SUMMARY_JSON, "summary_csv": d / SUMMARY_CSV, "tables": d / TABLES_MD, "plot": d / PLOT_FILE}
        if self.corpus is not None:
            paths |= {"corpus_json": d / CORPUS_JSON, "corpus_csv": d / CORPUS_CSV}
        if self.noise_floor is not None:
            paths["noise_floor"] = d / NOISE_JSON
        return paths

    def probe_rows(self, run: Path) -> dict[str, pd.DataFrame]:
        """Its perplexity and rank scores by context (a finished run only)."""
        require_complete(self.run_dir, self.manifest)
        return {LANGUAGE_MODELLING.key: lm_rows(run, self.summary)}


def stored_noise_floor(run_dir: Path) -> dict | None:
    """The noise floor a `score --noise-floor` run measured, if it has one (kept when `summary
    --write` rewrites the other files)."""
    path = Path(run_dir) / NOISE_JSON
    return json.loads(path.read_text()) if path.is_file() else None


def run_json(manifest: Manifest) -> list[dict[str, Any]]:
    """Per model: name, numeric path, fingerprint (summary.json)."""
    fingerprints = manifest.fingerprints or []
    paths = manifest.numeric_paths or []
    return [
        {"model": name, "numeric_path": paths[i].to_json() if i < len(paths) else None,
         "fingerprint": fingerprints[i].sha256 if i < len(fingerprints) else None}
        for i, name in enumerate(manifest.model_names)
    ]


V1_CONFIDENCE = 0.95  # the level of version 1's intervals (mean_interval's and cluster_bootstrap's default then)


def v1_rows(table: pd.DataFrame, metrics: MetricConfig, method: pd.Series | str) -> pd.DataFrame:
    """Version-1 rows (summary or corpus) with interval `<name>_lo`/`_hi` of each plotted metric in
    the columns `Interval.columns` writes, beside the metric as this version writes them, the
    `interval` column dropped. `method`: per row (a summary's `interval`: `t over K
    windows`, whose standard error the bounds give, or `bootstrap over N targets`, whose
    replicates were not kept), or one for every row (the corpus rows' cluster bootstrap over
    `n_documents`). A perplexity's standard error is NaN, as this version writes it."""
    if isinstance(method, str):
        methods, n, df = pd.Series(method, index=table.index), table["n_documents"], pd.Series(math.nan, index=table.index)
    else:
        methods = method.astype(str)
        n = methods.str.extract(r"over (\d+)", expand=False).astype("int64")
        df = (n - 1).where(methods.str.startswith("t over"))
    z = pd.Series([quantile(V1_CONFIDENCE, d) if d == d else math.nan for d in df], index=table.index)
    panels = panel_metrics(metrics)
    out = table.drop(columns="interval", errors="ignore")
    for name, log_scale in ((m.key, m.log_scale) for m in panels):
        low, high = out[f"{name}_lo"], out[f"{name}_hi"]
        se = pd.Series(math.nan, index=table.index) if log_scale else (high - low) / (2 * z)
        reason = low.isna().map({True: "a value is not finite", False: ""})
        out = interval_columns(out, name, {f"{name}_lo": "low", f"{name}_hi": "high"}, se=se, n=n, confidence=V1_CONFIDENCE, method=methods, reason=reason)
    beside = {m.key: [column(m.key, key) for key in ROW_KEYS if key != "estimate"] for m in panels}
    grouped = {c for columns in beside.values() for c in columns}
    others = [c for c in out.columns if c not in grouped]
    return out[[c for other in others for c in [other, *beside.get(other, [])]]]


def lm_rows(run: Path, summary: pd.DataFrame) -> pd.DataFrame:
    """Language-modelling rows of a sweep/score run, from its summary rows."""
    rows = summary[["model", "text_id", "method", "context_mode", "nominal_len", "n", "ppl", "bpb", "avg", "rp", "top1"]].rename(columns={"nominal_len": "context"})
    rows.insert(0, "run", str(run))
    return rows
