"""The one definition of the results schema: columns, the metric registry and the layer order.

Every module that writes, reads, plots or summarises results takes column and metric names from here.
A metric (:class:`Metric`: its axis label, whether it is a fraction shown in percent, which direction is
better) belongs to the task kinds that emit it: a :class:`probing.tasks.TaskKind` lists its metrics and
names its headline, and registering the kind registers them here, so figures, the summary and the report
handle it without knowing the kind.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from probing.errors import InputError

RESULT_COLUMNS = [
    "task",
    "dataset",
    "split",
    "encoder",
    "layer",
    "metric",
    "value",
    "ci_low",
    "ci_high",
    "seed",
    "intervention",
]
STRING_COLUMNS = ["task", "dataset", "split", "encoder", "layer", "metric"]
FLOAT_COLUMNS = ["value", "ci_low", "ci_high"]
INTERVENTION = "intervention"
"""What was done to the representation before probing (issue 30): ``""`` for nothing, else an
:class:`Intervention` as text: ``"erase:upos:leace"`` (the label erased from the stored layers),
``"erase:upos:random"`` (the same-rank random control), ``"intervene:1:upos:leace"`` (erased inside the biLM).
Tables and files without the column read as ``""``."""
KEY_COLUMNS = [*STRING_COLUMNS, INTERVENTION]  # a row is identified by these and its seed
MIX_COLUMNS = ["task", "dataset", "encoder", "layer", "weight", "seed", "refit"]  # refit 0: all training data
PER_TAG_COLUMNS = ["task", "dataset", "split", "encoder", "layer", "tag", "n", "accuracy", "seed"]
# probing.analysis.similarity.layer_similarity: every layer pair of the [similarity] encoders
SIMILARITY_COLUMNS = ["encoder_a", "layer_a", "encoder_b", "layer_b", "measure", "value", "n_tokens"]
# one row per layer, training size, test part and sentence-order seed (probing.tasks.curves)
LEARNING_CURVE_COLUMNS = [
    "task",
    "dataset",
    "split",
    "encoder",
    "layer",
    "train_fraction",
    "n_train_sentences",
    "metric",
    "value",
    "ci_low",
    "ci_high",
    "seed",
]
# measure "ratio": how many times more training sentences reference_encoder/reference_layer needs to reach the
# score encoder/layer reaches with at_fraction of them (ratio; inf: never within the full set); measures
# "sdl_kbits" and "esc_sentences" (Whitney et al., from the MDL blocks at epsilon bits per token; value, with
# bound "lower" where the curve had not reached epsilon): see DESIGN.md, "Learning curves"
DATA_EFFICIENCY_COLUMNS = [
    "task",
    "dataset",
    "split",
    "encoder",
    "layer",
    "reference_encoder",
    "reference_layer",
    "at_fraction",
    "ratio",
    "measure",
    "epsilon",
    "value",
    "bound",
    "seed",
]


@dataclass(frozen=True)
class SideTable:
    """A table written beside ``results.csv`` as ``<name>.csv``: its ``columns``, those read back as ``text``,
    and whether the file is written when it has no rows (``always``; else an empty table's file is removed)."""

    name: str
    columns: tuple[str, ...]
    text: tuple[str, ...] = ()
    always: bool = False

    @property
    def file(self) -> str:
        return f"{self.name}.csv"


SIDE_TABLES: dict[str, SideTable] = {}


def register_side_table(table: SideTable) -> SideTable:
    """Add ``table`` to the side tables a run writes and a report reads (a second registration must be
    identical). Task kinds and options register theirs when they are registered
    (:func:`probing.tasks.register_task_option`)."""
    old = SIDE_TABLES.get(table.name)
    if old is not None and old != table:
        raise InputError(f"side table {table.name!r} is already registered differently: {old}")
    if table.name in ("results", "report"):
        raise InputError(f"side table name {table.name!r} is taken by the run's own files")
    SIDE_TABLES[table.name] = table
    return table


MIX_WEIGHTS_TABLE = register_side_table(
    SideTable("mix_weights", tuple(MIX_COLUMNS), ("task", "dataset", "encoder", "layer"), always=True)
)
PER_TAG_TABLE = register_side_table(
    SideTable("per_tag", tuple(PER_TAG_COLUMNS), ("task", "dataset", "split", "encoder", "layer", "tag"), always=True)
)
SIMILARITY_TABLE = register_side_table(
    SideTable("similarity", tuple(SIMILARITY_COLUMNS), ("encoder_a", "layer_a", "encoder_b", "layer_b", "measure"))
)
LEARNING_CURVE_TABLE = register_side_table(
    SideTable(
        "learning_curve", tuple(LEARNING_CURVE_COLUMNS), ("task", "dataset", "split", "encoder", "layer", "metric")
    )
)
DATA_EFFICIENCY_TABLE = register_side_table(
    SideTable(
        "data_efficiency",
        tuple(DATA_EFFICIENCY_COLUMNS),
        tuple(c for c in DATA_EFFICIENCY_COLUMNS if c not in ("at_fraction", "ratio", "epsilon", "value", "seed")),
    )
)

CSV_NAME = "results.csv"
JSON_NAME = "results.json"
MIX_NAME = "mix_weights.csv"
PER_TAG_NAME = "per_tag.csv"
SIMILARITY_NAME = "similarity.csv"
LEARNING_CURVE_NAME = "learning_curve.csv"
DATA_EFFICIENCY_NAME = "data_efficiency.csv"

BASELINE_ENCODER = "baseline"
MIX_LAYER = "mix"
CONCAT_LAYER = "concat"


@dataclass(frozen=True)
class Intervention:
    """What a job did to the representation it probed, the one form of the ``intervention`` column's values:
    ``"erase:<label>:<method>"`` (``layer`` None: ``label`` erased from every stored layer) or
    ``"intervene:<layer>:<label>:<method>"`` (erased inside the biLM at ``layer``). ``str`` writes it,
    :meth:`parse` reads it back (a label may hold colons, e.g. ``feats:Number``).

    >>> str(Intervention("upos", "leace")), str(Intervention("upos", "random", layer=1))
    ('erase:upos:leace', 'intervene:1:upos:random')
    >>> Intervention.parse("intervene:1:feats:Number:inlp")
    Intervention(label='feats:Number', method='inlp', layer=1)
    """

    label: str
    method: str
    layer: int | None = None

    @property
    def where(self) -> str:
        """``"erase"`` (on the stored layers) or ``"intervene:<layer>"`` (inside the biLM)."""
        return "erase" if self.layer is None else f"intervene:{self.layer}"

    def __str__(self) -> str:
        return f"{self.where}:{self.label}:{self.method}"

    @classmethod
    def parse(cls, text: str) -> Intervention:
        """The intervention written as ``text``; InputError for anything else (the unedited ``""`` included)."""
        head, _, rest = text.partition(":")
        layer: int | None = None
        if head == "intervene":
            number, _, rest = rest.partition(":")
            layer = int(number) if number.isdigit() else -1
        label, _, method = rest.rpartition(":")
        if head not in ("erase", "intervene") or layer == -1 or not label or not method:
            raise InputError(
                f"intervention {text!r}: expected 'erase:<label>:<method>' or 'intervene:<layer>:<label>:<method>'"
            )
        return cls(label, method, layer)


@dataclass(frozen=True)
class Metric:
    """One metric of the results table.

    ``percent``: the value is a fraction (``bounds`` gives its valid range) shown times 100 in tables and
    figures; ``higher_is_better`` orders layers when picking the best one (and orients margins and
    significance: a positive margin is always an improvement).
    """

    name: str
    label: str
    percent: bool = False
    bounds: tuple[float, float] | None = None
    higher_is_better: bool = True

    @property
    def scale(self) -> float:
        return 100.0 if self.percent else 1.0

    def format(self, value: float) -> str:
        """``value`` as shown in tables: one decimal of percent for fractions, four digits otherwise."""
        return f"{value * 100:.1f}" if self.percent else f"{value:.4g}"


METRICS: dict[str, Metric] = {}


def register_metric(metric: Metric) -> Metric:
    """Add ``metric`` to the registry (a second registration must be identical). Task kinds register the
    metrics they emit when the kind is registered (:func:`probing.tasks.register_task_kind`)."""
    old = METRICS.get(metric.name)
    if old is not None and old != metric:
        raise InputError(f"metric {metric.name!r} is already registered differently: {old}")
    METRICS[metric.name] = metric
    return metric


def metric(name: str) -> Metric:
    """The registered metric ``name``; an unregistered one is shown as a plain number, higher better."""
    return METRICS.get(name) or Metric(name, name)


_NUMBERED = re.compile(r"^(\d+)([a-z]*)$")


def layer_sort_key(layer: str) -> tuple[int, int, str]:
    """The one layer order: 0, 1, 2, ... (a suffixed name such as ``1f`` right after its number), then
    ``mix``, ``concat``, then any other name (encoders' own layers, baselines) alphabetically."""
    m = _NUMBERED.match(layer)
    if m:
        return (0, int(m[1]), m[2])
    return ({MIX_LAYER: 1, CONCAT_LAYER: 2}.get(layer, 3), 0, layer)


def sort_layers(layers: Iterable[str]) -> list[str]:
    return sorted(layers, key=layer_sort_key)
