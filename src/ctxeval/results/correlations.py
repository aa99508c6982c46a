"""The `correlations` result of `ctxeval leval-corr`: corr.json (the human scores and each
metric's Kendall τ-b) and corr.md."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ctxeval.results.base import Result
from ctxeval.results.io import Json, Text, kept

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


def _rows(correlations: list[Correlation]) -> list[dict[str, Any]]:
    return [{"metric": r.metric, "tau": _null(r.tau), "p_value": _null(r.p_value), "models": list(r.models), "tasks": r.tasks} for r in correlations]


def _correlations(rows: list[dict[str, Any]]) -> list[Correlation]:
    return [Correlation(r["metric"], _nan(r["tau"]), _nan(r["p_value"]), tuple(r["models"]), r["tasks"]) for r in rows]


@dataclass
class Correlations(Result):
    """How each metric's model ranking agrees with the human one."""

    KIND = "correlations"
    FILES = (Json(CORR_JSON, {"human": "human", "correlations": kept("correlations", _rows, _correlations)}, newline=True),
             Text(CORR_MD, "markdown", prefix=_TITLE))

    human: dict[str, float]  # human score per model
    correlations: list[Correlation]
    markdown: str = ""  # the table (corr.md holds it under a title)


def _null(value: float) -> float | None:
    return None if math.isnan(value) else value


def _nan(value: float | None) -> float:
    return math.nan if value is None else value
