"""Which format each path of `ctxeval compare` is, and the one table of all of them."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ctxeval.byor.inspect_log import is_inspect, read_inspect
from ctxeval.byor.kvpress import is_kvpress, read_kvpress
from ctxeval.byor.lmeval import is_lmeval, read_lmeval
from ctxeval.byor.plain import is_plain, read_plain
from ctxeval.byor.ruler_pred import is_ruler_pred, read_ruler_pred
from ctxeval.byor.table import unreadable
from ctxeval.results.manifest import MANIFEST_FILE

FORMATS = ("ctxeval", "lm-eval", "inspect", "ruler", "kvpress", "table")


def is_ctxeval_run(path: Path) -> bool:
    """A ctxeval run folder (its manifest)."""
    return path.is_dir() and (path / MANIFEST_FILE).is_file()


def format_of(path: Path) -> str:
    """The format of one compared path, or a one-line error naming it."""
    if not path.exists():
        raise unreadable(path, "no such file or folder")
    for name, test in (("ctxeval", is_ctxeval_run), ("lm-eval", is_lmeval), ("inspect", is_inspect), ("kvpress", is_kvpress),
                       ("ruler", is_ruler_pred), ("table", is_plain)):
        if test(path):
            return name
    raise unreadable(path, "not a run ctxeval reads (a ctxeval run, an lm-eval --output_path folder or samples_*.jsonl, an inspect .eval/.json log, "
                     "a RULER pred/ folder, a kvpress results folder, or a CSV/Parquet of sample, score)")


def _label(path: Path) -> str:
    return path.stem if path.is_file() else path.name or str(path)


def read_runs(paths: list[Path], cluster: str | None = None) -> tuple[pd.DataFrame, list[dict]]:
    """All paths' samples in one table, and per run its label, path and format (runs in the
    order given; a kvpress results folder gives one run per config). Labels are made unique;
    `cluster` names the field of each sample that groups samples sharing a document."""
    tables, runs = [], []
    several = len(paths) > 1
    for path in paths:
        fmt = format_of(path)
        if fmt == "ctxeval":
            raise unreadable(path, "a ctxeval scoring run compares only with one other ctxeval scoring run (perplexity ratio)")
        label = _label(path)
        if fmt == "kvpress":
            found = read_kvpress(path, label, several, cluster)
        elif fmt == "table":
            df = read_plain(path, label, cluster)
            found = [(str(r), part) for r, part in df.groupby("run", sort=False)]
        else:
            reader = {"lm-eval": read_lmeval, "inspect": read_inspect, "ruler": read_ruler_pred}[fmt]
            found = [(label, reader(path, label, cluster))]
        for name, table in found:
            unique = name
            taken = {r["run"] for r in runs}
            suffix = 2
            while unique in taken:
                unique, suffix = f"{name}#{suffix}", suffix + 1
            runs.append({"run": unique, "path": str(path), "format": fmt})
            tables.append(table.assign(run=unique))
    return pd.concat(tables, ignore_index=True), runs
