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
"""What was done to the representation before probing (issue 30): ``""`` for nothing, ``"erase:upos:leace"``
(the label erased from the stored layers), ``"erase:upos:random"`` (the same-rank random control),
``"intervene:1:upos:leace"`` (erased inside the biLM). Tables and files without the column read as ``""``."""
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
