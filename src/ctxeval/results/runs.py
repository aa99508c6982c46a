"""A finished run as a reader needs it: its manifest and merged records, or one line saying
why the run cannot be read yet."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import pandas as pd

from ctxeval.errors import UserError
from ctxeval.results.manifest import SCORING_COMMANDS, Manifest, read_manifest, require_command
from ctxeval.results.records import RECORDS_FILE, read_records


def load_run(run_dir: Path, reader: str, accepted: Collection[str] = SCORING_COMMANDS) -> tuple[Manifest, pd.DataFrame]:
    """Manifest and records of a complete run of an `accepted` command, or a UserError saying
    why not (`reader`: the command that asks, named in the message)."""
    manifest = require_command(read_manifest(run_dir), run_dir, reader, accepted)
    require_complete(run_dir, manifest)
    return manifest, read_records(run_dir)


def require_complete(run_dir: Path, manifest: Manifest) -> None:
    """A UserError unless the run finished (its records merged)."""
    if manifest.status != "complete" or not (Path(run_dir) / RECORDS_FILE).is_file():
        raise UserError(f"the run in {run_dir} is not complete; re-run its command to finish it")
