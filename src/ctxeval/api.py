"""The public Python API, built from the command registry (commands/): one function per command,
named after it (`context-gain` is `context_gain`). A function takes the command's inputs
positionally and every option by keyword; its parameters are the fields of the command's spec,
with the spec's defaults, and it returns the command's typed result. A bad value raises
`UserError` naming the field as `name=`; the CLI names the same field by its flag.

    ctxeval.score(["book.txt"], method="fixed", window=512, out="runs/book")
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

from importlib import import_module

from ctxeval import catalog
from ctxeval.commands import COMMANDS
from ctxeval.commands.base import Command, execute
from ctxeval.metrics.config import MetricConfig
from ctxeval.options import SpecError
from ctxeval.results.manifest import SCORING_COMMANDS, read_manifest, require_command

def run_metrics(run_dir: str | Path) -> MetricConfig:
    """The metric settings a run was made with."""
    return require_command(read_manifest(Path(run_dir)), Path(run_dir), "summary", SCORING_COMMANDS).metrics


def _spec(command: Command, args: tuple, kwargs: dict[str, Any]) -> Any:
    """The command's spec from a Python call: inputs by position or name, options by name;
    a sequence where the spec holds a tuple becomes one, one path or string a 1-tuple, None
    for a group its defaults."""
    if len(args) > len(command.inputs):
        raise TypeError(f"{command.function_name}() takes {len(command.inputs)} positional arguments ({', '.join(command.inputs)}); give the options by name")
    values = dict(zip(command.inputs, args)) | kwargs
    by_name = {f.name: f for f in fields(command.spec)}
    unknown = sorted(set(values) - set(by_name))
    if unknown:
        raise TypeError(f"{command.function_name}() got an unexpected keyword argument {unknown[0]!r}")
    for name, value in values.items():
        f = by_name[name]
        default = f.default if f.default is not MISSING else None
        if "group" in f.metadata and value is None and not f.metadata["optional"]:
            values[name] = f.metadata["group"]()
        elif isinstance(default, tuple) or (f.default is MISSING and "tuple" in str(f.type)):
            values[name] = (value,) if isinstance(value, (str, Path)) else tuple(value) if value is not None else value
    return command.spec(**values)


def _signature(command: Command) -> inspect.Signature:
    params = []
    for f in fields(command.spec):
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD if f.name in command.inputs else inspect.Parameter.KEYWORD_ONLY
        if f.default is not MISSING:
            default = f.default
        elif f.default_factory is not MISSING:  # type: ignore[misc]
            default = f.default_factory()  # type: ignore[misc]
        else:
            default = inspect.Parameter.empty
        params.append(inspect.Parameter(f.name, kind, default=default, annotation=f.type))
    # a required option after a defaulted input is keyword-only, which Python allows; order inputs first
    params.sort(key=lambda p: p.kind)
    return inspect.Signature(params)


def _function(command: Command) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        spec = _spec(command, args, kwargs)
        try:
            return execute(command, spec)
        except SpecError as exc:
            raise exc.for_python() from None

    call.__name__ = call.__qualname__ = command.function_name
    call.__doc__ = inspect.cleandoc(command.run.__doc__ or command.help)
    call.__signature__ = _signature(command)  # type: ignore[attr-defined]
    call.__module__ = __name__
    return call


_FUNCTIONS = {command.function_name: _function(command) for command in COMMANDS.values()}
globals().update(_FUNCTIONS)

# the result classes and the extras the catalog lists, by name (ctxeval.__all__ is the same list)
globals().update({cls: getattr(import_module(module), cls) for module, cls in catalog.RESULTS.values()})
globals().update({name: getattr(import_module(module), name) for name, module in catalog.EXTRAS.items() if module != __name__})
__all__ = catalog.public_names()
