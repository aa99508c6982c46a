"""The one exception type a user can cause; the CLI turns it into one line and exit code 2."""


class UserError(Exception):
    """Bad input from the user (file, flag, model, text too short): reported, never a traceback."""
