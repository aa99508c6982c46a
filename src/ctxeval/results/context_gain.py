"""The `context-gain` result: summary.json, gain_by_distance.csv, context_gain.md and the plot.

It holds, beside what those files say, the run's records and, per (model, text), the gain
table with each target's key-token flag and the evaluator's key spans per text: what the
explorer pages through and `diff --key-tokens` maps onto its own tokens, so no reader
recomputes the key tokens from the records by itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ctxeval.metrics.gain import BIN_METHOD, LONG_METHOD, bin_gain, key_tables, ppl_ratio
from ctxeval.results.base import Result
from ctxeval.results.io import Csv, Figure, Json, Text, derived, folder, loaded
from ctxeval.results.manifest import Manifest, read_manifest
from ctxeval.results.probe_report import CONTEXT_GAIN
from ctxeval.results.records import read_records
from ctxeval.results.rows import json_rows
from ctxeval.stats.interval import ROW_KEYS, Interval, quantile

SUMMARY_JSON = "summary.json"
DISTANCE_CSV = "gain_by_distance.csv"
REPORT_MD = "context_gain.md"
PLOT_FILE = "context_gain.png"
OLD_CONFIDENCE = 0.95  # the level of version 1's intervals (its figure drew a bin's SEM at it)


def found_key_tables(found: dict) -> tuple[dict, dict]:
    """The gain tables with their key flags, and the key spans, as the task computed them from
    the records and the key-token rule summary.json states."""
    data, rule = found["summary"], found["summary"]["key_tokens"]
    return key_tables(found["records"], data["models"], list(data["texts"]), rule["evaluator"], rule["alpha"], rule["beta"])


@dataclass
class ContextGainResult(Result):
    """A finished context-gain run: per (model, text) summaries and the gain-by-distance table."""

    KIND = "context-gain"
    VERSION = 2
    READS = (1,)  # version 1 wrote the gain's bounds (mean_gain_ci), the ratio's (ppl_ratio_ci) and a bin's SEM beside bare estimates (`migrate`)
    PROBE = (CONTEXT_GAIN,)
    FILES = (Json(SUMMARY_JSON, "summary"), Csv(DISTANCE_CSV, "by_distance", text=("model", "text_id", "mean_gain.method", "mean_gain.reason")), Text(REPORT_MD, "markdown"), Figure(PLOT_FILE))

    run_dir: Path = folder()
    manifest: Manifest = loaded(read_manifest)
    records: pd.DataFrame = loaded(read_records, repr=False)  # the run's records, as loaded where the result was built
    summary: dict  # what summary.json holds
    by_distance: pd.DataFrame
    tables: dict[tuple[str, str], pd.DataFrame] = derived(found_key_tables, 0, repr=False)  # (model, text) -> gain table with `key`
    key_spans: dict[str, np.ndarray] = derived(found_key_tables, 1, repr=False)  # text -> the evaluator's key-token character spans
    markdown: str = ""  # what context_gain.md holds

    @property
    def key_tokens(self) -> dict[str, Any]:
        """How the key tokens were picked: evaluator, alpha, beta (and the rule, in words)."""
        return self.summary["key_tokens"]

    @classmethod
    def migrate(cls, found: dict[str, Any], version: int, folder: Path) -> dict[str, Any]:
        """Version 1: the mean gain and the perplexity ratio as bare numbers, their bounds in
        `mean_gain_ci` / `ppl_ratio_ci` and the bootstrap's facts (its confidence and method
        included) in `ci`, a distance bin's gain with its SEM (drawn as a normal interval at
        its version's level); here each as the row every interval writes."""
        for entry in found["summary"]["texts"].values():
            for summary in (entry, *entry["by_model"].values()):
                _gain_row(summary)
        table, z = found["by_distance"], quantile(OLD_CONFIDENCE)
        gains = pd.DataFrame([(bin_gain(np.array([mean]), OLD_CONFIDENCE) if sem != sem else
                               Interval(mean, mean - z * sem, mean + z * sem, sem, n, OLD_CONFIDENCE, BIN_METHOD)).columns("mean_gain")
                              for mean, sem, n in zip(table["mean_gain"], table["sem"], table["n"])], index=table.index)
        columns = list(table.columns)
        before, after = columns[:columns.index("mean_gain")], columns[columns.index("sem") + 1:]
        found["by_distance"] = pd.concat([table[before], gains, table[after]], axis=1)
        found["summary"]["gain_by_distance"] = json_rows(found["by_distance"])
        return found

    def long_rows(self, model: str, text_id: str) -> pd.DataFrame:
        """The records of one model and text scored with the full context, in target order."""
        r = self.records
        return r[(r["model"] == model) & (r["text_id"] == text_id) & (r["method"] == LONG_METHOD)].sort_values("target_pos", kind="stable")

    def paths(self) -> dict[str, Path]:
        """What the run wrote beside its records, by role."""
        d = self.run_dir
        return {"summary": d / SUMMARY_JSON, "report": d / REPORT_MD, "plot": d / PLOT_FILE, "by_distance": d / DISTANCE_CSV}

    def probe_rows(self, run: Path) -> dict[str, pd.DataFrame]:
        """Its gain and LongPPL per text and model."""
        return {CONTEXT_GAIN.key: gain_rows(run, self.summary)}


def _gain_row(summary: dict[str, Any]) -> None:
    """A version-1 summary of one (text, model) in place as this version writes it."""
    facts = summary.pop("ci")
    del summary["mean_gain_ci"], summary["ppl_ratio_ci"]
    gain = Interval.from_row(facts | {"n": facts["units"]})
    summary["mean_gain"] = gain.to_row() | {key: value for key, value in facts.items() if key not in ROW_KEYS} | {"reason": facts["reason"]}
    summary["ppl_ratio_long_over_short"] = ppl_ratio(gain).to_row()


def gain_rows(run: Path, summary: dict) -> pd.DataFrame:
    """Context-gain rows of a context-gain run, from its summary (summary.json's content)."""
    rows = []
    for text_id, entry in summary["texts"].items():
        for model, s in entry["by_model"].items():
            rows.append({"run": str(run), "model": model, "text_id": text_id, "window": summary["window"], "short": summary["short"],
                         "n": s["n_tokens"], "ppl_long": s["ppl_long"], "ppl_short": s["ppl_short"],
                         **Interval.from_row(s["mean_gain"]).columns("mean_gain"),
                         "key_fraction": s["key_fraction"], "longppl": s["longppl"], "evaluator": summary["key_tokens"]["evaluator"]})
    return pd.DataFrame(rows)
