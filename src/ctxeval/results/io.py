"""The one writer and the one reader of every Result kind, driven by what the kind declares.

A kind lists its files in `FILES`, in the order its header names them, each saying what it
holds: `Json` (one field, or keys in file order, each a field or a value computed from the
result when it is written), `Text` (a str field), `Csv` and `Parquet` (a DataFrame field),
`Figure` (drawn by render/ from the result; named here, written by `draw`). A file with `when`
is written only while that field is not None and read only where the header lists it.

A field no file of the kind holds says where a reader finds it, on the dataclass field:
`folder()` (the folder read), `loaded(read)` (a file of the run the engine writes: its manifest,
its records) or `derived(compute)` (a function of the fields read, as the task computed it).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import pandas as pd

from ctxeval.results.rows import frame, json_rows
from ctxeval.results.tables import read_csv, write_csv

_HOW = "ctxeval.results.io"  # the dataclass-field metadata key of a field no file holds


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class Value:
    """One place in a file: `write` gives what it holds from the result; `read` turns that back
    into field `field` (None: written only, a value computed from the result). With `item`, the
    field is a dict and this place holds its entry `item`; `missing` is what a file written
    without this key (an older version) reads as (None: the key must be there)."""

    field: str | None
    write: Callable[[Any], Any]
    read: Callable[[Any], Any] = _same
    item: str | None = None
    missing: Any = None


def kept(name: str, encode: Callable[[Any], Any] = _same, decode: Callable[[Any], Any] = _same) -> Value:
    """Field `name` as `encode` stores it, read back by `decode`."""
    return Value(name, lambda result: encode(getattr(result, name)), decode)


def rows(name: str) -> Value:
    """A DataFrame field as a list of JSON rows (NaN as null), read back as a DataFrame."""
    return kept(name, json_rows, frame)


def written(compute: Callable[[Any], Any]) -> Value:
    """A value computed from the result when it is written; not read back (the fields it is
    computed from are)."""
    return Value(None, compute)


def _value(content: str | Value) -> Value:
    return kept(content) if isinstance(content, str) else content


@dataclass(frozen=True)
class File:
    """One file of a kind; `when`: written only while that field is not None."""

    name: str
    when: str | None = field(default=None, kw_only=True)

    def writes(self, result: Any) -> bool:
        return self.when is None or getattr(result, self.when) is not None

    def holds(self) -> set[str]:
        """The fields a reader finds in this file."""
        return set()

    def save(self, result: Any, path: Path) -> None:
        raise NotImplementedError

    def load(self, path: Path, found: dict[str, Any]) -> None:
        """Add the fields this file holds to `found`."""
        raise NotImplementedError


@dataclass(frozen=True)
class Json(File):
    """A JSON file (indent 2): one value (`content` a field name or a `Value`), or an object
    whose keys, in file order, each hold one, then (`more`) the keys its result adds, each an
    entry of a dict field (`more.write` gives them all, by key; `more.read` reads each back);
    `json.dumps`' `default`, `ensure_ascii` and `sort_keys` as given, and a final line break
    with `newline`."""

    content: str | Value | Mapping[str, str | Value]
    default: Callable[[Any], Any] | None = None
    ensure_ascii: bool = True
    sort_keys: bool = False
    newline: bool = False
    more: Value | None = None

    def holds(self) -> set[str]:
        places = [*(self.content.values() if isinstance(self.content, Mapping) else [self.content]), *([self.more] if self.more else [])]
        return {v.field for v in map(_value, places) if v.field is not None}

    def data(self, result: Any) -> Any:
        """What the file holds, as Python values."""
        if isinstance(self.content, Mapping):
            declared = {key: _value(v).write(result) for key, v in self.content.items()}
            return declared | (self.more.write(result) if self.more is not None else {})
        return _value(self.content).write(result)

    def save(self, result: Any, path: Path) -> None:
        text = json.dumps(self.data(result), indent=2, default=self.default, ensure_ascii=self.ensure_ascii, sort_keys=self.sort_keys)
        path.write_text(text + ("\n" if self.newline else ""), encoding="utf-8")

    def load(self, path: Path, found: dict[str, Any]) -> None:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(self.content, Mapping):
            _put(found, _value(self.content), data)
            return
        for key, v in self.content.items():
            v = _value(v)
            if v.field is not None:
                _put(found, v, data[key] if key in data or v.missing is None else v.missing)
        if self.more is not None:
            for key in [k for k in data if k not in self.content]:
                _put(found, replace(self.more, item=key), data[key])


def _put(found: dict[str, Any], value: Value, stored: Any) -> None:
    if value.field is None:
        return
    if value.item is None:
        found[value.field] = value.read(stored)
    else:
        found.setdefault(value.field, {})[value.item] = value.read(stored)


@dataclass(frozen=True)
class Text(File):
    """A text file (UTF-8) holding a str field after `prefix`."""

    field: str
    prefix: str = ""

    def holds(self) -> set[str]:
        return {self.field}

    def save(self, result: Any, path: Path) -> None:
        path.write_text(self.prefix + getattr(result, self.field), encoding="utf-8")

    def load(self, path: Path, found: dict[str, Any]) -> None:
        found[self.field] = path.read_text(encoding="utf-8").removeprefix(self.prefix)


@dataclass(frozen=True)
class Csv(File):
    """A DataFrame as CSV: pandas' `to_csv` (no index), read back by `read_csv`; with `text`, the
    csv module's rows of Python values (`tables.write_csv`), read back with those columns as
    text. `content` a `written` value: a table computed from the result, not read back."""

    content: str | Value
    text: tuple[str, ...] | None = None

    def holds(self) -> set[str]:
        return {f for f in [_value(self.content).field] if f is not None}

    def save(self, result: Any, path: Path) -> None:
        table = _value(self.content).write(result)
        if self.text is None:
            table.to_csv(path, index=False)
        else:
            write_csv(path, table)

    def load(self, path: Path, found: dict[str, Any]) -> None:
        value = _value(self.content)
        if value.field is not None:
            _put(found, value, pd.read_csv(path) if self.text is None else read_csv(path, self.text))


@dataclass(frozen=True)
class Parquet(File):
    """A DataFrame field as Parquet (pandas' `to_parquet`, no index)."""

    field: str

    def holds(self) -> set[str]:
        return {self.field}

    def save(self, result: Any, path: Path) -> None:
        getattr(result, self.field).to_parquet(path, index=False)

    def load(self, path: Path, found: dict[str, Any]) -> None:
        found[self.field] = pd.read_parquet(path)


@dataclass(frozen=True)
class Figure(File):
    """A figure: drawn from the result by render/ when the engine writes it, never read back."""

    def save(self, result: Any, path: Path) -> None:
        """Drawn by `draw`, not here."""

    def load(self, path: Path, found: dict[str, Any]) -> None:
        """A figure holds no field."""


# -- fields no file of the kind holds -----------------------------------------------------------

@dataclass(frozen=True)
class _Found:
    """Where a reader finds a field: from the folder (`at`), or from the fields read (`compute`,
    the `pick`-th of what it returns; computed once per read)."""

    at: Callable[[Path], Any] | None = None
    compute: Callable[[dict[str, Any]], Any] | None = None
    pick: int | None = None


def folder(**kwargs: Any) -> Any:
    """A field holding the folder the result was written to (or read from)."""
    return field(metadata={_HOW: _Found(at=Path)}, **kwargs)


def loaded(read: Callable[[Path], Any], **kwargs: Any) -> Any:
    """A field read from the folder by `read`: a file the engine writes (manifest, records)."""
    return field(metadata={_HOW: _Found(at=read)}, **kwargs)


def derived(compute: Callable[[dict[str, Any]], Any], pick: int | None = None, **kwargs: Any) -> Any:
    """A field computed from the fields read (`compute(fields)`, or the `pick`-th of its tuple)."""
    return field(metadata={_HOW: _Found(compute=compute, pick=pick)}, **kwargs)


# -- the writer and the reader -------------------------------------------------------------------

def file_names(files: tuple[File, ...], result: Any | None = None) -> tuple[str, ...]:
    """The names of `files` (those `result` writes, when given)."""
    return tuple(f.name for f in files if result is None or f.writes(result))


def write_files(result: Any, out: Path) -> None:
    """Write every file `result` declares into `out` (each whole or not at all); figures are
    `draw`'s."""
    for f in result.FILES:
        if f.writes(result) and not isinstance(f, Figure):
            tmp = out / (f.name + ".tmp")
            f.save(result, tmp)
            os.replace(tmp, out / f.name)


def read_files(cls: type, out: Path, listed: list[str], version: int | None = None) -> Any:
    """The result of kind `cls` stored in `out`, whose header lists the files `listed`; the
    fields of an earlier `version` pass through the kind's `migrate` first."""
    found: dict[str, Any] = {}
    for f in cls.FILES:
        if f.name in listed:
            f.load(out / f.name, found)
    if version is not None and version != cls.VERSION:
        found = cls.migrate(found, version, out)
    how = {f.name: f.metadata[_HOW] for f in fields(cls) if _HOW in f.metadata}
    for name, where in how.items():
        if where.at is not None:
            found[name] = where.at(out)
    computed: dict[int, Any] = {}
    for name, where in how.items():
        if where.compute is not None:
            key = id(where.compute)
            if key not in computed:
                computed[key] = where.compute(found)
            found[name] = computed[key] if where.pick is None else computed[key][where.pick]
    return cls(**found)


def first_json(result: Any) -> Any:
    """What the kind's first JSON file holds, as Python values."""
    return next(f for f in result.FILES if isinstance(f, Json)).data(result)
