"""scores.md of `ctxeval leval`: tables per model × task, per-model averages, notes."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from ctxeval.render.renderer import Renderer
from ctxeval.results.leval import LevalResult


COLUMNS = (("exact_match", "EM"), ("f1", "F1"), ("rouge1", "R-1"), ("rouge2", "R-2"), ("rougeL", "R-L"), ("delta_len", "ΔL"))


def _cell(value: float | None) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.2f}"


def model_averages(scores: dict[str, dict[str, dict]]) -> dict[str, dict[str, float]]:
    """Per model, each metric averaged over the tasks that report it (L-Eval's leaderboard
    "EM/F1/ROUGE avg": the mean of per-task scores)."""
    out: dict[str, dict[str, float]] = {}
    for model, tasks in scores.items():
        sums: dict[str, list[float]] = {}
        for values in tasks.values():
            for key, value in values.items():
                if key != "n":
                    sums.setdefault(key, []).append(value)
        out[model] = {key: sum(v) / len(v) for key, v in sums.items()}
    return out


def markdown(data: dict[str, dict[str, dict]], variant: str, tokenize: str, notes: Sequence[str]) -> str:
    """One row per model × task, then per-model averages, then notes."""
    header = "| model | task | n | " + " | ".join(label for _, label in COLUMNS) + " |"
    rule = "|---|---|---:|" + "---:|" * len(COLUMNS)
    lines = [f"# L-Eval scores (variant: {variant}, tokenize: {tokenize})", "", "Values ×100; ΔL = output words − reference words.", "", header, rule]
    for model in sorted(data):
        for task in sorted(data[model]):
            values = data[model][task]
            cells = " | ".join(_cell(values.get(key)) for key, _ in COLUMNS)
            lines.append(f"| {model} | {task} | {values['n']} | {cells} |")
    lines += ["", "## Per-model averages over tasks", "", "| model | " + " | ".join(label for _, label in COLUMNS) + " |",
              "|---|" + "---:|" * len(COLUMNS)]
    for model, values in sorted(model_averages(data).items()):
        lines.append(f"| {model} | " + " | ".join(_cell(values.get(key)) for key, _ in COLUMNS) + " |")
    if notes:
        lines += ["", "## Notes", ""] + [f"- {note}" for note in notes]
    return "\n".join(lines) + "\n"


def texts(r: LevalResult) -> LevalResult:
    """scores.md, from the scores."""
    return replace(r, markdown=markdown(r.scores, r.variant, r.tokenize, r.notes))


RENDERER = Renderer(texts)
