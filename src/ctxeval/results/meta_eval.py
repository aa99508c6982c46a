"""The `meta-eval` result of `ctxeval meta-eval`: meta_eval.json (Table 3 metrics with
intervals per method), meta_eval.md and items.csv (scores and picks per item). The run's pass
records and manifest are the engine's; the result holds the manifest as read where it was built."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ctxeval.results.base import Result
from ctxeval.results.io import Csv, Json, Text, folder, loaded
from ctxeval.results.manifest import Manifest, read_manifest
from ctxeval.stats.bootstrap import METHOD
from ctxeval.stats.interval import Interval

META_EVAL_JSON = "meta_eval.json"
META_EVAL_MD = "meta_eval.md"
ITEMS_CSV = "items.csv"
OLD_CONFIDENCE = 0.95  # the level of version 1's intervals where its bootstrap section names none


@dataclass
class MetaEvalResult(Result):
    """How each method's picks agree with the human labels, and the picks themselves."""

    KIND = "meta-eval"
    VERSION = 2
    READS = (1,)  # version 1 wrote each metric's interval as its bounds alone, under `ci95` (`migrate`)
    FILES = (Json(META_EVAL_JSON, "report", newline=True), Text(META_EVAL_MD, "markdown"), Csv(ITEMS_CSV, "items", text=("item_id",)))

    report: dict[str, Any]  # meta_eval.json: dataset, evaluator, config, bootstrap, methods, timing
    items: pd.DataFrame  # one row per item: label, both answers' scores and the pick per method
    manifest: Manifest = loaded(read_manifest)
    out: Path = folder()
    markdown: str = ""  # what meta_eval.md holds

    @classmethod
    def migrate(cls, found: dict[str, Any], version: int, folder: Path) -> dict[str, Any]:
        """Version 1: each method's `ci95`, the bounds alone at the bootstrap section's level;
        here `intervals`, the row every interval writes (percentile bootstrap over items)."""
        confidence = float(found["report"]["bootstrap"].get("confidence", OLD_CONFIDENCE))
        for entry in found["report"]["methods"].values():
            bounds = entry.pop("ci95")
            entry["intervals"] = {key: Interval(entry["metrics"][key], low, high, n=entry["n"], confidence=confidence, method=METHOD).to_row()
                                  for key, (low, high) in bounds.items()}
        return found
