"""The registry of commands, built from `ctxeval.catalog.COMMANDS` (the one list: name, in the
CLI's order, and the family module whose `COMMANDS` declares it as (spec, run, echo)); the API
and the docs are built from this mapping, on first use of `COMMANDS`. The CLI loads only the
command it runs (`command(name)`), so `ctxeval --help` imports no family and no task."""

from __future__ import annotations

from importlib import import_module

from ctxeval import catalog
from ctxeval.commands.base import Command


def _registry() -> dict[str, Command]:
    """Each catalogued command from its family; a family declaring a command the catalog does not
    list stops the import (it would otherwise vanish from the CLI and the API), as does a
    catalogued name no family declares."""
    by_family = {module: {c.name: c for c in import_module(module).COMMANDS} for module in dict.fromkeys(e.module for e in catalog.COMMANDS.values())}
    declared = {name: c for commands in by_family.values() for name, c in commands.items()}
    misplaced = sorted(set(declared) ^ set(catalog.COMMANDS) | {n for n, e in catalog.COMMANDS.items() if n not in by_family[e.module]})
    if misplaced:
        raise RuntimeError(f"ctxeval.catalog.COMMANDS and the families' COMMANDS differ: {misplaced}")
    return {name: declared[name] for name in catalog.COMMANDS}


def command(name: str) -> Command:
    """One catalogued command, importing only its family: the CLI loads no other command's code
    (`ctxeval --help` and `ctxeval ruler` import no task of another command)."""
    found = {c.name: c for c in import_module(catalog.COMMANDS[name].module).COMMANDS}
    if name not in found:
        raise RuntimeError(f"ctxeval.catalog.COMMANDS names {catalog.COMMANDS[name].module} for {name!r}, which does not declare it")
    return found[name]


_REGISTRY: dict[str, Command] | None = None  # built on first use of COMMANDS


def __getattr__(name: str) -> dict[str, Command]:
    """`COMMANDS`, the whole registry, built (every family imported) on first use."""
    global _REGISTRY
    if name != "COMMANDS":
        raise AttributeError(f"module 'ctxeval.commands' has no attribute {name!r}")
    if _REGISTRY is None:
        _REGISTRY = _registry()
    return _REGISTRY
