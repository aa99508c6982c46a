"""NVIDIA RULER prediction folders: `pred/<task>.jsonl`, one line per sample with `index`,
`pred`, `outputs` (the references) and `input`, as RULER's `scripts/pred/call_api.py` writes
them. Scored per sample with RULER's own metric (metrics/ruler.py): `string_match_part` for the
QA tasks (`qa_*`), `string_match_all` for the others, after RULER's `postprocess_pred`; samples
pair by task and `others.id` (else `index`), as RULER's evaluate.py keys them, with the input's
digest as the prompt's identity.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from ctxeval.byor.table import cluster_of, digest, frame, unreadable
from ctxeval.metrics.ruler import match_all, postprocess_pred

MEASURE = "string_match"


def _folder(path: Path) -> Path:
    return path / "pred" if (path / "pred").is_dir() else path


def is_ruler_pred(path: Path) -> bool:
    """A folder (or its `pred/`) of .jsonl files whose first line has `index`, `pred` and `outputs`."""
    if not path.is_dir():
        return False
    files = sorted(_folder(path).glob("*.jsonl"))
    if not files:
        return False
    with files[0].open(encoding="utf-8") as f:
        first = f.readline()
    try:
        line = json.loads(first)
    except json.JSONDecodeError:
        return False
    return isinstance(line, dict) and {"index", "pred", "outputs"} <= set(line)


def sample_score(task: str, prediction: str, references: list[str]) -> float:
    """RULER's per-sample score in [0, 1]: any reference found (QA tasks), else the share found."""
    text = postprocess_pred(prediction)
    if task.split("_")[0] == "qa":
        return max(1.0 if r.lower() in text.lower() else 0.0 for r in references)
    return match_all(text, references)


def read_ruler_pred(path: Path, run: str, cluster: str | None = None) -> pd.DataFrame:
    """Every task's per-sample RULER score of one prediction folder; `cluster` names a field of
    a line's `others` (or of the line) that samples sharing a document share."""
    rows = []
    for file in sorted(_folder(path).glob("*.jsonl")):
        task = file.stem
        for number, text in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
            if not text.strip():
                continue
            line = json.loads(text)
            missing = [k for k in ("index", "pred", "outputs") if k not in line]
            if missing:
                raise unreadable(file, f"line {number} has no {', '.join(missing)} (not a RULER prediction line)")
            references = line["outputs"] if isinstance(line["outputs"], list) else [line["outputs"]]
            if not references:
                raise unreadable(file, f"line {number} has no reference in outputs")
            others = line.get("others") or {}
            rows.append({"run": run, "task": task, "measure": MEASURE, "sample": others.get("id", line["index"]),
                         "score": sample_score(task, str(line["pred"]), [str(r) for r in references]),
                         "prompt_hash": digest(line["input"]) if "input" in line else "",
                         "cluster": cluster_of(others if cluster in others else line, cluster, file, line["index"])})
    return frame(rows, path)
