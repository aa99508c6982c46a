"""Options declared once: a command's spec is a frozen dataclass whose fields carry their face.

A spec (commands/) or an option group (corpus, executor, metric, openai options) is a frozen
dataclass. Each field carries its face in its metadata: the CLI flag, the help
text, how a CLI value becomes the field's value (comma lists, 'full', 'none') and a check. A field
may hold a group (another dataclass whose fields carry their own flags: corpus, executor, metric
options; or a backend's options, which describe themselves in the backend's terms and get their
flags here, `field_flag`), which the CLI flattens into flags and Python callers pass as one object.

The CLI (cli.py) and the API (api.py) are both built from the specs (the registry in commands/__init__.py, from catalog.py's lines), so a
default, a help text and a check live in exactly one place. A bad value raises `SpecError`,
which names the field as the caller knows it: `--n-compare` on the CLI, `n_compare=` in Python.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import MISSING, dataclass, field, fields
from functools import cache
from typing import Any, Optional

from ctxeval.described import DESCRIBED, Described
from ctxeval.errors import FieldError, UserError, phrase
from ctxeval.stats.defaults import DEFAULT_REPLICATES, MIN_REPLICATES

Check = Callable[[Any], "str | None"]


class _Same:
    """`Flag.shown` when --help shows the field's own default."""

    def __repr__(self) -> str:
        return "SAME"


SAME: Any = _Same()


@dataclass(frozen=True)
class Flag:
    """How a field appears on the command line. `flag` "" makes it a positional argument;
    `cli_type` is what typer parses when it differs from the field's type (a comma list is a
    str); `to_value` turns the parsed value into the field's; `shown` is the default --help
    shows when the field's default is not what a user types; `check` returns what is wrong
    with a value ("must be positive, got 0") or None."""

    flag: str
    help: str
    cli_type: Any = None
    to_value: Callable[[Any], Any] | None = None
    shown: Any = SAME
    check: Check | None = None
    negative: str = ""  # the off switch of a boolean pair ("--non-exhaustive")

    @property
    def positional(self) -> bool:
        return not self.flag


_GIVEN: dict[dataclasses.Field, Flag] = {}  # faces the command layer gives fields declared below it (`give_faces`)


def give_faces(cls: type, **faces: Flag) -> None:
    """Give the fields of `cls` their CLI faces, by field name: for a dataclass of a layer that
    imports nothing of this one (metrics/, stats/: they import only errors and each other), so
    its face is declared where the options live."""
    by_name = {f.name: f for f in fields(cls)}
    unknown = set(faces) - set(by_name)
    if unknown:
        raise ValueError(f"{cls.__name__} has no field {', '.join(sorted(unknown))}")
    for name, face in faces.items():
        _GIVEN[by_name[name]] = face


def field_flag(f: dataclasses.Field) -> Flag | None:
    """A field's CLI face: the one `give_faces` gave it, its own (`option`), or the one a
    backend's description of the field (ctxeval/described.py) gives it: `--` and its name, a list
    when given once per value, a text turned into the option by the description; None: a field
    with no face."""
    given = _GIVEN.get(f)
    return given if given is not None else _own_flag(f)


@cache
def _own_flag(f: dataclasses.Field) -> Flag | None:
    if "flag" in f.metadata:
        return f.metadata["flag"]
    if DESCRIBED not in f.metadata:
        return None
    d: Described = f.metadata[DESCRIBED]
    flag = "--" + (d.name or f.name.replace("_", "-"))
    if d.many:
        return Flag(flag, d.help, cli_type=Optional[list[str]], shown=None)
    if d.from_text is not None:
        return Flag(flag, d.help, cli_type=Optional[str], to_value=d.from_text, shown=None)
    return Flag(flag, d.help)


class SpecError(UserError):
    """A bad value of one field; the message names it the way its caller spells it: the problem
    follows the name ("--window must be ...") or holds it as {name} ("unknown {name} 'x'"); other
    fields it mentions are {placeholders} spelled the same way (`others`: name -> (path, flag))."""

    def __init__(self, path: tuple[str, ...], flag: str, problem: str, others: dict[str, tuple[tuple[str, ...], str]] | None = None) -> None:
        self.path, self.flag, self.problem, self.others = path, flag, problem, others or {}
        super().__init__(self._message(flag or path[-1], {k: flag or p[-1] for k, (p, flag) in self.others.items()}))

    def _message(self, name: str, others: dict[str, str]) -> str:
        return phrase(self.problem, name, others)

    def for_python(self) -> UserError:
        return UserError(self._message(f"{'.'.join(self.path)}=", {k: f"{'.'.join(p)}=" for k, (p, _) in self.others.items()}))


def named(spec_cls: type, error: FieldError) -> UserError:
    """A task's FieldError as the SpecError of `spec_cls`'s field of that name (and its other
    placeholders), so the CLI and the API each spell it their way; unchanged when the spec has
    no such field."""
    paths = {path[-1]: path for path, _ in flat_fields(spec_cls)}
    if error.field not in paths or not error.placeholders() <= set(paths):
        return error
    others = {name: (paths[name], flag_of(spec_cls, paths[name])) for name in error.placeholders()}
    return SpecError(paths[error.field], flag_of(spec_cls, paths[error.field]), error.problem, others)


def option(flag: str, help: str, default: Any = MISSING, *, default_factory: Callable[[], Any] | Any = MISSING, cli_type: Any = None,
           to_value: Callable[[Any], Any] | None = None, shown: Any = SAME, check: Check | None = None, negative: str = "") -> Any:
    """A spec field with its CLI face (see `Flag`)."""
    meta = {"flag": Flag(flag, help, cli_type, to_value, shown, check, negative)}
    if default_factory is not MISSING:
        return field(default_factory=default_factory, metadata=meta)
    return field(default=default, metadata=meta)


def argument(help: str, default: Any = MISSING, *, cli_type: Any = None, to_value: Callable[[Any], Any] | None = None, shown: Any = SAME,
             check: Check | None = None) -> Any:
    """A positional spec field (the inputs of a command)."""
    return option("", help, default, cli_type=cli_type, to_value=to_value, shown=shown, check=check)


def python_only(default: Any = MISSING, *, default_factory: Callable[[], Any] | Any = MISSING) -> Any:
    """A field Python callers set and the CLI derives (e.g. `progress`, from --quiet)."""
    if default_factory is not MISSING:
        return field(default_factory=default_factory, metadata={"python_only": True})
    return field(default=default, metadata={"python_only": True})


def group(cls: type, *, optional: bool = False, only: tuple[str, ...] | None = None) -> Any:
    """A field holding a group of options. `optional`: None unless the CLI gives the group's
    first flag (a noise floor is measured only with --noise-floor); `only`: the group's fields
    this command offers on the CLI (the others keep their defaults)."""
    meta = {"group": cls, "optional": optional, "only": only}
    if optional:
        return field(default=None, metadata=meta)
    return field(default_factory=cls, metadata=meta)


def replicates_option() -> Any:
    """The --replicates field of a spec or option group: one help for every command."""
    return option("--replicates", "Bootstrap replicates of every interval.", DEFAULT_REPLICATES, check=at_least(MIN_REPLICATES))


def shared(name: str) -> dict[str, str]:
    """Metadata of a group field that takes the command's own field `name` on the CLI (the
    corpus's sampling seed is the command's --seed)."""
    return {"shared": name}


def flag_of(spec_cls: type, path: tuple[str, ...]) -> str:
    """The CLI flag of a (possibly nested) field."""
    cls = spec_cls
    for name in path:
        f = {f.name: f for f in fields(cls)}[name]
        if "group" in f.metadata:
            cls = f.metadata["group"]
        else:
            flag = field_flag(f)
            return flag.flag if flag and flag.flag else name.upper()
    return ""


def check_spec(spec: Any, path: tuple[str, ...] = ()) -> None:
    """Run every field's check, then the spec's own `check()` (rules across fields)."""
    for f in fields(spec):
        value = getattr(spec, f.name)
        flag = field_flag(f)
        if flag is not None and flag.check is not None and value is not None:
            problem = flag.check(value)
            if problem:
                raise SpecError((*path, f.name), flag.flag, problem)
        if "group" in f.metadata and value is not None:
            check_spec(value, (*path, f.name))
    own = getattr(type(spec), "check", None)
    if own is not None:
        own(spec)


def fail(spec_cls: type, name: str, problem: str) -> SpecError:
    """The error of a rule across fields, naming `name` (a dotted path for a group's field)."""
    path = tuple(name.split("."))
    return SpecError(path, flag_of(spec_cls, path), problem)


# -- reusable checks and converters ---------------------------------------------------------

def positive(value: Any) -> str | None:
    values = value if isinstance(value, (tuple, list)) else (value,)
    bad = next((v for v in values if v < 1), None)
    return None if bad is None else f"must be a positive integer, got {bad}"


def at_least(low: float, what: str = "") -> Check:
    def check(value: Any) -> str | None:
        return None if value >= low else f"must be at least {low:g}{what}, got {value}"
    return check


def non_negative(value: float) -> str | None:
    return None if value >= 0 else f"must not be negative, got {value}"


def greater_than_zero(value: float) -> str | None:
    return None if value > 0 else f"must be positive, got {value}"


def one_of(choices: Sequence[str]) -> Check:
    def check(value: Any) -> str | None:
        return None if value in choices else f"unknown {{name}} {value!r}; choose one of {', '.join(choices)}"
    return check


def comma_list(flag: str, kind: Callable[[str], Any], noun: str) -> Callable[[str], tuple]:
    """A parser of comma-separated values of one kind; a bad item names the flag."""
    def parse(value: str) -> tuple:
        try:
            return tuple(kind(v) for v in value.split(",") if v.strip())
        except ValueError:
            raise UserError(f"{flag} expects comma-separated {noun}, got {value!r}") from None
    return parse


def comma_ints(flag: str) -> Callable[[str], tuple[int, ...]]:
    return comma_list(flag, int, "integers")


def comma_floats(flag: str) -> Callable[[str], tuple[float, ...]]:
    return comma_list(flag, float, "numbers")


def joined(values: Sequence[Any]) -> str:
    """A sequence default as --help shows it ("32,64,128")."""
    return ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in values)


def flat_fields(spec_cls: type, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], dataclasses.Field]]:
    """Every (path, field) of a spec with a CLI face, groups flattened, in declaration order."""
    out = []
    for f in fields(spec_cls):
        if "group" in f.metadata:
            only = f.metadata["only"]
            out += [(p, g) for p, g in flat_fields(f.metadata["group"], (*path, f.name)) if only is None or p[len(path) + 1] in only]
        elif field_flag(f) is not None:
            out.append(((*path, f.name), f))
    return out


def field_default(f: dataclasses.Field) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return MISSING
