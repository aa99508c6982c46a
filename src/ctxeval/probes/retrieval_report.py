"""What a retrieval run's cases report: cells per (model, lines or token target, depth), the
content of results.json and results.md, and the heatmaps."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from ctxeval.report.outputs import json_rows  # noqa: E402

CASES_FILE = "cases.parquet"
LEGACY_CASES_FILE = "cases.jsonl"  # the case records of older run directories, still read


def results_json(variant: str, cells: pd.DataFrame, models: list[str]) -> dict:
    """results.json: per model (in run order, the first the primary one) and (lines or token
    target, depth): accuracy, mean_rank, n, ..."""
    return {
        "variant": variant,
        "model": models[0],
        "cells": json_rows(cells[cells["model"] == models[0]].drop(columns="model")),
        "by_model": {m: json_rows(cells[cells["model"] == m].drop(columns="model")) for m in models},
        "definitions": {
            "accuracy": "share of cases whose greedy answer equals the value exactly",
            "mean_rank": "mean full-vocabulary rank of the answer's first token after the prompt (1 = the model's top choice)",
            "mean_value_logprob": "mean over cases of the summed log-probability of the value's tokens (teacher forcing)",
            "generated": "cases whose accuracy needed real greedy generation (the answer left generation's greedy chain)",
            "tokens_target": "with --tokens: the prompt size asked for; lines is the most lines that fit it for this model",
        },
    }


def results_markdown(variant: str, cells: pd.DataFrame) -> str:
    """results.md: the cells as one table."""
    return f"# Line retrieval ({variant})\n\n" + cells.to_markdown(index=False, floatfmt=".3f") + "\n"


def cell_table(cases: pd.DataFrame) -> pd.DataFrame:
    """Aggregate cases per (model, lines, depth), or per (model, token target, lines, depth)."""
    grouped = cases.groupby(cell_keys(cases), sort=True)
    cells = grouped.agg(
        n=("correct", "size"),
        accuracy=("correct", "mean"),
        mean_rank=("first_rank", "mean"),
        median_rank=("first_rank", "median"),
        top1=("first_rank", lambda r: float((r == 1).mean())),
        mean_value_logprob=("value_logprob", "mean"),
        mean_prompt_tokens=("prompt_tokens", "mean"),
        mean_char_depth=("char_depth", "mean"),
        generated=("accuracy_method", lambda m: int((m == "greedy generation").sum())),
    ).reset_index()
    return cells


RETRIEVAL_THRESHOLD = 0.85  # RULER's: Llama-2-7B's mean score at 4K (85.6), rounded


def effective_lengths(cells: pd.DataFrame, threshold: float = RETRIEVAL_THRESHOLD) -> dict[str, dict]:
    """RULER-style effective length per model of a run sized in tokens (--tokens): the longest
    prompt size whose accuracy (over depths) and every shorter one's stay at or above
    `threshold`; None when the shortest already falls below it. Empty without --tokens."""
    if "tokens_target" not in cells or not cells["tokens_target"].notna().any():
        return {}
    out = {}
    for model, part in cells.groupby("model", sort=False):
        per_length = part.groupby("tokens_target").apply(lambda g: float((g["accuracy"] * g["n"]).sum() / g["n"].sum()), include_groups=False).sort_index()
        passing = (per_length >= threshold).cummin()
        value = int(per_length.index[passing.to_numpy()].max()) if passing.any() else None
        out[str(model)] = {"value": value, "threshold": threshold, "at_least": bool(passing.all()),
                           "accuracy": {str(int(k)): v for k, v in per_length.items()}}
    return out


def cell_keys(table: pd.DataFrame) -> list[str]:
    """What a cell is: (model, lines, depth), or (model, token target, lines, depth) for a run
    with --tokens."""
    with_tokens = "tokens_target" in table and table["tokens_target"].notna().any()
    return ["model", "tokens_target", "lines", "depth"] if with_tokens else ["model", "lines", "depth"]


def plot_heatmaps(cells: pd.DataFrame, path: Path) -> None:
    """Per model: accuracy and log2 mean rank over (lines x depth)."""
    models = list(dict.fromkeys(cells["model"]))
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


def read_cases(run_dir: Path) -> pd.DataFrame:
    """The recorded cases of a finished retrieval run (also of one written before cases were
    Parquet records: its `cases.jsonl`), in plan order; empty if it has none yet."""
    run_dir = Path(run_dir)
    if (run_dir / CASES_FILE).is_file():
        return pq.read_table(run_dir / CASES_FILE).to_pandas().drop(columns="case_index")
    legacy = run_dir / LEGACY_CASES_FILE
    lines = legacy.read_text(encoding="utf-8").splitlines() if legacy.is_file() else []
    rows = []
    for line in lines:
        try:
            rows.append({"tokens_target": None, **json.loads(line)})
        except json.JSONDecodeError:
            break  # a torn last line of an interrupted run
    return pd.DataFrame(rows)
