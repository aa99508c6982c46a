"""Tables as a result's JSON rows, and read back from them."""

from __future__ import annotations

import math

import pandas as pd


def wide_ints(table: pd.DataFrame) -> pd.DataFrame:
    """`table` with every integer column as int64, as `frame` reads it back whatever pandas
    version grouped it (pandas 2 keeps a records' int32 key as int32)."""
    narrow = {c: "int64" for c in table.select_dtypes("integer").columns if table[c].dtype != "int64"}
    return table.astype(narrow) if narrow else table


def frame(rows: list[dict]) -> pd.DataFrame:
    """The DataFrame `json_rows` wrote (null read back as NaN in numeric columns; integer
    columns come back as int64)."""
    return pd.DataFrame(rows) if rows else pd.DataFrame()


def json_rows(df: pd.DataFrame) -> list[dict]:
    """DataFrame rows as JSON-ready dicts, NaN written as null."""
    rows = df.to_dict(orient="records")
    return [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()} for row in rows]
