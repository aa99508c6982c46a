"""results.md of a retrieval run: its cells as one table."""

from __future__ import annotations

import pandas as pd


def results_markdown(variant: str, cells: pd.DataFrame) -> str:
    """results.md: the cells as one table."""
    return f"# Line retrieval ({variant})\n\n" + cells.to_markdown(index=False, floatfmt=".3f") + "\n"
