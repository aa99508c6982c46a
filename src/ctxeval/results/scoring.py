"""The `scoring` result: the summaries, tables and plot of a finished sweep or score run.

It owns summary.json/.csv, tables.md and scores_vs_length.png; corpus_summary.json/.csv when
the run scored several documents; noise_floor.json when `score --noise-floor` measured one.
The run's records and manifest are not part of it (the engine writes them); it holds them,
as read where it was built, so a reader needs no second trip to the run directory.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from ctxeval.metrics.config import MetricConfig
from ctxeval.results.base import Result, read_header
from ctxeval.results.manifest import Manifest, read_manifest
from ctxeval.results.records import RECORDS_FILE, read_records
from ctxeval.results.rows import frame, json_rows

SUMMARY_JSON = "summary.json"
SUMMARY_CSV = "summary.csv"
TABLES_MD = "tables.md"
PLOT_FILE = "scores_vs_length.png"
CORPUS_JSON = "corpus_summary.json"
CORPUS_CSV = "corpus_summary.csv"
NOISE_JSON = "noise_floor.json"


@dataclass
class RunResult(Result):
    """A finished run: where it lives and what it found."""

    KIND: ClassVar[str] = "scoring"
    VERSION: ClassVar[int] = 1
    FILES: ClassVar[tuple[str, ...]] = (SUMMARY_JSON, SUMMARY_CSV, TABLES_MD, PLOT_FILE)

    run_dir: Path
    manifest: Manifest
    records: pd.DataFrame = field(repr=False)  # the run's records, as loaded where the result was built
    summary: pd.DataFrame
    approx_vs_exact: pd.DataFrame
    metrics: MetricConfig  # the settings the summaries were computed with
    tables: str = ""  # the Markdown tables (what tables.md holds once written)
    noise_floor: dict | None = None  # `--noise-floor`: the model on a second numeric path (noise_floor.json)
    corpus: pd.DataFrame | None = None  # several documents: the corpus-level rows (intervals resample documents)

    def files(self) -> tuple[str, ...]:
        extra = ((CORPUS_JSON, CORPUS_CSV) if self.corpus is not None else ()) + ((NOISE_JSON,) if self.noise_floor is not None else ())
        return self.FILES + extra

    def paths(self) -> dict[str, Path]:
        """The run's files by role, its records included (what the CLI lists)."""
        d = self.run_dir
        paths = {"records": d / RECORDS_FILE, "summary_json": d / SUMMARY_JSON, "summary_csv": d / SUMMARY_CSV, "tables": d / TABLES_MD, "plot": d / PLOT_FILE}
        if self.corpus is not None:
            paths |= {"corpus_json": d / CORPUS_JSON, "corpus_csv": d / CORPUS_CSV}
        if self.noise_floor is not None:
            paths["noise_floor"] = d / NOISE_JSON
        return paths

    def to_json(self) -> dict[str, Any]:
        """summary.json: the per-document rows, approx-vs-exact deltas and the run's numerics."""
        return {
            "run_id": self.manifest.run_id,
            "metrics": asdict(self.metrics),
            "groups": json_rows(self.summary),
            "approx_vs_exact": json_rows(self.approx_vs_exact),
            "numerics": run_json(self.manifest),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], run_dir: Path, manifest: Manifest, records: pd.DataFrame) -> RunResult:
        """The result summary.json describes, around the run's manifest and records."""
        return cls(Path(run_dir), manifest, records, frame(data["groups"]), frame(data["approx_vs_exact"]), MetricConfig.from_dict(data["metrics"]))

    def write_files(self, out: Path) -> None:
        self.summary.to_csv(out / SUMMARY_CSV, index=False)
        (out / SUMMARY_JSON).write_text(json.dumps(self.to_json(), indent=2))
        (out / TABLES_MD).write_text(self.tables)
        if self.corpus is not None:
            self.corpus.to_csv(out / CORPUS_CSV, index=False)
            corpus = {"run_id": self.manifest.run_id, "metrics": asdict(self.metrics), "corpus": json_rows(self.corpus)}
            (out / CORPUS_JSON).write_text(json.dumps(corpus, indent=2))
        if self.noise_floor is not None:
            (out / NOISE_JSON).write_text(json.dumps(self.noise_floor, indent=2, default=float))

    @classmethod
    def read_files(cls, out: Path, version: int) -> RunResult:
        out = Path(out)
        listed = read_header(out)["files"]
        result = cls.from_json(json.loads((out / SUMMARY_JSON).read_text()), out, read_manifest(out), read_records(out))
        corpus = frame(json.loads((out / CORPUS_JSON).read_text())["corpus"]) if CORPUS_JSON in listed else None
        return replace(result, tables=(out / TABLES_MD).read_text(), noise_floor=stored_noise_floor(out) if NOISE_JSON in listed else None, corpus=corpus)


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
