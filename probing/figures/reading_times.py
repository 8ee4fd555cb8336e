"""Reading-time figures (issue 40): mean reading time against surprisal, per direction, and a task's metrics.

Input tables: :func:`probing.lm.reading_times.read_corpus`'s words with surprisal columns added
(``surprisal_forward``, ``surprisal_backward``, ..., bits; ``rt``, ms), and results rows of a
``reading-times`` task (``layer`` = direction, or the reference's model; metrics ``delta-loglik``,
``pearson-r``).
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from probing.errors import InputError
from probing.figures.splits import DIRECTION_COLOURS
from probing.figures.style import STYLE, check_columns, listing, new_figure
from probing.results import RESULT_COLUMNS
from probing.results.aggregate import aggregate

REFERENCE_GREY = "0.55"


def reading_time_figure(
    words: pd.DataFrame, directions: Sequence[str] = ("forward", "backward"), bins: int = 10
) -> Figure:
    """Mean reading time against surprisal, one panel per direction: the words in ``bins`` bins of equal
    count by surprisal (a point per bin at its mean surprisal and mean RT, with the standard error), and the
    least-squares line through all the words (its slope, ms per bit, in the legend). ``directions``: names
    of ``surprisal_<name>`` columns (``forward``, ``backward``, ``both``, ``gpt3``, ``unigram``)."""
    columns = [f"surprisal_{d}" for d in directions]
    check_columns(words, ["rt", *columns], "reading_time_figure")
    if bins < 2:
        raise InputError(f"reading_time_figure: bins must be >= 2, got {bins}")
    with matplotlib.rc_context(STYLE):
        fig = new_figure(3.3 * len(directions) + 0.5, 3.3)
        axes = fig.subplots(1, len(directions), sharey=True, squeeze=False)[0]
        for ax, d, col in zip(axes, directions, columns):
            ok = np.isfinite(words[col].to_numpy(np.float64)) & np.isfinite(words.rt.to_numpy(np.float64))
            x, y = words[col].to_numpy(np.float64)[ok], words.rt.to_numpy(np.float64)[ok]
            if len(x) < bins:
                raise InputError(f"reading_time_figure: {col} has {len(x)} words, fewer than {bins} bins")
            order = np.argsort(x, kind="stable")
            groups = np.array_split(order, bins)
            mx = np.array([x[g].mean() for g in groups])
            my = np.array([y[g].mean() for g in groups])
            se = np.array([y[g].std(ddof=1) / np.sqrt(len(g)) if len(g) > 1 else 0.0 for g in groups])
            colour = DIRECTION_COLOURS.get(d, REFERENCE_GREY)
            ax.errorbar(
                mx, my, yerr=se, fmt="o", color=colour, markersize=4, capsize=2, label="binned mean", gid=f"bins-{d}"
            )
            slope, intercept = np.polyfit(x, y, 1)
            grid = np.linspace(x.min(), x.max(), 50)
            ax.plot(
                grid,
                intercept + slope * grid,
                color=colour,
                linewidth=1.2,
                label=f"fit: {slope:.1f} ms/bit",
                gid=f"fit-{d}",
            )
            ax.set_xlabel(f"{d} surprisal (bits)")
            ax.set_title(d)
            ax.legend(frameon=False, fontsize="small")
        axes[0].set_ylabel("mean reading time (ms)")
    return fig


def reading_times_metrics_figure(results: pd.DataFrame, task: str, *, dataset: str | None = None) -> Figure:
    """A ``reading-times`` task's ``delta-loglik`` and ``pearson-r`` (one panel each): a bar per encoder
    direction and per reference model, with the 95 % CIs; bars are labelled ``encoder layer``."""
    check_columns(results, RESULT_COLUMNS[:-1], "reading_times_metrics_figure")
    rows = aggregate(results)
    rows = rows[(rows["task"] == task) & rows["metric"].isin(["delta-loglik", "pearson-r"])]
    if dataset is not None:
        rows = rows[rows["dataset"] == dataset]
    if rows.empty:
        raise InputError(f"no reading-time rows of task {task!r}; tasks: {listing(results['task'])}")
    with matplotlib.rc_context(STYLE):
        fig = new_figure(8.0, 3.2)
        axes = fig.subplots(1, 2)
        for ax, metric, label in zip(axes, ("delta-loglik", "pearson-r"), ("ΔLogLik per word (nats)", "Pearson r")):
            sub = rows[rows["metric"] == metric]
            names = [f"{e} {l}" for e, l in zip(sub["encoder"], sub["layer"])]
            colours = [DIRECTION_COLOURS.get(l, REFERENCE_GREY) for l in sub["layer"]]
            v = sub["value"].to_numpy(np.float64)
            err = np.vstack([v - sub["ci_low"].to_numpy(np.float64), sub["ci_high"].to_numpy(np.float64) - v])
            ax.bar(np.arange(len(v)), v, yerr=np.nan_to_num(err), color=colours, capsize=2, gid=f"bars-{metric}")
            ax.set_xticks(np.arange(len(v)), names, rotation=35, ha="right")
            ax.axhline(0, color="0.3", linewidth=0.8)
            ax.set_ylabel(label)
        fig.suptitle(f"{task}: surprisal as a predictor of reading time")
    return fig
