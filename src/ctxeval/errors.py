"""What goes wrong, and the CLI's exit code for each: a user error (bad input: one line, exit
code 2) and a run whose work partly failed (`IncompleteRun`: one line, exit code 3)."""

EXIT_USER_ERROR = 2
EXIT_INCOMPLETE = 3


def a_or_an(word: str) -> str:
    """`word` with its indefinite article, as an error line names a kind ("an effective-length run")."""
    return ("an " if word[:1].lower() in "aeiou" else "a ") + word


class UserError(Exception):
    """Bad input from the user (file, flag, model, text too short): reported, never a traceback."""


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
