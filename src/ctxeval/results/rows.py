"""Tables as a result's JSON rows, and read back from them.

An interval in a table is a group of flat columns (`stats.interval.column`: `score`,
`score.low`, `score.confidence`, ...); a JSON row holds the group as one object under its name
(`{"score": {"estimate": ..., "low": ..., "confidence": ..., "method": ...}}`, the row
`Interval.to_row` writes), and `frame` reads it back into the same columns.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from ctxeval.stats.interval import SEPARATOR, column, stored


def wide_ints(table: pd.DataFrame) -> pd.DataFrame:
    """`table` with every integer column as int64, as `frame` reads it back whatever pandas
    version grouped it (pandas 2 keeps a records' int32 key as int32)."""
    narrow = {c: "int64" for c in table.select_dtypes("integer").columns if table[c].dtype != "int64"}
    return table.astype(narrow) if narrow else table


NUMBERS = ("estimate", "low", "high", "se", "margin")  # an interval row's (Interval.to_row, Verdict.to_row) numbers that may be null


def _part(key: str, row: dict[str, Any]) -> tuple[str, str]:
    """(name, key of its row) of an interval's column `name.key` beside the column `name`; ('', '')
    for another column (an alpha's `a0.1`, with no column `a0`)."""
    name, _, part = key.rpartition(SEPARATOR)
    return (name, part) if name and part and name in row else ("", "")


def nested(row: dict[str, Any]) -> dict[str, Any]:
    """A flat row with each interval's columns gathered into one object under its name (NaN as null)."""
    names = {_part(key, row)[0] for key in row} - {""}
    out: dict[str, Any] = {}
    for key, value in row.items():
        name, part = _part(key, row)
        if name:
            out[name][part] = stored(value)
        else:
            out[key] = {"estimate": stored(value)} if key in names else stored(value)
    return out


def flat(row: dict[str, Any]) -> dict[str, Any]:
    """`nested`'s row back as flat columns (an interval's null numbers as NaN: a column of them
    all null is a float column, as it was written)."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, dict) and "estimate" in value:
            out |= {column(key, part): math.nan if v is None and part in NUMBERS else v for part, v in value.items()}
        else:
            out[key] = value
    return out


def frame(rows: list[dict]) -> pd.DataFrame:
    """The DataFrame `json_rows` wrote (null read back as NaN in numeric columns; integer
    columns come back as int64)."""
    return pd.DataFrame([flat(row) for row in rows]) if rows else pd.DataFrame()


def json_rows(df: pd.DataFrame) -> list[dict]:
    """DataFrame rows as JSON-ready dicts, each interval one object, NaN written as null."""
    return [nested(row) for row in df.to_dict(orient="records")]


def interval_columns(table: pd.DataFrame, name: str, renamed: dict[str, str], **filled: Any) -> pd.DataFrame:
    """An earlier version's table with interval `name` in the columns `Interval.columns` writes:
    `renamed` maps its old columns to the row's keys ("estimate", "low", ...), `filled` gives
    the keys it did not store (a constant, or a Series per row); the rest are NaN or ''."""
    if table.empty:
        return table
    out = table.rename(columns={old: column(name, key) for old, key in renamed.items()})
    for key, value in filled.items():
        out[column(name, key)] = value
    for key in ("se", "reason", "method"):
        if column(name, key) not in out:
            out[column(name, key)] = "" if key != "se" else float("nan")
    if column(name, "n") not in out:
        out[column(name, "n")] = out["n"] if "n" in out else 0
    return out


def bare(table: pd.DataFrame, name: str) -> pd.DataFrame:
    """`table` with interval `name`'s columns under its row's keys (`estimate`, `low`, ...,
    `outcome` for a verdict): for a reader of one interval a row by attribute (`itertuples`)."""
    prefix = name + SEPARATOR
    return table.rename(columns={name: "estimate"} | {c: c.removeprefix(prefix) for c in table.columns if c.startswith(prefix)})
