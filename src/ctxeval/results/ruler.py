"""The `ruler` result: results.json (scores per model, task and length; effective lengths;
agreement of the two scorings), results.md and the score plot, beside the run's samples."""

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

SAMPLES_FILE = "samples.parquet"  # the run's records, one row per sample (the engine writes them)
MEAN_TASK = "mean"  # the row of every length that averages a model's tasks
RESULTS_JSON = "results.json"
RESULTS_MD = "results.md"
PLOT_FILE = "ruler_scores.png"


@dataclass
class RulerResult(Result):
    """A finished RULER run: scores per (model, task, length) and their mean, effective lengths."""

    KIND: ClassVar[str] = "ruler"
    VERSION: ClassVar[int] = 1
    FILES: ClassVar[tuple[str, ...]] = (RESULTS_JSON, RESULTS_MD, PLOT_FILE)

    run_dir: Path
    manifest: Manifest
    threshold: float
    table: pd.DataFrame  # one row per (model, task or "mean", length)
    effective_lengths: dict[str, dict[str, dict]]
    agreement: dict
    samples: pd.DataFrame = field(repr=False)
    markdown: str = ""

    @property
    def models(self) -> list[str]:
        return list(dict.fromkeys(self.table["model"]))

    def paths(self) -> dict[str, Path]:
        d = self.run_dir
        return {"results": d / RESULTS_JSON, "samples": d / SAMPLES_FILE, "plot": d / PLOT_FILE, "report": d / RESULTS_MD}

    def to_json(self) -> dict[str, Any]:
        return {"threshold": self.threshold, "models": self.models, "scores": json_rows(self.table), "effective_lengths": self.effective_lengths,
                "agreement": self.agreement, "ruler_commit": self.manifest.config.get("ruler_commit"),
                "definitions": {
                    "score": "RULER's string_match_all in percent: per sample the share of answers found in the generated text (case-insensitive), averaged; "
                             "by likelihood where the backend does not generate (scored_by)",
                    "likelihood": "share of answers inside the greedy prefix of the teacher-forced reference, averaged (percent)",
                    "low/high": "95 % Wilson interval; partial credit counts as a fraction of a success",
                    "mean": "the task 'mean': the mean of the run's task scores per length, over the tasks the run has (of RULER's 13; its two QA tasks are not offered)",
                    "effective length": f"the longest length whose score, and every shorter length's, is at least the threshold ({self.threshold:g})",
                }}

    def write_files(self, out: Path) -> None:
        (out / RESULTS_JSON).write_text(json.dumps(self.to_json(), indent=2))
        (out / RESULTS_MD).write_text(self.markdown)

    @classmethod
    def read_files(cls, out: Path, version: int) -> RulerResult:
        out = Path(out)
        data = json.loads((out / RESULTS_JSON).read_text())
        samples = read_samples(out)
        return cls(out, read_manifest(out), data["threshold"], frame(data["scores"]), data["effective_lengths"], data["agreement"], samples,
                   (out / RESULTS_MD).read_text())


def read_samples(run_dir: Path) -> pd.DataFrame:
    """The run's sample records in plan order."""
    return pq.read_table(Path(run_dir) / SAMPLES_FILE).to_pandas().drop(columns="sample_index")
