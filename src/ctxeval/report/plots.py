"""Scores against context length (log2 axis), one line per model x text x setting, with the
95 % interval of every point (over repeated starts, or over the targets of a single start)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

_PANELS = (("avg", "average rank score (AVG)"), ("rp", "reciprocal rank score"), ("ppl", "PPL (exact)"), ("approx_ppl", "approx PPL (the thesis's PPL: top-k + penalty)"))


def plot_scores(summary: pd.DataFrame, path: Path) -> None:
    """Write a 2x2 figure of AVG, RP, PPL and approximate PPL against context length, each point
    with its interval (summary columns `<metric>_lo`/`_hi`), named in the figure's caption."""
    fig, axes = plt.subplots(2, 2, figsize=(11, 8.4), constrained_layout=True)
    lines = list(summary.groupby(["model", "text_id", "method", "context_mode"], sort=False))
    # several lines at the same lengths: shift each a little along the log axis so bars do not hide each other
    shifts = 2.0 ** (0.06 * (np.arange(len(lines)) - (len(lines) - 1) / 2))
    for ax, (column, title) in zip(axes.ravel(), _PANELS):
        for shift, ((model, text_id, method, mode), group) in zip(shifts, lines):
            group = group.sort_values("nominal_len")
            label = f"{model} · {text_id}" + (f" · {mode}" if method == "sweep" else f" · {method}")
            y = group[column].to_numpy(dtype=float)
            yerr = np.vstack([y - group[f"{column}_lo"].to_numpy(dtype=float), group[f"{column}_hi"].to_numpy(dtype=float) - y])
            ax.errorbar(group["nominal_len"] * shift, y, yerr=yerr, marker="o", capsize=3, label=label)
        ax.set_xscale("log", base=2)
        if column in ("ppl", "approx_ppl") and (summary[column] > 0).any():  # an API run can have no exact ppl (all NaN)
            ax.set_yscale("log")
        ax.set_xlabel("context length (tokens)")
        ax.set_title(title)
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
