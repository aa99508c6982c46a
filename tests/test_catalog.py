"""The one list (`ctxeval.catalog`): a command and its result kind catalogued once show up in the
CLI, the API, `ctxeval.__all__` and `read_result`, following docs/design.md's "Add a command"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

TOY_FAMILY = '''
"""A toy post-hoc command: the number of words of a text file."""
from dataclasses import dataclass
from pathlib import Path

from ctxeval.commands.base import Command
from ctxeval.errors import FieldError
from ctxeval.options import argument, option
from ctxeval.results.base import Result
from ctxeval.results.io import Json, folder


@dataclass
class ToyResult(Result):
    KIND = "toy"
    FILES = (Json("toy.json", {"words": "words"}),)  # its fields, declared: the one writer and reader do the rest
    out: Path = folder()
    words: int


@dataclass(frozen=True)
class ToySpec:
    """Count the words of a text file."""

    text: Path = argument("A text file.")
    out: Path = option("--out", "Folder to write.", Path("toy-out"))
    max_words: int = option("--max-words", "Refuse a longer text.", 100)


def run_toy(spec: ToySpec) -> ToyResult:
    words = len(spec.text.read_text().split())
    if words > spec.max_words:  # found by the task, named by the caller's spelling
        raise FieldError("max_words", f"is {spec.max_words}, below the {words} words of the text; raise it or shorten the text ({{out}} is untouched)")
    return ToyResult(spec.out, words)


COMMANDS = (Command("toy", ToySpec, run_toy, lambda result, spec, display: f"{result.words} words", inputs=("text",),
                    posthoc=lambda spec: (spec.out, (spec.text,))),)
'''

DRIVER = '''
import importlib, json, sys
import ctxeval.errors
from pathlib import Path

from ctxeval import catalog

catalog.COMMANDS["toy"] = "toy_family"          # the one line a command adds
catalog.RESULTS["toy"] = ("toy_family", "ToyResult")  # the one line a result kind adds
import ctxeval

importlib.reload(ctxeval)  # __all__ was computed when the package was first imported
from ctxeval import cli, read_result

text, out_api, out_cli = (Path(a) for a in sys.argv[1:4])
result = ctxeval.toy(text, out=out_api)
sys.argv = ["ctxeval", "toy", str(text), "--out", str(out_cli)]
try:
    cli.main()
except SystemExit as exc:
    assert not exc.code, exc.code
import contextlib, io
try:
    ctxeval.toy(text, out=out_api, max_words=2)
except ctxeval.errors.UserError as exc:
    python_error = str(exc)
sys.argv = ["ctxeval", "toy", str(text), "--max-words", "2"]
stderr = io.StringIO()
with contextlib.redirect_stderr(stderr):
    try:
        cli.main()
    except SystemExit as exc:
        cli_code = exc.code
print(json.dumps({"python_error": python_error, "cli_error": stderr.getvalue().strip(), "cli_code": cli_code}))
print(json.dumps({"in_all": "toy" in ctxeval.__all__, "api_words": result.words, "read_api": read_result(out_api).words,
                  "read_cli": type(read_result(out_cli)).__name__, "manifest": json.loads((out_cli / "manifest.json").read_text())["command"]}))
'''


def test_a_catalogued_command_appears_everywhere(tmp_path: Path):
    (tmp_path / "toy_family.py").write_text(TOY_FAMILY)
    (tmp_path / "driver.py").write_text(textwrap.dedent(DRIVER))
    text = tmp_path / "t.txt"
    text.write_text("one two three four")
    done = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(text), str(tmp_path / "api"), str(tmp_path / "cli")],
                          capture_output=True, text=True, cwd=tmp_path, env={**_env(), "PYTHONPATH": str(tmp_path)}, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0] == "4 words"  # the CLI's echo
    assert json.loads(lines[-2]) == {"python_error": "max_words= is 2, below the 4 words of the text; raise it or shorten the text (out= is untouched)",
                                      "cli_error": "ctxeval: error: --max-words is 2, below the 4 words of the text; raise it or shorten the text (--out is untouched)",
                                      "cli_code": 2}
    assert json.loads(lines[-1]) == {"in_all": True, "api_words": 4, "read_api": 4, "read_cli": "ToyResult", "manifest": "toy"}


def test_every_command_is_in_the_cli_the_api_and_all():
    """The built registry, the CLI, the API and `__all__` hold exactly the catalogued commands, and
    every result class a command's run returns is a catalogued kind."""
    import typing

    import ctxeval
    import ctxeval.judge  # noqa: F401  subpackages named like a command: the function still wins
    import ctxeval.leval.report  # noqa: F401
    from ctxeval import api, catalog, cli
    from ctxeval.commands import COMMANDS
    from ctxeval.results.base import Result

    assert list(COMMANDS) == list(catalog.COMMANDS)
    assert [c.name for c in cli.app.registered_commands] == list(catalog.COMMANDS)
    assert list(ctxeval.__all__) == list(api.__all__) == catalog.public_names()
    for name in ctxeval.__all__:
        assert getattr(ctxeval, name) is getattr(api, name)
    kinds = {cls for _, cls in catalog.RESULTS.values()}
    for command in COMMANDS.values():
        returned = typing.get_type_hints(command.run).get("return")
        for cls in typing.get_args(returned) or (returned,):
            if isinstance(cls, type) and issubclass(cls, Result):
                assert cls.__name__ in kinds and cls is getattr(api, cls.__name__), (command.name, cls)


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
