"""The `retrieval` result: results.json (cells per model), results.md and the heatmaps.

It holds the run's cases (its records, which the engine writes) beside the cells, so a reader
needs no second trip to the run directory.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

import pyarrow.parquet as pq

from ctxeval.results.base import Result
from ctxeval.results.io import Figure, Json, Text, Value, folder, loaded, written
from ctxeval.results.manifest import Manifest, read_manifest
from ctxeval.results.probe_report import EFFECTIVE_LENGTH, RETRIEVAL
from ctxeval.results.rows import frame, json_rows
from ctxeval.stats.threshold_lengths import RETRIEVAL_THRESHOLD, effective_lengths

CASES_FILE = "cases.parquet"  # the run's records, one row per case (the engine writes them)
LEGACY_CASES_FILE = "cases.jsonl"  # the case records of older run directories, still read

RESULTS_JSON = "results.json"
RESULTS_MD = "results.md"
HEATMAP_FILE = "retrieval_heatmap.png"


DEFINITIONS = {
    "accuracy": "share of cases whose greedy answer equals the value exactly",
    "mean_rank": "mean full-vocabulary rank of the answer's first token after the prompt (1 = the model's top choice)",
    "mean_value_logprob": "mean over cases of the summed log-probability of the value's tokens (teacher forcing)",
    "generated": "cases whose accuracy needed real greedy generation (the answer left generation's greedy chain)",
    "tokens_target": "with --tokens: the prompt size asked for; lines is the most lines that fit it for this model",
}


def _model_cells(result: RetrievalResult, model: str) -> list[dict]:
    return json_rows(result.cells[result.cells["model"] == model].drop(columns="model"))


def _cells(by_model: dict[str, list[dict]]) -> pd.DataFrame:
    """The cells table results.json's `by_model` describes, ordered as `cell_table` orders it."""
    cells = pd.concat([frame(rows).assign(model=model) for model, rows in by_model.items()], ignore_index=True)
    cells = cells[["model", *(c for c in cells.columns if c != "model")]]
    return cells.sort_values(cell_keys(cells), kind="stable", ignore_index=True)


@dataclass
class RetrievalResult(Result):
    """A finished retrieval run: accuracy and ranks per cell, and the cases they come from.
    results.json holds, per model (in run order, the first the primary one) and (lines or token
    target, depth): accuracy, mean_rank, n, ..."""

    KIND = "retrieval"
    PROBE = (RETRIEVAL, EFFECTIVE_LENGTH)
    FILES = (Json(RESULTS_JSON, {"variant": "variant", "model": written(lambda r: r.models[0]), "cells": written(lambda r: _model_cells(r, r.models[0])),
                                 "by_model": Value("cells", lambda r: {m: _model_cells(r, m) for m in r.models}, _cells),
                                 "definitions": written(lambda r: DEFINITIONS)}),
             Text(RESULTS_MD, "markdown"), Figure(HEATMAP_FILE))

    run_dir: Path = folder()
    manifest: Manifest = loaded(read_manifest)
    variant: str
    cells: pd.DataFrame  # one row per (model, [token target,] lines, depth)
    cases: pd.DataFrame = loaded(lambda run_dir: read_cases(run_dir), repr=False)  # the run's records, in plan order
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

    def probe_rows(self, run: Path) -> dict[str, pd.DataFrame]:
        """Its accuracy per model and record size, and its effective length per model."""
        return {RETRIEVAL.key: retrieval_rows(run, self.variant, self.cells, self.models), EFFECTIVE_LENGTH.key: retrieval_length_rows(run, self.effective_lengths())}


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


def retrieval_rows(run: Path, variant: str, cells: pd.DataFrame, models: list[str]) -> pd.DataFrame:
    """Retrieval rows of a retrieval run: its cells pooled over depths, per model (in `models`
    order) and record size."""
    rows = []
    for model in models:
        for lines, part in cells[cells["model"] == model].groupby("lines"):
            n = part["n"].sum()
            rows.append({"run": str(run), "model": model, "variant": variant, "lines": int(lines),
                         "mean_prompt_tokens": float(part["mean_prompt_tokens"].mean()), "n": int(n),
                         "accuracy": float((part["accuracy"] * part["n"]).sum() / n), "mean_rank": float((part["mean_rank"] * part["n"]).sum() / n),
                         "worst_depth_accuracy": float(part["accuracy"].min())})
    return pd.DataFrame(rows)


def retrieval_length_rows(run: Path, lengths: dict[str, dict]) -> pd.DataFrame:
    """Effective-length rows of a retrieval run sized in tokens: the longest prompt size whose
    accuracy stays at or above the threshold (RULER's rule), per model."""
    rows = []
    for model, e in lengths.items():
        text = "below the shortest size" if e["value"] is None else (f"≥ {e['value']}" if e["at_least"] else str(e["value"]))
        rows.append({"run": str(run), "model": model, "measure": "retrieval effective length", "max_context": None, "value": e["value"], "low": None, "high": None,
                     "confidence": None, "method": "", "at_least": e["at_least"], "units": f"accuracy ≥ {e['threshold']:g}", "text": text})
    return pd.DataFrame(rows)
