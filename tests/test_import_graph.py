"""The package's import graph: data flows one way (DESIGN.md, "Imports"), so no import goes against the order
below and no two folders or top-level modules import each other, directly or through others.

The graph is read from the source with ``ast``, so it counts every import statement: at module level, inside
functions (the lazy imports that keep ``import probing`` light) and under ``if TYPE_CHECKING:``. A
type-only import counts too: the annotation names a type of the other module, so the two are coupled as
much as by a run-time import (the issue's rule is "every import"). Not counted: names resolved by a string
at first use (``importlib.import_module``); the packages do that only for their own modules, and the root
package for its one public entry point, :func:`probing.probe_layers`.

A node is a folder of ``probing/`` (``elmo``, ``tasks``, ...), a top-level module (``cli``, ``errors``, ...)
or the root package itself (``probing``: ``__version__``; it imports nothing).
"""

from __future__ import annotations

import ast
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "probing"

# The declared order: a node may import a node of the same or a lower rank, never a higher one. Ranks follow
# the data: corpus -> encoder -> activation store -> probes and analyses -> results -> figures -> the task
# kinds (they make result rows and choose their figures) -> the runner and the report -> the entry points.
RANKS = {
    # 0: infrastructure every stage uses
    "probing": 0,
    "errors": 0,
    "_io": 0,
    "_toml": 0,
    "paths": 0,
    "identity": 0,
    "devices": 0,
    "protocols": 0,
    "layers": 0,
    "tokenize": 0,
    "download": 0,
    "palette": 0,
    # 1: data
    "corpora": 1,
    "wordnet": 1,
    # 2: encoders
    "elmo": 2,
    "glove": 2,
    "encoders": 2,
    # 3: the activation store
    "store": 3,
    # 4: probes and the analyses of activations and models
    "probes": 4,
    "lm": 4,
    "views": 4,
    # 5: the results schema and tables, and the analyses that are not probes (they write tables in it)
    "results": 5,
    "analysis": 5,
    # 6: figures (they draw results tables; the caller names the metric)
    "figures": 6,
    # 7: task kinds
    "tasks": 7,
    # 8: the runner, the verdict and the report
    "experiment": 8,
    "verdict": 8,
    "report": 8,
    # 9: entry points
    "demo": 9,
    "cli": 9,
}


@dataclass(frozen=True)
class Edge:
    """One import of ``target`` (a module name) by a module of node ``source``, at ``where`` (file:line)."""

    source: str
    target: str
    where: str
    imported: str

    def __str__(self) -> str:
        source, target = (
            f"{self.source} (rank {RANKS.get(self.source)})",
            f"{self.target}, rank {RANKS.get(self.target)}",
        )
        return f"{self.where}: {source} imports {self.imported} ({target})"


def node(module: str) -> str:
    """``probing.elmo.hub`` -> ``elmo``; ``probing.cli`` -> ``cli``; ``probing`` -> ``probing``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def modules(package: Path) -> dict[str, Path]:
    """Every module and package of the tree under ``package``: dotted name -> file."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports(path: Path, name: str, known: set[str]) -> list[tuple[str, int]]:
    """The ``probing`` modules that file ``path`` (module ``name``) imports, each with its line: every
    ``import`` and ``from ... import`` anywhere in the file, relative ones resolved; ``from pkg import x``
    imports the module ``pkg.x`` when there is one, else ``pkg``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for statement in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(statement, ast.Import):
            found += [(alias.name, statement.lineno) for alias in statement.names]
        elif isinstance(statement, ast.ImportFrom):
            if statement.level:
                base = package.split(".")[: len(package.split(".")) - statement.level + 1]
                module = ".".join(base + ([statement.module] if statement.module else []))
            else:
                module = statement.module or ""
            for alias in statement.names:
                sub = f"{module}.{alias.name}"
                found.append((sub if sub in known else module, statement.lineno))
    return [(m, line) for m, line in dict.fromkeys(found) if m == "probing" or m.startswith("probing.")]


def edges(package: Path = PACKAGE) -> list[Edge]:
    """Every import from one node to another in the tree under ``package``."""
    found = modules(package)
    out = []
    for name, path in found.items():
        for target, line in imports(path, name, set(found)):
            if node(target) != node(name):
                where = f"{path.relative_to(package.parent).as_posix()}:{line}"
                out.append(Edge(node(name), node(target), where, target))
    return out


def upward(graph: list[Edge]) -> list[Edge]:
    """The imports of a node of a higher rank than the importer's."""
    return [e for e in graph if RANKS[e.target] > RANKS[e.source]]


def cycles(graph: list[Edge]) -> list[list[Edge]]:
    """The circles between nodes: for each strongly connected group of two or more nodes, the imports
    inside it (Tarjan's algorithm)."""
    successors: dict[str, set[str]] = {}
    for e in graph:
        successors.setdefault(e.source, set()).add(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(successors.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(successors):
        if v not in index:
            visit(v)
    return [[e for e in graph if e.source in g and e.target in g] for g in groups]


def report(found: list[Edge]) -> str:
    return "\n".join(str(e) for e in found)


def test_every_folder_and_top_level_module_has_a_rank():
    """A new folder or top-level module must be placed in the order (here and in DESIGN.md's diagram)."""
    present = {node(m) for m in modules(PACKAGE)}
    assert present == set(RANKS), f"unranked: {sorted(present - set(RANKS))}; gone: {sorted(set(RANKS) - present)}"


def test_no_import_goes_against_the_declared_order():
    if found := upward(edges()):
        pytest.fail("imports against the order (RANKS):\n" + report(found), pytrace=False)


def test_no_circles_between_folders_and_top_level_modules():
    if found := cycles(edges()):
        pytest.fail("circles:\n" + "\n\n".join(report(c) for c in found), pytrace=False)


def test_an_injected_upward_import_and_circle_are_caught(tmp_path):
    """The checks on a copy of the package with three imports added: one inside a function of ``elmo`` that
    reaches up to ``figures``; one under ``if TYPE_CHECKING:`` in ``results`` that reaches up to ``tasks``,
    closing a circle (``tasks`` imports ``results``); a relative one inside ``figures`` that stays home."""
    copy = tmp_path / "probing"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "elmo" / "injected.py").write_text("def f():\n    from probing.figures import save\n\n    return save\n")
    (copy / "results" / "injected.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from probing.tasks.common import TaskKind\n"
    )
    (copy / "figures" / "injected.py").write_text("from .style import save\n")
    graph = edges(copy)
    assert [str(e) for e in upward(graph)] == [
        "probing/elmo/injected.py:2: elmo (rank 2) imports probing.figures (figures, rank 6)",
        "probing/results/injected.py:4: results (rank 5) imports probing.tasks.common (tasks, rank 7)",
    ]
    (circle,) = cycles(graph)  # results -> tasks -> results, joined by elmo -> figures -> ... -> elmo
    assert {"elmo", "figures", "results", "tasks"} <= {e.source for e in circle}
    assert "probing/results/injected.py:4: results (rank 5) imports probing.tasks.common" in report(circle)
    assert "probing/elmo/injected.py:2: elmo (rank 2) imports probing.figures" in report(circle)
    # the original tree has neither: the injected lines are what the checks found
    assert not upward(edges()) and not cycles(edges())


def test_probes_name_no_task_kind():
    """``probes/`` sits below the task kinds: no string constant of it is a kind's name (the structural
    kinds map their names to the probes' ``"distance"``/``"depth"`` in ``probing.tasks.structural``)."""
    from probing.tasks import TASK_KINDS

    found = [
        f"{path.relative_to(PACKAGE.parent).as_posix()}:{c.lineno}: {c.value!r}"
        for path in sorted((PACKAGE / "probes").rglob("*.py"))
        for c in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(c, ast.Constant) and c.value in TASK_KINDS
    ]
    assert not found, "task kind names in probes/:\n" + "\n".join(found)


def design_diagram() -> dict[str, tuple[int, set[str]]]:
    """DESIGN.md's diagram (its first code block) read back: node -> (rank, the nodes of rank 1 and up it
    imports). A line is ``rank N  LABEL`` in the first 24 columns (no ``rank`` on a continued line), then
    ``node ──► a, b, ...`` entries two spaces apart (a node alone imports nothing above rank 0); notes in
    parentheses are left out. Rank 0 lists its nodes only."""
    block = (PACKAGE.parent / "DESIGN.md").read_text(encoding="utf-8").split("```")[1]
    out: dict[str, tuple[int, set[str]]] = {}
    rank, last = -1, ""
    for line in block.strip("\n").splitlines():
        label, content = line[:24], re.sub(r"\([^)]*\)", "", line[24:])
        starts = label.startswith("rank")
        if starts:
            rank = int(label.split()[1])
        for segment in filter(None, (s.strip().rstrip(",") for s in re.split(r"\s{2,}", content))):
            if "──►" in segment:
                last, targets = (s.strip() for s in segment.split("──►"))
                out[last] = (rank, {t.strip() for t in targets.split(",") if t.strip()})
            elif starts and rank > 0:
                out.update({name.strip(): (rank, set()) for name in segment.split(",")})
            elif rank > 0:
                out[last][1].update(t.strip() for t in segment.split(",") if t.strip())
            else:
                out.update({name: (0, set()) for name in re.findall(r"\b[a-z_]+\b", segment) if name in RANKS})
    return out


def test_the_design_diagram_is_the_import_graph():
    """Every node is drawn at its rank with exactly the nodes above rank 0 it imports (DESIGN.md)."""
    actual: dict[str, set[str]] = {n: set() for n in RANKS}
    for e in edges():
        if RANKS[e.target] > 0:
            actual[e.source].add(e.target)
    drawn = design_diagram()
    assert {n: r for n, (r, _) in drawn.items()} == {n: r for n, r in RANKS.items() if n != "probing"}
    wrong = {n: (sorted(targets), sorted(actual[n])) for n, (_, targets) in drawn.items() if targets != actual[n]}
    assert not wrong, f"DESIGN.md's diagram (drawn, real): {wrong}"
