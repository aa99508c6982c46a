"""Every figure a result folder holds, drawn from its Result's data (each kind's renderer
declares its `draw`, which calls one of these).

The figures are drawn when the result is written (the engine's one write path), so a Result
itself holds data only."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ctxeval.metrics.config import MetricConfig
from ctxeval.metrics.registry import panel_metrics
from ctxeval.results.effective_length import curve_frame
from ctxeval.results.ruler import MEAN_TASK
from ctxeval.render import intervals
from ctxeval.stats.interval import column as interval_column


def _pyplot() -> Any:
    """matplotlib's pyplot on the file-only Agg backend, imported when a figure is drawn: at
    import time it would be a fifth of every command's start-up, most of which draw nothing."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_scores(summary: pd.DataFrame, metrics: MetricConfig, path: Path) -> None:
    """Write a figure of the plotted metrics (`registry.panel_metrics`: AVG, RP, PPL and
    approximate PPL), two panels a row, against context length, each point with its interval
    (the summary's columns `<metric>.low`/`.high`), whose level and method the caption names
    from the rows."""
    panels = panel_metrics(metrics)
    rows = math.ceil(len(panels) / 2)
    plt = _pyplot()
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
            yerr = np.vstack([y - group[interval_column(column, "low")].to_numpy(dtype=float), group[interval_column(column, "high")].to_numpy(dtype=float) - y])
            ax.errorbar(group["nominal_len"] * shift, y, yerr=yerr, marker="o", capsize=3, label=label)
        ax.set_xscale("log", base=2)
        if metric.log_scale and (summary[column] > 0).any():  # an API run can have no exact ppl (all NaN)
            ax.set_yscale("log")
        ax.set_xlabel("context length (tokens)")
        ax.set_title(metric.title)
        ax.grid(True, which="both", alpha=0.3)
    axes[0, 0].legend(fontsize="small")
    fig.suptitle(f"intervals: {_interval_caption([k for metric in panels for k in intervals.kinds(summary, metric.key)])}", fontsize="medium")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _interval_caption(kinds: list[tuple[float, str]]) -> str:
    """Which intervals the bars show, each (confidence, method) once; a bootstrap over one
    start's targets understates the noise."""
    caption = intervals.header(sorted(set(kinds)))
    if any(method.startswith("bootstrap") for _, method in kinds):
        caption += " (one start per length: the bars omit start-to-start noise; use --repeats)"
    return caption


def scatter_grid(table: pd.DataFrame, pairs: pd.DataFrame, path: Path) -> None:
    """`agreement`: one scatter per (task, cheap) pair of measures (long table: model, measure, value), models numbered in order."""
    models = list(dict.fromkeys(table["model"]))
    number = {m: i + 1 for i, m in enumerate(models)}
    wide = table.pivot(index="model", columns="measure", values="value")
    tasks, cheap = list(dict.fromkeys(pairs["task"])), list(dict.fromkeys(pairs["cheap"]))
    plt = _pyplot()
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


def plot_gain(tables: dict[tuple[str, str], pd.DataFrame], by_distance: pd.DataFrame, path: Path) -> None:
    """Left: mean gain against long-context length; right: distribution of the gain on distant targets."""
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5), constrained_layout=True)
    for (model, text_id), group in by_distance.groupby(["model", "text_id"], sort=False):
        mid = (group["context_from"].clip(lower=1) * group["context_to"]) ** 0.5
        err = [group["mean_gain"] - group["mean_gain.low"], group["mean_gain.high"] - group["mean_gain"]]  # NaN (one target): no bar
        left.errorbar(mid, group["mean_gain"], yerr=err, marker="o", capsize=3, label=f"{model} · {text_id}")
    left.axhline(0, color="grey", lw=0.8)
    left.set_title(f"mean gain by distance ({intervals.table_header(by_distance, 'mean_gain')})", fontsize="medium")
    left.set_xscale("log", base=2)
    left.set_xlabel("long context of the target (tokens, bin centre)")
    left.set_ylabel("mean gain log p_long - log p_short (nats)")
    left.grid(True, which="both", alpha=0.3)
    left.legend(fontsize="small")
    for (model, text_id), table in tables.items():
        gains = table.loc[table["distant"], "gain"]
        if len(gains):
            right.hist(gains.clip(-6, 6), bins=60, histtype="step", label=f"{model} · {text_id}")
    right.set_xlabel("gain on targets with distant context (nats, clipped to ±6)")
    right.set_ylabel("targets")
    if right.get_legend_handles_labels()[0]:
        right.set_yscale("log")
        right.legend(fontsize="small")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_curves(summary: dict, path: Path) -> None:
    """effective_length.png: `curves_figure`, saved."""
    plt = _pyplot()
    fig = curves_figure(summary)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def curves_figure(summary: dict) -> Any:
    """Left: gain over the shortest length with its paired interval, L* marked; right: the
    key tokens' mean log-probability (or, where no target is one, that said). The legends sit
    below the panels, so a long model name widens the figure's margin instead of covering a
    curve or the other panel."""
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5), layout="constrained")
    curves = curve_frame(summary)
    for i, (model, part) in enumerate(curves.groupby("model", sort=False)):
        colour = f"C{i % 10}"
        low = part["gain.low"].astype(float).fillna(part["gain"].astype(float))  # NaN (no interval): the estimate
        high = part["gain.high"].astype(float).fillna(part["gain"].astype(float))
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
            ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.16), ncols=1, frameon=False)
    if not right.get_legend_handles_labels()[0]:
        right.set_xlim(left.get_xlim())
        right.text(0.5, 0.5, "no key tokens in this run", ha="center", va="center", transform=right.transAxes)
        right.set_yticks([])
    left.set_title(f"gain with its band ({intervals.table_header(curves[curves['gain.method'] != ''], 'gain')}); dashed: L*")
    return fig


def plot_heatmaps(cells: pd.DataFrame, path: Path) -> None:
    """Per model: accuracy and log2 mean rank over (lines x depth)."""
    models = list(dict.fromkeys(cells["model"]))
    plt = _pyplot()
    fig, axes = plt.subplots(len(models), 2, figsize=(11, 3.8 * len(models)), squeeze=False, constrained_layout=True)
    for row, model in zip(axes, models):
        part = cells[cells["model"] == model]
        for ax, column, title, cmap, transform in (
            (row[0], "accuracy", "accuracy (greedy exact match)", "viridis", lambda x: x),
            (row[1], "mean_rank", "log2 mean rank of the answer", "magma_r", np.log2),
        ):
            size = "tokens_target" if "tokens_target" in part else "lines"
            pivot = part.pivot(index="depth", columns=size, values=column).sort_index()
            values = transform(pivot.to_numpy(dtype=float))
            image = ax.imshow(values, aspect="auto", cmap=cmap, origin="lower", vmin=0 if column == "accuracy" else None, vmax=1 if column == "accuracy" else None)
            ax.set_xticks(range(len(pivot.columns)), [str(c) for c in pivot.columns])
            ax.set_yticks(range(len(pivot.index)), [f"{d:g}" for d in pivot.index])
            ax.set_xlabel("prompt tokens (target)" if size == "tokens_target" else "lines in the record")
            ax.set_ylabel("depth of the queried line")
            ax.set_title(f"{model}: {title}")
            for (i, j), v in np.ndenumerate(pivot.to_numpy(dtype=float)):
                r, g, b, _ = image.cmap(image.norm(values[i, j]))
                ink = "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"
                ax.text(j, i, f"{v:.2f}" if column == "accuracy" else f"{v:.0f}", ha="center", va="center", color=ink, fontsize=8)
            fig.colorbar(image, ax=ax)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_ruler(table: pd.DataFrame, path: Path, threshold: float, mean_label: Callable[[int], str]) -> None:
    """Score by length, one panel per model: each task thin, the mean thick (its legend
    `mean_label(tasks)`) with its interval's band (its level and method, from the rows, in the
    legend), the threshold dashed."""
    models = list(dict.fromkeys(table["model"]))
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(models), figsize=(5.5 * len(models), 4), squeeze=False, constrained_layout=True)
    for ax, model in zip(axes[0], models):
        part = table[table["model"] == model]
        for task, curve in part.groupby("task", sort=False):
            curve = curve.sort_values("length")
            thick = task == MEAN_TASK
            label = mean_label(part["task"].nunique() - 1) if thick else task
            ax.plot(curve["length"], curve["score"], marker="o", lw=2.5 if thick else 1, alpha=1 if thick else 0.6, label=label, color="black" if thick else None)
            if thick:
                ax.fill_between(curve["length"], curve["score.low"], curve["score.high"], color="grey", alpha=0.25,
                                label=f"{intervals.table_header(curve, 'score')} interval")
        ax.axhline(threshold, ls="--", color="red", lw=1)
        ax.set_xscale("log", base=2)
        ax.set_ylim(-2, 102)
        ax.set_xlabel("length (tokens)")
        ax.set_ylabel("score (%)")
        ax.set_title(model, fontsize=9)
    axes[0][-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1, 0.5))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_report(sections: dict[str, pd.DataFrame], path: Path) -> None:
    """PPL against context, mean gain per model with its interval, retrieval accuracy against lines."""
    plt = _pyplot()
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
        err = [(gain["mean_gain"] - gain["mean_gain.low"]).clip(lower=0).to_numpy(), (gain["mean_gain.high"] - gain["mean_gain"]).clip(lower=0).to_numpy()]
        axes[1].bar(labels, gain["mean_gain"], yerr=err, capsize=4)
        axes[1].axhline(0, color="grey", lw=0.8)
        axes[1].tick_params(axis="x", labelsize="x-small")
        axes[1].set_title(f"mean context gain (nats/token, {intervals.table_header(gain, 'mean_gain')})")
    else:
        axes[1].set_title("mean context gain (nats/token)")
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
