"""kvpress evaluation results: the folders `evaluation/evaluate.py` writes, one per config,
named `<dataset>__[<data_dir>__]<model>__<press>__<ratio>[__...]` and holding `predictions.csv`
(the dataset's columns but the context, with `predicted_answer`) and `metrics.json`.

Each config is a variant. The RULER dataset is scored per sample as kvpress's
`benchmarks/ruler/calculate_metrics.py` scores it: control characters dropped from the stripped
prediction, then `string_match_part` for `qa_*` tasks and `string_match_all` for the others
(the share of the references found, case-insensitively). Samples pair by task and their place
among the task's rows (the csv keeps the dataset's order; no id is written), with the question,
answer prefix and references as the prompt's identity, so configs run on other samples
(`fraction` < 1) are named, not paired. Where `metrics.json` is there, each task's mean score
must equal its `string_match`, or the folder is refused.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pandas as pd

from ctxeval.byor.table import cluster_of, digest, frame, unreadable
from ctxeval.metrics.ruler import match_all

PREDICTIONS, METRICS = "predictions.csv", "metrics.json"
MEASURE = "string_match"
_CONTROL = re.compile(r"[\x00-\x1f]")
_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
SCORED = ("ruler",)


def configs(path: Path) -> list[Path]:
    """The config folders of a results folder (or the folder itself where it is one)."""
    if (path / PREDICTIONS).is_file():
        return [path]
    return sorted(p.parent for p in path.glob(f"*/{PREDICTIONS}")) if path.is_dir() else []


def is_kvpress(path: Path) -> bool:
    return bool(configs(path))


def references(cell: str, file: Path) -> list[str]:
    """A references cell: a list as pandas writes a dataset's array column (numpy's repr,
    `['a' 'b']`, each string in Python's quoting) or a Python/JSON list; other text is one reference."""
    if not cell.startswith("["):
        return [cell]
    found = [ast.literal_eval(m.group(0)) for m in _QUOTED.finditer(cell)]
    if not found:
        raise unreadable(file, f"answer {cell[:40]!r} is no list of references")
    return [str(r) for r in found]


def sample_score(task: str, prediction: str, refs: list[str]) -> float:
    text = _CONTROL.sub("", prediction.strip()).strip()
    if task.split("_")[0] == "qa":
        return max(1.0 if r.lower() in text.lower() else 0.0 for r in refs)
    return match_all(text, refs)


def read_config(folder: Path, run: str, cluster: str | None = None) -> pd.DataFrame:
    """One config's per-sample scores, checked against its metrics.json; `cluster` names a
    column that samples sharing a document share."""
    file = folder / PREDICTIONS
    name = folder.parent.name if folder.name.isdigit() else folder.name  # evaluate.py numbers a rerun's folder inside the first
    dataset = name.split("__")[0]
    if dataset not in SCORED:
        raise unreadable(folder, f"kvpress dataset {dataset!r} has no per-sample scorer here (scored: {', '.join(SCORED)}); write a CSV of sample, score")
    df = pd.read_csv(file, keep_default_na=False)
    missing = [c for c in ("task", "question", "answer", "predicted_answer") if c not in df]
    if missing:
        raise unreadable(file, f"no {', '.join(missing)} column")
    rows = []
    for task, part in df.groupby("task", sort=False):
        for place, row in enumerate(part.itertuples(index=False)):
            refs = references(str(row.answer), file)
            prefix = str(getattr(row, "answer_prefix", ""))
            rows.append({"run": run, "task": str(task), "measure": MEASURE, "sample": place,
                         "score": sample_score(str(task), str(row.predicted_answer), refs),
                         "prompt_hash": digest(json.dumps([row.question, prefix, refs])),
                         "cluster": cluster_of(row._asdict(), cluster, file, place)})
    table = frame(rows, file)
    _check_metrics(folder / METRICS, table)
    return table


def _check_metrics(file: Path, table: pd.DataFrame) -> None:
    if not file.is_file():
        return
    metrics = json.loads(file.read_text(encoding="utf-8"))
    for task, part in table.groupby("task"):
        stated = metrics.get(task, {}).get(MEASURE)
        if stated is not None and abs(round(100 * part["score"].mean(), 2) - float(stated)) > 0.011:
            raise unreadable(file, f"{task}'s string_match {stated} is not the mean of predictions.csv's scores ({100 * part['score'].mean():.2f})")


def read_kvpress(path: Path, label: str, several: bool, cluster: str | None = None) -> list[tuple[str, pd.DataFrame]]:
    """(label, scores) of every config under `path`: the config folder's name where the folder
    holds several configs (or several folders are compared), else `label`."""
    found = configs(path)
    if not found:
        raise unreadable(path, f"no {PREDICTIONS} (not a kvpress results folder)")
    return [(name, read_config(folder, name, cluster)) for folder in found for name in [folder.name if several or len(found) > 1 else label]]
