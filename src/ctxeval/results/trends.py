"""The `trends` result of `ctxeval trends`: trends.json (slopes and spread) and trends.md."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ctxeval.results.base import Result
from ctxeval.results.io import Json, Text, folder, rows
from ctxeval.results.rows import interval_columns
from ctxeval.stats.trends import SLOPE_METHOD

SERIES = ["model", "text_id", "method", "context_mode"]  # what one fitted series is
ALL_TEXTS = "(all texts)"  # the text_id of the fit over every text' windows
TRENDS_JSON = "trends.json"
TRENDS_MD = "trends.md"


@dataclass
class Trends(Result):
    """Slopes of every metric against context length, and the spread across repeated starts."""

    KIND = "trends"
    VERSION = 2
    READS = (1,)  # version 1 wrote a slope's interval as stderr, ci_low, ci_high and n (`migrate`)
    FILES = (Json(TRENDS_JSON, {"outlier_rule": "outlier_rule", "trends": rows("trends"), "variance": rows("variance")}), Text(TRENDS_MD, "markdown"))

    trends: pd.DataFrame  # one row per series × metric × x (raw or log2 length): the interval `slope` (stats.interval.column), intercept, r, p_value
    variance: pd.DataFrame  # one row per series × length × metric: spread and flagged windows
    outlier_rule: str  # how a window was flagged, in words
    out: Path = folder()
    markdown: str = ""  # what trends.md holds

    @classmethod
    def migrate(cls, found: dict[str, Any], version: int, folder: Path) -> dict[str, Any]:
        """Version 1: a slope's interval at 95 % as its own columns; here as the row every interval writes."""
        found["trends"] = interval_columns(found["trends"], "slope", {"stderr": "se", "ci_low": "low", "ci_high": "high", "n": "n"},
                                           confidence=0.95, method=SLOPE_METHOD)
        return found
