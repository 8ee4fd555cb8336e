"""The task kinds an experiment file can name: ``kind = "..."`` in a ``[[tasks]]`` table.

A new kind is one module that defines a :class:`~probing.tasks.common.TaskKind` (its option parser and its
job runner, plus its metrics registered in :mod:`probing.results.schema`) and one line in
:data:`TASK_KINDS` below (or a call to :func:`register_task_kind` from outside the package).
"""

from __future__ import annotations

from probing.errors import InputError
from probing.tasks.common import TaskKind
from probing.tasks.structural import STRUCTURAL_DEPTH, STRUCTURAL_DISTANCE
from probing.tasks.tagging import SUPERSENSE, TAGGING
from probing.tasks.wsd import WSD_1NN

TASK_KINDS: dict[str, TaskKind] = {
    kind.name: kind for kind in (TAGGING, SUPERSENSE, WSD_1NN, STRUCTURAL_DISTANCE, STRUCTURAL_DEPTH)
}


def register_task_kind(kind: TaskKind, *, replace: bool = False) -> TaskKind:
    """Make ``kind`` available to experiment files; an existing name needs ``replace=True``."""
    if kind.name in TASK_KINDS and not replace and TASK_KINDS[kind.name] is not kind:
        raise InputError(f"task kind {kind.name!r} is already registered (pass replace=True to override it)")
    TASK_KINDS[kind.name] = kind
    return kind


def task_kind(name: str) -> TaskKind:
    """The registered kind ``name``; KeyError lists the known kinds."""
    try:
        return TASK_KINDS[name]
    except KeyError:
        raise KeyError(f"unknown task kind {name!r}; known: {', '.join(TASK_KINDS)}") from None
