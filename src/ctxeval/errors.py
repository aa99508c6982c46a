"""What goes wrong, and the CLI's exit code for each: a user error (bad input: one line, exit
code 2) and a run whose work partly failed (`IncompleteRun`: one line, exit code 3)."""

import re
from collections.abc import Callable, Mapping

_PLACEHOLDER = re.compile(r"\{([a-z][a-z_]*)\}")


def phrase(problem: str, name: str, others: Mapping[str, str]) -> str:
    """The line of a bad option: `problem` after the option's `name`, or with it at {name}, and
    each other {field} it mentions spelled as `others` gives (a brace of a value stays as it is)."""
    spellings = {"name": name, **others}
    text = _PLACEHOLDER.sub(lambda m: spellings.get(m.group(1), m.group(0)), problem)
    return text if "{name}" in problem else f"{name} {text}"

def install_hint(extra: str = "") -> str:
    """How to install ctxeval, or one of its extras, spelled as the README's set-up does it: into
    the checkout's .venv, from the checkout's folder (ctxeval is not on PyPI)."""
    return f".venv/bin/pip install -e '.[{extra}]'" if extra else ".venv/bin/pip install -e ."

EXIT_USER_ERROR = 2
EXIT_INCOMPLETE = 3


def a_or_an(word: str) -> str:
    """`word` with its indefinite article, as an error line names a kind ("an effective-length run")."""
    return ("an " if word[:1].lower() in "aeiou" else "a ") + word


class UserError(Exception):
    """Bad input from the user (file, flag, model, text too short): reported, never a traceback."""


class FieldError(UserError):
    """A bad option value found below the commands (in the data, a model, a task), which cannot
    know how its caller spells options: `field` is the option's name in the command's spec
    (`lengths`), and `problem` follows it or holds it as {name}; other options it mentions are
    placeholders too ("use {method} fixed"). The command that ran renders each as its caller
    spells it (`--lengths` on the CLI, `lengths=` in Python); outside a command the names stand."""

    def __init__(self, field: str, problem: str) -> None:
        self.field, self.problem = field, problem
        super().__init__(self.render(lambda name: name))

    def placeholders(self) -> set[str]:
        """The other options the problem names."""
        return set(_PLACEHOLDER.findall(self.problem)) - {"name"}

    def render(self, spell: Callable[[str], str]) -> str:
        return phrase(self.problem, spell(self.field), {name: spell(name) for name in self.placeholders()})

    def __reduce__(self) -> tuple:  # a worker's error crosses Ray and process pools whole
        return (type(self), (self.field, self.problem))


class ScoringFailed(Exception):
    """A pass a backend could not score (e.g. an API request that failed after its retries).

    The run records it as failed, scores everything else, reports it and exits non-zero; a
    re-run retries it. It is never scored silently.
    """


class IncompleteRun(Exception):
    """Some work of a run failed (e.g. API requests that failed after their retries): the
    records hold everything else, the manifest says `incomplete` and lists the failures, and a
    re-run of the same command retries only them. Exit code EXIT_INCOMPLETE, distinct from
    user errors."""
