"""Token records: the single source of truth of a run, one row per scored token.

A run writes records in atomic part files (`parts/part-NNNNN.parquet`, each holding whole
passes) while it works, so an interrupted run loses at most the passes in flight; a re-run
skips passes already present and, at the end, the parts are merged into `records.parquet` in
plan order, identical to an uninterrupted run.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

RECORDS_FILE = "records.parquet"
PARTS_DIR = "parts"

BASE_SCHEMA = pa.schema(
    [
        ("pass_index", pa.int32()),
        ("model", pa.string()),
        ("text_id", pa.string()),
        ("method", pa.string()),
        ("context_mode", pa.string()),
        ("nominal_len", pa.int32()),
        ("repeat", pa.int32()),
        ("window_id", pa.string()),
        ("context_len", pa.int32()),
        ("target_pos", pa.int32()),
        ("char_start", pa.int64()),
        ("char_end", pa.int64()),
        ("n_bytes", pa.int32()),
        ("target_id", pa.int32()),
        ("target_text", pa.string()),
        ("logprob", pa.float64()),
        ("rank", pa.int64()),
        ("greedy_id", pa.int32()),
        ("topk_ids", pa.list_(pa.int32())),
        ("topk_logprobs", pa.list_(pa.float32())),
    ]
)


def temperature_column(temperature: float) -> str:
    """Column holding log-probabilities at another temperature, e.g. `logprob_t0.5`."""
    return f"logprob_t{temperature:g}"


def schema_for(temperatures: Sequence[float]) -> pa.Schema:
    schema = BASE_SCHEMA
    for t in temperatures:
        if t != 1.0:
            schema = schema.append(pa.field(temperature_column(t), pa.float64()))
    return schema


class PartWriter:
    """Appends finished passes to numbered, atomically renamed Parquet part files."""

    def __init__(self, run_dir: Path, schema: pa.Schema) -> None:
        self.dir = run_dir / PARTS_DIR
        self.dir.mkdir(parents=True, exist_ok=True)
        self.schema = schema
        existing = sorted(self.dir.glob("part-*.parquet"))
        self._next = 1 + max((int(p.stem.split("-")[1]) for p in existing), default=0)

    def write(self, columns: dict[str, list]) -> None:
        table = pa.Table.from_pydict(columns, schema=self.schema)
        final = self.dir / f"part-{self._next:05d}.parquet"
        tmp = final.with_suffix(".tmp")
        pq.write_table(table, tmp)
        os.replace(tmp, final)
        self._next += 1


def done_passes(run_dir: Path) -> set[int]:
    """Indices of passes whose records are already on disk."""
    parts = sorted((run_dir / PARTS_DIR).glob("part-*.parquet"))
    done: set[int] = set()
    for part in parts:
        done.update(pq.read_table(part, columns=["pass_index"]).column(0).unique().to_pylist())
    return done


def merge_parts(run_dir: Path, schema: pa.Schema) -> pa.Table:
    """Merge part files into `records.parquet`, sorted in plan order, then remove the parts."""
    parts = sorted((run_dir / PARTS_DIR).glob("part-*.parquet"))
    tables = [pq.read_table(p, schema=schema) for p in parts]
    table = pa.concat_tables(tables) if tables else schema.empty_table()
    table = table.sort_by([("pass_index", "ascending"), ("target_pos", "ascending")])
    tmp = run_dir / (RECORDS_FILE + ".tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, run_dir / RECORDS_FILE)
    for p in parts:
        p.unlink()
    (run_dir / PARTS_DIR).rmdir()
    return table


def read_records(run_dir: Path) -> pd.DataFrame:
    """All records of a finished run as a DataFrame."""
    return pq.read_table(Path(run_dir) / RECORDS_FILE).to_pandas()
