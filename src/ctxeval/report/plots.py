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
