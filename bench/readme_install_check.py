"""Each README question's install line is enough for its command: per question, a fresh venv with
exactly that line (the set-up's `pip install -e .` where a question has none), then each of its
commands' checks in that venv, without running the command: `ctxeval COMMAND --help`, and a dry
check that what the command's models and options load imports there (each model's backend, an
embedded model's package, a press's kvpress, `--generate-share`'s ppi-python, `serve`'s FastAPI
and uvicorn, `lm_eval` on the venv's path). Installs reuse pip's cache and the machine's wheel
sources (the llama-cpp-python wheel that the first install built); each venv is made anew.

    python bench/readme_install_check.py --venvs /tmp/readme-venvs

Prints one line per command (ok, or the check that failed) and exits 1 if any failed. The
README's example outputs are not commands; `curl` lines need a running server and are left out.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]


INSTALL = re.compile(r"^\.venv/bin/pip install -e '\.\[([a-z0-9,_-]+)\]'$")
RUNNABLE = ("ctxeval ", "lm_eval ")
MODEL_ARGUMENTS = {"diff": 2, "serve": 1}  # commands whose first positional arguments are models


@dataclass(frozen=True)
class Question:
    """One README question: its title, the extras its install line names (None: no line, the
    set-up's install) and its runnable command lines."""

    title: str
    extras: str | None
    commands: tuple[str, ...]


def questions(readme: str) -> list[Question]:
    """The README's questions (its `###` sections under "Questions"), each with its indented code."""
    from tests.test_readme import code_lines  # here: the checks inside a question's venv run without pytest

    body = readme.split("\n## Questions", 1)[1].split("\n## ", 1)[0]
    found = []
    for section in body.split("\n### ")[1:]:
        title, _, text = section.partition("\n")
        extras, commands = None, []
        for line in code_lines(text):
            install = INSTALL.match(line)
            if install:
                extras = install.group(1)
            elif line.startswith(RUNNABLE):
                commands.append(line)
        found.append(Question(title, extras, tuple(commands)))
    return found


def models_of(words: list[str]) -> list[str]:
    """The models a ctxeval command line names: its `--model` values, and for diff and serve
    their leading positional arguments."""
    models = [words[i + 1] for i, w in enumerate(words[:-1]) if w == "--model"]
    positional = [w for i, w in enumerate(words[2:], 2) if not w.startswith("-") and not words[i - 1].startswith("--")]
    return models + positional[:MODEL_ARGUMENTS.get(words[1], 0)]


def check_inside(line: str) -> None:
    """In the question's venv: import what the command's models and options need, as loading them
    would (a missing package raises ctxeval's own one-line error)."""
    from ctxeval.backends.kv_press import press_classes
    from ctxeval.backends.model_files import EMBEDDED, embedded_path
    from ctxeval.backends.registry import backend_class, parse_model_spec
    from ctxeval.ruler.generation import Generation

    words = shlex.split(line, comments=True)
    if words[0] == "lm_eval":
        if shutil.which("lm_eval") is None:
            raise SystemExit("lm_eval is not installed in this venv")
        return
    for text in models_of(words):
        spec = parse_model_spec(text)
        backend_class(spec.backend.name)  # the backend's module: torch and transformers for hf:
        name = spec.base.removeprefix("hf:")
        if name in EMBEDDED:
            embedded_path(name)  # the embedded model's package
            if spec.backend.name == "hf":
                for module in ("gguf", "accelerate"):  # the first use converts its GGUF
                    importlib.import_module(module)
        if spec.pressed:
            press_classes()
    if "--generate-share" in words:
        Generation.of(False, float(words[words.index("--generate-share") + 1]), None, 10 ** 6)
    if words[1] == "serve":
        importlib.import_module("uvicorn")
        importlib.import_module("ctxeval.server.app")


def run(args: list[str], env: dict[str, str], cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)


def check_question(question: Question, venvs: Path) -> list[tuple[str, str]]:
    """A fresh venv with the question's install line, then each command's checks: (command, result)."""
    venv = venvs / re.sub(r"[^a-z0-9]+", "-", question.title.lower()).strip("-")
    shutil.rmtree(venv, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    made = run([sys.executable, "-m", "venv", str(venv)], env)
    if made.returncode:
        return [("venv", made.stderr.strip())]
    target = f".[{question.extras}]" if question.extras else "."
    install = run([str(venv / "bin" / "pip"), "install", "--quiet", "-e", target], env)
    if install.returncode:
        errors = [line for line in install.stderr.splitlines() if line.strip() and "is ignored" not in line]
        return [(f"pip install -e '{target}'", "\n        ".join(errors[-4:]))]
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    results = []
    for line in question.commands:
        words = shlex.split(line, comments=True)
        helped = run([str(venv / "bin" / words[0]), *([words[1]] if words[0] == "ctxeval" else []), "--help"], env)
        if helped.returncode:
            results.append((line, f"--help failed: {(helped.stderr or helped.stdout).strip().splitlines()[-1:]}"))
            continue
        checked = run([str(venv / "bin" / "python"), str(Path(__file__).resolve()), "--inside", line], env)
        results.append((line, "ok" if checked.returncode == 0 else (checked.stderr.strip().splitlines() or ["failed"])[-1]))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venvs", type=Path, default=Path("/tmp/ctxeval-readme-venvs"), help="folder for the questions' venvs (each made anew)")
    parser.add_argument("--only", help="check only the questions whose title contains this")
    parser.add_argument("--inside", help=argparse.SUPPRESS)  # a command line, checked in the running venv
    args = parser.parse_args()
    if args.inside:
        check_inside(args.inside)
        return
    failed = 0
    for question in questions((ROOT / "README.md").read_text(encoding="utf-8")):
        if args.only and args.only not in question.title:
            continue
        line = f".venv/bin/pip install -e '.[{question.extras}]'" if question.extras else "the set-up's install (pip install -e .)"
        print(f"## {question.title}\n   install: {line}", flush=True)
        for command, result in check_question(question, args.venvs):
            failed += result != "ok"
            print(f"   {'ok  ' if result == 'ok' else 'FAIL'} {command}" + ("" if result == "ok" else f"\n        {result}"), flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
