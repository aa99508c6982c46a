"""What a command is: a spec (its options, declared once), the function that runs it and returns
its result, and what the CLI prints of that result.

The registry (commands/__init__.py, from `ctxeval.catalog`) lists every command; cli.py builds the typer commands from it
and api.py the Python functions, so neither declares an option of its own.
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ctxeval import catalog
from ctxeval.errors import FieldError
from ctxeval.options import check_spec, named, option


@dataclass(frozen=True)
class Command:
    """One command. `spec` is the options dataclass (its docstring is the command's help);
    `run(spec)` does the work and returns the result; `echo(result, spec, display)` returns what
    the CLI prints and its exit code; `display` is a dataclass of CLI-only flags (--quiet,
    --price-in) or None; `cli_spec(spec, display)` lets the CLI derive python-only fields
    (progress from --quiet)."""

    name: str
    spec: type
    run: Callable[[Any], Any]
    echo: Callable[[Any, Any, Any], "tuple[str, int] | str"]
    display: type | None = None
    cli_spec: Callable[[Any, Any], Any] | None = None
    inputs: tuple[str, ...] = ()  # fields a Python caller may pass positionally (the command's inputs)
    # a command that loads no model and writes a folder (compare, trends, ...): the folder and
    # the outputs it reads, for the manifest the engine records there; None for the others
    posthoc: Callable[[Any], "tuple[Path | None, tuple]"] | None = None

    @property
    def function_name(self) -> str:
        return catalog.function_name(self.name)

    @property
    def help(self) -> str:
        return inspect.cleandoc(self.spec.__doc__ or "")


@dataclass(frozen=True)
class AppOptions:
    """The options of `ctxeval` itself, given before any command."""

    version: bool = option("--version", "Print ctxeval's version and exit.", False)


def execute(command: Command, spec: Any) -> Any:
    """Check the spec (every field, then the rules across fields) and run the command; a
    post-hoc command's result gets its texts (render/) and its folder its manifest (what it
    read, with which settings). A bad
    option value the task finds (`FieldError`) is named by the spec's flag (CLI) or keyword (API)."""
    try:
        return _execute(command, spec)
    except FieldError as exc:
        raise named(command.spec, exc) from None


def _execute(command: Command, spec: Any) -> Any:
    from ctxeval.pipeline.engine import check_posthoc_out, write_posthoc  # not at start-up: `ctxeval --help` loads no engine

    check_spec(spec)
    out, inputs = command.posthoc(spec) if command.posthoc is not None else (None, ())
    if out is not None:
        check_posthoc_out(out, command.name)
    started = time.time()
    result = command.run(spec)
    if command.posthoc is None:  # rendered where the engine writes it (or by the command that writes nothing)
        return result
    from ctxeval.render.kinds import RENDERING

    result = RENDERING.texts(result)
    if out is not None:
        write_posthoc(out, result, command.name, spec_config(spec), inputs, time.time() - started, RENDERING)
    return result


def spec_config(spec: Any) -> dict[str, Any]:
    """A spec as a manifest stores it (paths as text)."""
    return json.loads(json.dumps(asdict(spec), default=str))
