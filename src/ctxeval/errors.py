"""The one exception type a user can cause; the CLI turns it into one line and exit code 2."""


class UserError(Exception):
    """Bad input from the user (file, flag, model, text too short): reported, never a traceback."""


class ScoringFailed(Exception):
    """A pass a backend could not score (e.g. an API request that failed after its retries).

    The run records it as failed, scores everything else, reports it and exits non-zero; a
    re-run retries it. It is never scored silently.
    """
