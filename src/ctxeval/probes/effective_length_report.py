"""What an effective-length run reports: the curve table, the Markdown and the plot."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from ctxeval.report.lengths import describe_length  # noqa: E402


def curve_frame(summary: dict) -> pd.DataFrame:
    """One row per (model, length): mean log-probability and AVG, the gain over the shortest
    length with its interval, and the key tokens' mean log-probability (curve.csv)."""
    rows = []
    for model, s in summary["models"].items():
        for point in s["curve"]:
            gain = point["gain"] or {"estimate": 0.0, "low": None, "high": None, "interval": "none"}
            rows.append({"model": model, "length": point["length"], "mean_context": point["mean_context"], "logprob": point["logprob"], "avg": point["avg"],
                         "gain": gain["estimate"], "gain_low": gain["low"], "gain_high": gain["high"], "gain_interval": gain["interval"],
                         "key_logprob": point["key_logprob"]})
    return pd.DataFrame(rows)


def _ci(e: dict | None, fmt: str = "+.4f") -> str:
    if e is None:
        return "—"
    if e["interval"] == "none":
        return f"{e['estimate']:{fmt}} (no interval)"
    return f"{e['estimate']:{fmt}} [{e['low']:{fmt}}, {e['high']:{fmt}}]"


def render_markdown(summary: dict) -> str:
    """effective_length.md: L* per model, then each model's gains per doubling."""
    est = summary["estimator"]
    lines = [
        "# Effective context length",
        "",
        f"{len(summary['documents'])} document(s), {summary['spans']} spans of {summary['targets_per_span']} targets, the same targets at every length "
        f"({', '.join(str(x) for x in summary['lengths'])} tokens; target j of a span sees L + j).",
        f"{est['rule']} ({100 * est['confidence']:g} %, {est['replicates']} replicates).",
        "",
        "| model | max_context | L* | key-token L* | gain " + f"{summary['lengths'][0]}→{summary['lengths'][-1]} (nats/token) | last significant doubling | key tokens |",
        "|---|---|---|---|---|---|---|",
    ]
    for model, s in summary["models"].items():
        first_gain = s["curve"][-1]["gain"]
        last = s["last_significant_doubling"]
        lines.append(f"| {model} | {s['max_context'] or '—'} | {describe_length(s['effective_length'])} | {describe_length(s['key_effective_length'])} | "
                     f"{_ci(first_gain)} | {last or '—'} | {s['n_key']} of {s['n_targets']} |")
    for model, s in summary["models"].items():
        e = s["effective_length"]
        if e.get("no_gain_seen"):
            lines.append(f"\n{model}: no gain at the longest length ({e['no_gain_seen']}), so L* is the shortest length.")
    warnings = {s["effective_length"].get("warning") for s in summary["models"].values()} - {None}
    lines += [f"\nIntervals over {len(summary['documents'])} documents: {w}; read them as rough." for w in sorted(warnings)]
    if summary["comparisons"]:
        lines += ["", "| gain B − A | lengths | difference (nats/token) | spans |", "|---|---|---|---|"]
        for c in summary["comparisons"]:
            lines.append(f"| {c['b']} − {c['a']} | {c['lengths'][0]}→{c['lengths'][1]} | {_ci(c['gain_difference'])} | {c['spans']} |")
    for model, s in summary["models"].items():
        lines += ["", f"## {model}", "", "| doubling | log p gain | AVG gain | key-token log p gain |", "|---|---|---|---|"]
        for d in s["doublings"]:
            lines.append(f"| {d['from']}→{d['to']} | {_ci(d['logprob_gain'])} | {_ci(d['avg_gain'])} | {_ci(d['key_logprob_gain'])} |")
    return "\n".join(lines) + "\n"


def plot_curves(summary: dict, path: Path) -> None:
    """Left: gain over the shortest length with its paired interval, L* marked; right: the
    key tokens' mean log-probability."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5), constrained_layout=True)
    curves = curve_frame(summary)
    for i, (model, part) in enumerate(curves.groupby("model", sort=False)):
        colour = f"C{i % 10}"
        low = part["gain_low"].astype(float).fillna(part["gain"].astype(float))  # None (no interval) as float first: no object downcast
        high = part["gain_high"].astype(float).fillna(part["gain"].astype(float))
        left.plot(part["length"], part["gain"], marker="o", color=colour, label=model)
        left.fill_between(part["length"], low, high, color=colour, alpha=0.2)
        star = summary["models"][model]["effective_length"]
        left.axvline(star["value"], color=colour, ls="--", lw=1)
        if part["key_logprob"].notna().any():
            right.plot(part["length"], part["key_logprob"], marker="o", color=colour, label=model)
    for ax, ylabel in ((left, "mean log p gain over the shortest length (nats)"), (right, "mean log p of key tokens (nats)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("context length L (tokens)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="small")
    left.set_title("gain with 95 % band; dashed: L*")
    fig.savefig(path, dpi=110)
    plt.close(fig)
