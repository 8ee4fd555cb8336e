"""SyntaxGym figures (issue 40): accuracy by circuit beside the authors' models, and a suite's region plot.

Input tables: results rows of a ``syntaxgym`` task (``split`` = ``overall``, ``circuit:<name>``,
``suite:<name>``; ``layer`` = ``forward``, ``backward``, ``both``; reference rows with encoder ``reference``),
and :func:`probing.lm.region_surprisal`'s table (``suite``, ``item``, ``condition``, ``region``,
``surprisal_forward``, ``surprisal_backward``, bits). Accuracies are fractions, drawn in percent.
"""

from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from probing.errors import InputError
from probing.figures.splits import DIRECTION_COLOURS
from probing.figures.style import SERIES_COLOURS, STYLE, check_columns, listing, new_figure
from probing.results import RESULT_COLUMNS
from probing.results.aggregate import aggregate

DIRECTIONS = ("forward", "backward", "both")
REFERENCE_ENCODER = "reference"
# the authors' models drawn beside the model by default (the others stay in the table)
REFERENCE_LAYERS = {"grnn": "GRNN", "jrnn": "JRNN", "gpt-2": "GPT-2", "n-gram-bllip": "n-gram"}
REFERENCE_GREYS = ("0.8", "0.65", "0.45", "0.3")


def circuits_figure(
    results: pd.DataFrame,
    task: str,
    *,
    dataset: str | None = None,
    metric: str = "accuracy",
    references: dict[str, str] | None = None,
) -> Figure:
    """Accuracy of each encoder's forward, backward and both-direction LM per circuit and overall (the SG
    score), with 95 % bootstrap CIs, beside the reference rows present (``references``: layer -> legend,
    default GRNN, JRNN, GPT-2 and the n-gram). Horizontal bars, one group per circuit; each series is one bar
    container labelled with its legend entry (gid ``series-<encoder>-<layer>``)."""
    check_columns(results, RESULT_COLUMNS[:-1], "circuits_figure")
    rows = aggregate(results)
    rows = rows[(rows["task"] == task) & (rows["metric"] == metric)]
    if dataset is not None:
        rows = rows[rows["dataset"] == dataset]
    if rows.empty:
        raise InputError(
            f"no {metric!r} rows of task {task!r}"
            + (f" on {dataset!r}" if dataset else "")
            + f"; tasks: {listing(results['task'])}"
        )
    groups = [*sorted(s for s in set(rows["split"]) if s.startswith("circuit:")), "overall"]
    if not groups[:-1]:  # a suite of one's own has no circuit: draw its suites
        groups = [*sorted(s for s in set(rows["split"]) if s.startswith("suite:")), "overall"]
    encoders = [e for e in dict.fromkeys(rows["encoder"]) if e != REFERENCE_ENCODER]
    series: list[tuple[str, str, str, str]] = []
    for k, enc in enumerate(encoders):
        for j, d in enumerate(DIRECTIONS):
            if ((rows["encoder"] == enc) & (rows["layer"] == d)).any():
                colour = DIRECTION_COLOURS[d] if len(encoders) == 1 else SERIES_COLOURS[(3 * k + j) % 6]
                series.append((enc, d, d if len(encoders) == 1 else f"{enc} {d}", colour))
    refs = set(rows.loc[rows["encoder"] == REFERENCE_ENCODER, "layer"])
    wanted = REFERENCE_LAYERS if references is None else references
    for i, (layer, label) in enumerate(wanted.items()):
        if layer in refs:
            series.append((REFERENCE_ENCODER, layer, label, REFERENCE_GREYS[i % len(REFERENCE_GREYS)]))
    table = rows.set_index(["encoder", "layer", "split"])
    height = 0.8 / max(len(series), 1)
    with matplotlib.rc_context({**STYLE, "axes.grid.axis": "x"}):
        fig = new_figure(7.0, 1.2 + 0.075 * len(series) * len(groups))
        ax = fig.add_subplot()
        y = np.arange(len(groups))[::-1].astype(float)
        for j, (enc, layer, label, colour) in enumerate(series):
            keys = [(enc, layer, g) for g in groups]
            vals, lo, hi = (
                np.array([table[c].get(k, np.nan) for k in keys]) * 100 for c in ("value", "ci_low", "ci_high")
            )
            err = np.vstack([vals - lo, hi - vals])
            ax.barh(
                y + 0.4 - (j + 0.5) * height,
                vals,
                height,
                xerr=None if np.isnan(err).all() else np.nan_to_num(err),
                color=colour,
                label=label,
                error_kw={"capsize": 1.5, "elinewidth": 0.7},
                zorder=2,
                gid=f"series-{enc}-{layer}",
            )
        ax.set_yticks(y, [g.split(":", 1)[1] if ":" in g else "SG score (overall)" for g in groups])
        ax.set_xlim(0, 100)
        ax.set_xlabel(f"{metric} (%)")
        ax.set_title(f"{task} ({', '.join(sorted(set(rows['dataset'])))}): {metric} by circuit, each direction's LM")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return fig


def region_figure(
    regions: pd.DataFrame, suite: str, *, region_names: dict[int, str] | None = None, directions=("forward", "backward")
) -> Figure:
    """SyntaxGym's region plot of one suite: per direction (one panel each) the mean surprisal (bits) of
    each region in each condition over the suite's items, with the standard error of the mean; one line per
    condition (gid ``condition-<name>``), regions on the x axis (``region_names``: number -> name, e.g.
    :class:`probing.lm.syntaxgym.Suite`'s ``region_names``)."""
    check_columns(
        regions, ["suite", "item", "condition", "region", "surprisal_forward", "surprisal_backward"], "region_figure"
    )
    rows = regions[regions["suite"] == suite]
    if rows.empty:
        raise InputError(f"region_figure: no rows of suite {suite!r}; suites: {listing(regions['suite'])}")
    unknown = [d for d in directions if d not in DIRECTIONS[:2]]
    if unknown or not directions:
        raise InputError(f"region_figure: directions must be among forward, backward, got {list(directions)}")
    numbers = sorted(set(rows["region"].astype(int)))
    conditions = list(dict.fromkeys(rows["condition"]))
    with matplotlib.rc_context(STYLE):
        fig = new_figure(3.2 + 0.55 * len(numbers) * len(directions), 3.4)
        axes = fig.subplots(1, len(directions), sharey=True, squeeze=False)[0]
        for ax, d in zip(axes, directions):
            stats = rows.groupby(["condition", "region"])[f"surprisal_{d}"].agg(["mean", "sem"])
            for k, c in enumerate(conditions):
                s = stats.loc[c].reindex(numbers)
                ax.errorbar(
                    numbers,
                    s["mean"],
                    yerr=s["sem"].fillna(0),
                    label=c,
                    color=SERIES_COLOURS[k % len(SERIES_COLOURS)],
                    marker="o",
                    markersize=3,
                    capsize=2,
                    gid=f"condition-{c}",
                )
            names = region_names or {}
            ax.set_xticks(numbers, [names.get(n, str(n)) for n in numbers], rotation=35, ha="right")
            ax.set_title(f"{d} LM ({'left' if d == 'forward' else 'right'} context)")
            ax.set_xlabel("region")
        axes[0].set_ylabel("mean surprisal (bits)")
        axes[-1].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, title="condition")
        fig.suptitle(f"{suite}: surprisal by region and condition")
    return fig
