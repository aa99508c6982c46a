"""One report over several runs: does a lower perplexity come with better use of long context?

The rows of each kind of run — `sweep`/`score` (perplexity and rank scores per window),
`context-gain` (long vs short context, LongPPL) and `retrieval` — and what puts every model's
numbers side by side: one section per probe plus an at-a-glance table, and the plot. The runs
are read as results by results/probe_report.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from ctxeval.report.lengths import describe_length  # noqa: E402

SECTIONS = ("language_modelling", "context_gain", "effective_length", "retrieval")


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


def render(glance: pd.DataFrame, sections: dict[str, pd.DataFrame], run_dirs: list[Path]) -> str:
    parts = ["# Long-context probe report", "", "Runs: " + ", ".join(f"`{d}`" for d in run_dirs), "", "## At a glance", "",
             _table(glance), "",
             "Reading it: a model that uses distant context has a clearly positive mean gain (nats per token from tokens beyond the short context), "
             "a LongPPL well below its short-context value, and retrieval accuracy that holds up as records grow. Similar perplexities with "
             "different gains or retrieval scores mean perplexity is reflecting local modelling (paper 002). The effective length L* is the shortest context "
             "that brings 95 % of the likelihood gain of the longest one (same targets at every length); the retrieval effective length is the longest "
             "prompt whose retrieval accuracy stays above the threshold.", ""]
    titles = {"language_modelling": "Perplexity and rank-based scores by context", "context_gain": "Context gain and LongPPL",
              "effective_length": "Effective context length", "retrieval": "Line retrieval"}
    for key, title in titles.items():
        if not sections[key].empty:
            parts += [f"## {title}", "", _table(sections[key]), ""]
    return "\n".join(parts)


def plot_report(sections: dict[str, pd.DataFrame], path: Path) -> None:
    """PPL against context, mean gain per model with its interval, retrieval accuracy against lines."""
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5), constrained_layout=True)
    lm, gain, retrieval = sections["language_modelling"], sections["context_gain"], sections["retrieval"]
    if not lm.empty:
        for (run, model, text, method, mode), part in lm.groupby(["run", "model", "text_id", "method", "context_mode"], sort=False):
            part = part.sort_values("context")
            axes[0].plot(part["context"], part["ppl"], marker="o", label=f"{model} · {text} · {method} {mode}")
        axes[0].set_xscale("log", base=2)
        axes[0].legend(fontsize="x-small")
    axes[0].set_title("perplexity by context length")
    axes[0].set_xlabel("context / window (tokens)")
    if not gain.empty:
        labels = [f"{m}\n{t}" for m, t in zip(gain["model"], gain["text_id"])]
        # a BCa interval need not contain its estimate; such a side is drawn with no bar
        err = [(gain["mean_gain"] - gain["gain_ci_low"]).clip(lower=0), (gain["gain_ci_high"] - gain["mean_gain"]).clip(lower=0)]
        axes[1].bar(labels, gain["mean_gain"], yerr=err, capsize=4)
        axes[1].axhline(0, color="grey", lw=0.8)
        axes[1].tick_params(axis="x", labelsize="x-small")
    axes[1].set_title("mean context gain (nats/token, 95% BCa)")
    if not retrieval.empty:
        for (model, variant), part in retrieval.groupby(["model", "variant"], sort=False):
            by_lines = part.groupby("lines").apply(lambda g: (g["accuracy"] * g["n"]).sum() / g["n"].sum(), include_groups=False)
            axes[2].plot(by_lines.index, by_lines.values, marker="o", label=f"{model} · {variant}")
        axes[2].set_ylim(-0.05, 1.05)
        axes[2].legend(fontsize="x-small")
    axes[2].set_title("retrieval accuracy (mean over depths)")
    axes[2].set_xlabel("lines in the record")
    for ax in axes:
        ax.grid(True, alpha=0.3)
    fig.savefig(path, dpi=110)
    plt.close(fig)


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


def _table(frame: pd.DataFrame) -> str:
    return frame.to_markdown(index=False, floatfmt=".4g") if not frame.empty else "(nothing)"


def records(frame: pd.DataFrame) -> list[dict]:
    """A section's rows as probe_report.json holds them."""
    return json.loads(frame.to_json(orient="records")) if not frame.empty else []
