"""The one identity rule of every cache: a canonical hasher and a notion of code identity.

A cached result (an activation store, a finished probe job, a 2-D projection, a corpus memo) is named by
:func:`digest` over a JSON-able description of its inputs, and that description names the code that
computed it with :func:`code_identity`: an explicit compute version (bumped by hand when the output changes
for a reason the code does not show, e.g. a new default) plus a digest of the code itself that ignores
comments, docstrings and formatting (the abstract syntax tree with docstrings removed, after the model of
Hugging Face datasets' fingerprints). Editing a comment keeps every cache; editing a statement renews
exactly the caches of the code it belongs to.

>>> digest({"b": 1, "a": [1.5, "x"]}) == digest({"a": [1.5, "x"], "b": 1})
True
>>> source_digest("def f():\\n    return 1  # one\\n") == source_digest("def f():\\n    'Doc.'\\n    return (1)\\n")
True
"""

from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import json
import textwrap
from collections.abc import Callable, Iterable
from dataclasses import MISSING, fields, is_dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = [
    "canonical",
    "code_identity",
    "digest",
    "function_identity",
    "module_digest",
    "option_key",
    "source_digest",
]


def canonical(value: Any) -> bytes:
    """``value`` as canonical JSON bytes: sorted keys, no spaces, UTF-8; anything JSON cannot hold is its
    ``str`` (paths, enums)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8")


def digest(value: Any) -> str:
    """sha256 (hex) of :func:`canonical` ``(value)``: the one key of every cached result."""
    return hashlib.sha256(canonical(value)).hexdigest()


def option_key(value: Any) -> Any:
    """The part of a cache key that an option's value contributes: a dataclass gives the dict of its fields
    that have no default or differ from it (recursively), so a field added later with a default leaves every
    existing key as it was; a list or tuple gives the list of its items' keys; anything else is itself.

    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class Code:
    ...     probe: str
    ...     width: int = 256
    >>> option_key(Code("mlp")), option_key([Code("mlp", 64)])
    ({'probe': 'mlp'}, [{'probe': 'mlp', 'width': 64}])
    """
    if is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in fields(value):
            field_value = getattr(value, f.name)
            default = f.default_factory() if f.default_factory is not MISSING else f.default
            if default is MISSING or field_value != default:
                out[f.name] = option_key(field_value)
        return out
    if isinstance(value, (list, tuple)):
        return [option_key(v) for v in value]
    return value


class _StripDocstrings(ast.NodeTransformer):
    """Drops the docstring of every module, class and function (a first statement that is a string)."""

    def _strip(self, node: Any) -> Any:
        self.generic_visit(node)
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            if isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
        return node

    visit_Module = visit_ClassDef = visit_FunctionDef = visit_AsyncFunctionDef = _strip


def source_digest(source: str) -> str:
    """sha256 of Python ``source`` insensitive to comments, docstrings, blank lines and formatting: the
    dump of its syntax tree without docstrings or positions."""
    tree = _StripDocstrings().visit(ast.parse(source))
    return hashlib.sha256(ast.dump(tree, annotate_fields=False, include_attributes=False).encode()).hexdigest()


@functools.cache
def _file_digest(path: str, mtime_ns: int, size: int) -> str:
    return source_digest(Path(path).read_text(encoding="utf-8"))


def file_digest(path: str | Path) -> str:
    """:func:`source_digest` of the Python file ``path`` (memoised while the file is unchanged)."""
    st = Path(path).stat()
    return _file_digest(str(path), st.st_mtime_ns, st.st_size)


def module_digest(module: ModuleType | str) -> str:
    """The code digest of a module, given as a module or its dotted name (found without importing it); a
    package's digest covers every ``.py`` file below it, each with its relative name, in sorted order."""
    if isinstance(module, str):
        import importlib.util

        spec = importlib.util.find_spec(module)
        if spec is None or spec.origin is None:
            raise ModuleNotFoundError(f"no module named {module!r}")
        path = Path(spec.origin)
    else:
        path = Path(module.__file__ or "")
    if path.name != "__init__.py":
        return file_digest(path)
    root = path.parent
    return digest([[f.relative_to(root).as_posix(), file_digest(f)] for f in sorted(root.rglob("*.py"))])


def code_identity(version: str | int, modules: Iterable[ModuleType | str] = ()) -> str:
    """The identity of the code that computes a cached result: ``version`` (bumped by hand for a change the
    code does not show) and the code digests of ``modules`` (order-insensitive)."""
    names = sorted({m if isinstance(m, str) else m.__name__ for m in modules})
    return digest({"version": str(version), "code": {name: module_digest(name) for name in names}})


def function_identity(fn: Callable[..., Any]) -> str:
    """The identity of a function defined anywhere (e.g. a task kind registered from outside the package):
    its qualified name and the code digest of its whole module (so the helpers it calls count too); a
    function without a source file (built in the interpreter) falls back to its own source."""
    module = inspect.getmodule(fn)
    name = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
    if module is not None and getattr(module, "__file__", None) and str(module.__file__).endswith(".py"):
        return digest([name, module_digest(module)])
    try:
        return digest([name, source_digest(textwrap.dedent(inspect.getsource(fn)))])
    except (OSError, TypeError, SyntaxError):
        return digest([name, "unknown-source"])
