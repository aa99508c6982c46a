"""The output contract: every folder a command writes holds one typed, versioned `Result`.

A `Result` subclass is one output kind (a scoring summary, a comparison, a diff, ...), catalogued
once (`catalog.RESULTS`): it declares its files and what each holds (`FILES`, results/io.py), and
the one writer and reader of every kind write and read them from that declaration.
`write_result` writes the files, then the header `result.json` (`{"kind", "version", "command",
"files", "ctxeval"}`), last, so a folder with a header holds every file the header lists.
`read_result` dispatches on the header's kind and refuses, in one line, a folder without a header
(written before outputs carried one), a kind the reader does not take, or a version this
ctxeval cannot read.

A kind whose layout changes bumps `VERSION`; `READS` lists the earlier versions it still reads,
each through the kind's `migrate` (the fields an earlier layout stored, as this version holds
them), so an old folder either reads or is refused naming its version.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Collection
from dataclasses import dataclass
from importlib import import_module, metadata
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from ctxeval import catalog
from ctxeval.errors import FieldError, UserError, a_or_an
from ctxeval.results.io import File, Text, file_names, first_json, read_files, write_files

RESULT_FILE = "result.json"

T = TypeVar("T", bound="Result")


@dataclass(frozen=True)
class Section:
    """A section of the probe report: its key in probe_report.json and its heading in
    probe_report.md."""

    key: str
    title: str


class Result:
    """One output kind: what a command found and the files it owns (`FILES`, what each holds)."""

    KIND: ClassVar[str]
    VERSION: ClassVar[int] = 1
    READS: ClassVar[tuple[int, ...]] = ()  # earlier versions its declaration still reads
    FILES: ClassVar[tuple[File, ...]] = ()  # the files it owns, relative to its folder, in header order
    # the probe-report sections it adds rows to (`probe_rows`): probe-report reads every
    # catalogued kind that declares one
    PROBE: ClassVar[tuple[Section, ...]] = ()

    @classmethod
    def migrate(cls, found: dict[str, Any], version: int, folder: Path) -> dict[str, Any]:
        """The fields read from an earlier `version` (one of READS) of the kind's files, stored in
        `folder`, as this version holds them: the one place a kind reads its earlier layouts."""
        return found

    def probe_rows(self, run: Path) -> dict[str, Any]:
        """Its rows (a DataFrame) in each section of `PROBE`, by key; `run` is its folder as the
        probe-report's caller named it."""
        raise NotImplementedError(f"the {self.KIND} result adds no probe-report section")

    @classmethod
    def file_names(cls) -> tuple[str, ...]:
        """Every file the kind may write."""
        return file_names(cls.FILES)

    def files(self) -> tuple[str, ...]:
        """The files this result writes (an optional one only while its field is set)."""
        return file_names(self.FILES, self)

    def text(self) -> str:
        """Its Markdown: the field its first text file holds ('' for a kind without one)."""
        found = next((f for f in self.FILES if isinstance(f, Text)), None)
        return "" if found is None else str(getattr(self, found.field))

    def to_json(self) -> Any:
        """What its (first) JSON file holds, as Python values."""
        return first_json(self)


def check_folder(path: Path, field: str = "out") -> None:
    """Refuse, before any work, an output folder that cannot be created: a file where it or a
    folder above it should be, or a parent this process may not write (read-only, no permission)."""
    if path.exists():
        if not path.is_dir():
            raise FieldError(field, f"{{name}} {path} is a file, not a folder; choose another {{name}} or remove it")
        return
    parent = next(p for p in path.parents if p.exists())  # the root always exists
    if not parent.is_dir():
        raise FieldError(field, f"{{name}} {path} cannot be created: {parent} is a file, not a folder; choose another {{name}}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise FieldError(field, f"{{name}} {path} cannot be created: {parent} is not writable; choose another {{name}}")


def make_folder(path: Path, field: str = "out") -> None:
    """Create an output folder and its parents; what the early check cannot see (a read-only
    file system for root) fails here, as one line naming the option."""
    check_folder(path, field)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FieldError(field, f"{{name}} {path} cannot be created: {exc.strerror or exc}; choose another {{name}}") from None


def write_result(out: str | Path, result: Result, command: str, draw: Callable[[Result, Path], None]) -> Path:
    """Write `result` into `out` (its files, its figure by `draw`, then the header); returns the folder."""
    out = Path(out)
    make_folder(out)
    header = out / RESULT_FILE
    if header.is_file():
        found = read_header(out)
        if found["kind"] != result.KIND:
            raise FieldError("out", f"{out} holds a {found['kind']} result" + (f" (from `ctxeval {found['command']}`)" if found["command"] else "")
                             + f", not a {result.KIND} result; choose another {{name}} or remove it")
    header.unlink(missing_ok=True)  # no stale header while the files are rewritten
    write_files(result, out)
    draw(result, out)
    payload = {"kind": result.KIND, "version": result.VERSION, "command": command, "files": list(result.files()), "ctxeval": _version()}
    tmp = header.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload, indent=2) + "\n")
    tmp.replace(header)
    return out


def read_header(path: str | Path) -> dict[str, Any]:
    """The header of an output folder, or one line saying why there is none."""
    path = Path(path)
    header = path / RESULT_FILE
    if not path.is_dir():
        raise UserError(f"{path} is not a folder")
    if not header.is_file():
        if (path / "manifest.json").is_file():
            raise UserError(f"{path} has no {RESULT_FILE}: its outputs were written by a ctxeval before output folders carried a header; re-run the command that made it to rewrite them")
        raise UserError(f"{path} is not a ctxeval output folder (no {RESULT_FILE})")
    try:
        data = json.loads(header.read_text())
        return {"kind": str(data["kind"]), "version": int(data["version"]), "command": str(data.get("command", "")), "files": list(data.get("files", []))}
    except (json.JSONDecodeError, KeyError, TypeError, ValueError):
        raise UserError(f"{header} is not a valid ctxeval result header") from None


def read_result(path: str | Path, *, reader: str | None = None, kinds: Collection[type[T]] | None = None) -> T:
    """The result stored in `path`. With `kinds`, only those kinds are accepted: another kind is
    refused in one line naming what the folder holds and what `reader` (a command) reads."""
    path = Path(path)
    header = read_header(path)
    cls = result_class(header["kind"])
    if kinds is not None and cls not in kinds:
        found = f"{a_or_an(header['kind'])} result" + (f" (from `ctxeval {header['command']}`)" if header["command"] else "")
        wanted = "/".join(k.KIND for k in kinds)
        raise UserError(f"{path} holds {found}; {reader or 'this command'} reads {wanted} results")
    version = header["version"]
    if version != cls.VERSION and version not in cls.READS:
        newer = "a newer" if version > cls.VERSION else "an older"
        raise UserError(f"{path} holds version {version} of the {cls.KIND} result, written by {newer} ctxeval; this one reads version {cls.VERSION}"
                        + (" (re-run its command to rewrite it)" if version < cls.VERSION else " (upgrade ctxeval)"))
    missing = [f for f in header["files"] if not (path / f).exists()]
    if missing:
        raise UserError(f"{path} lacks {missing[0]}, which its {RESULT_FILE} lists; re-run the command that made it")
    return read_files(cls, path, header["files"], version)  # type: ignore[no-any-return]


def result_class(kind: str) -> type[Result]:
    """The class of an output kind, as the catalog names it (its module is imported on first use)."""
    if kind not in catalog.RESULTS:
        raise UserError(f"unknown result kind {kind!r}: written by a newer ctxeval? (this one reads {', '.join(sorted(catalog.RESULTS))})")
    module, name = catalog.RESULTS[kind]
    cls: type[Result] = getattr(import_module(module), name)
    return cls


def _version() -> str:
    try:
        return metadata.version("ctxeval")
    except metadata.PackageNotFoundError:
        return "unknown"
