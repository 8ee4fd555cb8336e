"""Figures beyond accuracy: layer-similarity heatmaps and MDL codelength / compression per layer.

Each function draws on ``ax`` (a new figure when None) and returns the ``Figure``; nothing is written.

Inputs (tidy ``pandas.DataFrame``):

* **similarity** (``probing.similarity.layer_similarity``): ``encoder_a, layer_a, encoder_b, layer_b,
  measure, value, n_tokens``.
* **results** rows of MDL metrics: ``encoder, layer, metric, value`` (optionally ``task``, ``seed``,
  ``ci_low``, ``ci_high``); metric ``codelength_kbits`` for the task, ``control-codelength_kbits`` (or
  the name passed as ``control_metric``) for the control task, ``compression``. Several seeds of one
  (encoder, layer, metric) are drawn as their mean with a min-max bar; a single row uses its
  ``ci_low``/``ci_high`` when present.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from probing.errors import InputError

__all__ = ["similarity_heatmap", "codelength_by_layer", "compression_by_layer", "similarity_matrix"]

_TASK_COLOR, _CONTROL_COLOR = "#0072B2", "#E69F00"  # Okabe-Ito blue and orange


def _new_ax(ax: Axes | None, size: tuple[float, float]) -> tuple[Figure, Axes]:
    if ax is not None:
        return ax.figure, ax  # type: ignore[return-value]
    fig = Figure(figsize=size, layout="constrained")
    return fig, fig.add_subplot()


def similarity_matrix(frame: pd.DataFrame, measure: str) -> tuple[pd.DataFrame, list[str]]:
    """The (k, k) matrix of ``measure`` over ``encoder:layer`` keys in their order of appearance (rows =
    ``a``, columns = ``b``; NaN where a pair is missing), and the encoder of each key."""
    missing = {"encoder_a", "layer_a", "encoder_b", "layer_b", "measure", "value"} - set(frame.columns)
    if missing:
        raise InputError(f"similarity frame lacks columns {sorted(missing)}")
    f = frame[frame.measure == measure]
    if f.empty:
        raise InputError(f"no rows for measure {measure!r}; measures present: {sorted(frame.measure.unique())}")
    a = f.encoder_a.astype(str) + ":" + f.layer_a.astype(str)
    b = f.encoder_b.astype(str) + ":" + f.layer_b.astype(str)
    keys = list(dict.fromkeys(list(a) + list(b)))
    encoders = [k.split(":", 1)[0] for k in keys]
    m = pd.DataFrame({"a": a.to_numpy(), "b": b.to_numpy(), "v": f.value.to_numpy()})
    return m.pivot_table(index="a", columns="b", values="v", aggfunc="mean").reindex(index=keys, columns=keys), encoders


def similarity_heatmap(
    frame: pd.DataFrame, measure: str = "linear_cka", *, ax: Axes | None = None, annotate: bool = True
) -> Figure:
    """Heatmap of ``measure`` between every pair of layers, encoders side by side (blocks separated by
    lines, labelled ``encoder:layer``); the token count is in the title. Colour scale 0..1."""
    matrix, encoders = similarity_matrix(frame, measure)
    k = len(matrix)
    fig, ax = _new_ax(ax, (1.2 + 0.55 * k, 0.9 + 0.5 * k))
    image = ax.imshow(matrix.to_numpy(dtype=float), cmap="viridis", vmin=0.0, vmax=1.0)
    ax.set_xticks(range(k), matrix.columns, rotation=45, ha="right")
    ax.set_yticks(range(k), matrix.index)
    for i in range(1, k):
        if encoders[i] != encoders[i - 1]:
            ax.axhline(i - 0.5, color="white", lw=2)
            ax.axvline(i - 0.5, color="white", lw=2)
    if annotate:
        for (i, j), v in np.ndenumerate(matrix.to_numpy(dtype=float)):
            if np.isfinite(v):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color="white" if v < 0.6 else "black")
    counts = sorted(frame.loc[frame.measure == measure, "n_tokens"].unique()) if "n_tokens" in frame else []
    n = ", ".join(str(int(c)) for c in counts)
    ax.set_title(f"{measure.replace('_', ' ')} (n_tokens = {n})" if n else measure.replace("_", " "))
    fig.colorbar(image, ax=ax, shrink=0.8)
    return fig


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
    fig, ax = _new_ax(ax, (1.5 + 0.8 * len(task), 3.5))
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
    fig, ax = _new_ax(ax, (1.5 + 0.6 * len(table), 3.5))
    x = np.arange(len(table))
    _bars(ax, x, table, 0.6, _TASK_COLOR, "compression")
    ax.axhline(1.0, color="0.5", lw=1, ls="--")
    ax.set_xticks(x, table.key, rotation=30, ha="right")
    ax.set_ylabel("compression (uniform / online)")
    ax.set_title(_title(results, "MDL compression"))
    return fig
