"""The `probe-report` result: probe_report.md, probe_report.json and probe_report.png."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from ctxeval.results.base import Result

REPORT_MD = "probe_report.md"
REPORT_JSON = "probe_report.json"
PLOT_FILE = "probe_report.png"
SECTIONS = ("language_modelling", "context_gain", "effective_length", "retrieval")


@dataclass
class ProbeReport(Result):
    """Every model's numbers over several runs, side by side: an at-a-glance table and one
    section per probe (perplexity by context, context gain, effective length, retrieval)."""

    KIND: ClassVar[str] = "probe-report"
    VERSION: ClassVar[int] = 2
    READS: ClassVar[tuple[int, ...]] = (1,)  # version 1 had no effective-length section
    FILES: ClassVar[tuple[str, ...]] = (REPORT_MD, REPORT_JSON, PLOT_FILE)

    out: Path
    runs: list[str]  # the run directories it read, as given
    at_a_glance: pd.DataFrame
    sections: dict[str, pd.DataFrame]  # SECTIONS -> rows (empty where no run of that kind was given)
    markdown: str = ""  # what probe_report.md holds

    def paths(self) -> dict[str, Path]:
        """Its files, by role."""
        return {"report": self.out / REPORT_MD, "json": self.out / REPORT_JSON, "plot": self.out / PLOT_FILE}

    def to_json(self) -> dict[str, Any]:
        return {"runs": self.runs, "at_a_glance": records(self.at_a_glance)} | {k: records(self.sections[k]) for k in SECTIONS}

    @classmethod
    def from_json(cls, data: dict[str, Any], out: Path, markdown: str) -> ProbeReport:
        return cls(Path(out), list(data["runs"]), pd.DataFrame(data["at_a_glance"]), {k: pd.DataFrame(data.get(k, [])) for k in SECTIONS}, markdown)

    def write_files(self, out: Path) -> None:
        (out / REPORT_MD).write_text(self.markdown)
        (out / REPORT_JSON).write_text(json.dumps(self.to_json(), indent=2))

    @classmethod
    def read_files(cls, out: Path, version: int) -> ProbeReport:
        return cls.from_json(json.loads((Path(out) / REPORT_JSON).read_text()), out, (Path(out) / REPORT_MD).read_text())


def records(frame: pd.DataFrame) -> list[dict]:
    """A section's rows as probe_report.json holds them."""
    return json.loads(frame.to_json(orient="records")) if not frame.empty else []
