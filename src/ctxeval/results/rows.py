"""Tables read back from a result's JSON rows (written by `report.outputs.json_rows`)."""

from __future__ import annotations

import pandas as pd


def frame(rows: list[dict]) -> pd.DataFrame:
    """The DataFrame `json_rows` wrote (null read back as NaN in numeric columns; integer
    columns come back as int64)."""
    return pd.DataFrame(rows) if rows else pd.DataFrame()
