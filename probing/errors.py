"""The base of every failure a user can cause and fix (a bad file, option, value or missing data).

The CLI prints such an error as one line naming the file, field or value and what was expected, and exits 2;
any other exception is a bug in the toolkit and keeps its traceback.
"""

from __future__ import annotations

import operator
import sys
from typing import SupportsIndex

COUNT_MAX = sys.maxsize
"""The largest count any option accepts (2**63 - 1): what ``range``, ``islice`` and numpy index with."""


class ProbingError(Exception):
    """A failure the user can cause and fix: the CLI prints its one-line message and exits 2.

    The message names the file, field or value and what was expected. Subclasses that callers already
    catch as ``ValueError`` or ``OSError`` inherit from those too.
    """


class InputError(ProbingError, ValueError):
    """A value, option or file content is not what was expected; the message names it and what was."""


def _integer(value: object) -> int | None:
    """``value`` as an int if it is an integer (int or numpy integer, not bool or float), else None."""
    if isinstance(value, bool) or not isinstance(value, SupportsIndex):
        return None
    return operator.index(value)


def integer_range(low: int, high: int = COUNT_MAX, value: object = None) -> str:
    """How a count's range is spelled in every message (CLI, experiment file and API alike); the upper
    bound is named when it is not COUNT_MAX or when ``value`` is past it."""
    v = _integer(value)
    past = v is not None and v > high
    return f"an integer >= {low}" + ("" if high == COUNT_MAX and not past else f" and <= {high}")


def is_count(value: object, low: int = 1, high: int = COUNT_MAX) -> bool:
    """Whether ``value`` is an integer (not a bool, not a float) in ``[low, high]``."""
    v = _integer(value)
    return v is not None and low <= v <= high


def check_count(value: object, name: str, low: int = 1, high: int = COUNT_MAX) -> int:
    """``value`` as an int if it is a count in ``[low, high]``; else an :class:`InputError` naming ``name``.

    The one check behind every count option (batch sizes, sentence limits): the CLI's argument types and
    the experiment file's integers use the same range, so a count the API refuses is refused everywhere.
    """
    v = _integer(value)
    if v is None or not low <= v <= high:
        raise InputError(f"{name}: expected {integer_range(low, high, value)}, got {value!r}")
    return v


__all__ = ["COUNT_MAX", "InputError", "ProbingError", "check_count", "integer_range", "is_count"]
