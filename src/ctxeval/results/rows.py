"""Tables read back from a result's JSON rows (written by `report.outputs.json_rows`)."""

from __future__ import annotations

import math

import pandas as pd


def frame(rows: list[dict]) -> pd.DataFrame:
    """The DataFrame `json_rows` wrote (null read back as NaN in numeric columns)."""
    return pd.DataFrame(rows).fillna(value=math.nan) if rows else pd.DataFrame()
