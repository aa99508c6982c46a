"""The `pplqa` result of `ctxeval pplqa`: pplqa.json (mean ranks and agreement), pplqa.md and
scores.csv (one row per question × answer). The run's pass records and manifest are the
engine's; the result holds the manifest as read where it was built."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from ctxeval.results.manifest import Manifest, read_manifest
from ctxeval.results.base import Result
from ctxeval.results.tables import read_csv, write_csv

PPLQA_JSON = "pplqa.json"
PPLQA_MD = "pplqa.md"
SCORES_CSV = "scores.csv"


@dataclass
class PplqaResult(Result):
    """Every answer's scores and per-question ranks, and how the methods' rankings agree."""

    KIND: ClassVar[str] = "pplqa"
    VERSION: ClassVar[int] = 1
    FILES: ClassVar[tuple[str, ...]] = (PPLQA_JSON, PPLQA_MD, SCORES_CSV)

    report: dict[str, Any]  # pplqa.json: evaluator, config, mean rank per model, agreement, timing
    scores: pd.DataFrame  # one row per question × answer: each method's score and rank (1 = best)
    manifest: Manifest
    out: Path
    markdown: str = ""  # what pplqa.md holds

    def to_json(self) -> dict[str, Any]:
        return self.report

    def write_files(self, out: Path) -> None:
        (out / PPLQA_JSON).write_text(json.dumps(self.to_json(), indent=2) + "\n", encoding="utf-8")
        (out / PPLQA_MD).write_text(self.markdown, encoding="utf-8")
        write_csv(out / SCORES_CSV, self.scores)

    @classmethod
    def read_files(cls, out: Path, version: int) -> PplqaResult:
        report = json.loads((out / PPLQA_JSON).read_text(encoding="utf-8"))
        result = cls(report, read_csv(out / SCORES_CSV, ("question_id", "model")), read_manifest(out), out)
        result.markdown = (out / PPLQA_MD).read_text(encoding="utf-8")
        return result
