"""MDL figures: online codelength per layer (with the control task's beside it) and compression.

Input: results rows of MDL metrics: ``encoder, layer, metric, value`` (optionally ``task``, ``seed``,
``ci_low``, ``ci_high``); metric ``codelength_kbits`` for the task, ``control-codelength_kbits`` (or the
name passed as ``control_metric``) for the control task, ``compression``. Several seeds of one (encoder,
layer, metric) are drawn as their mean with a min-max bar; a single row uses its ``ci_low``/``ci_high`` when
present. Each function draws on ``ax`` (a new figure when None) and returns the ``Figure``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from probing.errors import InputError
from probing.figures.style import OKABE_ITO, figure_and_axes

__all__ = ["codelength_by_layer", "compression_by_layer"]

_TASK_COLOR, _CONTROL_COLOR = OKABE_ITO["blue"], OKABE_ITO["orange"]


def _per_layer(results: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Mean, low and high of ``metric`` per ``encoder:layer`` key (order of appearance)."""
    missing = {"encoder", "layer", "metric", "value"} - set(results.columns)
    if missing:
        raise InputError(f"results frame lacks columns {sorted(missing)}")
    f = results[results.metric == metric].copy()
    f["key"] = f.encoder.astype(str) + ":" + f.layer.astype(str)
    rows = []
    for key, g in f.groupby("key", sort=False):
        v = g.value.to_numpy(dtype=float)
        if len(v) == 1 and {"ci_low", "ci_high"} <= set(g.columns) and np.isfinite(g[["ci_low", "ci_high"]]).all(None):
            lo, hi = float(g.ci_low.iloc[0]), float(g.ci_high.iloc[0])
        else:
            lo, hi = float(v.min()), float(v.max())
        rows.append((key, float(v.mean()), lo, hi))
    return pd.DataFrame(rows, columns=["key", "mean", "low", "high"])


def _bars(ax: Axes, x: np.ndarray, table: pd.DataFrame, width: float, color: str, label: str) -> None:
    err = np.vstack([table["mean"] - table["low"], table["high"] - table["mean"]])
    ax.bar(x, table["mean"], width, color=color, label=label, yerr=err if np.any(err > 0) else None, capsize=3)


def _title(results: pd.DataFrame, what: str) -> str:
    tasks = results["task"].unique() if "task" in results else []
    return f"{what}: {', '.join(map(str, tasks))}" if len(tasks) else what


def codelength_by_layer(
    results: pd.DataFrame,
    *,
    metric: str = "codelength_kbits",
    control_metric: str = "control-codelength_kbits",
    ax: Axes | None = None,
) -> Figure:
    """Online codelength per layer (bars), the control task's codelength beside each (when present);
    lower is better, and a large gap to the control means the labels are easy to extract."""
    task = _per_layer(results, metric)
    if task.empty:
        raise InputError(f"no rows with metric {metric!r}")
    control = _per_layer(results, control_metric).set_index("key").reindex(task.key).reset_index()
    fig, ax = figure_and_axes(ax, 1.5 + 0.8 * len(task), 3.5)
    x = np.arange(len(task))
    has_control = bool(control["mean"].notna().any())
    width = 0.4 if has_control else 0.6
    _bars(ax, x - (width / 2 if has_control else 0), task, width, _TASK_COLOR, "task")
    if has_control:
        _bars(ax, x + width / 2, control.fillna(0.0), width, _CONTROL_COLOR, "control task")
        ax.legend(frameon=False)
    ax.set_xticks(x, task.key, rotation=30, ha="right")
    ax.set_ylabel("online codelength (kbits)")
    ax.set_title(_title(results, "MDL codelength"))
    return fig


def compression_by_layer(results: pd.DataFrame, *, metric: str = "compression", ax: Axes | None = None) -> Figure:
    """Compression (uniform / online codelength) per layer: 1 = nothing learnt, higher is better."""
    table = _per_layer(results, metric)
    if table.empty:
        raise InputError(f"no rows with metric {metric!r}")
    fig, ax = figure_and_axes(ax, 1.5 + 0.6 * len(table), 3.5)
    x = np.arange(len(table))
    _bars(ax, x, table, 0.6, _TASK_COLOR, "compression")
    ax.axhline(1.0, color="0.5", lw=1, ls="--")
    ax.set_xticks(x, table.key, rotation=30, ha="right")
    ax.set_ylabel("compression (uniform / online)")
    ax.set_title(_title(results, "MDL compression"))
    return fig
