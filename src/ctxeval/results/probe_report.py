"""The `probe-report` result: probe_report.md, probe_report.json and probe_report.png."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from ctxeval.errors import UserError
from ctxeval.probes.probe_report import SECTIONS, at_a_glance, effective_rows, gain_rows, lm_rows, plot_report, records, render, retrieval_length_rows, retrieval_rows
from ctxeval.report.outputs import require_complete
from ctxeval.results.base import Result, read_result
from ctxeval.results.context_gain import ContextGainResult
from ctxeval.results.effective_length import EffectiveLengthResult
from ctxeval.results.retrieval import RetrievalResult
from ctxeval.results.scoring import RunResult

REPORT_MD = "probe_report.md"
REPORT_JSON = "probe_report.json"
PLOT_FILE = "probe_report.png"
PROBE_KINDS = (RunResult, ContextGainResult, EffectiveLengthResult, RetrievalResult)


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
        plot_report(self.sections, out / PLOT_FILE)

    @classmethod
    def read_files(cls, out: Path, version: int) -> ProbeReport:
        return cls.from_json(json.loads((Path(out) / REPORT_JSON).read_text()), out, (Path(out) / REPORT_MD).read_text())


def probe_report(run_dirs: list[Path], out: Path) -> ProbeReport:
    """The report over `run_dirs`, each read as its result (sweep/score, context-gain,
    effective-length or retrieval; another kind is refused in one line)."""
    if not run_dirs:
        raise UserError("give at least one run directory")
    rows: dict[str, list[pd.DataFrame]] = {k: [] for k in SECTIONS}
    for run_dir in run_dirs:
        result = read_result(run_dir, reader="probe-report", kinds=PROBE_KINDS)
        if isinstance(result, RunResult):
            require_complete(result.run_dir, result.manifest)
            rows["language_modelling"].append(lm_rows(run_dir, result.summary))
        elif isinstance(result, ContextGainResult):
            rows["context_gain"].append(gain_rows(run_dir, result.summary))
        elif isinstance(result, EffectiveLengthResult):
            rows["effective_length"].append(effective_rows(run_dir, result.summary))
        else:
            rows["retrieval"].append(retrieval_rows(run_dir, result.variant, result.cells, result.models))
            rows["effective_length"].append(retrieval_length_rows(run_dir, result.effective_lengths()))
    sections = {k: pd.concat(v, ignore_index=True) if v else pd.DataFrame() for k, v in rows.items()}
    glance = at_a_glance(sections)
    return ProbeReport(Path(out), [str(d) for d in run_dirs], glance, sections, render(glance, sections, run_dirs))
