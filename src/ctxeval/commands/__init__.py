"""The registry of commands, built from `ctxeval.catalog.COMMANDS` (the one list: name, in the
CLI's order, and the family module whose `COMMANDS` declares it as (spec, run, echo)); the CLI,
the API and the docs are built from this mapping."""

from __future__ import annotations

from importlib import import_module

from ctxeval import catalog
from ctxeval.commands.base import Command


def _registry() -> dict[str, Command]:
    """Each catalogued command from its family; a family declaring a command the catalog does not
    list stops the import (it would otherwise vanish from the CLI and the API), as does a
    catalogued name no family declares."""
    by_family = {module: {c.name: c for c in import_module(module).COMMANDS} for module in dict.fromkeys(catalog.COMMANDS.values())}
    declared = {name: c for commands in by_family.values() for name, c in commands.items()}
    misplaced = sorted(set(declared) ^ set(catalog.COMMANDS) | {n for n, m in catalog.COMMANDS.items() if n not in by_family[m]})
    if misplaced:
        raise RuntimeError(f"ctxeval.catalog.COMMANDS and the families' COMMANDS differ: {misplaced}")
    return {name: declared[name] for name in catalog.COMMANDS}


COMMANDS: dict[str, Command] = _registry()
