"""A toy task option defined outside the package (``tests/test_task_registry.py`` registers it with one line):
``norms = { scale = 2.0 }`` in the table of a task whose kind offers it adds the side table ``layer_norms``
(the mean L2 norm of each layer's test vectors, times ``scale``) and a figure of it, per task and test part."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from probing.figures import group_names
from probing.results import SideTable
from probing.tasks import Job, TaskOption, TaskOutput


@dataclass(frozen=True)
class NormsOptions:
    """The option's keys, in its sub-table ``norms = { ... }``: ``scale``, a positive number."""

    scale: float = 1.0


LAYER_NORMS = SideTable(
    "layer_norms",
    ("task", "dataset", "split", "encoder", "layer", "mean_norm"),
    text=("task", "dataset", "split", "encoder", "layer"),
)


def norm_rows(job: Job, options: NormsOptions) -> TaskOutput:
    """The ``layer_norms`` rows of one job: every layer of every test part's store."""
    out = TaskOutput()
    for part in job.tests:
        for layer in part.store.layer_names:
            norms = np.linalg.norm(part.store.layer(layer, dtype=np.float64), axis=1)
            out.table(LAYER_NORMS.name).append(
                {
                    "task": job.task,
                    "dataset": part.dataset,
                    "split": part.split,
                    "encoder": job.encoder,
                    "layer": layer,
                    "mean_norm": options.scale * float(norms.mean()),
                }
            )
    return out


def norm_figures(results: pd.DataFrame, tables: Mapping[str, pd.DataFrame]) -> dict[str, Figure]:
    """``layer_norms_<task>``: a bar per layer (per encoder), for each task and test part with rows."""
    norms = tables.get(LAYER_NORMS.name)
    if norms is None or norms.empty:
        return {}
    out = {}
    for (task, dataset, split), name in group_names(norms).items():
        rows = norms[(norms["task"] == task) & (norms["dataset"] == dataset) & (norms["split"] == split)]
        fig = Figure()
        fig.subplots().bar(rows["encoder"] + " " + rows["layer"], rows["mean_norm"])
        out[f"layer_norms_{name}"] = fig
    return out


NORMS = TaskOption("norms", NormsOptions, tables=(LAYER_NORMS,), rows=norm_rows, figures=norm_figures)
