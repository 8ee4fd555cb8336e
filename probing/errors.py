"""The toolkit's error contract: what a user can cause and fix is a :class:`ProbingError`."""

from __future__ import annotations


class ProbingError(Exception):
    """A failure the user can cause and fix: the CLI prints its one-line message and exits 2.

    The message names the file, field or value and what was expected. Subclasses that callers already
    catch as ``ValueError`` or ``OSError`` inherit from those too.
    """


__all__ = ["ProbingError"]
