"""Probing tasks that read activations from stores (never models): POS and supersense tagging probes with
control tasks and baselines, 1-NN word-sense disambiguation with its baselines, and structural (syntax tree)
probes with their control task and position baseline. Each kind is a
:class:`TaskKind` in :data:`TASK_KINDS`."""

from probing.tasks.common import Job, Part, ProbeSettings, TaskError, TaskKind, TaskOutput
from probing.tasks.registry import TASK_KINDS, register_task_kind, task_kind
from probing.tasks.structural import STRUCTURAL_BASELINES, structural_baselines, structural_probes
from probing.tasks.tagging import (
    LABEL_COLUMNS,
    TAGGING_BASELINES,
    column_labels,
    supersense_labels,
    tagging_baselines,
    tagging_probes,
)
from probing.tasks.wsd import WSD_BASELINES, wsd_1nn, wsd_baselines

__all__ = [
    "LABEL_COLUMNS",
    "STRUCTURAL_BASELINES",
    "TAGGING_BASELINES",
    "TASK_KINDS",
    "WSD_BASELINES",
    "Job",
    "Part",
    "ProbeSettings",
    "TaskError",
    "TaskKind",
    "TaskOutput",
    "column_labels",
    "register_task_kind",
    "structural_baselines",
    "structural_probes",
    "supersense_labels",
    "tagging_baselines",
    "tagging_probes",
    "task_kind",
    "wsd_1nn",
    "wsd_baselines",
]
