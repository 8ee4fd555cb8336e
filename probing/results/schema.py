"""The one definition of the results schema: columns, metrics, the layer order and each task kind's headline.

Every module that writes, reads, plots or summarises results takes column and metric names from here.
A task kind that emits a new metric registers it with :func:`register_metric` (its axis label, whether it
is a fraction shown in percent, which direction is better) and names its headline metric in the
``headline_for`` field, so figures, the summary and the report handle it without knowing the kind.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import pandas as pd

from probing.errors import InputError
from probing.similarity import SIMILARITY_COLUMNS as SIMILARITY_COLUMNS  # re-exported: one definition

RESULT_COLUMNS = ["task", "dataset", "split", "encoder", "layer", "metric", "value", "ci_low", "ci_high", "seed"]
STRING_COLUMNS = ["task", "dataset", "split", "encoder", "layer", "metric"]
FLOAT_COLUMNS = ["value", "ci_low", "ci_high"]
KEY_COLUMNS = STRING_COLUMNS  # a row is identified by these and its seed
MIX_COLUMNS = ["task", "dataset", "encoder", "layer", "weight", "seed", "refit"]  # refit 0: all training data
PER_TAG_COLUMNS = ["task", "dataset", "split", "encoder", "layer", "tag", "n", "accuracy", "seed"]
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
    figures; ``higher_is_better`` orders layers when picking the best one; ``kinds`` are the task kinds that
    emit it and ``headline_for`` those whose headline (summary, figures, best layer) it is.
    """

    name: str
    label: str
    percent: bool = False
    bounds: tuple[float, float] | None = None
    higher_is_better: bool = True
    kinds: tuple[str, ...] = ()
    headline_for: tuple[str, ...] = ()

    @property
    def scale(self) -> float:
        return 100.0 if self.percent else 1.0

    def format(self, value: float) -> str:
        """``value`` as shown in tables: one decimal of percent for fractions, four digits otherwise."""
        return f"{value * 100:.1f}" if self.percent else f"{value:.4g}"


_TAGGING = ("tagging", "supersense")
_DISTANCE, _DEPTH = ("structural-distance",), ("structural-depth",)
_STRUCTURAL = _DISTANCE + _DEPTH
METRICS: dict[str, Metric] = {}


def register_metric(metric: Metric) -> Metric:
    """Add ``metric`` to the registry (a second registration must be identical)."""
    old = METRICS.get(metric.name)
    if old is not None and old != metric:
        raise InputError(f"metric {metric.name!r} is already registered differently: {old}")
    METRICS[metric.name] = metric
    return metric


for _m in (
    Metric("f1", "F1 (%)", True, (0.0, 1.0), kinds=("wsd-1nn",), headline_for=("wsd-1nn",)),
    Metric("accuracy", "accuracy (%)", True, (0.0, 1.0), kinds=_TAGGING, headline_for=_TAGGING),
    Metric("control-accuracy", "control-task accuracy (%)", True, (0.0, 1.0), kinds=_TAGGING),
    Metric("selectivity", "selectivity (percentage points)", True, (-1.0, 1.0), kinds=_TAGGING + _STRUCTURAL),
    Metric(
        "best-layer-margin",
        "best single layer minus the next (percentage points)",
        True,
        (-1.0, 1.0),
        kinds=(*_TAGGING, "wsd-1nn"),
    ),
    # structural probes (Hewitt & Manning 2019): UUAS and Root% are fractions, DSpr./NSpr. Spearman correlations
    Metric("uuas", "UUAS (%)", True, (0.0, 1.0), kinds=_DISTANCE, headline_for=_DISTANCE),
    Metric("dspr", "DSpr. (Spearman)", False, (-1.0, 1.0), kinds=_DISTANCE),
    Metric("root_acc", "Root (%)", True, (0.0, 1.0), kinds=_DEPTH, headline_for=_DEPTH),
    Metric("nspr", "NSpr. (Spearman)", False, (-1.0, 1.0), kinds=_DEPTH),
    Metric("control-uuas", "control-task UUAS (%)", True, (0.0, 1.0), kinds=_DISTANCE),
    Metric("control-dspr", "control-task DSpr. (Spearman)", False, (-1.0, 1.0), kinds=_DISTANCE),
    Metric("control-root_acc", "control-task Root (%)", True, (0.0, 1.0), kinds=_DEPTH),
    Metric("control-nspr", "control-task NSpr. (Spearman)", False, (-1.0, 1.0), kinds=_DEPTH),
    Metric("oov-rate", "out-of-vocabulary tokens (%)", True, (0.0, 1.0), higher_is_better=False, kinds=_TAGGING),
    # oov_split = true (issue 21): accuracy on the tokens inside (iv) / outside (oov) GloVe's vocabulary and
    # the bundled model's training vocabulary
    Metric("accuracy-iv-glove", "accuracy on words in GloVe's vocabulary (%)", True, (0.0, 1.0), kinds=_TAGGING),
    Metric("accuracy-oov-glove", "accuracy on words outside GloVe's vocabulary (%)", True, (0.0, 1.0), kinds=_TAGGING),
    Metric(
        "accuracy-iv-train",
        "accuracy on words in the model's training vocabulary (%)",
        True,
        (0.0, 1.0),
        kinds=_TAGGING,
    ),
    Metric(
        "accuracy-oov-train",
        "accuracy on words outside the model's training vocabulary (%)",
        True,
        (0.0, 1.0),
        kinds=_TAGGING,
    ),
    # MDL probing (Voita & Titov 2020), on the training split: online and uniform codelength in kbits (1000 bits),
    # compression = uniform / online (1 = nothing learnt)
    Metric(
        "codelength_kbits", "online codelength (kbits)", bounds=(0.0, math.inf), higher_is_better=False, kinds=_TAGGING
    ),
    Metric(
        "uniform_kbits", "uniform codelength (kbits)", bounds=(0.0, math.inf), higher_is_better=False, kinds=_TAGGING
    ),
    Metric("compression", "compression (uniform / online)", bounds=(0.0, math.inf), kinds=_TAGGING),
    Metric(
        "control-codelength_kbits",
        "control-task online codelength (kbits)",
        bounds=(0.0, math.inf),
        higher_is_better=False,
        kinds=_TAGGING,
    ),
):
    register_metric(_m)


def metric(name: str) -> Metric:
    """The registered metric ``name``; an unregistered one is shown as a plain number, higher better."""
    return METRICS.get(name) or Metric(name, name)


def headline_metric(kind: str) -> str:
    """The headline metric of task kind ``kind`` (e.g. ``"f1"`` for ``wsd-1nn``)."""
    for m in METRICS.values():
        if kind in m.headline_for:
            return m.name
    raise KeyError(f"no headline metric registered for task kind {kind!r}")


def headline_metrics(results: pd.DataFrame, headlines: Mapping[str, str] | None = None) -> dict[str, str]:
    """The headline metric of every task in ``results``.

    ``headlines`` (task -> metric, as recorded in a run's provenance) wins; otherwise a task's headline is
    the first of its metrics, in registry order (F1 before accuracy), that is the headline of some task
    kind. The task's name plays no part, so a WSD task named "senses" still gets F1.
    """
    headlines = dict(headlines or {})
    candidates = [m.name for m in METRICS.values() if m.headline_for]
    out: dict[str, str] = {}
    for task, metrics in results.groupby("task", sort=False)["metric"]:
        present = set(metrics.astype(str))
        given = headlines.get(str(task))
        if given in present:
            out[str(task)] = str(given)
            continue
        found = next((m for m in candidates if m in present), None)
        if found is None:
            raise InputError(
                f"task {task!r} has no headline metric: its metrics are {sorted(present)}, "
                f"headline metrics are {candidates}"
            )
        out[str(task)] = found
    return out


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
