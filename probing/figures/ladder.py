"""The encoder ladder's figures (issue 41).

:func:`ladder_figure`: one panel per task, the encoders on the x axis in ladder order, each at its best single
layer (by the metric's direction) with that row's 95 % CI, the layer named beside the point (not for a static encoder, whose one layer is named like it).

:func:`contextuality_figure`: Ethayarajh's (2019) layout for the ``contextuality`` task kind: one panel per statistic (self-similarity,
intra-sentence similarity, maximum explainable variance), layer on the x axis, one line per encoder; the solid
line is the anisotropy-adjusted value, the dotted line of the same colour the raw one. A static encoder's one
layer (e.g. ``glove``) is drawn as a single point at layer 0 (its every occurrence of a word is one vector, so
its self-similarity is 1). Draws a new figure and returns it; nothing is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from probing.errors import InputError
from probing.figures.style import MARKERS, SERIES_COLOURS, check_columns, new_figure, percent_scale, pretty
from probing.results import metric as metric_info

__all__ = ["CONTEXTUALITY_PANELS", "best_layers", "contextuality_figure", "ladder_figure"]
RESULT_COLUMNS = ("task", "dataset", "split", "encoder", "layer", "metric", "value", "ci_low", "ci_high")


def best_layers(results: pd.DataFrame, task: str, metric: str, order: Sequence[str]) -> pd.DataFrame:
    """Each encoder's best single layer on ``task``'s first (dataset, split) group in ``results``: one row per
    encoder of ``order`` that has rows (``encoder, layer, value, ci_low, ci_high``), in ladder order. Single
    layers only: the scalar mix, the concatenation and erased rows are left out; ties go to the lower layer.

    Parameters
    ----------
    results : the results table.
    task, metric : the task and the metric that ranks its layers (its headline).
    order : the encoders in ladder order.

    Returns
    -------
    pandas.DataFrame
    """
    check_columns(results, RESULT_COLUMNS, "best_layers")
    rows = results[(results.task == task) & (results.metric == metric) & ~results.layer.isin(["mix", "concat"])]
    if "intervention" in rows:
        rows = rows[rows.intervention.fillna("") == ""]
    if rows.empty:
        raise InputError(f"best_layers: no {metric!r} rows for task {task!r}")
    first = rows.iloc[0]
    rows = rows[(rows.dataset == first.dataset) & (rows.split == first.split)]
    sign = 1.0 if metric_info(metric).higher_is_better else -1.0
    out = []
    for encoder in order:
        r = rows[rows.encoder == encoder]
        if not r.empty:
            best = r.iloc[int(np.argmax(sign * r.value.to_numpy()))]
            out.append({k: best[k] for k in ("encoder", "layer", "value", "ci_low", "ci_high")})
    return pd.DataFrame(out, columns=["encoder", "layer", "value", "ci_low", "ci_high"])


def ladder_figure(results: pd.DataFrame, metrics: Mapping[str, str], order: Sequence[str]) -> Figure:
    """One panel per task of ``metrics`` (task -> the metric to draw, its headline), encoders in ``order``.

    Parameters
    ----------
    results : the results table.
    metrics : task -> metric, in panel order.
    order : the encoders in ladder order (e.g. word2vec, fasttext, glove, random-elmo, elmo, transformer).

    Returns
    -------
    Figure
    """
    if not metrics:
        raise InputError("ladder_figure: no task to draw (metrics is empty)")
    fig = new_figure(0.6 + 0.55 * len(order) * len(metrics), 3.2)
    axes = fig.subplots(1, len(metrics), squeeze=False)[0]
    for ax, (task, metric) in zip(axes, metrics.items()):
        best = best_layers(results, task, metric, order)
        scale = percent_scale(metric)
        x = np.arange(len(best))
        y = best.value.to_numpy(dtype=float) * scale
        err = np.vstack([y - best.ci_low.to_numpy(dtype=float) * scale, best.ci_high.to_numpy(dtype=float) * scale - y])
        ax.errorbar(x, y, yerr=np.nan_to_num(err), fmt="o", color=SERIES_COLOURS[0], capsize=3)
        for xi, yi, layer, encoder in zip(x, y, best.layer, best.encoder):
            if str(layer) != str(encoder):  # a static encoder's one layer is named like it
                ax.annotate(f"layer {layer}", (xi, yi), textcoords="offset points", xytext=(4, 4), fontsize=7)
        ax.set_xticks(x, [pretty(str(e)) for e in best.encoder], rotation=45, ha="right")
        ax.set_title(task)
        ax.set_ylabel(metric_info(metric).label)
    return fig


CONTEXTUALITY_PANELS = ("self-similarity", "intra-sentence-similarity", "explained-variance")
_TITLES = {
    "self-similarity": "self-similarity",
    "intra-sentence-similarity": "intra-sentence similarity",
    "explained-variance": "max. explainable variance (%)",
}


def _x(layer: str) -> int:
    return int(layer) if layer.isdigit() else 0


def contextuality_figure(results: pd.DataFrame, task: str, dataset: str, split: str) -> Figure:
    """The task's statistics per layer for every encoder of ``results`` on ``dataset``/``split``.

    Parameters
    ----------
    results : the results table (columns ``task, dataset, split, encoder, layer, metric, value``).
    task, dataset, split : the rows to draw.

    Returns
    -------
    Figure
    """
    check_columns(results, ("task", "dataset", "split", "encoder", "layer", "metric", "value"), "contextuality_figure")
    rows = results[(results.task == task) & (results.dataset == dataset) & (results.split == split)]
    if not rows.metric.isin(CONTEXTUALITY_PANELS).any():
        raise InputError(
            f"contextuality_figure: no rows of {list(CONTEXTUALITY_PANELS)} for task {task!r} on {dataset}/{split}"
        )
    fig = new_figure(3.2 * len(CONTEXTUALITY_PANELS), 3.0)
    axes = fig.subplots(1, len(CONTEXTUALITY_PANELS), squeeze=False)[0]
    encoders = list(dict.fromkeys(rows.encoder.astype(str)))
    for ax, metric in zip(axes, CONTEXTUALITY_PANELS):
        scale = percent_scale(metric)
        for k, encoder in enumerate(encoders):
            colour, marker = SERIES_COLOURS[k % len(SERIES_COLOURS)], MARKERS[k % len(MARKERS)]
            for name, style, label in ((f"{metric}-adjusted", "-", pretty(encoder)), (metric, ":", None)):
                r = rows[(rows.encoder == encoder) & (rows.metric == name)]
                if r.empty:
                    continue
                x = [_x(str(layer)) for layer in r.layer]
                order = sorted(range(len(x)), key=x.__getitem__)
                ax.plot(
                    [x[i] for i in order],
                    [float(r.value.iloc[i]) * scale for i in order],
                    linestyle=style,
                    marker=marker,
                    color=colour,
                    label=label,
                    alpha=1.0 if style == "-" else 0.6,
                )
        ax.set_title(_TITLES[metric])
        ax.set_xlabel("layer")
    axes[0].set_ylabel("solid: adjusted for anisotropy; dotted: raw")
    axes[-1].legend(loc="best")
    fig.suptitle(f"{task}: {dataset}/{split}")
    return fig
