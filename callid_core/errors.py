"""The one error base class: every error callid reports to a user derives from it.

The command line maps a :class:`CallidError` to ``callid: error: MESSAGE`` and the
exit status of its class (:attr:`CallidError.exit_code`), in one place.
"""

from __future__ import annotations

import os

__all__ = ["EXIT_FAILED", "EXIT_USAGE", "BadValue", "CallidError", "Failed", "InputError", "os_reason"]

#: exit status: a run or a step failed
EXIT_FAILED = 1
#: exit status: bad usage or bad input
EXIT_USAGE = 2


class CallidError(Exception):
    """An error with a one-line message for the user."""

    exit_code = EXIT_USAGE


class BadValue(CallidError, ValueError):
    """A value given by the user (an option, a specification, a CallID) that cannot be used."""


class InputError(CallidError):
    """Bad input (a log, a database, a file): the message names the file, column or row at fault."""


class Failed(CallidError):
    """Work that could not be done (a run, a server, a step); the message says what failed."""

    exit_code = EXIT_FAILED


def os_reason(exc: OSError) -> str:
    """What an OSError says, in a few words: its errno's text (``No space left on device``; pyarrow's
    errors bury it in their message), else its message."""
    return os.strerror(exc.errno) if exc.errno else exc.strerror or str(exc)
