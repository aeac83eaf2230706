"""The one exception type for user mistakes: the CLI prints it on one line, no traceback."""


class MtkitError(Exception):
    """A problem with the user's input, files or options (not a bug in mtkit)."""
