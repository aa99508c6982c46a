"""Tables read back from a result's JSON rows (written by `report.outputs.json_rows`)."""

from __future__ import annotations

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
