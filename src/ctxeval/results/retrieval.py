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

from ctxeval.pipeline.manifest import Manifest, read_manifest
from ctxeval.probes.retrieval_report import CASES_FILE, RETRIEVAL_THRESHOLD, cell_keys, cell_table, effective_lengths, plot_heatmaps, read_cases, results_json, results_markdown
from ctxeval.results.base import Result
from ctxeval.results.rows import frame

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
        return cls(Path(run_dir), manifest, data["variant"], cells, cases, results_markdown(data["variant"], cells))

    def write_files(self, out: Path) -> None:
        (out / RESULTS_JSON).write_text(json.dumps(self.to_json(), indent=2))
        (out / RESULTS_MD).write_text(self.markdown)
        plot_heatmaps(self.cells, out / HEATMAP_FILE)

    @classmethod
    def read_files(cls, out: Path, version: int) -> RetrievalResult:
        out = Path(out)
        result = cls.from_json(json.loads((out / RESULTS_JSON).read_text()), out, read_manifest(out), read_cases(out))
        result.markdown = (out / RESULTS_MD).read_text()
        return result


def retrieval_result(run_dir: Path, manifest: Manifest) -> RetrievalResult:
    """A finished run's result, from its recorded cases."""
    cases = read_cases(run_dir)
    cells = cell_table(cases)
    variant = manifest.config["variant"]
    return RetrievalResult(Path(run_dir), manifest, variant, cells, cases, results_markdown(variant, cells))
