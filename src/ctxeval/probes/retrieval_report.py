"""What a retrieval run's cases report: cells per (model, lines or token target, depth), the
Markdown, and the run's result built from them."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ctxeval.results.manifest import Manifest
from ctxeval.results.retrieval import RetrievalResult, cell_keys, read_cases


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


def retrieval_result(run_dir: Path, manifest: Manifest) -> RetrievalResult:
    """A finished run's result, from its recorded cases."""
    cases = read_cases(run_dir)
    cells = cell_table(cases)
    variant = manifest.config["variant"]
    return RetrievalResult(Path(run_dir), manifest, variant, cells, cases)
