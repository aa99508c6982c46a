"""Scores against context length (log2 axis), one line per model x text x setting."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

_PANELS = (("avg", "average rank score (AVG)"), ("rp", "reciprocal rank score"), ("ppl", "perplexity"), ("approx_ppl", "approximate perplexity (top-k)"))


def plot_scores(summary: pd.DataFrame, path: Path) -> None:
    """Write a 2x2 figure of AVG, RP, PPL and approximate PPL against context length."""
    fig, axes = plt.subplots(2, 2, figsize=(11, 8), constrained_layout=True)
    for ax, (column, title) in zip(axes.ravel(), _PANELS):
        for (model, text_id, method, mode), group in summary.groupby(["model", "text_id", "method", "context_mode"], sort=False):
            group = group.sort_values("nominal_len")
            label = f"{model} · {text_id}" + (f" · {mode}" if method == "sweep" else f" · {method}")
            sd = group.get(f"{column}_sd")
            ax.errorbar(group["nominal_len"], group[column], yerr=None if sd is None or sd.isna().all() else sd, marker="o", capsize=3, label=label)
        ax.set_xscale("log", base=2)
        if column in ("ppl", "approx_ppl") and (summary[column] > 0).any():  # an API run can have no exact ppl (all NaN)
            ax.set_yscale("log")
        ax.set_xlabel("context length (tokens)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    axes[0, 0].legend(fontsize="small")
    fig.savefig(path, dpi=110)
    plt.close(fig)
