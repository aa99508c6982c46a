"""ctxeval: measure how well language models use long contexts.

The public functions live in `ctxeval.api` and are imported from it on first use, so a process
that only needs a backend (a Ray worker, `ctxeval serve`) does not import pandas, scipy and
matplotlib (about a second here).
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from ctxeval.catalog import COMMANDS, function_name, public_names

__all__ = public_names()

if TYPE_CHECKING:
    from ctxeval.api import *  # noqa: F403

_FUNCTIONS = frozenset(function_name(c) for c in COMMANDS)


class _Package(types.ModuleType):
    """A command's function wins over a subpackage of the same name: importing `ctxeval.report`
    (or agreement, judge, leval) sets it as an attribute of this package, which would otherwise
    turn `ctxeval.report(...)` into a call of a module once anything imported it."""

    def __getattribute__(self, name: str) -> Any:
        if name in _FUNCTIONS:
            from ctxeval import api

            return getattr(api, name)
        return super().__getattribute__(name)


def __getattr__(name: str) -> Any:
    if name in __all__:
        from ctxeval import api

        return getattr(api, name)
    raise AttributeError(f"module 'ctxeval' has no attribute {name!r}")


sys.modules[__name__].__class__ = _Package
