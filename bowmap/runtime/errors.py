"""Errors meant for the user: the CLI prints their message as one line, without a traceback."""


class BowmapError(Exception):
    """A failure the user can act on (bad input, missing file, corrupt index): exit code 1.

    The message names what is wrong and where (file, line, record) and fits on one line.
    """

    exit_code = 1


class UsageError(BowmapError):
    """A wrong command line (bad option value, conflicting options): exit code 2."""

    exit_code = 2
