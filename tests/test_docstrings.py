"""Every public function of the package that takes or returns an array documents it in numpydoc sections.

"Takes an array": a parameter annotated with an array type (``ndarray``, ``ArrayLike``, ``Tensor``...) or named as
scikit-learn names its arrays (``X``, ``y``, ``X_dev``, ``y_dev``). Such a parameter must be named in a
``Parameters`` section; an array return needs a ``Returns`` (or ``Yields``) section; a property that returns an
array states its shape in its one-line docstring. Private names (a leading underscore, in the function, its class
or its module path) are exempt. The rule is read from the source, so it holds without importing anything.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "probing"
ARRAY_TYPE = re.compile(r"\b(ndarray|ArrayLike|NDArray|Tensor)\b")
ARRAY_NAMES = {"X", "y", "X_dev", "y_dev"}
SECTION = "\n{}\n{}"
SHAPE = re.compile(r"\(\s*[\w.+\-*/ ]*(,|\bn\b|n_|dim|\+ ?1)[^()]*\)")


def _modules() -> list[Path]:
    return sorted(
        p
        for p in PACKAGE.rglob("*.py")
        if not any(part.startswith("_") for part in p.relative_to(PACKAGE).parts[:-1])
        and not (p.name.startswith("_") and p.name != "__init__.py")
    )


def _public_functions(tree: ast.Module):
    """(qualified name, node) of every public function and method of public classes, nested classes included."""

    def walk(body, prefix):
        for node in body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                yield from walk(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
                yield f"{prefix}{node.name}", node

    yield from walk(tree.body, "")


def _has_section(doc: str, *titles: str) -> bool:
    return any(SECTION.format(t, "-" * len(t)) in "\n" + doc for t in titles)


def _problems(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
    arrays = [
        a.arg
        for a in args
        if a.arg in ARRAY_NAMES or (a.annotation is not None and ARRAY_TYPE.search(ast.unparse(a.annotation)))
    ]
    returns = node.returns is not None and bool(ARRAY_TYPE.search(ast.unparse(node.returns)))
    doc = ast.get_docstring(node) or ""
    if any(isinstance(d, ast.Name) and d.id in {"property", "cached_property"} for d in node.decorator_list):
        return [] if not returns or SHAPE.search(doc) else ["a property returning an array, with no shape stated"]
    problems = []
    if arrays:
        if not _has_section(doc, "Parameters"):
            problems.append(f"no Parameters section for {arrays}")
        else:
            params = doc.split("Parameters\n", 1)[1]
            unnamed = [a for a in arrays if not re.search(rf"^\s*([\w, ]*\b){a}\b[\w, ]*:", params, re.M)]
            if unnamed:
                problems.append(f"Parameters does not name {unnamed}")
    if returns and not _has_section(doc, "Returns", "Yields"):
        problems.append("no Returns section")
    return problems


def test_the_rule_sees_what_it_should():
    """The checker itself: an undocumented array function fails it, a documented one passes."""
    bad = ast.parse("def f(x: np.ndarray) -> np.ndarray:\n    '''Do it.'''\n").body[0]
    good = ast.parse(
        "def f(x: np.ndarray, X) -> np.ndarray:\n"
        "    '''Do it.\n\n    Parameters\n    ----------\n    x, X : ndarray (n, d)\n\n"
        "    Returns\n    -------\n    ndarray (n,)\n    '''\n"
    ).body[0]
    prop = ast.parse("@property\ndef f(self) -> np.ndarray:\n    '''The offsets.'''\n").body[0]
    assert isinstance(bad, ast.FunctionDef) and isinstance(good, ast.FunctionDef) and isinstance(prop, ast.FunctionDef)
    assert _problems(bad) == ["no Parameters section for ['x']", "no Returns section"]
    assert _problems(good) == []
    assert _problems(prop) == ["a property returning an array, with no shape stated"]


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_array_functions_have_numpydoc_sections(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    missing = {name: p for name, node in _public_functions(tree) if (p := _problems(node))}
    assert not missing, "\n".join(f"{path.name}: {name}: {'; '.join(p)}" for name, p in missing.items())
