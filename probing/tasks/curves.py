"""Learning curves per layer (issue 31): a task's probe retrained on nested prefixes of its training sentences.

With ``learning_curve = [0.01, 0.1, 1.0]`` in a ``[[tasks]]`` table (kinds ``tagging``, ``supersense``,
``wsd-1nn``), every single layer (and every baseline that is trained) is refitted on the first
``int(f * n)`` of the ``n`` training sentences, for each fraction ``f``, in one seeded order per seed (the
first ``learning_curve_seeds`` of the experiment's seeds, 1 by default): the prefixes are nested, so a
larger size only adds sentences. A size is scored like the full task (its headline metric on every test
part, with a cluster-bootstrap CI over test sentences); the probe's C is chosen on dev at each size, since
the best C moves with n. Rows go to the ``learning_curve`` side table
(:data:`~probing.results.schema.LEARNING_CURVE_COLUMNS`). The option is :data:`LEARNING_CURVE`, which a kind
offers by naming ``"learning_curve"`` among its ``task_options`` and calling :func:`curve_rows` per layer in
its ``run`` when ``job.options["learning_curve"]`` is set.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from probing.results.schema import DATA_EFFICIENCY_COLUMNS, DATA_EFFICIENCY_TABLE, LEARNING_CURVE_TABLE
from probing.tasks.common import Part, ProbeSettings, TaskError, fraction_row
from probing.tasks.options import TaskOption

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from probing._toml import Table

CurveScores = Callable[[np.ndarray], list[tuple[Part, np.ndarray, np.ndarray]]]
"""Training item indices (m,) -> for each test part: (part, per-item scores (k,), sentence ids (k,))."""


@dataclass(frozen=True)
class CurveOptions:
    """The ``learning_curve`` option's value: the fractions of the training sentences (ascending) and how
    many of the experiment's seeds each order the sentences (both always in the job key)."""

    fractions: tuple[float, ...]
    seeds: int


@dataclass(frozen=True)
class CurvePoint:
    """One size of a learning curve: the fraction asked for, the sentences it keeps and their items."""

    fraction: float
    n_sentences: int
    items: np.ndarray


def nested_prefixes(groups: np.ndarray, fractions: Sequence[float], seed: int) -> list[CurvePoint]:
    """The items of the first ``int(f * n)`` sentences of one seeded order, for each fraction (ascending).

    ``n`` is the number of distinct sentence ids in ``groups``. Fractions that keep no sentence
    (``int(f * n) < 1``, as for the MDL blocks) or no more than the previous one are left out; the prefixes are
    nested.

    Parameters
    ----------
    groups : ndarray (m,)
        The sentence id of each training item.
    fractions : sequence of float
        Fractions of the ``n`` sentences, in any order.
    seed : seeds the order of the sentences.

    Returns
    -------
    list of CurvePoint
        By ascending fraction; each point's ``items`` is an ndarray (m_f,) of int64: positions into
        ``groups`` (ascending) of the items of its ``n_sentences`` sentences.
    """
    sentences, member = np.unique(np.asarray(groups), return_inverse=True)
    rank = np.empty(len(sentences), dtype=np.int64)
    rank[np.random.default_rng(seed).permutation(len(sentences))] = np.arange(len(sentences))
    item_rank = rank[member]
    points: list[CurvePoint] = []
    for f in sorted(fractions):
        n = int(f * len(sentences))
        if n >= 1 and (not points or n > points[-1].n_sentences):
            points.append(CurvePoint(float(f), n, np.flatnonzero(item_rank < n)))
    return points


def curve_rows(
    task: str,
    encoder: str,
    layer: str,
    groups: np.ndarray,
    options: CurveOptions,
    seeds: Sequence[int],
    scores: CurveScores,
    metric: str,
    n_boot: int,
    full: list[tuple[Part, np.ndarray, np.ndarray]] | None = None,
) -> list[dict]:
    """Learning-curve rows of one layer: ``scores`` of the model refitted on each prefix of each seed's order.

    ``full``, the task's own scores with every training item (what ``scores(all items)`` returns), is reused
    for a prefix that keeps every sentence instead of fitting the same model again.

    Parameters
    ----------
    task, encoder, layer, metric : the rows' identity.
    groups : ndarray (m,)
        The sentence id of each training item.
    options : CurveOptions
        The task's ``learning_curve`` option: its fractions and how many seeds order the sentences.
    seeds : sequence of int
        The experiment's seeds; the first ``options.seeds`` of them each order the sentences.
    scores : CurveScores
        Training item positions, ndarray (m_f,) of int into ``groups`` -> per test part
        ``(part, per-item scores (k,), sentence ids (k,))``.
    n_boot : bootstrap replicates of each row's CI.
    full : list of (Part, ndarray (k,), ndarray (k,)), optional
        ``scores`` of every training item, if already computed.

    Returns
    -------
    list of dict
        One row per seed, size and test part, with ``train_fraction`` and ``n_train_sentences`` added.
    """
    rows = []
    for seed in seeds[: options.seeds]:
        points = nested_prefixes(groups, options.fractions, seed)
        if not points:
            raise TaskError(
                f"task {task!r}: learning_curve {list(options.fractions)} keeps no training sentence of "
                f"{len(np.unique(groups))} (the smallest fraction must keep at least one)"
            )
        n_all = len(np.unique(groups))
        for point in points:
            scored = full if full is not None and point.n_sentences == n_all else scores(point.items)
            for part, item_scores, test_groups in scored:
                row = fraction_row(task, part, encoder, layer, metric, item_scores, test_groups, seed, n_boot)
                rows.append({**row, "train_fraction": point.fraction, "n_train_sentences": point.n_sentences})
    return rows


def parse_learning_curve(t: Table) -> CurveOptions | None:
    """``learning_curve`` (fractions of the training sentences, each in (0, 1], distinct; absent: no curve,
    None) and ``learning_curve_seeds`` (1: how many of the experiment's seeds get their own sentence order)."""
    if "learning_curve" not in t.data:
        if "learning_curve_seeds" in t.data:
            raise t.fail("learning_curve_seeds", "learning_curve beside it", t.data["learning_curve_seeds"])
        return None
    fractions = t.get(
        "learning_curve",
        "a non-empty list of distinct fractions of the training sentences, each > 0 and <= 1 (e.g. [0.01, 0.1, 1.0])",
        lambda v: (
            isinstance(v, list)
            and len(v) > 0
            and all(isinstance(f, (int, float)) and not isinstance(f, bool) and 0 < f <= 1 for f in v)
            and len(set(v)) == len(v)
        ),
    )
    seeds = t.integer("learning_curve_seeds", 1, minimum=1)
    return CurveOptions(tuple(sorted(float(f) for f in fractions)), seeds)


def curve_work(settings: ProbeSettings, layer_names: Sequence[str], options: CurveOptions) -> dict[str, int]:
    """A learning curve's units of work per single layer (step ``curve <layer>``): one fit per C, probe seed,
    size and sentence order."""
    fits = len(settings.Cs) * len(settings.probe_seeds)
    orders = min(options.seeds, len(settings.seeds))
    return {f"curve {n}": fits * len(options.fractions) * orders for n in layer_names}


def finish_curves(tables: dict[str, pd.DataFrame]) -> None:
    """The data-efficiency ratios of the run's curves (:func:`probing.results.efficiency.data_efficiency`)
    put before the ``data_efficiency`` rows the jobs wrote (SDL and eSC from MDL)."""
    import pandas as pd

    from probing.results.efficiency import data_efficiency

    frames = [data_efficiency(tables[LEARNING_CURVE_TABLE.name]), tables[DATA_EFFICIENCY_TABLE.name]]
    kept = [df for df in frames if not df.empty] or [frames[1]]
    tables[DATA_EFFICIENCY_TABLE.name] = pd.concat(kept, ignore_index=True)[DATA_EFFICIENCY_COLUMNS]


def curve_figures(results: pd.DataFrame, tables: Mapping[str, pd.DataFrame]) -> dict[str, Figure]:
    """``learning_curve_*``: per task and test part with rows in the ``learning_curve`` table."""
    from probing import figures as fg

    curves = tables.get(LEARNING_CURVE_TABLE.name)
    if curves is None or curves.empty:
        return {}
    return {
        f"learning_curve_{name}": fg.learning_curves(curves, task, results=results, dataset=dataset, split=split)
        for (task, dataset, split), name in fg.group_names(curves).items()
    }


LEARNING_CURVE = TaskOption(
    "learning_curve",
    CurveOptions,
    parse=parse_learning_curve,
    tables=(LEARNING_CURVE_TABLE, DATA_EFFICIENCY_TABLE),
    work=curve_work,
    finish=finish_curves,
    figures=curve_figures,
)
