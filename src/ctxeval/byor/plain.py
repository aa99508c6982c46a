"""A plain table of per-sample scores, CSV or Parquet: one row per sample with `sample` and
`score` columns, and optionally `task`, `measure`, `cluster` and `prompt_hash` (a file with a
`run` column holds several runs, one variant per value)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ctxeval.byor.table import frame, unreadable

SUFFIXES = (".csv", ".parquet")


def is_plain(path: Path) -> bool:
    return path.is_file() and path.suffix in SUFFIXES


def read_plain(path: Path, run: str, cluster: str | None = None) -> pd.DataFrame:
    """The scores of a CSV/Parquet file; `cluster` names the column of samples' clusters
    (default: `cluster` where there is one)."""
    df = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path, keep_default_na=False, dtype={"sample": str})
    missing = [c for c in ("sample", "score") if c not in df]
    if missing:
        raise unreadable(path, f"no {' or '.join(missing)} column (a plain table needs sample and score)")
    scores = pd.to_numeric(df["score"], errors="coerce")
    if scores.isna().any():
        raise unreadable(path, f"score of sample {df['sample'][scores.isna()].iloc[0]} is not a number")
    rows = pd.DataFrame({"run": df["run"].astype(str) if "run" in df else run, "task": df["task"].astype(str) if "task" in df else "all",
                         "measure": df["measure"].astype(str) if "measure" in df else "score", "sample": df["sample"], "score": scores})
    if cluster is not None and cluster not in df:
        raise unreadable(path, f"no column {cluster!r} to cluster by")
    for column, source in (("cluster", cluster or "cluster"), ("prompt_hash", "prompt_hash")):
        if source in df:
            rows[column] = df[source].astype(str)
    return frame(rows.to_dict("records"), path)
