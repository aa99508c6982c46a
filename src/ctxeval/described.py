"""How a backend describes its own options (the openai backend's server, mode, tokenizer, ...):
what each means and how a value given as text becomes it, in the backend's terms. The command
layer (ctxeval.options) turns a description into a CLI option and a Python keyword, so no
backend imports the face. A leaf module: the face and the backends both import it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

DESCRIBED = "described"  # the metadata key of a field's description


@dataclass(frozen=True)
class Described:
    """One backend option: `help`, what it means; `name`, what a user calls it where the
    field's own name is too generic for a command that has other options (`api-mode`; "": the
    field's name); `many`, given once per value (several servers); `from_text`, how a value
    given as text (or None: not given) becomes the option (None: as given)."""

    help: str
    name: str = ""
    many: bool = False
    from_text: Callable[[Any], Any] | None = None


def described(help: str, default: Any, *, name: str = "", many: bool = False, from_text: Callable[[Any], Any] | None = None) -> Any:
    """A dataclass field of backend options with its description."""
    return field(default=default, metadata={DESCRIBED: Described(help, name, many, from_text)})
