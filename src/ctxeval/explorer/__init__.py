"""The offline, self-contained HTML report with a per-token explorer (`ctxeval report`)."""

from __future__ import annotations

from pathlib import Path

from ctxeval.errors import FieldError
from ctxeval.explorer.data import DEFAULT_TOP_K_SHOWN
from ctxeval.explorer.pairs import Compare
from ctxeval.explorer.render import render_report, write_atomic
from ctxeval.results.base import check_folder

__all__ = ["write_report", "DEFAULT_TOP_K_SHOWN"]


def write_report(run_dirs: list[Path], out: Path, compare: Compare, top_k_shown: int = DEFAULT_TOP_K_SHOWN) -> Path:
    """Render the report of `run_dirs` into `out` atomically (never a half-written file); its
    pairs of language-modelling arms are compared by `compare` (compare's task)."""
    if top_k_shown < 0:
        raise FieldError("top_k_shown", f"must be zero or positive, got {top_k_shown}")
    out = Path(out)
    if out.is_dir():
        raise FieldError("out", f"{out} is a directory; give a file name such as report.html")
    check_folder(out.parent)  # before the work: a folder above the file that cannot be made
    html = render_report([Path(d) for d in run_dirs], compare, top_k_shown)
    return write_atomic(out, html)
