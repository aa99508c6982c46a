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

    @classmethod
    def of(cls, human: dict[str, float], correlations: list[Correlation]) -> Correlations:
        return cls(human, correlations, correlation_markdown(correlations, sorted(human)))

    def to_json(self) -> dict[str, Any]:
        rows = [{"metric": r.metric, "tau": _null(r.tau), "p_value": _null(r.p_value), "models": list(r.models), "tasks": r.tasks} for r in self.correlations]
        return {"human": self.human, "correlations": rows}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Correlations:
        rows = [Correlation(r["metric"], _nan(r["tau"]), _nan(r["p_value"]), tuple(r["models"]), r["tasks"]) for r in data["correlations"]]
        return cls.of(data["human"], rows)

    def write_files(self, out: Path) -> None:
        (out / CORR_JSON).write_text(json.dumps(self.to_json(), indent=2) + "\n", encoding="utf-8")
        (out / CORR_MD).write_text(_TITLE + self.markdown, encoding="utf-8")

    @classmethod
    def read_files(cls, out: Path, version: int) -> Correlations:
        return cls.from_json(json.loads((out / CORR_JSON).read_text(encoding="utf-8")))


def _null(value: float) -> float | None:
    return None if math.isnan(value) else value


def _nan(value: float | None) -> float:
    return math.nan if value is None else value


def correlation_markdown(results: list[Correlation], human_models: list[str]) -> str:
    lines = ["| metric | Kendall τ-b | p | models | tasks |", "|---|---:|---:|---:|---:|"]
    for r in results:
        tau = "n/a (constant)" if math.isnan(r.tau) else f"{r.tau:.3f}"
        p = "" if math.isnan(r.p_value) else f"{r.p_value:.3g}"
        tasks = "" if r.tasks is None else str(r.tasks)
        lines.append(f"| {r.metric} | {tau} | {p} | {len(r.models)} of {len(human_models)} | {tasks} |")
    return "\n".join(lines) + "\n"
