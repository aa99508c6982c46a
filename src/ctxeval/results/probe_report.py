"""The `probe-report` result: probe_report.md, probe_report.json and probe_report.png."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ctxeval.results.base import Result, Section
from ctxeval.results.io import Figure, Json, Text, Value, folder, kept
from ctxeval.results.rows import frame, interval_columns, nested
from ctxeval.stats.interval import percentile_method

REPORT_MD = "probe_report.md"
REPORT_JSON = "probe_report.json"
PLOT_FILE = "probe_report.png"
# the sections every probe report holds (the at-a-glance table reads them); a kind that adds
# rows to another declares it (`Result.PROBE`) and the report holds it after these
LANGUAGE_MODELLING = Section("language_modelling", "Perplexity and rank-based scores by context")
CONTEXT_GAIN = Section("context_gain", "Context gain and LongPPL")
EFFECTIVE_LENGTH = Section("effective_length", "Effective context length")
RETRIEVAL = Section("retrieval", "Line retrieval")
OLD_CONFIDENCE = 0.95  # the level of a context gain's interval and of L*'s in versions 1-3 (no command then offered another)
SECTIONS = tuple(s.key for s in (LANGUAGE_MODELLING, CONTEXT_GAIN, EFFECTIVE_LENGTH, RETRIEVAL))


def _named_l_star(rows: pd.DataFrame) -> pd.DataFrame:
    """Effective-length rows of versions 1-3 with the level and method of L*'s interval, which
    their run's settings named: the effective-length kind's percentile bootstrap over the units
    its `units` column counts ("8 spans") at its version 2's level; a retrieval row has none."""
    bounded = rows["low"].notna()
    units = rows["units"].astype(str).str.split(" ", n=1).str[1].fillna("")  # "8 spans": spans
    out = rows.copy()
    out.insert(out.columns.get_loc("high") + 1, "confidence", OLD_CONFIDENCE)
    out["confidence"] = out["confidence"].where(bounded)
    out.insert(out.columns.get_loc("confidence") + 1, "method", [percentile_method(u.removesuffix("s")) if b else "" for u, b in zip(units, bounded)])
    return out


def records(table: pd.DataFrame) -> list[dict]:
    """A section's rows as probe_report.json holds them: each interval one object (`rows.nested`)."""
    return [nested(row) for row in json.loads(table.to_json(orient="records"))] if not table.empty else []


def _section(key: str) -> Value:
    """One section's rows at its own key (a version 1 file has no effective-length key)."""
    return Value("sections", lambda report: records(report.sections[key]), frame, item=key, missing=[])


@dataclass
class ProbeReport(Result):
    """Every model's numbers over several runs, side by side: an at-a-glance table and one
    section per probe (perplexity by context, context gain, effective length, retrieval)."""

    KIND = "probe-report"
    VERSION = 4
    # version 1 had no effective-length section; before 3 the context gain's interval was its
    # bounds alone, before 4 L*'s without its level and method (`migrate`)
    READS = (1, 2, 3)
    FILES = (Text(REPORT_MD, "markdown"),
             Json(REPORT_JSON, {"runs": "runs", "at_a_glance": kept("at_a_glance", records, pd.DataFrame), **{key: _section(key) for key in SECTIONS}},
                  more=Value("sections", lambda report: {k: records(v) for k, v in report.sections.items() if k not in SECTIONS}, frame)),
             Figure(PLOT_FILE))

    out: Path = folder()
    runs: list[str]  # the run directories it read, as given
    at_a_glance: pd.DataFrame
    sections: dict[str, pd.DataFrame]  # SECTIONS, then any other section a kind declares -> rows (empty where no run adds to it)
    markdown: str = ""  # what probe_report.md holds

    @classmethod
    def migrate(cls, found: dict[str, Any], version: int, folder: Path) -> dict[str, Any]:
        """Versions 1-2: a context gain's interval as its bounds alone (gain_ci_low/high), the
        context-gain kind's BCa over blocks of targets at its version 1's level; here as the
        columns every interval writes (its resampling units unknown: n 0)."""
        gain = found["sections"].get(CONTEXT_GAIN.key)
        if gain is not None and "gain_ci_low" in gain:
            found["sections"][CONTEXT_GAIN.key] = interval_columns(gain, "mean_gain", {"gain_ci_low": "low", "gain_ci_high": "high"},
                                                                   confidence=OLD_CONFIDENCE, method="BCa", n=0)
        lengths = found["sections"].get(EFFECTIVE_LENGTH.key)
        if lengths is not None and not lengths.empty and "confidence" not in lengths:
            found["sections"][EFFECTIVE_LENGTH.key] = _named_l_star(lengths)
        return found

    def paths(self) -> dict[str, Path]:
        """Its files, by role."""
        return {"report": self.out / REPORT_MD, "json": self.out / REPORT_JSON, "plot": self.out / PLOT_FILE}
