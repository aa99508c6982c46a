"""One report over several runs: does a lower perplexity come with better use of long context?

The rows of each kind of run — `sweep`/`score` (perplexity and rank scores per window),
`context-gain` (long vs short context, LongPPL) and `retrieval` — and what puts every model's
numbers side by side: one section per probe plus an at-a-glance table. `probe_report` reads the
runs as results and builds the report's result.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ctxeval.errors import UserError
from ctxeval.results.base import read_result
from ctxeval.results.context_gain import ContextGainResult
from ctxeval.results.effective_length import EffectiveLengthResult, describe_length
from ctxeval.results.probe_report import SECTIONS, ProbeReport
from ctxeval.results.retrieval import RetrievalResult
from ctxeval.results.runs import require_complete
from ctxeval.results.scoring import RunResult

PROBE_KINDS = (RunResult, ContextGainResult, EffectiveLengthResult, RetrievalResult)


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


def lm_rows(run: Path, summary: pd.DataFrame) -> pd.DataFrame:
    """Language-modelling rows of a sweep/score run, from its summary rows."""
    rows = summary[["model", "text_id", "method", "context_mode", "nominal_len", "n", "ppl", "bpb", "avg", "rp", "top1"]].rename(columns={"nominal_len": "context"})
    rows.insert(0, "run", str(run))
    return rows


def gain_rows(run: Path, summary: dict) -> pd.DataFrame:
    """Context-gain rows of a context-gain run, from its summary (summary.json's content)."""
    rows = []
    for text_id, entry in summary["texts"].items():
        for model, s in entry["by_model"].items():
            rows.append({"run": str(run), "model": model, "text_id": text_id, "window": summary["window"], "short": summary["short"],
                         "n": s["n_tokens"], "ppl_long": s["ppl_long"], "ppl_short": s["ppl_short"], "mean_gain": s["mean_gain"],
                         **dict(zip(("gain_ci_low", "gain_ci_high"), s["mean_gain_ci"] or (None, None))),
                         "key_fraction": s["key_fraction"], "longppl": s["longppl"], "evaluator": summary["key_tokens"]["evaluator"]})
    return pd.DataFrame(rows)


def effective_rows(run: Path, summary: dict) -> pd.DataFrame:
    """Effective-length rows of an effective-length run: L* and the key-token L* per model."""
    rows = []
    for model, s in summary["models"].items():
        for measure, e in (("effective length", s["effective_length"]), ("key-token effective length", s["key_effective_length"])):
            if e is not None:
                rows.append({"run": str(run), "model": model, "measure": measure, "max_context": s["max_context"], "value": e["value"], "low": e["low"], "high": e["high"],
                             "at_least": e["at_least"], "units": f"{e['units']} {e['unit']}s", "text": describe_length(e)})
    return pd.DataFrame(rows)


def retrieval_length_rows(run: Path, lengths: dict[str, dict]) -> pd.DataFrame:
    """Effective-length rows of a retrieval run sized in tokens: the longest prompt size whose
    accuracy stays at or above the threshold (RULER's rule), per model."""
    rows = []
    for model, e in lengths.items():
        text = "below the shortest size" if e["value"] is None else (f"≥ {e['value']}" if e["at_least"] else str(e["value"]))
        rows.append({"run": str(run), "model": model, "measure": "retrieval effective length", "max_context": None, "value": e["value"], "low": None, "high": None,
                     "at_least": e["at_least"], "units": f"accuracy ≥ {e['threshold']:g}", "text": text})
    return pd.DataFrame(rows)


def retrieval_rows(run: Path, variant: str, cells: pd.DataFrame, models: list[str]) -> pd.DataFrame:
    """Retrieval rows of a retrieval run: its cells pooled over depths, per model (in `models`
    order) and record size."""
    rows = []
    for model in models:
        for lines, part in cells[cells["model"] == model].groupby("lines"):
            n = part["n"].sum()
            rows.append({"run": str(run), "model": model, "variant": variant, "lines": int(lines),
                         "mean_prompt_tokens": float(part["mean_prompt_tokens"].mean()), "n": int(n),
                         "accuracy": float((part["accuracy"] * part["n"]).sum() / n), "mean_rank": float((part["mean_rank"] * part["n"]).sum() / n),
                         "worst_depth_accuracy": float(part["accuracy"].min())})
    return pd.DataFrame(rows)


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
    return ProbeReport(Path(out), [str(d) for d in run_dirs], glance, sections)
