"""No function of the package is over 120 lines (issue 38's bound), counted with ``ast`` from ``def`` to its
last line, docstring included: a function that grows over the bound, or a new one, fails the test."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "probing"
LIMIT = 120
KNOWN: dict[str, int] = {}  # file:function -> lines, for a function allowed over the bound for now (none)


def long_functions(package: Path = PACKAGE) -> dict[str, int]:
    """``file:name`` -> lines of every function (methods and nested ones too) over :data:`LIMIT` lines."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > LIMIT:
                    out[f"{path.relative_to(package.parent).as_posix()}:{node.name}"] = length
    return out


def test_no_function_over_120_lines_beyond_the_known_ones():
    grown = {f: n for f, n in long_functions().items() if n > KNOWN.get(f, LIMIT)}
    assert not grown, f"functions over {LIMIT} lines (or longer than listed in KNOWN): {grown}"


def test_the_count_sees_a_long_function(tmp_path):
    """A function of 121 lines (def, 119 statements, return) in a copy of one module is caught."""
    folder = tmp_path / "probing"
    folder.mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(119))
    (folder / "long.py").write_text(f"def f():\n{body}    return 0\n", encoding="utf-8")
    assert long_functions(folder) == {"probing/long.py:f": 121}
