"""The `diff` result of `ctxeval diff`: diff.json (the report), diff.md and report.html.

The run's records (diff_records.parquet), pieces and manifest are not part of it (the engine
writes them), nor is the noise floor's own run in `noise_floor/`; the result holds the
manifest, as read where it was built. Its Markdown and page are kept as the text they render
to (render/diff.py and render/diff_page.py render them), so this module imports neither.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from ctxeval.results.manifest import Manifest, read_manifest
from ctxeval.results.base import Result

DIFF_JSON = "diff.json"
DIFF_MD = "diff.md"
REPORT_HTML = "report.html"


@dataclass
class DiffResult(Result):
    """A finished diff: its directory and manifest, the report (diff.json's content), diff.md,
    report.html, and why its gates failed (empty: passed)."""

    KIND: ClassVar[str] = "diff"
    VERSION: ClassVar[int] = 1
    FILES: ClassVar[tuple[str, ...]] = (DIFF_JSON, DIFF_MD, REPORT_HTML)

    run_dir: Path
    manifest: Manifest
    report: dict
    markdown: str = ""  # what diff.md holds
    html: str = field(repr=False, default="")  # what report.html holds
    failures: list[str] = field(default_factory=list)
    # what the page shows, as loaded where the result was built (no files of their own: None when
    # read back, and a result read back equals the one written)
    records: pd.DataFrame | None = field(repr=False, default=None, compare=False)
    pieces: dict[int, str] | None = field(repr=False, default=None, compare=False)  # token id -> text
    key_mask: np.ndarray | None = field(repr=False, default=None, compare=False)  # `--key-tokens`: which records are key tokens

    def paths(self) -> dict[str, Path]:
        """The result's files by role."""
        d = self.run_dir
        return {"report": d / DIFF_JSON, "markdown": d / DIFF_MD, "html": d / REPORT_HTML}

    def to_json(self) -> dict[str, Any]:
        return self.report

    @classmethod
    def from_json(cls, data: dict[str, Any], run_dir: Path, manifest: Manifest, markdown: str, html: str) -> DiffResult:
        """The result diff.json describes (its gates' failures included), with its rendered texts."""
        return cls(Path(run_dir), manifest, data, markdown, html, list(data["gates"]["failures"]))

    def write_files(self, out: Path) -> None:
        (out / DIFF_JSON).write_text(json.dumps(self.to_json(), indent=2, default=float))
        (out / DIFF_MD).write_text(self.markdown)
        tmp = out / (REPORT_HTML + ".tmp")  # a page is never half-written
        tmp.write_text(self.html, encoding="utf-8")
        os.replace(tmp, out / REPORT_HTML)

    @classmethod
    def read_files(cls, out: Path, version: int) -> DiffResult:
        out = Path(out)
        data = json.loads((out / DIFF_JSON).read_text())
        return cls.from_json(data, out, read_manifest(out), (out / DIFF_MD).read_text(), (out / REPORT_HTML).read_text(encoding="utf-8"))
