"""The `trends` result of `ctxeval trends`: trends.json (slopes and spread) and trends.md."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from ctxeval.results.base import Result
from ctxeval.results.rows import frame, json_rows

SERIES = ["model", "text_id", "method", "context_mode"]  # what one fitted series is
ALL_TEXTS = "(all texts)"  # the text_id of the fit over every text' windows
TRENDS_JSON = "trends.json"
TRENDS_MD = "trends.md"


@dataclass
class Trends(Result):
    """Slopes of every metric against context length, and the spread across repeated starts."""

    KIND: ClassVar[str] = "trends"
    VERSION: ClassVar[int] = 1
    FILES: ClassVar[tuple[str, ...]] = (TRENDS_JSON, TRENDS_MD)

    trends: pd.DataFrame  # one row per series × metric × x (raw or log2 length): slope, SE, p, CI
    variance: pd.DataFrame  # one row per series × length × metric: spread and flagged windows
    outlier_rule: str  # how a window was flagged, in words
    out: Path
    markdown: str = ""  # what trends.md holds

    def to_json(self) -> dict[str, Any]:
        return {"outlier_rule": self.outlier_rule, "trends": json_rows(self.trends), "variance": json_rows(self.variance)}

    @classmethod
    def from_json(cls, data: dict[str, Any], out: Path) -> Trends:
        return cls(frame(data["trends"]), frame(data["variance"]), data["outlier_rule"], Path(out))

    def write_files(self, out: Path) -> None:
        (out / TRENDS_JSON).write_text(json.dumps(self.to_json(), indent=2))
        (out / TRENDS_MD).write_text(self.markdown)

    @classmethod
    def read_files(cls, out: Path, version: int) -> Trends:
        result = cls.from_json(json.loads((out / TRENDS_JSON).read_text()), out)
        result.markdown = (out / TRENDS_MD).read_text()
        return result
