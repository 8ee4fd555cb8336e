"""Figures that split a layer's score: by direction (the forward and backward halves of each biLSTM
layer against the whole layer) and by vocabulary (accuracy on tokens inside vs outside a vocabulary). Each
function draws on ``ax`` when given (else a new figure) and returns the Figure.

Input: a results table (DESIGN.md's contract) from a run with ``directions = true`` (layers ``"1f"``,
``"1b"``, ...) or ``oov_split = true`` (metrics ``accuracy-iv-NAME`` / ``accuracy-oov-NAME``). Seeds are
averaged by :func:`probing.results.aggregate.aggregate`.
"""

from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from probing.errors import InputError
from probing.figures.layers import select_rows
from probing.figures.style import OKABE_ITO, STYLE, figure_and_axes
from probing.layers import DIRECTIONS, has_halves
from probing.results import BASELINE_ENCODER, layer_sort_key
from probing.results import metric as metric_info
from probing.results.aggregate import aggregate

__all__ = ["DIRECTION_COLOURS", "directions", "oov_split"]

DIRECTION_COLOURS = {"forward": OKABE_ITO["blue"], "backward": OKABE_ITO["vermillion"], "both": OKABE_ITO["black"]}


def _one_encoder(rows: pd.DataFrame, encoder: str | None, task: str) -> str:
    encoders = sorted(set(rows["encoder"]) - {BASELINE_ENCODER})
    if encoder is None:
        if len(encoders) != 1:
            raise InputError(f"task {task!r}: encoders {encoders} have direction rows; pass encoder=")
        return encoders[0]
    if encoder not in encoders:
        raise InputError(f"task {task!r} has no direction rows for encoder {encoder!r}; available: {encoders}")
    return encoder


def _column(table: pd.DataFrame, keys: list[tuple[str, str]], metric: str, column: str) -> np.ndarray:
    """``column`` of ``metric`` for each (encoder, layer) of ``keys`` (NaN where absent)."""
    return np.array(
        [table.at[(e, lay, metric), column] if (e, lay, metric) in table.index else np.nan for e, lay in keys],
        dtype=float,
    )


def _errors(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Error-bar lengths ``(2, n)`` from a CI; a missing CI draws no bar."""
    return np.nan_to_num(np.vstack([values - lo, hi - values]), nan=0.0).clip(min=0.0)


def directions(
    results: pd.DataFrame,
    task: str,
    metric: str,
    *,
    encoder: str | None = None,
    dataset: str | None = None,
    split: str | None = None,
    ax: Axes | None = None,
) -> Figure:
    """Layer x {forward, backward, both}: ``metric`` (the task's headline) of each biLSTM layer's forward half
    ("1f"), backward half ("1b") and the whole layer ("1"), with 95 % CIs; layer 0 (no context) as a dashed line.

    Bars are drawn in the order layer 1 (forward, backward, both), layer 2 (...), in percent for fractions.
    """
    sub, dataset, split = select_rows(aggregate(results), task, metric, dataset, split)
    sub = sub[sub["metric"] == metric]
    halves = sub[sub["layer"].str.fullmatch(r"\d+[fb]")]
    if halves.empty:
        raise InputError(
            f"task {task!r} ({dataset}/{split}) has no forward/backward rows (layers 1f, 1b, ...): "
            "run it with directions = true in its [[tasks]] table"
        )
    encoder = _one_encoder(halves, encoder, task)
    sub = sub[sub["encoder"] == encoder].set_index("layer")
    layers = sorted({lay for lay in sub.index if has_halves(lay) and f"{lay}f" in sub.index}, key=layer_sort_key)
    info = metric_info(metric)
    kinds = {"forward": "f", "backward": "b", "both": ""}
    with matplotlib.rc_context(STYLE):
        fig, ax = figure_and_axes(ax, 1.6 + 1.5 * len(layers), 3.4)
        x = np.arange(len(layers))
        width = 0.26
        for j, (label, suffix) in enumerate(kinds.items()):
            names = [f"{lay}{suffix}" for lay in layers]
            present = [n in sub.index for n in names]
            vals = np.array([sub.at[n, "value"] if p else np.nan for n, p in zip(names, present)]) * info.scale
            lo = np.array([sub.at[n, "ci_low"] if p else np.nan for n, p in zip(names, present)]) * info.scale
            hi = np.array([sub.at[n, "ci_high"] if p else np.nan for n, p in zip(names, present)]) * info.scale
            ax.bar(
                x + (j - 1) * width,
                vals,
                width,
                yerr=_errors(vals, lo, hi),
                color=DIRECTION_COLOURS[label],
                label=label,
                capsize=3,
                zorder=2,
                gid=f"direction-{label}",
            )
        if "0" in sub.index:
            ax.axhline(sub.at["0", "value"] * info.scale, color="0.4", linestyle="--", linewidth=1, label="layer 0")
        ax.set_xticks(x, [f"layer {lay}" for lay in layers])
        ax.set_ylabel(info.label)
        ax.set_title(f"{task} ({dataset}/{split}), {encoder}: {' vs '.join(DIRECTIONS.values())} vs both")
        ax.legend(loc="lower right", frameon=False)
        top = np.nanmax(sub.loc[[n for lay in layers for n in (lay, f"{lay}f", f"{lay}b")], "ci_high"]) * info.scale
        bottom = np.nanmin(sub.loc[[n for lay in layers for n in (lay, f"{lay}f", f"{lay}b")], "ci_low"]) * info.scale
        if "0" in sub.index:
            bottom = min(bottom, sub.at["0", "value"] * info.scale)
        ax.set_ylim(max(0.0, bottom - 0.1 * (top - bottom) - 1), top + 0.05 * (top - bottom) + 1)
    return fig


def oov_split(
    results: pd.DataFrame,
    task: str,
    vocabulary: str = "glove",
    *,
    dataset: str | None = None,
    split: str | None = None,
    ax: Axes | None = None,
) -> Figure:
    """Accuracy on the tokens inside vs outside ``vocabulary`` (``glove`` or ``train``), one pair of bars
    per encoder and single layer (halves, mix and concat left out; baselines included), with 95 % CIs."""
    iv, oov = f"accuracy-iv-{vocabulary}", f"accuracy-oov-{vocabulary}"
    sub, dataset, split = select_rows(aggregate(results), task, None, dataset, split)
    sub = sub[sub["metric"].isin([iv, oov])]
    if sub.empty:
        raise InputError(
            f"task {task!r} ({dataset}/{split}) has no {iv}/{oov} rows: run it with oov_split = true "
            "in its [[tasks]] table"
        )
    sub = sub[~sub["layer"].str.fullmatch(r"\d+[fb]|mix|concat")]
    keys = sorted(
        {(e, lay) for e, lay in zip(sub["encoder"], sub["layer"])},
        key=lambda k: (k[0] == BASELINE_ENCODER, k[0], layer_sort_key(k[1])),
    )
    table = sub.set_index(["encoder", "layer", "metric"])
    with matplotlib.rc_context(STYLE):
        fig, ax = figure_and_axes(ax, 1.5 + 0.75 * len(keys), 3.4)
        x = np.arange(len(keys))
        width = 0.38
        for j, (name, label, colour) in enumerate(
            ((iv, "in vocabulary", OKABE_ITO["blue"]), (oov, "out of vocabulary", OKABE_ITO["orange"]))
        ):
            vals, lo, hi = (_column(table, keys, name, col) * 100 for col in ("value", "ci_low", "ci_high"))
            ax.bar(
                x + (j - 0.5) * width,
                vals,
                width,
                yerr=_errors(vals, lo, hi),
                color=colour,
                label=label,
                capsize=3,
                zorder=2,
                gid=f"oov-{'iv' if j == 0 else 'oov'}",
            )
        ax.set_xticks(x, [lay if e == BASELINE_ENCODER else f"{e}\n{lay}" for e, lay in keys], rotation=0, fontsize=8)
        ax.set_ylabel("accuracy (%)")
        what = {"glove": "GloVe's vocabulary", "train": "the model's training vocabulary"}.get(vocabulary, vocabulary)
        ax.set_title(f"{task} ({dataset}/{split}): tokens in vs out of {what}")
        ax.set_ylim(0, 105)
        ax.legend(loc="lower left", frameon=False)
    return fig
