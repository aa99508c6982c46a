"""One report over several runs: does a lower perplexity come with better use of long context?

Each run adds its rows to the sections its kind declares (`Result.PROBE` and `probe_rows`:
`sweep`/`score` perplexity and rank scores per window, `context-gain` long vs short context and
LongPPL, `effective-length` L*, `retrieval` accuracy and its effective length, and any other
catalogued kind that declares a section); the at-a-glance table puts every model's numbers from
the four standing sections side by side. `probe_report` reads the runs as results and builds the
report's result.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ctxeval import catalog
from ctxeval.errors import UserError
from ctxeval.results.base import Result, read_result, result_class
from ctxeval.results.probe_report import SECTIONS, ProbeReport


def at_a_glance(sections: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Per model: PPL and AVG at its longest scored context, context gain, LongPPL, the effective
    lengths (from likelihood, on key tokens, from retrieval), retrieval."""
    rows: dict[str, dict] = {}
    lm = sections["language_modelling"]
    if not lm.empty:
        for model, part in lm.groupby("model", sort=False):
            longest = part[part["context"] == part["context"].max()]
            rows.setdefault(model, {}).update({"longest_context": int(longest["context"].iloc[0]), "ppl_at_longest": float(longest["ppl"].mean()), "avg_at_longest": float(longest["avg"].mean())})
    gain = sections["context_gain"]
    if not gain.empty:
        for model, part in gain.groupby("model", sort=False):
            rows.setdefault(model, {}).update({
                "ppl_long": float(part["ppl_long"].mean()), "ppl_short": float(part["ppl_short"].mean()),
                "mean_gain": float(part["mean_gain"].mean()), "key_fraction": float(part["key_fraction"].mean()),
                "longppl": float(part["longppl"].mean()) if part["longppl"].notna().any() else None,
            })
    effective = sections["effective_length"]
    if not effective.empty:
        for (model, measure), part in effective.groupby(["model", "measure"], sort=False):
            rows.setdefault(model, {})[measure.replace(" ", "_").replace("-", "_")] = part["text"].iloc[0]
    retrieval = sections["retrieval"]
    if not retrieval.empty:
        for model, part in retrieval.groupby("model", sort=False):
            weights = part["n"]
            rows.setdefault(model, {}).update({
                "retrieval_accuracy": float((part["accuracy"] * weights).sum() / weights.sum()),
                "retrieval_mean_rank": float((part["mean_rank"] * weights).sum() / weights.sum()),
            })
    return pd.DataFrame([{"model": m} | values for m, values in rows.items()])


def probe_kinds() -> tuple[type[Result], ...]:
    """Every catalogued kind that adds rows to a probe-report section (`Result.PROBE`)."""
    return tuple(cls for cls in map(result_class, catalog.RESULTS) if cls.PROBE)


def probe_report(run_dirs: list[Path], out: Path) -> ProbeReport:
    """The report over `run_dirs`, each read as its result (a kind that declares probe-report
    sections: sweep/score, context-gain, effective-length, retrieval, ...; another kind is
    refused in one line) and adding its rows to them."""
    if not run_dirs:
        raise UserError("give at least one run directory")
    kinds = probe_kinds()
    rows: dict[str, list[pd.DataFrame]] = {k: [] for k in dict.fromkeys([*SECTIONS, *(s.key for cls in kinds for s in cls.PROBE)])}
    for run_dir in run_dirs:
        for key, part in read_result(run_dir, reader="probe-report", kinds=kinds).probe_rows(run_dir).items():
            rows[key].append(part)
    sections = {k: pd.concat(v, ignore_index=True) if v else pd.DataFrame() for k, v in rows.items()}
    glance = at_a_glance(sections)
    return ProbeReport(Path(out), [str(d) for d in run_dirs], glance, sections)
