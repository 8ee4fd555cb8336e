"""Probing tasks that read activations from stores (never models): POS and supersense tagging probes with
control tasks and baselines, 1-NN word-sense disambiguation with its baselines, and structural (syntax tree)
probes with their control task and position baseline. Each kind is a :class:`TaskKind` in
:data:`TASK_KINDS`; :mod:`probing.results.metrics` defines the built-in kinds' metrics.

Names resolve on first use (PEP 562), so the report can read the registry without importing the probe code
(and torch) before it needs it.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from probing.tasks.baselines import TAGGING_BASELINES, tagging_baselines
    from probing.tasks.common import Job, Part, ProbeSettings, TaskError, TaskKind, TaskOutput
    from probing.tasks.labels import LABEL_COLUMNS, column_labels, supersense_labels
    from probing.tasks.options import TaskOption
    from probing.tasks.registry import (
        TASK_KINDS,
        TASK_OPTIONS,
        headline_metric,
        headline_metrics,
        overview_panels,
        register_task_kind,
        register_task_option,
        task_kind,
        task_kinds,
        task_option,
    )
    from probing.tasks.structural import STRUCTURAL_BASELINES, structural_baselines, structural_probes
    from probing.tasks.tagging import tagging_probes
    from probing.tasks.wsd import WSD_BASELINES, wsd_1nn, wsd_baselines

_HOMES = {
    **dict.fromkeys(["Job", "Part", "ProbeSettings", "TaskError", "TaskKind", "TaskOutput"], "common"),
    **dict.fromkeys(
        [
            "TASK_KINDS",
            "headline_metric",
            "headline_metrics",
            "overview_panels",
            "register_task_kind",
            "register_task_option",
            "task_kind",
            "task_kinds",
            "task_option",
        ],
        "registry",
    ),
    **dict.fromkeys(["STRUCTURAL_BASELINES", "structural_baselines", "structural_probes"], "structural"),
    **dict.fromkeys(["LABEL_COLUMNS", "column_labels", "supersense_labels"], "labels"),
    **dict.fromkeys(["TAGGING_BASELINES", "tagging_baselines"], "baselines"),
    **dict.fromkeys(["TASK_OPTIONS", "register_task_option", "task_option"], "registry"),
    "TaskOption": "options",
    "tagging_probes": "tagging",
    **dict.fromkeys(["WSD_BASELINES", "wsd_1nn", "wsd_baselines"], "wsd"),
}


def __getattr__(name: str) -> Any:
    """Import on first use (PEP 562)."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"probing.tasks.{_HOMES[name]}"), name)


__all__ = [
    "LABEL_COLUMNS",
    "STRUCTURAL_BASELINES",
    "TAGGING_BASELINES",
    "TASK_KINDS",
    "TASK_OPTIONS",
    "WSD_BASELINES",
    "Job",
    "Part",
    "ProbeSettings",
    "TaskError",
    "TaskKind",
    "TaskOption",
    "TaskOutput",
    "column_labels",
    "headline_metric",
    "headline_metrics",
    "overview_panels",
    "register_task_kind",
    "register_task_option",
    "structural_baselines",
    "structural_probes",
    "supersense_labels",
    "tagging_baselines",
    "tagging_probes",
    "task_kind",
    "task_kinds",
    "task_option",
    "wsd_1nn",
    "wsd_baselines",
]
