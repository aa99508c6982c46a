"""The output contract: every folder a command writes holds one typed, versioned `Result`.

A `Result` subclass is one output kind (a scoring summary, a comparison, a diff, ...): it owns
its files (`FILES`), is the only code that writes them (`write_files`) and the only code that
reads them back (`read_files`). `write_result` writes the files, then the header `result.json`
(`{"kind", "version", "command", "files", "ctxeval"}`), last, so a folder with a header holds
every file the header lists. `read_result` dispatches on the header's kind and refuses, in one
line, a folder without a header (written before outputs carried one), a kind the reader does
not take, or a version this ctxeval cannot read.

A kind whose layout changes bumps `VERSION`; `READS` lists the earlier versions its
`read_files` still understands, so an old folder either reads or is refused naming its version.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Collection
from importlib import import_module, metadata
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from ctxeval import catalog
from ctxeval.errors import FieldError, UserError, a_or_an

RESULT_FILE = "result.json"

T = TypeVar("T", bound="Result")

_KINDS: dict[str, type[Result]] = {}


class Result:
    """One output kind: what a command found, the files it owns, how they are written and read."""

    KIND: ClassVar[str]
    VERSION: ClassVar[int] = 1
    READS: ClassVar[tuple[int, ...]] = ()  # earlier versions `read_files` still reads
    FILES: ClassVar[tuple[str, ...]] = ()  # the files it owns, relative to its folder

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "KIND" in cls.__dict__:
            _KINDS[cls.KIND] = cls

    def files(self) -> tuple[str, ...]:
        """The files this result writes (a subclass may add optional ones to `FILES`)."""
        return self.FILES

    def write_files(self, out: Path) -> None:
        """Write every file of `files()` into `out` (which exists)."""
        raise NotImplementedError

    @classmethod
    def read_files(cls: type[T], out: Path, version: int) -> T:
        """The result stored in `out` (written with header version `version`)."""
        raise NotImplementedError


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
    result.write_files(out)
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
    return cls.read_files(path, version)  # type: ignore[return-value]


def result_class(kind: str) -> type[Result]:
    """The class of an output kind (its module is imported on first use)."""
    if kind not in _KINDS and kind in catalog.RESULTS:
        import_module(catalog.RESULTS[kind][0])
    if kind not in _KINDS:
        raise UserError(f"unknown result kind {kind!r}: written by a newer ctxeval? (this one reads {', '.join(sorted(catalog.RESULTS))})")
    return _KINDS[kind]


def _version() -> str:
    try:
        return metadata.version("ctxeval")
    except metadata.PackageNotFoundError:
        return "unknown"
