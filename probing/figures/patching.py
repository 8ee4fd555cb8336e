"""The interchange-intervention heat map (issue 39): layer x position class, per direction, with the probe's
accuracy at the same sites beside it ("used from there" beside "decodable there").

Input: results rows of an ``agreement-patching`` task (``split`` = the position class, ``layer`` =
``forward-<k>`` or ``backward-<k>``); the caller names the metrics.
"""

from __future__ import annotations

import re

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from probing.errors import InputError
from probing.figures.style import STYLE, check_columns, listing, new_figure
from probing.results import RESULT_COLUMNS
from probing.results.aggregate import aggregate

SITE = re.compile(r"^(forward|backward)-(\d+)$")
CLASS_ORDER = ("subject", "attractor", "before-verb")


def iia_heatmap(
    results: pd.DataFrame,
    task: str,
    *,
    dataset: str | None = None,
    metric: str = "interchange-accuracy",
    beside: str = "number-probe-accuracy",
) -> Figure:
    """Heat maps of ``metric`` and ``beside`` (percent) over layer (rows) x position class (columns), one pair of
    panels per direction; each cell prints its value, an empty cell is a class without pairs. Rows of several
    layers at once (``forward-all``) are left out."""
    check_columns(results, RESULT_COLUMNS[:-1], "iia_heatmap")
    rows = aggregate(results)
    rows = rows[(rows["task"] == task) & rows["metric"].isin([metric, beside])]
    if dataset is not None:
        rows = rows[rows["dataset"] == dataset]
    rows = rows[rows["layer"].astype(str).str.match(SITE)]
    if rows.empty:
        raise InputError(f"no {metric!r} rows per site of task {task!r}; tasks: {listing(results['task'])}")
    classes = [c for c in CLASS_ORDER if c in set(rows["split"])] + sorted(set(rows["split"]) - set(CLASS_ORDER))
    layers = sorted({int(SITE.match(str(v))[2]) for v in rows["layer"]})  # type: ignore[index]
    directions = [d for d in ("forward", "backward") if rows["layer"].astype(str).str.startswith(d).any()]
    with matplotlib.rc_context({**STYLE, "axes.grid": False}):
        fig = new_figure(2.2 * 2 * len(directions) + 0.6, 0.55 * len(layers) + 1.4)
        axes = fig.subplots(1, 2 * len(directions), squeeze=False)[0]
        for k, (d, name) in enumerate((d, m) for d in directions for m in (metric, beside)):
            grid = np.full((len(layers), len(classes)), np.nan)
            sel = rows[rows["metric"] == name]
            for r in sel.itertuples(index=False):
                m = SITE.match(str(r.layer))
                if m and m[1] == d:
                    grid[layers.index(int(m[2])), classes.index(str(r.split))] = 100 * float(r.value)
            ax = axes[k]
            image = ax.imshow(grid, vmin=0, vmax=100, cmap="viridis", aspect="auto")
            for (i, j), v in np.ndenumerate(grid):
                if np.isfinite(v):
                    ax.text(j, i, f"{v:.0f}", ha="center", va="center", color="white" if v < 60 else "black")
            ax.set_xticks(range(len(classes)), classes, rotation=30, ha="right")
            ax.set_yticks(range(len(layers)), [str(x) for x in layers])
            ax.set_ylabel("layer" if k == 0 else "")
            label = "IIA" if name == metric else "probe"
            ax.set_title(f"{d}: {label} (%)", fontsize="medium")
        fig.colorbar(image, ax=list(axes), shrink=0.8)
        fig.suptitle(f"{task}: interchange accuracy beside the probe's accuracy", fontsize="medium")
    return fig
