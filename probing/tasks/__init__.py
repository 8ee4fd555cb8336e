"""Probing tasks that read activations from stores (never models): POS and supersense tagging probes with
control tasks and baselines, and 1-NN word-sense disambiguation with its baselines."""

from probing.tasks.common import BASELINE_ENCODER, Part, ProbeSettings, TaskError, TaskOutput
from probing.tasks.tagging import (
    TAGGING_BASELINES,
    column_labels,
    supersense_labels,
    tagging_baselines,
    tagging_probes,
)
from probing.tasks.wsd import WSD_BASELINES, wsd_1nn, wsd_baselines

__all__ = [
    "BASELINE_ENCODER",
    "Part",
    "ProbeSettings",
    "TaskError",
    "TaskOutput",
    "TAGGING_BASELINES",
    "WSD_BASELINES",
    "column_labels",
    "supersense_labels",
    "tagging_baselines",
    "tagging_probes",
    "wsd_1nn",
    "wsd_baselines",
]
