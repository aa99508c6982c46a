"""What a command is: a spec (its options, declared once), the function that runs it and returns
its result, and what the CLI prints of that result.

The registry (commands/__init__.py) lists every command; cli.py builds the typer commands from it
and api.py the Python functions, so neither declares an option of its own.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ctxeval.options import check_spec


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
    api_name: str = ""  # the Python function's name (default: the name with - as _)
    inputs: tuple[str, ...] = ()  # fields a Python caller may pass positionally (the command's inputs)

    @property
    def function_name(self) -> str:
        return self.api_name or self.name.replace("-", "_")

    @property
    def help(self) -> str:
        return inspect.cleandoc(self.spec.__doc__ or "")


def execute(command: Command, spec: Any) -> Any:
    """Check the spec (every field, then the rules across fields) and run the command."""
    check_spec(spec)
    return command.run(spec)
