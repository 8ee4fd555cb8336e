"""The task kinds an experiment file can name (``kind = "..."`` in a ``[[tasks]]`` table) and the task options
they offer.

A new kind is one module that defines a :class:`~probing.tasks.common.TaskKind` (its option parser, its job
runner, its metrics and headline, its figures) and one line in the tuple below (or a call to
:func:`register_task_kind` from outside the package); a new option is one module that defines a
:class:`~probing.tasks.options.TaskOption` and one line in the options' tuple (or a call to
:func:`~probing.tasks.options.register_task_option`). Registering a kind registers its metrics; the options
it offers must be registered first.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from probing.errors import InputError
from probing.results import METRICS, register_metric
from probing.tasks.agreement_patching import AGREEMENT_PATCHING
from probing.tasks.common import TaskKind
from probing.tasks.contextuality import CONTEXTUALITY
from probing.tasks.curves import LEARNING_CURVE
from probing.tasks.erase import ERASE
from probing.tasks.mdl import MDL
from probing.tasks.minimal_pairs import MINIMAL_PAIRS
from probing.tasks.options import TASK_OPTIONS, register_task_option
from probing.tasks.options import task_option as task_option  # re-exported by probing.tasks, registered here
from probing.tasks.reading_times import READING_TIMES
from probing.tasks.structural import STRUCTURAL_DEPTH, STRUCTURAL_DISTANCE
from probing.tasks.syntaxgym import SYNTAXGYM
from probing.tasks.tagging import SUPERSENSE, TAGGING
from probing.tasks.wsd import WSD_1NN

TASK_KINDS: dict[str, TaskKind] = {}


def register_task_kind(kind: TaskKind, *, replace: bool = False) -> TaskKind:
    """Make ``kind`` (and its metrics) available to experiment files; an existing name needs ``replace=True``.
    A metric registered differently by another kind is refused (:func:`probing.results.register_metric`)."""
    if kind.name in TASK_KINDS and not replace and TASK_KINDS[kind.name] is not kind:
        raise InputError(f"task kind {kind.name!r} is already registered (pass replace=True to override it)")
    unknown = [name for name in kind.task_options if name not in TASK_OPTIONS]
    if unknown:
        raise InputError(f"task kind {kind.name!r} offers options that are not registered: {unknown}")
    for m in kind.metrics:
        register_metric(m)
    TASK_KINDS[kind.name] = kind
    return kind


for _option in (MDL, LEARNING_CURVE, ERASE):
    register_task_option(_option)

for _kind in (
    TAGGING,
    SUPERSENSE,
    WSD_1NN,
    STRUCTURAL_DISTANCE,
    STRUCTURAL_DEPTH,
    MINIMAL_PAIRS,
    SYNTAXGYM,
    READING_TIMES,
    AGREEMENT_PATCHING,
    CONTEXTUALITY,
):
    register_task_kind(_kind)


def task_kind(name: str) -> TaskKind:
    """The registered kind ``name``; KeyError lists the known kinds."""
    try:
        return TASK_KINDS[name]
    except KeyError:
        raise KeyError(f"unknown task kind {name!r}; known: {', '.join(TASK_KINDS)}") from None


def headline_metric(kind: str) -> str:
    """The headline metric of task kind ``kind`` (e.g. ``"f1"`` for ``wsd-1nn``)."""
    return task_kind(kind).headline


def task_kinds(
    results: pd.DataFrame, kinds: Mapping[str, str] | None = None, *, strict: bool = True
) -> dict[str, TaskKind]:
    """The kind of every task in ``results``.

    ``kinds`` (task -> kind name, as recorded in a run's provenance) wins; a task it does not name (a results
    table without provenance) gets the first registered kind whose headline is among its metrics (so a WSD
    task named "senses" is a ``wsd-1nn`` task: its name plays no part; several candidates: the headline
    first in the metric registry's order, F1 before accuracy). InputError when none fits; with
    ``strict=False`` such a task (e.g. of a kind registered in another process) is left out.
    """
    kinds = dict(kinds or {})
    heads = {k.headline for k in TASK_KINDS.values()}
    order = [m for m in METRICS if m in heads] + sorted(heads - set(METRICS))
    out: dict[str, TaskKind] = {}
    for task, metrics in results.groupby("task", sort=False)["metric"]:
        present = set(metrics.astype(str))
        given = TASK_KINDS.get(kinds.get(str(task), ""))
        if given is not None and given.headline in present:
            out[str(task)] = given
            continue
        headline = next((m for m in order if m in present), None)
        found = next((k for k in TASK_KINDS.values() if k.headline == headline), None)
        if found is None:
            if not strict:
                continue
            raise InputError(
                f"task {task!r} has no headline metric: its metrics are {sorted(present)}, headline metrics "
                f"are {list(dict.fromkeys(k.headline for k in TASK_KINDS.values()))}"
            )
        out[str(task)] = found
    return out


def headline_metrics(results: pd.DataFrame, headlines: Mapping[str, str] | None = None) -> dict[str, str]:
    """The headline metric of every task in ``results``: ``headlines`` (task -> metric, as recorded in a
    run's provenance) where it names a metric the task has, else its kind's (:func:`task_kinds`)."""
    headlines = dict(headlines or {})
    out = {}
    for task, metrics in results.groupby("task", sort=False)["metric"]:
        given = headlines.get(str(task))
        if given is not None and given in set(metrics.astype(str)):
            out[str(task)] = given
    rest = results[~results["task"].astype(str).isin(list(out))]
    out.update({task: kind.headline for task, kind in task_kinds(rest).items()})
    return {str(t): out[str(t)] for t in dict.fromkeys(results["task"].astype(str))}


def overview_panels(results: pd.DataFrame, kinds: Mapping[str, str] | None = None) -> dict[str, str]:
    """The overview figure's panels (:func:`probing.figures.overview`), task -> headline metric: the first task
    (in results order) of each task kind that asks for one (``TaskKind.overview``: tagging, then WSD), in kind
    registration order. ``kinds``: task -> kind name, as recorded in a run's provenance (else inferred from
    the tasks' metrics, :func:`task_kinds`)."""
    first: dict[str, str] = {}
    for task, kind in task_kinds(results, kinds, strict=False).items():
        if kind.overview:
            first.setdefault(kind.name, task)
    order = {name: i for i, name in enumerate(TASK_KINDS)}
    return {first[k]: TASK_KINDS[k].headline for k in sorted(first, key=lambda k: order.get(k, len(order)))}
