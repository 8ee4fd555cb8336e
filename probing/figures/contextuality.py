"""Ethayarajh's (2019) layout for the ``contextuality`` task kind: one panel per statistic (self-similarity,
intra-sentence similarity, maximum explainable variance), layer on the x axis, one line per encoder; the solid
line is the anisotropy-adjusted value, the dotted line of the same colour the raw one. A static encoder's one
layer (e.g. ``glove``) is drawn as a single point at layer 0 (its every occurrence of a word is one vector, so
its self-similarity is 1). Draws a new figure and returns it; nothing is written.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from probing.errors import InputError
from probing.figures.style import MARKERS, SERIES_COLOURS, check_columns, new_figure, percent_scale, pretty

__all__ = ["CONTEXTUALITY_PANELS", "contextuality_figure"]

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
