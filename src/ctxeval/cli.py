"""Command-line interface, built from the command specs (commands/): every flag, default and help
text comes from a spec field, so none is declared here. Parses flags into the spec, runs the
command and prints what its `echo` returns. No logic of its own."""

from __future__ import annotations

import inspect
import sys
import types
import typing
from dataclasses import MISSING, fields
from functools import cache
from typing import Annotated, Any, Optional

import typer
import typer.core

from ctxeval import catalog
from ctxeval.commands import command as catalogued
from ctxeval.commands.base import AppOptions, Command, execute
from ctxeval.errors import EXIT_INCOMPLETE, EXIT_USER_ERROR, IncompleteRun, UserError
from ctxeval.options import SAME, Flag, field_default, field_flag, flat_fields

HELP = "Measure how well language models use long contexts: perplexity, rank-based perplexity, context-length sweeps."
_SEP = "__"  # joins a group field's path into one parameter name


def _cli_type(owner: type, f: Any, flag: Flag) -> Any:
    """The type typer parses for a field: the flag's own, else the field's (X | None as Optional[X])."""
    if flag.cli_type is not None:
        return flag.cli_type
    hint = typing.get_type_hints(owner)[f.name]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return Optional[args[0]]
    return hint


def _parameters(spec: type, display: type | None) -> list[inspect.Parameter]:
    params = []
    own = spec.__dict__.get("__annotations__", {})  # a command's own options first, then those it inherits
    fields_in_order = sorted(flat_fields(spec), key=lambda pf: pf[0][0] not in own)
    sources = [(spec, path, f) for path, f in fields_in_order] + ([(display, ("display", *p), f) for p, f in flat_fields(display)] if display else [])
    for root, path, f in sources:
        flag = field_flag(f)
        assert flag is not None
        owner = _owner(root, path[1:] if path[0] == "display" else path)
        default = flag.shown if flag.shown is not SAME else field_default(f)
        cli_type = _cli_type(owner, f, flag)
        # a switch takes no value: --help shows no type beside it
        info = typer.Argument(help=flag.help) if flag.positional else typer.Option(
            f"{flag.flag}/{flag.negative}" if flag.negative else flag.flag, help=flag.help, metavar="" if cli_type in (bool, Optional[bool]) else None)
        kind = inspect.Parameter.KEYWORD_ONLY
        annotation = Annotated[cli_type, info]
        params.append(inspect.Parameter(_SEP.join(path), kind, default=inspect.Parameter.empty if default is MISSING else default, annotation=annotation))
    return params


def _owner(root: type, path: tuple[str, ...]) -> type:
    """The dataclass that declares the field at `path`."""
    cls = root
    for name in path[:-1]:
        cls = {f.name: f for f in fields(cls)}[name].metadata["group"]
    return cls


def _build(cls: type, values: dict[str, Any], prefix: tuple[str, ...], top: dict[str, Any]) -> Any:
    """An instance of `cls` from the flat CLI values (groups built recursively, shared fields
    taken from the command's own field of that name)."""
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        key = _SEP.join((*prefix, f.name))
        if "group" in f.metadata:
            group_cls = f.metadata["group"]
            if f.metadata["optional"]:
                first = next(g.name for g in fields(group_cls) if field_flag(g) is not None)
                if values.get(_SEP.join((*prefix, f.name, first))) is None:
                    kwargs[f.name] = None
                    continue
            kwargs[f.name] = _build(group_cls, values, (*prefix, f.name), top)
        elif "shared" in f.metadata:
            kwargs[f.name] = top[f.metadata["shared"]]
        elif key in values:
            flag = field_flag(f)
            assert flag is not None
            value = values[key]
            kwargs[f.name] = flag.to_value(value) if flag.to_value is not None else value
    from_cli = getattr(cls, "from_cli", None)
    return from_cli(kwargs) if from_cli is not None else cls(**kwargs)


def _top_values(spec: type, values: dict[str, Any]) -> dict[str, Any]:
    """The command's own (ungrouped) field values, for the groups' shared fields."""
    out = {}
    for f in fields(spec):
        flag = field_flag(f)
        if flag is not None and f.name in values:
            out[f.name] = flag.to_value(values[f.name]) if flag.to_value is not None else values[f.name]
    return out


def _register(command: Command, app: typer.Typer) -> None:
    def cli_command(**values: Any) -> None:
        display_values = {k[len("display" + _SEP):]: v for k, v in values.items() if k.startswith("display" + _SEP)}
        spec_values = {k: v for k, v in values.items() if not k.startswith("display" + _SEP)}
        spec = _build(command.spec, spec_values, (), _top_values(command.spec, spec_values))
        display = _build(command.display, display_values, (), {}) if command.display else None
        if command.cli_spec is not None:
            spec = command.cli_spec(spec, display)
        result = execute(command, spec)
        shown = command.echo(result, spec, display)
        text, code = shown if isinstance(shown, tuple) else (shown, 0)
        if text:
            typer.echo(text)
        if code:
            raise typer.Exit(code)

    cli_command.__signature__ = inspect.Signature(_parameters(command.spec, command.display))  # type: ignore[attr-defined]
    cli_command.__doc__ = command.help
    app.command(command.name, help=_paragraphs(command.help), cls=_Command)(cli_command)


def _paragraphs(text: str) -> str:
    """Help text with its paragraphs' line breaks removed, so no renderer breaks a sentence where
    the docstring's source line ended."""
    return "\n\n".join(" ".join(p.split()) for p in text.split("\n\n"))


def _switch(option: Any) -> Any:
    """The help option shown as the switch it is (no type beside it)."""
    if option is not None:
        option.metavar = ""
    return option


class _Command(typer.core.TyperCommand):
    def get_help_option(self, ctx: Any) -> Any:
        return _switch(super().get_help_option(ctx))


class _Commands(typer.core.TyperGroup):
    """The commands, loaded one at a time: the one named is built from its family alone, and the
    list in `ctxeval --help` shows the catalog's summaries, so listing the commands or running
    one imports no other command's code."""

    def list_commands(self, ctx: Any) -> list[str]:
        return list(catalog.COMMANDS)

    def get_command(self, ctx: Any, name: str) -> Any:
        if name not in catalog.COMMANDS:
            return None
        if name in catalog.SUMMARIES:
            return _Command(name, help=catalog.SUMMARIES[name])
        return _loaded(name)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        if args and args[0] in catalog.COMMANDS:
            return args[0], _loaded(args[0]), args[1:]
        return super().resolve_command(ctx, args)

    def get_help_option(self, ctx: Any) -> Any:
        return _switch(super().get_help_option(ctx))


@cache
def _loaded(name: str) -> Any:
    """The click command of one catalogued command."""
    one = typer.Typer(pretty_exceptions_enable=False, add_completion=False)
    _register(catalogued(name), one)
    loaded = typer.main.get_command(one)
    loaded.name = name
    return loaded


def _root(**values: Any) -> None:
    """ctxeval's own options (AppOptions), given before a command."""
    if values.get("version"):
        from importlib import metadata  # only here: `ctxeval --help` does without it

        typer.echo(f"ctxeval {metadata.version('ctxeval')}")
        raise typer.Exit()


_root.__signature__ = inspect.Signature(_parameters(AppOptions, None))  # type: ignore[attr-defined]


def _typer(**settings: Any) -> typer.Typer:
    """A command line with ctxeval's own options."""
    app = typer.Typer(help=HELP, no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False, **settings)
    app.callback(invoke_without_command=True)(_root)
    return app


@cache
def _full_app() -> typer.Typer:
    """Every command registered at once (every family imported): for tests and tools that read
    the whole command line, e.g. each command's flags."""
    full = _typer()
    for name in catalog.COMMANDS:
        _register(catalogued(name), full)
    return full


def __getattr__(name: str) -> typer.Typer:
    """`app`: the whole command line, built on first use (`main` loads only the command it runs)."""
    if name != "app":
        raise AttributeError(f"module 'ctxeval.cli' has no attribute {name!r}")
    return _full_app()


def main() -> None:
    """Entry point: user errors become one line on stderr and exit code 2; a run whose work
    partly failed, one line and exit code 3 (re-running the same command retries that work)."""
    try:
        code = _typer(cls=_Commands)(standalone_mode=False)
    except UserError as exc:
        _fail(str(exc))
    except IncompleteRun as exc:
        _fail(str(exc), EXIT_INCOMPLETE)
    except KeyboardInterrupt:
        _interrupted()
    except Exception as exc:
        # typer's (vendored) click usage errors: bad flags, missing arguments
        if type(exc).__name__ == "NoArgsIsHelpError":
            sys.exit(0)
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
            _fail(_not_a_number(exc) or exc.format_message().replace("\n", " "))
        if type(exc).__name__ == "Abort":
            _interrupted()
        raise
    if code == 130:  # typer turns Ctrl-C into Exit(130)
        _interrupted()
    if isinstance(code, int) and code:
        sys.exit(code)


def _not_a_number(exc: Exception) -> str | None:
    """A numeric flag given text, in ctxeval's words (`--generate-share must be a number, got
    'abc'`) instead of the parsing library's; None for any other error."""
    param, message = getattr(exc, "param", None), str(getattr(exc, "message", ""))
    opts = getattr(param, "opts", None)
    kind = "an integer" if "valid integer" in message else "a number" if "valid number" in message else None
    if not opts or kind is None:
        return None
    flag = max(opts, key=len)
    args = sys.argv[1:]
    given = next((a.split("=", 1)[1] for a in args if a.startswith(flag + "=")), None)
    given = given if given is not None else next((args[i + 1] for i, a in enumerate(args[:-1]) if a == flag), None)
    return f"{flag} must be {kind}" + (f", got {given!r}" if given is not None else "")


def _fail(message: str, code: int = EXIT_USER_ERROR) -> None:
    print(f"ctxeval: error: {message}", file=sys.stderr)
    sys.exit(code)


def _interrupted() -> None:
    print("ctxeval: interrupted; finished passes are saved — re-run the same command to resume", file=sys.stderr)
    sys.exit(130)


if __name__ == "__main__":
    main()
