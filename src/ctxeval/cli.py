"""Command-line interface, built from the command specs (commands/): every flag, default and help
text comes from a spec field, so none is declared here. Parses flags into the spec, runs the
command and prints what its `echo` returns. No logic of its own."""

from __future__ import annotations

import inspect
import sys
import types
import typing
from dataclasses import MISSING, fields
from typing import Annotated, Any, Optional

import typer

from ctxeval.commands import COMMANDS
from ctxeval.commands.base import Command, execute
from ctxeval.errors import EXIT_INCOMPLETE, EXIT_USER_ERROR, IncompleteRun, UserError
from ctxeval.options import SAME, Flag, field_default, flat_fields

app = typer.Typer(
    help="Measure how well language models use long contexts: perplexity, rank-based perplexity, context-length sweeps.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
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
        flag: Flag = f.metadata["flag"]
        owner = _owner(root, path[1:] if path[0] == "display" else path)
        default = flag.shown if flag.shown is not SAME else field_default(f)
        info = typer.Argument(help=flag.help) if flag.positional else typer.Option(f"{flag.flag}/{flag.negative}" if flag.negative else flag.flag, help=flag.help)
        kind = inspect.Parameter.KEYWORD_ONLY
        annotation = Annotated[_cli_type(owner, f, flag), info]
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
                first = next(g.name for g in fields(group_cls) if "flag" in g.metadata)
                if values.get(_SEP.join((*prefix, f.name, first))) is None:
                    kwargs[f.name] = None
                    continue
            kwargs[f.name] = _build(group_cls, values, (*prefix, f.name), top)
        elif "shared" in f.metadata:
            kwargs[f.name] = top[f.metadata["shared"]]
        elif key in values:
            flag: Flag = f.metadata["flag"]
            value = values[key]
            kwargs[f.name] = flag.to_value(value) if flag.to_value is not None else value
    from_cli = getattr(cls, "from_cli", None)
    return from_cli(kwargs) if from_cli is not None else cls(**kwargs)


def _top_values(spec: type, values: dict[str, Any]) -> dict[str, Any]:
    """The command's own (ungrouped) field values, for the groups' shared fields."""
    out = {}
    for f in fields(spec):
        if "flag" in f.metadata and f.name in values:
            flag: Flag = f.metadata["flag"]
            out[f.name] = flag.to_value(values[f.name]) if flag.to_value is not None else values[f.name]
    return out


def _register(command: Command) -> None:
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
    app.command(command.name, help=command.help)(cli_command)


for _command in COMMANDS.values():
    _register(_command)


def main() -> None:
    """Entry point: user errors become one line on stderr and exit code 2; a run whose work
    partly failed, one line and exit code 3 (re-running the same command retries that work)."""
    try:
        code = app(standalone_mode=False)
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
            _fail(exc.format_message().replace("\n", " "))
        if type(exc).__name__ == "Abort":
            _interrupted()
        raise
    if code == 130:  # typer turns Ctrl-C into Exit(130)
        _interrupted()
    if isinstance(code, int) and code:
        sys.exit(code)


def _fail(message: str, code: int = EXIT_USER_ERROR) -> None:
    print(f"ctxeval: error: {message}", file=sys.stderr)
    sys.exit(code)


def _interrupted() -> None:
    print("ctxeval: interrupted; finished passes are saved — re-run the same command to resume", file=sys.stderr)
    sys.exit(130)


if __name__ == "__main__":
    main()
