"""The `correlations` result of `ctxeval leval-corr`: corr.json (the human scores and each
metric's Kendall τ-b) and corr.md."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ctxeval.results.base import Result

CORR_JSON = "corr.json"
CORR_MD = "corr.md"
_TITLE = "# Kendall τ-b with the human ranking\n\n"


@dataclass(frozen=True)
class Correlation:
    """One metric against the human ranking: τ-b, its p-value, the models both rank, the tasks averaged."""

    metric: str
    tau: float
    p_value: float
    models: tuple[str, ...]
    tasks: int | None  # tasks averaged (scores.json inputs); None for a plain table


@dataclass
class Correlations(Result):
    """How each metric's model ranking agrees with the human one."""

    KIND: ClassVar[str] = "correlations"
    VERSION: ClassVar[int] = 1
    FILES: ClassVar[tuple[str, ...]] = (CORR_JSON, CORR_MD)

    human: dict[str, float]  # human score per model
    correlations: list[Correlation]
    markdown: str = ""  # the table (corr.md holds it under a title)

    def to_json(self) -> dict[str, Any]:
        rows = [{"metric": r.metric, "tau": _null(r.tau), "p_value": _null(r.p_value), "models": list(r.models), "tasks": r.tasks} for r in self.correlations]
        return {"human": self.human, "correlations": rows}

    @classmethod
    def from_json(cls, data: dict[str, Any], markdown: str = "") -> Correlations:
        rows = [Correlation(r["metric"], _nan(r["tau"]), _nan(r["p_value"]), tuple(r["models"]), r["tasks"]) for r in data["correlations"]]
        return cls(data["human"], rows, markdown)

    def write_files(self, out: Path) -> None:
        (out / CORR_JSON).write_text(json.dumps(self.to_json(), indent=2) + "\n", encoding="utf-8")
        (out / CORR_MD).write_text(_TITLE + self.markdown, encoding="utf-8")

    @classmethod
    def read_files(cls, out: Path, version: int) -> Correlations:
        markdown = (out / CORR_MD).read_text(encoding="utf-8").removeprefix(_TITLE)
        return cls.from_json(json.loads((out / CORR_JSON).read_text(encoding="utf-8")), markdown)


def _null(value: float) -> float | None:
    return None if math.isnan(value) else value


def _nan(value: float | None) -> float:
    return math.nan if value is None else value
