"""The result of `ctxeval leval` from its scores, and its Markdown: tables per model × task,
per-model averages, notes."""

from __future__ import annotations

import math
from pathlib import Path

from ctxeval.leval.score import LevalScores
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


def markdown(result: LevalScores) -> str:
    """One row per model × task, then per-model averages, then notes."""
    data = result.as_json()
    header = "| model | task | n | " + " | ".join(label for _, label in COLUMNS) + " |"
    rule = "|---|---|---:|" + "---:|" * len(COLUMNS)
    lines = [f"# L-Eval scores (variant: {result.variant}, tokenize: {result.tokenize})", "", "Values ×100; ΔL = output words − reference words.", "", header, rule]
    for model in sorted(data):
        for task in sorted(data[model]):
            values = data[model][task]
            cells = " | ".join(_cell(values.get(key)) for key, _ in COLUMNS)
            lines.append(f"| {model} | {task} | {values['n']} | {cells} |")
    lines += ["", "## Per-model averages over tasks", "", "| model | " + " | ".join(label for _, label in COLUMNS) + " |",
              "|---|" + "---:|" * len(COLUMNS)]
    for model, values in sorted(model_averages(data).items()):
        lines.append(f"| {model} | " + " | ".join(_cell(values.get(key)) for key, _ in COLUMNS) + " |")
    notes = result.notes()
    if notes:
        lines += ["", "## Notes", ""] + [f"- {note}" for note in notes]
    return "\n".join(lines) + "\n"


def leval_result(scores: LevalScores, out: Path) -> LevalResult:
    """What `ctxeval leval` writes into `out`: the numbers, the settings, the notes and the tables."""
    return LevalResult(scores.as_json(), scores.variant, scores.tokenize, tuple(scores.notes()), Path(out), markdown(scores))
