"""Learning curves: a task's score against the number of training sentences, one line per layer and
encoder (issue 31); returns a matplotlib ``Figure`` and writes nothing.

Input: the ``learning_curve`` side table (``task, dataset, split, encoder, layer, train_fraction,
n_train_sentences, metric, value, ci_low, ci_high, seed``) and, for the baselines' horizontal lines, the
results table (their full-data rows, encoder ``baseline``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from probing.errors import InputError
from probing.figures.style import (
    BASELINE_STYLES,
    MARKERS,
    SERIES_COLOURS,
    check_columns,
    figure_and_axes,
    listing,
    percent_scale,
    pretty,
)
from probing.results import BASELINE_ENCODER, LEARNING_CURVE_COLUMNS, layer_sort_key
from probing.results import metric as metric_info


def learning_curves(
    curves: pd.DataFrame,
    task: str,
    *,
    results: pd.DataFrame | None = None,
    dataset: str | None = None,
    split: str | None = None,
    ax: Axes | None = None,
) -> Figure:
    """Score (percent for fractions) against training sentences on a log axis, for one task and test part.

    One line per encoder and single layer, through the mean over sentence-order seeds; the band is the
    95 % bootstrap CI over test sentences (mean over seeds), widened to the seeds' range when they
    differ more. Baselines (full training set, from ``results``) are horizontal dashed lines.
    """
    check_columns(curves, LEARNING_CURVE_COLUMNS, "learning_curves")
    rows = curves[curves["task"].astype(str) == task]
    if rows.empty:
        raise InputError(f"learning_curves: task {task!r} has no curve; tasks with curves: {listing(curves['task'])}")
    dataset = dataset if dataset is not None else str(rows["dataset"].iloc[0])
    split = split if split is not None else str(rows["split"].iloc[0])
    rows = rows[(rows["dataset"].astype(str) == dataset) & (rows["split"].astype(str) == split)]
    if rows.empty:
        raise InputError(f"learning_curves: task {task!r} has no curve on {dataset}/{split}")
    name = str(rows["metric"].iloc[0])
    scale = percent_scale(name)
    fig, ax = figure_and_axes(ax, 6.4, 4.0)
    trained = rows[rows["encoder"].astype(str) != BASELINE_ENCODER]
    series = sorted(trained.groupby(["encoder", "layer"]).groups, key=lambda k: (str(k[0]), layer_sort_key(str(k[1]))))
    for i, (encoder, layer) in enumerate(series):
        g = trained[(trained["encoder"] == encoder) & (trained["layer"] == layer)]
        by_n = g.groupby("n_train_sentences")
        n = np.asarray(sorted(by_n.groups), dtype=float)
        mean = by_n["value"].mean().reindex(n).to_numpy() * scale
        lo = np.minimum(by_n["ci_low"].mean(), by_n["value"].min()).reindex(n).to_numpy() * scale
        hi = np.maximum(by_n["ci_high"].mean(), by_n["value"].max()).reindex(n).to_numpy() * scale
        colour = SERIES_COLOURS[i % len(SERIES_COLOURS)]
        label = pretty(str(encoder)) if str(layer) == str(encoder) else f"{pretty(str(encoder))} layer {layer}"
        ax.plot(n, mean, marker=MARKERS[i % len(MARKERS)], ms=4, color=colour, label=label)
        ax.fill_between(n, lo, hi, color=colour, alpha=0.15, linewidth=0)
    if results is not None:
        base = results[
            (results["task"].astype(str) == task)
            & (results["encoder"].astype(str) == BASELINE_ENCODER)
            & (results["dataset"].astype(str) == dataset)
            & (results["split"].astype(str) == split)
            & (results["metric"].astype(str) == name)
        ]
        for j, (layer, value) in enumerate(base.groupby("layer")["value"].mean().items()):
            ax.axhline(
                value * scale,
                color="0.35",
                lw=1,
                ls=BASELINE_STYLES[j % len(BASELINE_STYLES)],
                label=pretty(str(layer)),
            )
    ax.set_xscale("log")
    ax.set_xlabel("training sentences (log scale)")
    ax.set_ylabel(metric_info(name).label + (" (%)" if scale != 1 else ""))
    ax.set_title(f"How much data each layer needs: {task} ({dataset}/{split})")
    ax.legend(loc="lower right", frameon=False, fontsize=8)
    return fig
