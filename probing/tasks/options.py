"""Task options: what any task kind may offer beside its own keys (MDL, ``learning_curve``, ``erase``, and
options registered from outside the package).

A :class:`TaskOption` is one object: its options dataclass (read from a ``[[tasks]]`` table through
:class:`~probing._toml.Table`), its metrics and side tables (registered with it), the rows it adds to a job,
its units of work, its extra runs of a job (an :class:`~probing.results.Intervention` each, with the parts
they read), how it completes its side tables when a run is assembled, and its figures. A kind names the
options it offers (:attr:`TaskKind.task_options`); a set option's value is ``job.options[option.name]``, and
its contribution to the job's cache key is :func:`probing.identity.option_key` of that value: fields equal
to their defaults drop out, so a field added later keeps every existing key. An option that is not set adds
nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, is_dataclass
from typing import TYPE_CHECKING, Any

from probing._toml import parse_options
from probing.errors import InputError
from probing.results import Intervention, Metric, SideTable, register_metric, register_side_table
from probing.tasks.common import Job, Part, ProbeSettings, TaskKind, TaskOutput

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from probing._toml import Table

Parts = tuple[Part, Part | None, list[Part]]
"""A job's training, dev and test parts."""
OptionFigures = Callable[["pd.DataFrame", Mapping[str, "pd.DataFrame"]], Mapping[str, "Figure"]]
"""(the results table, the run's side tables by name) -> {figure name: Figure}."""


@dataclass(frozen=True)
class TaskOption:
    """An option any task kind may offer (``name`` is its key in ``job.options``).

    ``options``: the dataclass of its value. ``parse(table) -> value | None`` reads its keys from a
    ``[[tasks]]`` table through :class:`~probing._toml.Table` (None: not set); without ``parse``, the option
    is the sub-table ``name = { ... }`` read by :func:`~probing._toml.parse_options` into ``options``.
    ``metrics`` and ``tables`` (:class:`~probing.results.SideTable`: name and columns) are registered with
    the option. ``rows(job, value) -> TaskOutput``: the rows and side-table rows it adds to each job of a
    task that sets it, after the kind's own (None: the kinds that offer it compute its rows in their ``run``,
    as MDL and learning curves do with the kind's labels and probes). ``work(settings, layer_names, value)
    -> {step: units}``: its units of work per job. ``variants(value)``: the interventions of its extra runs
    of each job, and ``views(value, parts)`` the parts each of them reads (``erase``: the stores seen through
    erasers fitted on the training store); ``variant_settings(value, intervention, settings) -> settings``, the
    probe settings of an extra run (``erase``: without the scalar mix and concatenation unless the option asks
    for them; None: the job's own). ``finish(tables)``: completes the run's side tables (pandas
    DataFrames by name) when the jobs' rows are assembled. ``figures(results, tables) -> {name: Figure}``:
    the figures of its rows, which the report draws after the kinds' figures. ``code``: modules its rows
    depend on beyond its own (an analysis of :mod:`probing.analysis`), whose code identity with ``version``
    (bumped for a change the code does not show) enters the key of every job that sets the option.
    """

    name: str
    options: type
    parse: Callable[[Table], Any] | None = None
    metrics: tuple[Metric, ...] = ()
    tables: tuple[SideTable, ...] = ()
    rows: Callable[[Job, Any], TaskOutput] | None = None
    work: Callable[[ProbeSettings, Sequence[str], Any], Mapping[str, int]] | None = None
    variants: Callable[[Any], Sequence[Intervention]] | None = None
    views: Callable[[Any, Parts], Sequence[tuple[Intervention, Parts]]] | None = None
    variant_settings: Callable[[Any, Intervention, ProbeSettings], ProbeSettings] | None = None
    finish: Callable[[dict[str, pd.DataFrame]], None] | None = None
    figures: OptionFigures | None = None
    code: tuple[str, ...] = ()
    version: int = 1

    def __post_init__(self) -> None:
        if not is_dataclass(self.options):
            raise InputError(f"task option {self.name!r}: options must be a dataclass, got {self.options!r}")
        if (self.variants is None) != (self.views is None):
            raise InputError(f"task option {self.name!r}: variants and views go together")

    def read(self, table: Table) -> Any:
        """The option's value from a ``[[tasks]]`` table, or None when the table does not set it."""
        if self.parse is not None:
            return self.parse(table)
        if self.name not in table.data:
            return None
        sub = table.table(self.name)
        value: Any = parse_options(self.options, sub)
        sub.done()
        return value


TASK_OPTIONS: dict[str, TaskOption] = {}


def register_task_option(option: TaskOption, *, replace: bool = False) -> TaskOption:
    """Make ``option`` (its metrics and side tables) available to the kinds that offer it; an existing name
    needs ``replace=True``."""
    if option.name in TASK_OPTIONS and not replace and TASK_OPTIONS[option.name] is not option:
        raise InputError(f"task option {option.name!r} is already registered (pass replace=True to override it)")
    for m in option.metrics:
        register_metric(m)
    for t in option.tables:
        register_side_table(t)
    TASK_OPTIONS[option.name] = option
    return option


def task_option(name: str) -> TaskOption:
    """The registered option ``name``; KeyError lists the known options."""
    try:
        return TASK_OPTIONS[name]
    except KeyError:
        raise KeyError(f"unknown task option {name!r}; known: {', '.join(TASK_OPTIONS)}") from None


def read_task_options(kind: TaskKind, table: Table) -> dict[str, Any]:
    """The values of the options ``kind`` offers that ``table`` sets, by name, in the kind's order."""
    values = {name: task_option(name).read(table) for name in kind.task_options}
    return {name: value for name, value in values.items() if value is not None}


def set_options(options: Mapping[str, Any]) -> list[tuple[TaskOption, Any]]:
    """The registered options set in a job's ``options``, with their values, in registration order."""
    return [(option, options[name]) for name, option in TASK_OPTIONS.items() if name in options]


def run_task(kind: TaskKind, job: Job, options: Sequence[TaskOption] = ()) -> TaskOutput:
    """A job's output: its kind's rows, then the rows of each of ``options`` (the task's set options with
    ``rows``, resolved by the caller, so a worker needs no registry)."""
    out = kind.run(job)
    for option in options:
        if option.rows is not None:
            out.extend(option.rows(job, job.options[option.name]))
    return out
