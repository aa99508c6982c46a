"""The one per-sample table every reader returns, and the one-line error of a file it cannot read.

Columns: `run` (the label a variant is shown by), `task`, `measure` (a metric or scorer), `sample`
(the id samples pair on, as text), `score`, `prompt_hash` (the prompt's digest where the format
has one, "" elsewhere: the same id with another prompt is never paired), `cluster` ("" where
none) and `answer_logp` (log-probability of the right answer among a multiple-choice item's
choices; NaN where the format has none).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from ctxeval.errors import UserError

COLUMNS = ["run", "task", "measure", "sample", "score", "prompt_hash", "cluster", "answer_logp"]


def unreadable(path: Path | str, problem: str) -> UserError:
    """The one-line error of a file a reader cannot use: the file, then what is missing."""
    return UserError(f"{path}: {problem}")


def digest(text: str) -> str:
    """A prompt's digest (sha256 of its text), for formats that keep the prompt but no hash."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cluster_of(fields: dict, name: str | None, source: Path | str, sample: object) -> str:
    """A sample's cluster: its field `name` (`--cluster`), "" without one; refused where missing."""
    if name is None:
        return ""
    if not isinstance(fields, dict) or name not in fields:
        raise unreadable(source, f"sample {sample} has no field {name!r} to cluster by")
    return str(fields[name])


def frame(rows: Iterable[dict], source: Path | str) -> pd.DataFrame:
    """The rows as the common table (missing optional columns filled), refused when empty."""
    df = pd.DataFrame(list(rows))
    if df.empty:
        raise unreadable(source, "no per-sample scores in it")
    for column, empty in (("prompt_hash", ""), ("cluster", ""), ("answer_logp", math.nan)):
        if column not in df:
            df[column] = empty
    df["sample"] = df["sample"].astype(str)
    df["score"] = df["score"].astype(float)
    df["answer_logp"] = df["answer_logp"].astype(float)
    return df[COLUMNS]
