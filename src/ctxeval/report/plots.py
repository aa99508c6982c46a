"""Scores against context length (log2 axis), one line per model x text x setting, with the
95 % interval of every point (over repeated starts, or over the targets of a single start)."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ctxeval.config import MetricConfig  # noqa: E402
from ctxeval.metrics.registry import panel_metrics  # noqa: E402


def plot_scores(summary: pd.DataFrame, metrics: MetricConfig, path: Path) -> None:
    """Write a figure of the plotted metrics (`registry.panel_metrics`: AVG, RP, PPL and
    approximate PPL), two panels a row, against context length, each point with its interval
    (summary columns `<metric>_lo`/`_hi`), named in the figure's caption."""
    panels = panel_metrics(metrics)
    rows = math.ceil(len(panels) / 2)
    fig, axes = plt.subplots(rows, 2, figsize=(11, 4.2 * rows), constrained_layout=True, squeeze=False)
    lines = list(summary.groupby(["model", "text_id", "method", "context_mode"], sort=False))
    # several lines at the same lengths: shift each a little along the log axis so bars do not hide each other
    shifts = 2.0 ** (0.06 * (np.arange(len(lines)) - (len(lines) - 1) / 2))
    for ax, metric in zip(axes.ravel(), panels):
        column = metric.key
        for shift, ((model, text_id, method, mode), group) in zip(shifts, lines):
            group = group.sort_values("nominal_len")
            label = f"{model} · {text_id}" + (f" · {mode}" if method == "sweep" else f" · {method}")
            y = group[column].to_numpy(dtype=float)
            yerr = np.vstack([y - group[f"{column}_lo"].to_numpy(dtype=float), group[f"{column}_hi"].to_numpy(dtype=float) - y])
            ax.errorbar(group["nominal_len"] * shift, y, yerr=yerr, marker="o", capsize=3, label=label)
        ax.set_xscale("log", base=2)
        if metric.log_scale and (summary[column] > 0).any():  # an API run can have no exact ppl (all NaN)
            ax.set_yscale("log")
        ax.set_xlabel("context length (tokens)")
        ax.set_title(metric.title)
        ax.grid(True, which="both", alpha=0.3)
    axes[0, 0].legend(fontsize="small")
    fig.suptitle(f"95 % intervals: {_interval_caption(summary['interval'])}", fontsize="medium")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _interval_caption(kinds: pd.Series) -> str:
    """Which interval the bars show; a bootstrap over one start's targets understates the noise."""
    caption = "; ".join(sorted(set(kinds)))
    if any(k.startswith("bootstrap") for k in kinds):
        caption += " (one start per length: the bars omit start-to-start noise; use --repeats)"
    return caption


def scatter_grid(table: pd.DataFrame, pairs: pd.DataFrame, path: Path) -> None:
    """`agreement`: one scatter per (task, cheap) pair of measures (long table: model, measure, value), models numbered in order."""
    models = list(dict.fromkeys(table["model"]))
    number = {m: i + 1 for i, m in enumerate(models)}
    wide = table.pivot(index="model", columns="measure", values="value")
    tasks, cheap = list(dict.fromkeys(pairs["task"])), list(dict.fromkeys(pairs["cheap"]))
    fig, axes = plt.subplots(len(tasks), len(cheap), figsize=(2.6 * len(cheap), 2.4 * len(tasks)), squeeze=False, constrained_layout=True)
    for i, t in enumerate(tasks):
        for j, c in enumerate(cheap):
            ax = axes[i][j]
            match = pairs[(pairs["task"] == t) & (pairs["cheap"] == c)]
            if match.empty:
                ax.set_axis_off()
                continue
            both = wide[[c, t]].dropna()
            ax.scatter(both[c], both[t], s=14)
            for model, (x, y) in both.iterrows():
                ax.annotate(str(number[model]), (x, y), fontsize=6, xytext=(2, 2), textcoords="offset points")
            rho = match["spearman"].iloc[0]
            ax.set_title(f"ρ = {rho:.2f}" if rho == rho and rho is not None else "ρ undefined", fontsize=8)
            ax.tick_params(labelsize=6)
            if i == len(tasks) - 1:
                ax.set_xlabel(c, fontsize=7)
            if j == 0:
                ax.set_ylabel(t, fontsize=7)
    fig.savefig(path, dpi=100)
    plt.close(fig)
