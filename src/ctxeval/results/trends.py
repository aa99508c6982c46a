"""The `trends` result of `ctxeval trends`: trends.json (slopes and spread) and trends.md."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ctxeval.results.base import Result
from ctxeval.results.io import Json, Text, folder, rows

SERIES = ["model", "text_id", "method", "context_mode"]  # what one fitted series is
ALL_TEXTS = "(all texts)"  # the text_id of the fit over every text' windows
TRENDS_JSON = "trends.json"
TRENDS_MD = "trends.md"


@dataclass
class Trends(Result):
    """Slopes of every metric against context length, and the spread across repeated starts."""

    KIND = "trends"
    FILES = (Json(TRENDS_JSON, {"outlier_rule": "outlier_rule", "trends": rows("trends"), "variance": rows("variance")}), Text(TRENDS_MD, "markdown"))

    trends: pd.DataFrame  # one row per series × metric × x (raw or log2 length): slope, SE, p, CI
    variance: pd.DataFrame  # one row per series × length × metric: spread and flagged windows
    outlier_rule: str  # how a window was flagged, in words
    out: Path = folder()
    markdown: str = ""  # what trends.md holds
