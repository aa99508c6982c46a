"""The `agreement` result: agreement.json (measures per model, correlations per pair, costs),
agreement.md, agreement.html and the scatter of every pair."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ctxeval.results.base import Result
from ctxeval.results.io import Figure, Json, Text, folder, rows, written
from ctxeval.results.rows import interval_columns
from ctxeval.stats.rank_correlation import METHOD as RANK_METHOD

AGREEMENT_JSON = "agreement.json"
AGREEMENT_MD = "agreement.md"
AGREEMENT_HTML = "agreement.html"
SCATTER_PNG = "agreement_scatter.png"
DEFINITIONS = {
    "oriented": "each measure multiplied by its direction (+1 higher is better, -1 lower is better: KL, rank) before ranking",
    "spearman/kendall": "scipy.stats.spearmanr and kendalltau (tau-b) over the models that have both measures",
    "spearman/kendall interval": "each coefficient an interval object (estimate, low, high, se, n, confidence, method, reason): a percentile bootstrap "
                                 "over models; none below 4 models or when most resamples make a measure constant (note)",
    "seconds_per_model": "the run's recorded seconds over its finished sessions divided by its models",
    "task_reliability": "RULER's split-half reliability over the run's models: the Spearman ρ of two random halves of each cell's samples (the same split "
                        "for every model), mean over 200 seeded splits, stepped up by Spearman-Brown 2ρ/(1+ρ); none below 3 models",
    "ceiling": "√task_reliability: about the ρ a measure ordering the models exactly as their true scores would reach against this noisy task measure",
}


@dataclass
class AgreementResult(Result):
    """Rank correlations between cheap and task measures across the models of several runs."""

    KIND = "agreement"
    VERSION = 2
    READS = (1,)  # version 1 wrote a coefficient's interval as <name>_low/<name>_high (`migrate`)
    FILES = (Json(AGREEMENT_JSON, {"runs": "runs", "models": written(lambda r: r.models), "replicates": "replicates", "seed": "seed",
                                   "measures": rows("measures"), "correlations": rows("correlations"), "definitions": written(lambda r: DEFINITIONS)}),
             Text(AGREEMENT_MD, "markdown"), Text(AGREEMENT_HTML, "html"), Figure(SCATTER_PNG))

    out: Path = folder()
    runs: list[str]
    measures: pd.DataFrame  # one row per (model, measure): kind, direction, value, run, seconds_per_model
    correlations: pd.DataFrame  # one row per (cheap, task) pair
    replicates: int
    seed: int
    html: str = field(repr=False, default="")  # what agreement.html holds
    markdown: str = ""  # what agreement.md holds

    @classmethod
    def migrate(cls, found: dict[str, Any], version: int, folder: Path) -> dict[str, Any]:
        """Version 1: each coefficient's 95 % interval as its bounds alone; here as the row every interval writes."""
        table = found["correlations"]
        for name in ("spearman", "kendall"):
            table = interval_columns(table, name, {f"{name}_low": "low", f"{name}_high": "high"}, confidence=0.95, method=RANK_METHOD, n=table["models"])
        found["correlations"] = table
        return found

    @property
    def models(self) -> list[str]:
        return list(dict.fromkeys(self.measures["model"]))

    def paths(self) -> dict[str, Path]:
        return {"json": self.out / AGREEMENT_JSON, "report": self.out / AGREEMENT_MD, "html": self.out / AGREEMENT_HTML, "scatter": self.out / SCATTER_PNG}
