"""The registry of commands: each family module declares its `COMMANDS` (spec, run, echo); the
CLI, the API and the docs are built from this one mapping, in this order."""

from __future__ import annotations

from ctxeval.commands import answers, compare, diff, probes, scoring, tools, validity
from ctxeval.commands.base import Command

_ORDER = ("sweep", "score", "diff", "summary", "compare", "trends", "context-gain", "effective-length", "retrieval", "ruler", "agreement", "probe-report", "report", "models", "leval", "leval-corr",
          "judge", "meta-eval", "pplqa", "serve")
_ALL = {c.name: c for module in (scoring, diff, compare, probes, validity, tools, answers) for c in module.COMMANDS}
if set(_ALL) != set(_ORDER):  # a command left out of the order would vanish from the CLI and the API
    raise RuntimeError(f"commands/__init__._ORDER and the families' COMMANDS differ: {sorted(set(_ALL) ^ set(_ORDER))}")
COMMANDS: dict[str, Command] = {name: _ALL[name] for name in _ORDER}
