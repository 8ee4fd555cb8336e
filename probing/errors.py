"""The base of every failure a user can cause and fix (a bad file, option, value or missing data).

The CLI prints such an error as one line naming the file, field or value and what was expected, and exits 2;
any other exception is a bug in the toolkit and keeps its traceback.
"""

from __future__ import annotations


class ProbingError(Exception):
    """A failure the user can cause and fix: the CLI prints its one-line message and exits 2.

    The message names the file, field or value and what was expected. Subclasses that callers already
    catch as ``ValueError`` or ``OSError`` inherit from those too.
    """


class InputError(ProbingError, ValueError):
    """A value, option or file content is not what was expected; the message names it and what was."""


__all__ = ["InputError", "ProbingError"]
