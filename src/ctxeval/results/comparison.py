"""The `comparison` result of `ctxeval compare`: compare.json (the paired report) and compare.md."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ctxeval.results.base import Result
from ctxeval.results.io import Json, Text, derived, folder

COMPARE_JSON = "compare.json"
COMPARE_MD = "compare.md"


def gate_failures(found: dict) -> list[str]:
    """Why a report's gates failed, as its JSON lists them (empty: passed)."""
    return list(found["report"]["gates"]["failures"])


@dataclass
class Comparison(Result):
    """A paired comparison: the report, where it was written, and why a profile failed it."""

    KIND = "comparison"
    FILES = (Json(COMPARE_JSON, "report", default=float), Text(COMPARE_MD, "markdown"))

    report: dict
    out: Path = folder()
    failures: list[str] = derived(gate_failures)
    markdown: str = ""  # what compare.md holds


def window_label(window: dict) -> str:
    """A paired window as the report names it: its id, or both arms' ids where they differ."""
    return window["a"] if window["a"] == window["b"] else f"{window['a']}/{window['b']}"
