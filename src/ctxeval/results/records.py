"""Records: the single source of truth of a run. Token records (`records.parquet`, one row per
scored token) for sweep, score and context-gain; other commands keep their own record kinds
(retrieval cases, QA evaluator passes, judge verdicts: `RecordKind`) in the same machinery.

A run writes records in atomic part files (`parts/part-NNNNN.parquet`, each holding whole
units of work) while it works, so an interrupted run loses at most the work in flight; a re-run
skips work already present (by the kind's key column) and, at the end, the parts are merged
into the kind's file in plan order, identical to an uninterrupted run.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ctxeval.errors import UserError
from ctxeval.results.fingerprint import FingerprintColumns

RECORDS_FILE = "records.parquet"
PARTS_DIR = "parts"
FLUSH_SECONDS = 2.0
# Tests set this to interrupt a run deterministically: after that many units of work are
# recorded and flushed, the process sends itself SIGTERM, exactly as `kill` would.
STOP_AFTER_PASSES_ENV = "CTXEVAL_TEST_STOP_AFTER_PASSES"

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
        # an API's rank: how many alternatives the server returned in the list it was read from
        # (rank scores use l = this where it is below the cutoff, thesis eq. 4); null: the rank
        # is over the full vocabulary
        ("topk_returned", pa.int32()),
    ]
)


@dataclass(frozen=True)
class RecordKind:
    """One kind of record: its merged file, the column that identifies a unit of work (what
    resume skips), the plan order it is sorted into, and, for scored tokens, where each model's
    values are (what the run's fingerprints hash: results/fingerprint.py; none for other kinds)."""

    file: str
    key: str
    order: tuple[str, ...]
    fingerprint: tuple[FingerprintColumns, ...] = ()


TOKENS = RecordKind(RECORDS_FILE, "pass_index", ("pass_index", "target_pos"), (FingerprintColumns(),))


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


class RowSink:
    """Finished records buffered column by column and written as a part every FLUSH_SECONDS and
    when flushed, so a kill loses only the last seconds. A unit of work fills `columns` (one row,
    `append_row`, or a row per target for token records), then `unit_done` is called."""

    def __init__(self, run_dir: Path, schema: pa.Schema) -> None:
        self.writer = PartWriter(run_dir, schema)
        self.columns: dict[str, list] = {name: [] for name in schema.names}
        self.added = 0  # units of work done by this invocation
        self._last_flush = time.monotonic()
        self._stop_after = int(os.environ.get(STOP_AFTER_PASSES_ENV, "0")) or None

    def unit_done(self) -> None:
        """One more unit of work is in `columns` (or failed, adding none): flush when due."""
        self.added += 1
        if time.monotonic() - self._last_flush > FLUSH_SECONDS or self.added == self._stop_after:
            self.flush()
        if self.added == self._stop_after:
            signal.raise_signal(signal.SIGTERM)

    def flush(self) -> None:
        if next(iter(self.columns.values())):
            self.writer.write(self.columns)
            for values in self.columns.values():
                values.clear()
        self._last_flush = time.monotonic()


def append_row(columns: dict[str, list], row: dict) -> None:
    """Append one record (a value for every column) to a sink's columns."""
    for name, values in columns.items():
        values.append(row[name])


def done_passes(run_dir: Path, kind: RecordKind = TOKENS) -> set:
    """Keys (pass indices, for token records) of the work whose records are already on disk:
    in part files, and in the merged file of a kind that adds work to a finished run (QA passes)."""
    files = sorted((run_dir / PARTS_DIR).glob("part-*.parquet"))
    if (run_dir / kind.file).is_file():
        files.append(run_dir / kind.file)
    done: set = set()
    for path in files:
        done.update(pq.read_table(path, columns=[kind.key]).column(0).unique().to_pylist())
    return done


def check_resumable(run_dir: Path, schema: pa.Schema, kind: RecordKind, what: str) -> None:
    """Refuse to resume into records written with other columns (by another ctxeval version):
    `merge_parts` would read them with this run's schema, filling the missing columns with
    nulls, and mix two schemas in one file."""
    sources = sorted((run_dir / PARTS_DIR).glob("part-*.parquet"))
    if (run_dir / kind.file).is_file():
        sources.append(run_dir / kind.file)
    for path in sources:
        if pq.read_schema(path).names != schema.names:
            raise UserError(f"{run_dir} holds unfinished {what} records with other columns (an earlier ctxeval); "
                            "finish it with that version, or remove the directory to start again")


def merge_parts(run_dir: Path, schema: pa.Schema, kind: RecordKind = TOKENS) -> pa.Table:
    """Merge part files (and the kind's merged file, if one exists) into the merged file,
    sorted in plan order, then remove the parts."""
    parts = sorted((run_dir / PARTS_DIR).glob("part-*.parquet"))
    merged = run_dir / kind.file
    sources = ([merged] if merged.is_file() else []) + parts
    tables = [pq.read_table(p, schema=schema) for p in sources]
    table = pa.concat_tables(tables) if tables else schema.empty_table()
    table = table.sort_by([(column, "ascending") for column in kind.order])
    tmp = run_dir / (kind.file + ".tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, merged)
    for p in parts:
        p.unlink()
    if (run_dir / PARTS_DIR).is_dir():
        (run_dir / PARTS_DIR).rmdir()
    return table


def write_records(run_dir: Path, table: pa.Table, kind: RecordKind) -> None:
    """Write a whole records file at once (atomically), as a run combined from other runs' records
    holds them (`ruler --until`'s rounds)."""
    tmp = Path(run_dir) / (kind.file + ".tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, Path(run_dir) / kind.file)


def read_records(run_dir: Path) -> pd.DataFrame:
    """All records of a finished run as a DataFrame."""
    return pq.read_table(Path(run_dir) / RECORDS_FILE).to_pandas()
