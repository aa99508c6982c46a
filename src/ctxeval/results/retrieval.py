"""The `retrieval` result: results.json (cells per model), results.md and the heatmaps.

It holds the run's cases (its records, which the engine writes) beside the cells, so a reader
needs no second trip to the run directory.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

import pyarrow.parquet as pq

from ctxeval.results.base import Result
from ctxeval.results.manifest import Manifest, read_manifest
from ctxeval.results.rows import frame, json_rows
from ctxeval.stats.threshold_lengths import RETRIEVAL_THRESHOLD, effective_lengths

CASES_FILE = "cases.parquet"  # the run's records, one row per case (the engine writes them)
LEGACY_CASES_FILE = "cases.jsonl"  # the case records of older run directories, still read

RESULTS_JSON = "results.json"
RESULTS_MD = "results.md"
HEATMAP_FILE = "retrieval_heatmap.png"


@dataclass
class RetrievalResult(Result):
    """A finished retrieval run: accuracy and ranks per cell, and the cases they come from."""

    KIND: ClassVar[str] = "retrieval"
    VERSION: ClassVar[int] = 1
    FILES: ClassVar[tuple[str, ...]] = (RESULTS_JSON, RESULTS_MD, HEATMAP_FILE)

    run_dir: Path
    manifest: Manifest
    variant: str
    cells: pd.DataFrame  # one row per (model, [token target,] lines, depth)
    cases: pd.DataFrame = field(repr=False)  # the run's records, in plan order
    markdown: str = ""  # what results.md holds

    @property
    def models(self) -> list[str]:
        """The models, in run order."""
        return list(dict.fromkeys(self.cases["model"]))

    def effective_lengths(self, threshold: float = RETRIEVAL_THRESHOLD) -> dict[str, dict]:
        """Per model, the longest prompt size whose accuracy stays at or above `threshold`
        (a run sized with --tokens; empty otherwise)."""
        return effective_lengths(self.cells, threshold)

    def paths(self) -> dict[str, Path]:
        """What the run wrote, by role."""
        d = self.run_dir
        return {"results": d / RESULTS_JSON, "cases": d / CASES_FILE, "heatmap": d / HEATMAP_FILE, "report": d / RESULTS_MD}

    def to_json(self) -> dict[str, Any]:
        return results_json(self.variant, self.cells, self.models)

    @classmethod
    def from_json(cls, data: dict[str, Any], run_dir: Path, manifest: Manifest, cases: pd.DataFrame) -> RetrievalResult:
        """The result results.json describes, around the run's manifest and cases."""
        parts = [frame(rows).assign(model=model) for model, rows in data["by_model"].items()]
        cells = pd.concat(parts, ignore_index=True)
        cells = cells[["model", *(c for c in cells.columns if c != "model")]]
        cells = cells.sort_values(cell_keys(cells), kind="stable", ignore_index=True)  # as `cell_table` orders them
        return cls(Path(run_dir), manifest, data["variant"], cells, cases)

    def write_files(self, out: Path) -> None:
        (out / RESULTS_JSON).write_text(json.dumps(self.to_json(), indent=2))
        (out / RESULTS_MD).write_text(self.markdown)

    @classmethod
    def read_files(cls, out: Path, version: int) -> RetrievalResult:
        out = Path(out)
        result = cls.from_json(json.loads((out / RESULTS_JSON).read_text()), out, read_manifest(out), read_cases(out))
        result.markdown = (out / RESULTS_MD).read_text()
        return result


def results_json(variant: str, cells: pd.DataFrame, models: list[str]) -> dict:
    """results.json: per model (in run order, the first the primary one) and (lines or token
    target, depth): accuracy, mean_rank, n, ..."""
    return {
        "variant": variant,
        "model": models[0],
        "cells": json_rows(cells[cells["model"] == models[0]].drop(columns="model")),
        "by_model": {m: json_rows(cells[cells["model"] == m].drop(columns="model")) for m in models},
        "definitions": {
            "accuracy": "share of cases whose greedy answer equals the value exactly",
            "mean_rank": "mean full-vocabulary rank of the answer's first token after the prompt (1 = the model's top choice)",
            "mean_value_logprob": "mean over cases of the summed log-probability of the value's tokens (teacher forcing)",
            "generated": "cases whose accuracy needed real greedy generation (the answer left generation's greedy chain)",
            "tokens_target": "with --tokens: the prompt size asked for; lines is the most lines that fit it for this model",
        },
    }


def cell_keys(table: pd.DataFrame) -> list[str]:
    """What a cell is: (model, lines, depth), or (model, token target, lines, depth) for a run
    with --tokens."""
    with_tokens = "tokens_target" in table and table["tokens_target"].notna().any()
    return ["model", "tokens_target", "lines", "depth"] if with_tokens else ["model", "lines", "depth"]


def read_cases(run_dir: Path) -> pd.DataFrame:
    """The recorded cases of a finished retrieval run (also of one written before cases were
    Parquet records: its `cases.jsonl`), in plan order; empty if it has none yet."""
    run_dir = Path(run_dir)
    if (run_dir / CASES_FILE).is_file():
        return pq.read_table(run_dir / CASES_FILE).to_pandas().drop(columns="case_index")
    legacy = run_dir / LEGACY_CASES_FILE
    lines = legacy.read_text(encoding="utf-8").splitlines() if legacy.is_file() else []
    rows = []
    for line in lines:
        try:
            rows.append({"tokens_target": None, **json.loads(line)})
        except json.JSONDecodeError:
            break  # a torn last line of an interrupted run
    return pd.DataFrame(rows)
