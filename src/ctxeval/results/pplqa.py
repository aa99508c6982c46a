"""The `pplqa` result of `ctxeval pplqa`: pplqa.json (mean ranks and agreement), pplqa.md and
scores.csv (one row per question × answer). The run's pass records and manifest are the
engine's; the result holds the manifest as read where it was built."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ctxeval.results.base import Result
from ctxeval.results.io import Csv, Json, Text, folder, loaded
from ctxeval.results.manifest import Manifest, read_manifest

PPLQA_JSON = "pplqa.json"
PPLQA_MD = "pplqa.md"
SCORES_CSV = "scores.csv"


@dataclass
class PplqaResult(Result):
    """Every answer's scores and per-question ranks, and how the methods' rankings agree."""

    KIND = "pplqa"
    FILES = (Json(PPLQA_JSON, "report", newline=True), Text(PPLQA_MD, "markdown"), Csv(SCORES_CSV, "scores", text=("question_id", "model")))

    report: dict[str, Any]  # pplqa.json: evaluator, config, mean rank per model, agreement, timing
    scores: pd.DataFrame  # one row per question × answer: each method's score and rank (1 = best)
    manifest: Manifest = loaded(read_manifest)
    out: Path = folder()
    markdown: str = ""  # what pplqa.md holds
