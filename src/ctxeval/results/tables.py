"""CSV tables of the answer-quality results (one row per answer or item), written as the csv
module writes rows of Python values and read back with the same types."""

from __future__ import annotations

import csv
from pathlib import Path

import pandas as pd


def write_csv(path: Path, table: pd.DataFrame) -> None:
    """`table` as CSV: its columns in order, each value as `str` gives it (NaN as "nan")."""
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(table.columns))
        writer.writeheader()
        writer.writerows(table.to_dict("records"))


def read_csv(path: Path, text_columns: tuple[str, ...]) -> pd.DataFrame:
    """The table `write_csv` wrote: `text_columns` as text, the others as the numbers they were."""
    return pd.read_csv(path, dtype={c: str for c in text_columns}, keep_default_na=False, na_values={"nan"})
