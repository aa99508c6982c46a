"""The `diff` result of `ctxeval diff`: diff.json (the report), diff.md and report.html.

The run's records (diff_records.parquet), pieces and manifest are not part of it (the engine
writes them; `token_records` reads the records back), nor is the noise floor's own run in `noise_floor/`; the result holds the
manifest, as read where it was built. Its Markdown and page are kept as the text they render
to (render/diff.py and render/diff_page.py render them), so this module imports neither.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from ctxeval.results.base import Result
from ctxeval.results.comparison import gate_failures
from ctxeval.results.io import Json, Text, derived, folder, loaded
from ctxeval.results.manifest import Manifest, read_manifest

RECORDS_FILE = "diff_records.parquet"  # the run's records (modeldiff/run.py writes them)
DIFF_JSON = "diff.json"
DIFF_MD = "diff.md"
REPORT_HTML = "report.html"


@dataclass
class DiffResult(Result):
    """A finished diff: its directory and manifest, the report (diff.json's content), diff.md,
    report.html, and why its gates failed (empty: passed)."""

    KIND = "diff"
    FILES = (Json(DIFF_JSON, "report", default=float), Text(DIFF_MD, "markdown"), Text(REPORT_HTML, "html"))

    run_dir: Path = folder()
    manifest: Manifest = loaded(read_manifest)
    report: dict
    markdown: str = ""  # what diff.md holds
    html: str = field(repr=False, default="")  # what report.html holds
    failures: list[str] = derived(gate_failures, default_factory=list)
    # what the page shows, as loaded where the result was built (no files of their own: None when
    # read back, and a result read back equals the one written)
    records: pd.DataFrame | None = field(repr=False, default=None, compare=False)
    pieces: dict[int, str] | None = field(repr=False, default=None, compare=False)  # token id -> text
    key_mask: np.ndarray | None = field(repr=False, default=None, compare=False)  # `--key-tokens`: which records are key tokens
    compressed_mask: np.ndarray | None = field(repr=False, default=None, compare=False)  # a pressed model: which records saw a compressed cache

    def token_records(self) -> pd.DataFrame:
        """One row per scored token with both models' numbers: the records the result was built
        with, else (a result read back) the run's records file."""
        return self.records if self.records is not None else pq.read_table(self.run_dir / RECORDS_FILE).to_pandas()

    def paths(self) -> dict[str, Path]:
        """The result's files by role."""
        d = self.run_dir
        return {"report": d / DIFF_JSON, "markdown": d / DIFF_MD, "html": d / REPORT_HTML}
