"""The ``erase`` option (issue 30), :data:`ERASE`: a task also run with a label erased from every stored layer.

``erase = { label = "upos", method = "leace" }`` (or a list of such tables) in a ``[[tasks]]`` table: besides
its plain job, each (task, encoder) runs once per :class:`~probing.results.Intervention` ``erase:<label>:<method>``
and, for ``leace``/``inlp``, once with the same-rank random control, on its stores seen through erasers fitted
on the training store (:mod:`probing.analysis.erasure`). Those runs probe every layer (with its control task)
but not the scalar mix or the concatenation of the layers, which the plain run has: on an erased store they
cost as much as the layers together and answer no question the layers' rows do not (issue 44); ``mix = true``
and ``concat = true`` in the erase table bring them back (as ``[probe]`` and the plain run have them). Its rows carry the intervention; its figure is the
present-vs-used figure (:func:`probing.figures.erasure.present_vs_used`), drawn for every task with erased or
intervened rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from probing.results import INTERVENTION, Intervention
from probing.tasks.common import Part, ProbeSettings
from probing.tasks.options import Parts, TaskOption

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from probing._toml import Table

ERASE_METHOD = "leace"  # an erase table's method when it names none


@dataclass(frozen=True)
class EraseSpec:
    """One ``{label, method}`` of a task's ``erase``: ``label`` erased from every stored layer by ``method``
    (both always in the job key), its runs with the scalar mix and the concatenation only if ``mix`` and
    ``concat`` say so (and ``[probe]`` has them); the option's value is a tuple of them."""

    label: str
    method: str
    mix: bool = False
    concat: bool = False

    def interventions(self) -> list[Intervention]:
        """The runs it adds: the erasure, then (for ``leace``/``inlp``) its same-rank random control."""
        methods = [self.method] if self.method == "random" else [self.method, "random"]
        return [Intervention(self.label, m) for m in methods]


def parse_erase(t: Table) -> tuple[EraseSpec, ...] | None:
    """``erase``: a table ``{label, method}`` or a list of distinct ones (None when absent)."""
    if "erase" not in t.data:
        return None
    from probing._toml import Table
    from probing.analysis.erasure import METHODS
    from probing.tasks.labels import LABEL_COLUMNS

    value = t.get("erase", "a table {label, method} or a list of them", lambda v: isinstance(v, (dict, list)))
    tables = value if isinstance(value, list) else [value]
    specs = []
    for i, item in enumerate(tables):
        sub = Table(item, f"{t.where}.erase" + (f"[{i}]" if isinstance(value, list) else ""), t.source, t.base)
        specs.append(
            EraseSpec(
                sub.string("label", choices=LABEL_COLUMNS),
                sub.string("method", ERASE_METHOD, choices=METHODS),
                sub.boolean("mix", False),
                sub.boolean("concat", False),
            )
        )
        sub.done()
    if len(set(specs)) != len(specs):
        raise t.fail("erase", "distinct {label, method} pairs", value)
    return tuple(specs)


def erase_variants(specs: tuple[EraseSpec, ...]) -> list[Intervention]:
    """Every run the option adds to a job, in order."""
    return [iv for spec in specs for iv in spec.interventions()]


def erase_settings(specs: tuple[EraseSpec, ...], iv: Intervention, settings: ProbeSettings) -> ProbeSettings:
    """The probe settings of run ``iv``: the job's, without the scalar mix and the concatenation unless the
    erase table that added the run asks for them."""
    spec = next(s for s in specs if iv in s.interventions())
    return replace(settings, mix=bool(settings.mix) and spec.mix, concat=bool(settings.concat) and spec.concat)


def erase_views(specs: tuple[EraseSpec, ...], parts: Parts) -> list[tuple[Intervention, Parts]]:
    """Each run's parts: the job's stores seen through erasers fitted on its training store (a random
    control with the rank of the eraser it controls)."""
    from probing.analysis.erasure import ErasedStore, fit_layer_erasers

    train, dev, tests = parts
    out = []
    for spec in specs:
        fitted: dict | None = None
        for iv in spec.interventions():
            ranks = None if fitted is None else {k: e.rank_ for k, e in fitted.items()}
            erasers = fit_layer_erasers(train.store, spec.label, iv.method, ranks=ranks)
            fitted = fitted or erasers

            def seen(p: Part, erasers: dict = erasers, iv: Intervention = iv) -> Part:
                return Part(p.dataset, p.split, ErasedStore(p.store, erasers, str(iv)))

            out.append((iv, (seen(train), None if dev is None else seen(dev), [seen(p) for p in tests])))
    return out


def erase_figures(results: pd.DataFrame, tables: Mapping[str, pd.DataFrame]) -> dict[str, Figure]:
    """``present_vs_used_*`` on the task's headline, per task, data and split of headline rows with erased or
    intervened rows (:func:`probing.figures.erasure.erasure_figures`)."""
    from probing import figures as fg
    from probing.figures.erasure import erasure_figures
    from probing.tasks.registry import task_kinds

    if INTERVENTION not in results.columns or not (results[INTERVENTION] != "").any():
        return {}
    heads = {task: kind.headline for task, kind in task_kinds(results, strict=False).items()}
    headline_rows = results[results["metric"] == results["task"].map(heads)]
    return {
        f"{stem}_{name}": fig
        for (task, dataset, split), name in fg.group_names(headline_rows).items()
        for stem, fig in erasure_figures(results, task, dataset, split, heads[task]).items()
    }


ERASE = TaskOption(
    "erase",
    EraseSpec,
    parse=parse_erase,
    variants=erase_variants,
    views=erase_views,
    variant_settings=erase_settings,
    figures=erase_figures,
)
