"""A checked TOML table: every read names its key and what was expected, and unknown keys are errors.

The experiment file's parser and each task kind's option parser read their tables through :class:`Table`,
so every mistake in an experiment file is reported as ``FILE: tasks[2].label: expected ..., got ...``.
"""

from __future__ import annotations

import difflib
import math
import typing
from collections.abc import Callable
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any, TypeVar

from probing.errors import COUNT_MAX, ProbingError, integer_range, is_count


class ExperimentError(ProbingError, ValueError):
    """The experiment file is invalid; the message names the file, the TOML key and what was expected."""


_REQUIRED = object()
T = TypeVar("T")


class Table:
    """A TOML table being validated: every read names its key, unknown keys are errors."""

    def __init__(self, data: Any, where: str, source: str, base: Path):
        if not isinstance(data, dict):
            raise ExperimentError(f"{source}: {where} must be a table, got {type(data).__name__} {data!r}")
        self.data, self.where, self.source, self.base = data, where, source, base
        self.used: set[str] = set()

    def fail(self, key: str, expected: str, value: Any = _REQUIRED) -> ExperimentError:
        got = "it is missing" if value is _REQUIRED else f"got {value!r}"
        if value is _REQUIRED:
            stray = difflib.get_close_matches(key, [k for k in self.data if k not in self.used], 1, 0.75)
            if stray:
                got += f" (the table has the unknown key {stray[0]!r}: a misspelling of {key!r}?)"
        where = f"{self.where}.{key}" if self.where else key
        return ExperimentError(f"{self.source}: {where}: expected {expected}, {got}")

    def get(self, key: str, expected: str, check: Callable[[Any], bool], default: Any = _REQUIRED) -> Any:
        self.used.add(key)
        if key not in self.data:
            if default is _REQUIRED:
                raise self.fail(key, expected)
            return default
        value = self.data[key]
        if not check(value):
            raise self.fail(key, expected, value)
        return value

    def string(self, key: str, default: Any = _REQUIRED, choices: tuple[str, ...] | None = None) -> Any:
        expected = f"one of {', '.join(repr(c) for c in choices)}" if choices else "a non-empty string"
        return self.get(
            key,
            expected,
            lambda v: isinstance(v, str) and v.strip() != "" and (choices is None or v in choices),
            default,
        )

    def integer(self, key: str, default: Any = _REQUIRED, minimum: int = 0, maximum: int = COUNT_MAX) -> Any:
        value = self.data.get(key)
        return self.get(key, integer_range(minimum, maximum, value), lambda v: is_count(v, minimum, maximum), default)

    def number(self, key: str, default: Any = _REQUIRED) -> Any:
        return self.get(
            key,
            "a positive finite number",
            lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0,
            default,
        )

    def boolean(self, key: str, default: Any = _REQUIRED) -> Any:
        return self.get(key, "true or false", lambda v: isinstance(v, bool), default)

    def boolean_or_names(self, key: str, default: Any = _REQUIRED, choices: tuple[str, ...] = ()) -> Any:
        """true, false, or a list of names from ``choices`` (returned as a tuple; an empty list is false)."""
        value = self.get(
            key,
            f"true, false or a list of names from {', '.join(repr(c) for c in choices)}",
            lambda v: (
                isinstance(v, bool) or (isinstance(v, list) and all(isinstance(x, str) and x in choices for x in v))
            ),
            default,
        )
        if isinstance(value, list):
            return tuple(dict.fromkeys(value)) if value else False
        return value

    def path(self, key: str, default: Any = None) -> Path | None:
        value = self.string(key, default)
        return None if value is None else resolve_path(value, self.base)

    def int_list(self, key: str, default: Any = _REQUIRED) -> Any:
        value = self.get(
            key,
            "a non-empty list of distinct integers",
            lambda v: (
                isinstance(v, list)
                and len(v) > 0
                and len(set(map(repr, v))) == len(v)
                and all(isinstance(x, int) and not isinstance(x, bool) for x in v)
            ),
            default,
        )
        return tuple(value) if isinstance(value, list) else value

    def number_list(self, key: str, default: Any = _REQUIRED) -> Any:
        value = self.get(
            key,
            "a non-empty list of positive finite numbers",
            lambda v: (
                isinstance(v, list)
                and len(v) > 0
                and all(
                    isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0 for x in v
                )
            ),
            default,
        )
        return tuple(float(x) for x in value) if isinstance(value, list) else value

    def string_list(self, key: str, default: Any = _REQUIRED, choices: tuple[str, ...] | None = None) -> Any:
        expected = "a non-empty list of strings" + (f" from {', '.join(repr(c) for c in choices)}" if choices else "")
        value = self.get(
            key,
            expected,
            lambda v: (
                isinstance(v, list)
                and len(v) > 0
                and all(isinstance(x, str) and (choices is None or x in choices) for x in v)
            ),
            default,
        )
        return tuple(value) if isinstance(value, list) else value

    def table(self, key: str) -> Table:
        self.used.add(key)
        return Table(
            self.data.get(key, {}), f"{self.where}.{key}" if self.where else f"[{key}]", self.source, self.base
        )

    def done(self) -> None:
        unknown = sorted(set(self.data) - self.used)
        if unknown:
            named = []
            for k in unknown:
                close = difflib.get_close_matches(k, sorted(self.used), 1, 0.6)
                named.append(repr(k) + (f" (closest known key: {close[0]!r})" if close else ""))
            raise ExperimentError(
                f"{self.source}: {self.where or 'top level'}: unknown key(s) "
                f"{', '.join(named)}; known keys: {', '.join(sorted(self.used))}"
            )


def resolve_path(value: str, base: Path) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else base / p


def parse_options(cls: type[T], table: Table) -> T:
    """A kind's options dataclass ``cls`` (a task kind's, an encoder kind's) read from its table through
    :class:`Table` (so an unknown or malformed key is an error naming file, key and expectation): each field by
    its type (``str``, ``int``, ``float``, ``bool``, each optionally ``| None``), defaulting to the field's
    default (a field without one is required); ``metadata={"choices": (...)}`` limits a string,
    ``{"minimum": n}`` an integer (default 0). A float is read as a positive finite number."""
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in fields(cls):  # type: ignore[arg-type]
        kind = hints[f.name]
        args = [a for a in typing.get_args(kind) if a is not type(None)]
        base = args[0] if len(args) == 1 else kind
        default: dict[str, Any] = {} if f.default is MISSING else {"default": f.default}  # none: required
        meta = f.metadata
        if base is bool:
            value = table.boolean(f.name, **default)
        elif base is int:
            value = table.integer(f.name, minimum=meta.get("minimum", 0), **default)
        elif base is float:
            value = table.number(f.name, **default)
            value = None if value is None else float(value)
        elif base is str:
            value = table.string(f.name, choices=meta.get("choices"), **default)
        else:
            raise TypeError(f"{cls.__name__}.{f.name}: options fields are str, int, float or bool, not {kind}")
        values[f.name] = value
    return cls(**values)
