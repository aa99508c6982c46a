"""Fingerprints of token records: whether two runs' numbers are bit-identical, not just alike.

Two runs with the same configuration can still differ in the last bits (another CPU kind,
flash attention, another library version: docs/numerics.md). A fingerprint is a SHA-256 over
the exact stored values of every scored token of one model, in a canonical order, so

- equal fingerprints mean bit-identical scores (same positions, contexts, targets,
  log-probability bits and ranks), whatever order the parts were written in: a resumed run
  equals an uninterrupted one;
- per-document fingerprints (by text id) name the documents whose scores differ.

What is hashed, per row: `target_pos`, `context_len`, `target_id`, the log-probability (the
raw bytes of its column's type, little-endian; a null as NaN) and the rank (int64; a null,
unknown rank as -1), rows sorted by the record kind's order (`pass_index`, `target_pos`) — the
order of the plan, never of the parts. The hash input starts with a header naming these
columns and their types (`HEADER`), so a change of definition can never collide with an older one.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SHOWN = 16  # hex digits a report shows
UNKNOWN_RANK = -1  # a null rank (an API beyond its top-k): ranks are >= 1 otherwise


@dataclass(frozen=True)
class FingerprintColumns:
    """Where one model's scored tokens live in a record kind: the columns of its
    log-probability and rank, and the column naming the model where one file holds several
    models' rows (token records), or None where every row has a value for each model (a diff's
    REF and CAND columns: one `FingerprintColumns` per model, in the manifest's model order)."""

    logprob: str = "logprob"
    rank: str = "rank"
    model: str | None = "model"


@dataclass(frozen=True)
class Fingerprint:
    """One model's fingerprint in a run: the hash over all its scored tokens and one per
    document (text id), full 64 hex digits; `short` is what reports show."""

    model: str
    tokens: int
    sha256: str
    documents: dict[str, str] = field(default_factory=dict)

    @property
    def short(self) -> str:
        return self.sha256[:SHOWN]

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "tokens": self.tokens, "sha256": self.sha256, "documents": dict(self.documents)}

    @staticmethod
    def from_json(data: dict[str, Any]) -> Fingerprint:
        return Fingerprint(str(data["model"]), int(data["tokens"]), str(data["sha256"]), dict(data.get("documents") or {}))


def header(logprob_type: pa.DataType) -> bytes:
    """The first bytes hashed: the definition, so fingerprints of two definitions never agree."""
    return f"ctxeval-fingerprint-1|target_pos:int32|context_len:int32|target_id:int32|logprob:{logprob_type}|rank:int64\n".encode()


def fingerprint(table: pa.Table, columns: FingerprintColumns, order: tuple[str, ...], model: str) -> Fingerprint:
    """The fingerprint of one model's rows of `table` (already only that model's), rows sorted
    by `order` (the record kind's plan order)."""
    table = table.take(pc.sort_indices(table, sort_keys=[(c, "ascending") for c in order]))
    logprob = table.column(columns.logprob)
    rows = _row_bytes(table, columns)
    head = header(logprob.type)
    run = hashlib.sha256(head)
    run.update(rows.tobytes())
    texts = table.column("text_id").to_numpy(zero_copy_only=False).astype(str)
    documents: dict[str, str] = {}
    if len(texts):
        names, inverse = np.unique(texts, return_inverse=True)
        grouped = np.argsort(inverse, kind="stable")  # each document's rows together, in plan order
        bounds = np.searchsorted(inverse[grouped], np.arange(len(names) + 1))
        rows = rows[grouped]
        for name, lo, hi in zip(names.tolist(), bounds[:-1], bounds[1:]):
            documents[name] = hashlib.sha256(head + rows[lo:hi].tobytes()).hexdigest()
    return Fingerprint(model, table.num_rows, run.hexdigest(), documents)


def _row_bytes(table: pa.Table, columns: FingerprintColumns) -> np.ndarray:
    """One row of bytes per record [n, row width]: the hashed values side by side, little-endian."""
    logprob = table.column(columns.logprob)
    values = [
        _array(table.column("target_pos"), np.dtype("<i4")),
        _array(table.column("context_len"), np.dtype("<i4")),
        _array(table.column("target_id"), np.dtype("<i4")),
        _array(pc.fill_null(logprob, math.nan), np.dtype(logprob.type.to_pandas_dtype()).newbyteorder("<")),
        _array(pc.fill_null(table.column(columns.rank), UNKNOWN_RANK), np.dtype("<i8")),
    ]
    return np.hstack([v.view(np.uint8).reshape(len(v), v.dtype.itemsize) for v in values]) if table.num_rows else np.empty((0, 0), np.uint8)


def _array(column: pa.ChunkedArray, dtype: np.dtype) -> np.ndarray:
    return np.ascontiguousarray(column.to_numpy(), dtype=dtype)


def run_fingerprints(table: pa.Table, kinds: tuple[FingerprintColumns, ...], order: tuple[str, ...], models: list[str]) -> list[Fingerprint]:
    """One fingerprint per model of a run, in `models` order: rows split by the model column
    (token records), or each model its own columns (`kinds` aligned with `models`: a diff)."""
    if len(kinds) == 1 and kinds[0].model is not None:
        column = kinds[0].model
        return [fingerprint(table.filter(pc.equal(table.column(column), name)), kinds[0], order, name) for name in models]
    if len(kinds) != len(models):
        raise ValueError(f"{len(kinds)} fingerprint column sets for {len(models)} models")
    return [fingerprint(table, columns, order, name) for columns, name in zip(kinds, models)]


def differing_documents(a: Fingerprint, b: Fingerprint) -> list[str]:
    """Text ids whose records differ between two fingerprints: those in both with different
    hashes, then those only one of them holds; in text id order."""
    both = sorted(set(a.documents) & set(b.documents))
    changed = [t for t in both if a.documents[t] != b.documents[t]]
    return changed + sorted(set(a.documents) ^ set(b.documents))
