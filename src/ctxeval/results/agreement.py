"""The `agreement` result: agreement.json (measures per model, correlations per pair, costs),
agreement.md, agreement.html and the scatter of every pair."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from ctxeval.results.base import Result
from ctxeval.results.rows import frame, json_rows

AGREEMENT_JSON = "agreement.json"
AGREEMENT_MD = "agreement.md"
AGREEMENT_HTML = "agreement.html"
SCATTER_PNG = "agreement_scatter.png"


@dataclass
class AgreementResult(Result):
    """Rank correlations between cheap and task measures across the models of several runs."""

    KIND: ClassVar[str] = "agreement"
    VERSION: ClassVar[int] = 1
    FILES: ClassVar[tuple[str, ...]] = (AGREEMENT_JSON, AGREEMENT_MD, AGREEMENT_HTML, SCATTER_PNG)

    out: Path
    runs: list[str]
    measures: pd.DataFrame  # one row per (model, measure): kind, direction, value, run, seconds_per_model
    correlations: pd.DataFrame  # one row per (cheap, task) pair
    replicates: int
    seed: int
    html: str = field(repr=False, default="")  # what agreement.html holds
    markdown: str = ""  # what agreement.md holds

    @property
    def models(self) -> list[str]:
        return list(dict.fromkeys(self.measures["model"]))

    def paths(self) -> dict[str, Path]:
        return {"json": self.out / AGREEMENT_JSON, "report": self.out / AGREEMENT_MD, "html": self.out / AGREEMENT_HTML, "scatter": self.out / SCATTER_PNG}

    def to_json(self) -> dict[str, Any]:
        return {"runs": self.runs, "models": self.models, "replicates": self.replicates, "seed": self.seed,
                "measures": json_rows(self.measures), "correlations": json_rows(self.correlations),
                "definitions": {
                    "oriented": "each measure multiplied by its direction (+1 higher is better, -1 lower is better: KL, rank) before ranking",
                    "spearman/kendall": "scipy.stats.spearmanr and kendalltau (tau-b) over the models that have both measures",
                    "low/high": "95 % percentile bootstrap over models; none below 4 models or when most resamples make a measure constant (note)",
                    "seconds_per_model": "the run's recorded seconds over its finished sessions divided by its models",
                }}

    def write_files(self, out: Path) -> None:
        out = Path(out)
        (out / AGREEMENT_JSON).write_text(json.dumps(self.to_json(), indent=2))
        (out / AGREEMENT_MD).write_text(self.markdown)
        (out / AGREEMENT_HTML).write_text(self.html)

    @classmethod
    def read_files(cls, out: Path, version: int) -> AgreementResult:
        out = Path(out)
        data = json.loads((out / AGREEMENT_JSON).read_text())
        return cls(out, data["runs"], frame(data["measures"]), frame(data["correlations"]), data["replicates"], data["seed"],
                   (out / AGREEMENT_HTML).read_text(), (out / AGREEMENT_MD).read_text())

