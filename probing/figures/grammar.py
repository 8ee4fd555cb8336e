"""Grammar figures (issue 29): minimal-pair accuracy by phenomenon beside the BLiMP authors' models and humans,
and subject-verb agreement accuracy against the number of attractors.

Input tables: results rows of a ``minimal-pairs`` task (``split`` = ``overall``, ``phenomenon:<name>``,
``paradigm:<group>``; ``layer`` = ``forward``, ``backward``, ``both``; reference rows with encoder
``reference``), and for agreement :func:`probing.lm.agreement.agreement_probe`'s rows (``layer``, ``group``,
``accuracy``, ``ci_low``, ``ci_high``) and :func:`probing.lm.minimal_pairs`' rows on agreement items
(``layer``, ``level``, ``group``, ``metric``, ``value``, ``ci_low``, ``ci_high``). Values are fractions,
drawn in percent.
"""

from __future__ import annotations

import re

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from probing.errors import InputError
from probing.figures.splits import DIRECTION_COLOURS
from probing.figures.style import MARKERS, OKABE_ITO, SERIES_COLOURS, STYLE, check_columns, listing, new_figure
from probing.results import RESULT_COLUMNS
from probing.results.aggregate import aggregate

DIRECTIONS = ("forward", "backward", "both")
REFERENCE_ENCODER = "reference"
# the BLiMP authors' models and humans drawn beside the model (their Transformer-XL rows stay in the table)
REFERENCE_LAYERS = {"5-gram": "5-gram", "lstm": "LSTM", "gpt2": "GPT-2", "human": "human"}
REFERENCE_COLOURS = {"5-gram": "0.78", "lstm": "0.6", "gpt2": "0.4", "human": OKABE_ITO["bluish green"]}


def _groups(rows: pd.DataFrame) -> tuple[list[str], str]:
    """The splits drawn (phenomena when the data has them, else paradigms; then ``overall``) and their level."""
    splits = list(dict.fromkeys(rows["split"]))
    phenomena = sorted(s for s in splits if s.startswith("phenomenon:"))
    if phenomena:
        return [*phenomena, "overall"], "phenomenon"
    return [*sorted(s for s in splits if s.startswith("paradigm:")), "overall"], "paradigm"


def minimal_pairs_figure(
    results: pd.DataFrame, task: str, *, dataset: str | None = None, metric: str = "accuracy"
) -> Figure:
    """Accuracy of each encoder's forward, backward and both-direction LM per phenomenon (BLiMP; per group for
    your own pairs) and overall, with 95 % bootstrap CIs, beside the reference rows (the BLiMP authors' 5-gram,
    LSTM, GPT-2 and humans) where present; chance (50 %) as a dashed line. Horizontal bars, one group of bars
    per phenomenon; each series is one bar container labelled with its legend entry."""
    check_columns(results, RESULT_COLUMNS[:-1], "minimal_pairs_figure")
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
    datasets = sorted(set(rows["dataset"]))
    if len(datasets) > 1:
        raise InputError(f"task {task!r} has several datasets ({', '.join(datasets)}): pass dataset=")
    groups, level = _groups(rows)
    series: list[tuple[str, str, str, str]] = []  # (encoder, layer, legend, colour)
    encoders = [e for e in dict.fromkeys(rows["encoder"]) if e != REFERENCE_ENCODER]
    shades = {"forward": 0, "backward": 1, "both": 2}
    for k, enc in enumerate(encoders):
        for d in DIRECTIONS:
            if ((rows["encoder"] == enc) & (rows["layer"] == d)).any():
                colour = DIRECTION_COLOURS[d] if len(encoders) == 1 else SERIES_COLOURS[(3 * k + shades[d]) % 6]
                series.append((enc, d, d if len(encoders) == 1 else f"{enc} {d}", colour))
    refs = rows[rows["encoder"] == REFERENCE_ENCODER]
    for layer, label in REFERENCE_LAYERS.items():
        if (refs["layer"] == layer).any():
            series.append((REFERENCE_ENCODER, layer, label, REFERENCE_COLOURS[layer]))
    table = rows.set_index(["encoder", "layer", "split"])
    n, height = len(series), 0.8 / max(len(series), 1)
    with matplotlib.rc_context({**STYLE, "axes.grid.axis": "x"}):
        fig = new_figure(7.0, 1.2 + 0.075 * n * len(groups))
        ax: Axes = fig.add_subplot()
        y = np.arange(len(groups))[::-1].astype(float)
        for j, (enc, layer, label, colour) in enumerate(series):
            keys = [(enc, layer, g) for g in groups]
            vals = np.array([table["value"].get(k, np.nan) for k in keys]) * 100
            lo = np.array([table["ci_low"].get(k, np.nan) for k in keys]) * 100
            hi = np.array([table["ci_high"].get(k, np.nan) for k in keys]) * 100
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
        ax.axvline(50, color="0.3", linestyle="--", linewidth=1, label="chance", zorder=3)
        names = [g.split(":", 1)[1].replace("_", " ") if ":" in g else g for g in groups]
        ax.set_yticks(y, names)
        ax.set_xlim(0, 100)
        ax.set_xlabel(f"{metric} (%)")
        what = "phenomenon" if level == "phenomenon" else "group"
        ax.set_title(f"{task} ({datasets[0]}): {metric} by {what}, each direction's LM")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return fig


def _attractors(group: str) -> str | None:
    """``attractors=2`` -> ``"2"``, ``attractors=3+`` -> ``"3+"``; None for ``overall``."""
    m = re.fullmatch(r"attractors=(\d+\+?)", str(group))
    return m[1] if m else None


def agreement_figure(probe: pd.DataFrame | None = None, lm: pd.DataFrame | None = None) -> Figure:
    """Subject-verb agreement accuracy against the number of attractors (nouns of the other number between
    subject and verb): one panel for the LM (``lm``: forward, backward, both) and one for the number probes
    (``probe``: one line per layer or direction half, ``1f``, ``1b``, ...), with 95 % CIs; chance at 50 %.
    Each line is labelled with its layer or direction."""
    panels: list[tuple[str, pd.DataFrame]] = []
    if lm is not None and len(lm):
        check_columns(lm, ["layer", "group", "metric", "value", "ci_low", "ci_high"], "agreement_figure(lm=)")
        sub = lm[lm["metric"] == "accuracy"]
        panels.append(("LM: prefers the right verb form", sub.rename(columns={"value": "accuracy"})))
    if probe is not None and len(probe):
        check_columns(probe, ["layer", "group", "accuracy", "ci_low", "ci_high"], "agreement_figure(probe=)")
        panels.append(("probe: subject's number from the word before the verb", probe))
    if not panels:
        raise InputError("agreement_figure: give probe= (agreement_probe rows) and/or lm= (minimal_pairs rows)")
    with matplotlib.rc_context(STYLE):
        fig = new_figure(4.2 * len(panels) + 1.2, 3.4)
        axes = fig.subplots(1, len(panels), sharey=True, squeeze=False)[0]
        for ax, (title, rows) in zip(axes, panels):
            rows = rows.assign(attractors=[_attractors(g) for g in rows["group"]]).dropna(subset=["attractors"])
            ticks = sorted(set(rows["attractors"]), key=lambda a: int(a.rstrip("+")))
            x = {a: i for i, a in enumerate(ticks)}
            layers = list(dict.fromkeys(rows["layer"]))
            for k, layer in enumerate(layers):
                one = rows[rows["layer"] == layer].sort_values("attractors", key=lambda s: s.map(x))
                xs = one["attractors"].map(x).to_numpy()
                vals = one["accuracy"].to_numpy() * 100
                err = np.vstack([vals - one["ci_low"].to_numpy() * 100, one["ci_high"].to_numpy() * 100 - vals])
                colour = DIRECTION_COLOURS.get(str(layer), SERIES_COLOURS[k % len(SERIES_COLOURS)])
                ax.errorbar(
                    xs,
                    vals,
                    yerr=np.nan_to_num(err),
                    color=colour,
                    marker=MARKERS[k % len(MARKERS)],
                    capsize=3,
                    label=str(layer),
                    gid=f"line-{layer}",
                )
            ax.axhline(50, color="0.4", linestyle="--", linewidth=1)
            ax.set_xticks(range(len(ticks)), ticks)
            ax.set_xlabel("attractors")
            ax.set_title(title, fontsize=10)
            ax.legend(frameon=False, fontsize=8)
        axes[0].set_ylabel("accuracy (%)")
        fig.suptitle("Subject-verb agreement: accuracy vs attractors")
    return fig
