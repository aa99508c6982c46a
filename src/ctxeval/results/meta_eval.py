"""The `meta-eval` result of `ctxeval meta-eval`: meta_eval.json (Table 3 metrics with
intervals per method), meta_eval.md and items.csv (scores and picks per item). The run's pass
records and manifest are the engine's; the result holds the manifest as read where it was built."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from ctxeval.results.manifest import Manifest, read_manifest
from ctxeval.results.base import Result
from ctxeval.results.tables import read_csv, write_csv

META_EVAL_JSON = "meta_eval.json"
META_EVAL_MD = "meta_eval.md"
ITEMS_CSV = "items.csv"


@dataclass
class MetaEvalResult(Result):
    """How each method's picks agree with the human labels, and the picks themselves."""

    KIND: ClassVar[str] = "meta-eval"
    VERSION: ClassVar[int] = 1
    FILES: ClassVar[tuple[str, ...]] = (META_EVAL_JSON, META_EVAL_MD, ITEMS_CSV)

    report: dict[str, Any]  # meta_eval.json: dataset, evaluator, config, bootstrap, methods, timing
    items: pd.DataFrame  # one row per item: label, both answers' scores and the pick per method
    manifest: Manifest
    out: Path
    markdown: str = ""  # what meta_eval.md holds

    def to_json(self) -> dict[str, Any]:
        return self.report

    def write_files(self, out: Path) -> None:
        (out / META_EVAL_JSON).write_text(json.dumps(self.to_json(), indent=2) + "\n", encoding="utf-8")
        (out / META_EVAL_MD).write_text(self.markdown, encoding="utf-8")
        write_csv(out / ITEMS_CSV, self.items)

    @classmethod
    def read_files(cls, out: Path, version: int) -> MetaEvalResult:
        report = json.loads((out / META_EVAL_JSON).read_text(encoding="utf-8"))
        result = cls(report, read_csv(out / ITEMS_CSV, ("item_id",)), read_manifest(out), out)
        result.markdown = (out / META_EVAL_MD).read_text(encoding="utf-8")
        return result
