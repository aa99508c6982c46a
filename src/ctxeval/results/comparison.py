"""The `comparison` result of `ctxeval compare`: compare.json (the paired report) and compare.md."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ctxeval.results.base import Result

COMPARE_JSON = "compare.json"
COMPARE_MD = "compare.md"


@dataclass
class Comparison(Result):
    """A paired comparison: the report, where it was written, and why a profile failed it."""

    KIND: ClassVar[str] = "comparison"
    VERSION: ClassVar[int] = 1
    FILES: ClassVar[tuple[str, ...]] = (COMPARE_JSON, COMPARE_MD)

    report: dict
    out: Path
    failures: list[str]
    markdown: str = ""  # what compare.md holds

    def to_json(self) -> dict[str, Any]:
        return self.report

    @classmethod
    def from_json(cls, data: dict[str, Any], out: Path) -> Comparison:
        return cls(data, Path(out), list(data["gates"]["failures"]))

    def write_files(self, out: Path) -> None:
        (out / COMPARE_JSON).write_text(json.dumps(self.to_json(), indent=2, default=float))
        (out / COMPARE_MD).write_text(self.markdown)

    @classmethod
    def read_files(cls, out: Path, version: int) -> Comparison:
        result = cls.from_json(json.loads((out / COMPARE_JSON).read_text()), out)
        result.markdown = (out / COMPARE_MD).read_text()
        return result


def window_label(window: dict) -> str:
    """A paired window as the report names it: its id, or both arms' ids where they differ."""
    return window["a"] if window["a"] == window["b"] else f"{window['a']}/{window['b']}"
