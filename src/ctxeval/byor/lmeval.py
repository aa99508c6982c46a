"""lm-evaluation-harness 0.4.x per-sample logs: the `samples_<task>_<date>.jsonl` files that
`lm_eval --output_path DIR --log_samples` writes (one line per document and filter).

Every numeric per-sample metric a line names in its `metrics` list (acc, acc_norm,
exact_match, ...) is a measure (`metric,filter` where the filter is not "none", as lm-eval's
results name them); samples pair by task and `doc_id`, and `doc_hash`/`prompt_hash` are the
prompt's identity. A multiple-choice line (its `filtered_resps` one [log-likelihood, is-greedy]
pair per choice, its `target` the right choice's index) also gives the right choice's
log-probability among the choices, log softmax of the choices' log-likelihoods at the target.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd

from ctxeval.byor.table import cluster_of, frame, unreadable

SAMPLES = re.compile(r"^samples_(?P<task>.+)_(?P<date>\d{4}-\d{2}-\d{2}T[\d.\-]+)\.jsonl$")


def is_lmeval(path: Path) -> bool:
    """A samples file, or a folder holding one (at any depth: lm-eval nests it by model)."""
    if path.is_file():
        return SAMPLES.match(path.name) is not None
    return path.is_dir() and any(SAMPLES.match(p.name) for p in path.rglob("samples_*.jsonl"))


def sample_files(path: Path) -> dict[str, Path]:
    """Task → its samples file: the newest one where a folder holds several runs of a task;
    refused where its files lie in several folders (lm-eval's one per model)."""
    files = [path] if path.is_file() else sorted(path.rglob("samples_*.jsonl"))
    newest: dict[str, tuple[str, Path]] = {}
    for file in files:
        m = SAMPLES.match(file.name)
        if m is None:
            raise unreadable(file, "not an lm-eval samples file (samples_<task>_<date>.jsonl)")
        if m["task"] not in newest or m["date"] > newest[m["task"]][0]:
            newest[m["task"]] = (m["date"], file)
    if not newest:
        raise unreadable(path, "no lm-eval samples_<task>_<date>.jsonl (run lm_eval with --log_samples)")
    folders = sorted({str(file.parent.relative_to(path)) for file in files}) if path.is_dir() else []
    if len(folders) > 1:
        raise unreadable(path, f"holds the samples of several runs ({', '.join(folders)}): pass each folder as a run")
    return {task: file for task, (_, file) in newest.items()}


def answer_logp(line: dict) -> float:
    """log p of the right choice among the choices, or NaN where the line is no single-answer
    multiple-choice item."""
    resps, target = line.get("filtered_resps"), line.get("target")
    if isinstance(target, str) and target.isdigit():
        target = int(target)
    if not isinstance(resps, list) or not isinstance(target, int) or isinstance(target, bool) or not 0 <= target < len(resps) or len(resps) < 2:
        return math.nan
    try:
        lls = [float(r[0]) for r in resps]
    except (TypeError, ValueError, IndexError):
        return math.nan
    top = max(lls)
    return lls[target] - (top + math.log(sum(math.exp(x - top) for x in lls)))


def read_lmeval(path: Path, run: str, cluster: str | None = None) -> pd.DataFrame:
    """Every task's per-sample metrics of one lm-eval run (a folder or one samples file);
    `cluster` names the document field that samples sharing a document share."""
    rows = []
    for task, file in sample_files(path).items():
        for number, text in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
            if not text.strip():
                continue
            try:
                line = json.loads(text)
            except json.JSONDecodeError as exc:
                raise unreadable(file, f"line {number} is not JSON ({exc.msg})") from None
            if "doc_id" not in line or "metrics" not in line:
                raise unreadable(file, f"line {number} has no {'doc_id' if 'doc_id' not in line else 'metrics'} (not an lm-eval 0.4 samples line)")
            flt = line.get("filter", "none")
            prompt = f"{line.get('doc_hash', '')}/{line.get('prompt_hash', '')}".strip("/")
            logp = answer_logp(line)
            group = cluster_of(line.get("doc"), cluster, file, line["doc_id"])
            for metric in line["metrics"]:
                value = line.get(metric)
                if not isinstance(value, (int, float)):  # corpus-level metrics keep a tuple per sample (perplexity, BLEU): no paired score
                    continue
                rows.append({"run": run, "task": task, "measure": metric if flt == "none" else f"{metric},{flt}", "sample": line["doc_id"],
                             "score": float(value), "prompt_hash": prompt, "answer_logp": logp, "cluster": group})
    return frame(rows, path)
