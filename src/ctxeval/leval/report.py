"""Write `ctxeval leval` results: scores.json (the numbers) and scores.md (tables and notes)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from ctxeval.leval.score import LevalScores, score_predictions

SCORES_JSON = "scores.json"
SCORES_MD = "scores.md"
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


def run_leval(predictions: Path, out: Path, variant: str = "leval", progress: bool = True, tokenize: str = "plain") -> LevalScores:
    """Score the prediction files and write DIR/scores.json and DIR/scores.md."""
    result = score_predictions(predictions, variant, progress, tokenize)
    out.mkdir(parents=True, exist_ok=True)
    (out / SCORES_JSON).write_text(json.dumps(result.as_json(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    (out / SCORES_MD).write_text(markdown(result), encoding="utf-8")
    return result
