"""Layer-comparison figures: a task's score per layer (one or several metrics), selectivity, and the
overview; each function returns a matplotlib ``Figure`` and writes nothing.

Input tables (all tidy ``pandas.DataFrame``\\ s):

* **results** (the contract in DESIGN.md): ``task, dataset, split, encoder, layer, metric, value,
  ci_low, ci_high, seed``. ``value``/``ci_low``/``ci_high`` of the metrics ``accuracy``, ``f1`` and
  ``control-accuracy`` are fractions in [0, 1] and ``selectivity`` is a difference of two such fractions
  in [-1, 1]; figures show them in percent. ``ci_low``/``ci_high`` may be NaN (no error bar). Rows that
  differ only in ``seed`` are averaged: one seed keeps its own CI, several seeds get a 95 % Student-t
  interval over the seed means (see :func:`aggregate`).
  A row's ``layer`` decides how it is drawn:

  - ``"0"``, ``"1"``, ... , ``"mix"``, ``"concat"``: a point of the series named by ``encoder``;
  - ``"<series>:<layer>"`` (e.g. ``"random-elmo:0"``): a point of the series ``<series>``;
  - anything else (``"majority"``, ``"most-frequent-tag"``, ``"glove"``, ``"wn-first-sense"``,
    ``"semcor-mfs"``, ...): a baseline, drawn as a labelled horizontal line.

* **scalar-mix weights**: ``task, encoder, layer, weight`` and optionally ``seed``; ``weight`` is the
  softmax-normalised weight s_j of layer ``layer`` (so the weights of one task/encoder/seed sum to 1).
* **per-tag accuracy**: ``task, encoder, layer, tag, n, accuracy`` and optionally ``seed``; ``n`` is the
  number of evaluation tokens whose gold tag is ``tag`` (the same for every layer) and ``accuracy`` the
  fraction of them the probe on ``layer`` labels correctly.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, cast

import matplotlib
import numpy as np
import pandas as pd
from matplotlib import transforms
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from probing.errors import InputError
from probing.figures.style import (
    BASELINE_STYLES,
    MARKERS,
    OKABE_ITO,
    SERIES_COLOURS,
    STYLE,
    figure_and_axes,
    listing,
    new_figure,
    percent_scale,
    pretty,
    signed,
)
from probing.layers import is_half
from probing.results import layer_sort_key
from probing.results import metric as metric_info
from probing.results.aggregate import aggregate

_LAYER_RE = re.compile(r"^(?:\d+|mix|concat)$")
_PREFIXED_LAYER_RE = re.compile(r"^(?P<series>.+):(?P<layer>\d+|mix|concat)$")


def split_layer(encoder: str, layer: str) -> tuple[str, str] | None:
    """``(series, layer)`` for a per-layer row, ``None`` for a baseline row (see module docstring)."""
    if _LAYER_RE.match(layer):
        return encoder, layer
    m = _PREFIXED_LAYER_RE.match(layer)
    if m:
        return m["series"], m["layer"]
    return None


def select_rows(
    agg: pd.DataFrame, task: str, metric: str | None, dataset: str | None, split: str | None
) -> tuple[pd.DataFrame, str, str]:
    """Rows of one task/dataset/split (and metric if given); raise naming what is missing or ambiguous."""
    sub = agg[agg["task"] == task]
    if sub.empty:
        raise InputError(f"task {task!r} not in results; available tasks: {listing(agg['task'])}")
    if dataset is None:
        datasets = sorted(set(sub["dataset"]))
        if len(datasets) > 1:
            raise InputError(f"task {task!r} has several datasets ({', '.join(datasets)}); pass dataset=")
        dataset = datasets[0]
    elif dataset not in set(sub["dataset"]):
        raise InputError(f"task {task!r} has no dataset {dataset!r}; available: {listing(sub['dataset'])}")
    sub = sub[sub["dataset"] == dataset]
    if split is None:
        splits = sorted(set(sub["split"]))
        split = "test" if "test" in splits else splits[0] if len(splits) == 1 else None
        if split is None:
            raise InputError(f"task {task!r}/{dataset!r} has several splits ({', '.join(splits)}); pass split=")
    elif split not in set(sub["split"]):
        raise InputError(f"task {task!r}/{dataset!r} has no split {split!r}; available: {listing(sub['split'])}")
    sub = sub[sub["split"] == split]
    if metric is not None:
        if metric not in set(sub["metric"]):
            raise InputError(
                f"task {task!r} ({dataset}/{split}) has no metric {metric!r}; available: {listing(sub['metric'])}"
            )
    return sub, dataset, split


def _series_and_baselines(rows: pd.DataFrame) -> tuple[dict[str, pd.DataFrame], list[tuple[str, float]]]:
    """Split one metric's aggregated rows into per-series layer rows and (label, value) baselines."""
    series: dict[str, list] = {}
    base_rows = []
    for r in rows.itertuples(index=False):
        if is_half(r.layer):  # one direction of a layer: drawn by probing.figures.directions
            continue
        parsed = split_layer(r.encoder, r.layer)
        if parsed is None:
            base_rows.append(r)
        else:
            series.setdefault(parsed[0], []).append((parsed[1], r.value, r.ci_low, r.ci_high, r.encoder, r.layer))
    out = {}
    for name, pts in series.items():
        df = pd.DataFrame(pts, columns=["layer", "value", "ci_low", "ci_high", "encoder", "raw"])
        dup = df[df["layer"].duplicated(keep=False)]
        if len(dup):
            rows_txt = " and ".join(f"encoder {e!r}, layer {r!r}" for e, r in zip(dup["encoder"], dup["raw"]))
            raise InputError(
                f"series {name!r} has two results for layer {dup['layer'].iloc[0]!r}: rows with {rows_txt}"
            )
        df = df.drop(columns=["encoder", "raw"])
        out[name] = df.sort_values("layer", key=lambda s: s.map(layer_sort_key)).reset_index(drop=True)
    baselines: list[tuple[str, float]] = []
    by_name: dict[str, list] = {}
    for r in base_rows:
        by_name.setdefault(r.layer, []).append(r)
    for name, rs in by_name.items():
        values = {round(r.value, 12) for r in rs}
        if len(values) == 1:
            baselines.append((pretty(name), rs[0].value))
        else:
            baselines.extend((f"{pretty(name)} ({pretty(r.encoder)})", r.value) for r in rs)
    baselines.sort(key=lambda b: -b[1])
    return out, baselines


def _repel(ys: Sequence[float], gap: float, lo: float = 0.0, hi: float = 1.0) -> list[float]:
    """Move sorted-or-not positions apart by at least ``gap`` (same units), keeping them in [lo, hi]."""
    order = sorted(range(len(ys)), key=lambda i: ys[i])
    pos = [min(max(ys[i], lo), hi) for i in order]
    for i in range(1, len(pos)):
        pos[i] = max(pos[i], pos[i - 1] + gap)
    if pos and pos[-1] > hi:
        pos[-1] = hi
        for i in range(len(pos) - 2, -1, -1):
            pos[i] = min(pos[i], pos[i + 1] - gap)
    out = [0.0] * len(ys)
    for k, i in enumerate(order):
        out[i] = pos[k]
    return out


def _draw_layer_scores(ax: Axes, rows: pd.DataFrame, metric: str, clip_baselines: bool) -> None:
    """Draw series points with CI bars and baseline lines on ``ax`` (rows: one metric, aggregated)."""
    scale = percent_scale(metric)
    series, baselines = _series_and_baselines(rows)
    if not series:
        raise InputError(
            f"no per-layer results for metric {metric!r}: every row is a baseline (layers: {listing(rows['layer'])})"
        )
    layers = sorted({lay for df in series.values() for lay in df["layer"]}, key=layer_sort_key)
    xpos = {lay: i for i, lay in enumerate(layers)}
    n = len(series)
    dodge = 0.08 if n > 1 else 0.0
    handles: list[Any] = []
    s_lo, s_hi = math.inf, -math.inf
    for i, (name, df) in enumerate(series.items()):
        colour, marker = SERIES_COLOURS[i % len(SERIES_COLOURS)], MARKERS[i % len(MARKERS)]
        x = np.array([xpos[lay] for lay in df["layer"]], dtype=float) + (i - (n - 1) / 2) * dodge
        y = df["value"].to_numpy() * scale
        lo = df["ci_low"].to_numpy() * scale
        hi = df["ci_high"].to_numpy() * scale
        yerr = np.vstack([np.nan_to_num(y - lo), np.nan_to_num(hi - y)])
        numeric = df["layer"].str.isdigit().to_numpy()
        if numeric.sum() > 1:
            ax.plot(x[numeric], y[numeric], color=colour, linewidth=1.5, alpha=0.8, zorder=2)
        h = ax.errorbar(
            x,
            y,
            yerr=yerr,
            fmt=marker,
            color=colour,
            markersize=6,
            capsize=3.5,
            elinewidth=1.2,
            markeredgecolor="white",
            markeredgewidth=0.7,
            label=pretty(name),
            zorder=3,
        )
        handles.append(h)
        if numeric.sum() > 1:  # ring the best single layer, as the terminal summary stars it
            pick = np.nanargmax if metric_info(metric).higher_is_better else np.nanargmin
            best = np.flatnonzero(numeric)[pick(y[numeric])]
            ax.scatter(
                x[best], y[best], s=190, facecolors="none", edgecolors=colour, linewidths=1.5, zorder=4, gid="best"
            )
        s_lo = min(s_lo, np.nanmin(np.fmin(lo, y)))
        s_hi = max(s_hi, np.nanmax(np.fmax(hi, y)))

    span = max(s_hi - s_lo, 1.0 if scale == 100 else 1e-6)
    near: list[tuple[str, float]] = []
    far: list[tuple[str, float]] = []
    for name, v in baselines:
        inside = not clip_baselines or s_lo - 2 * span <= v * scale <= s_hi + 2 * span
        (near if inside else far).append((name, v * scale))
    y_lo = min([s_lo] + [v for _, v in near])
    y_hi = max([s_hi] + [v for _, v in near])
    pad = 0.08 * max(y_hi - y_lo, 1.0 if scale == 100 else 1e-6)
    ax.set_ylim(y_lo - pad, y_hi + pad)
    ax.set_xlim(-0.5, len(layers) - 0.5)
    ax.set_xticks(range(len(layers)), [pretty(lay) if not lay.isdigit() else lay for lay in layers])
    n_numeric = sum(lay.isdigit() for lay in layers)
    if 0 < n_numeric < len(layers):
        ax.axvline(n_numeric - 0.5, color="0.6", linewidth=0.8, linestyle=":", zorder=1)

    label_y: list[float] = []
    label_text: list[str] = []
    anchor_y: list[float | None] = []
    digits = ".1f" if scale == 100 else ".2f"
    for k, (name, v) in enumerate(near):
        ax.axhline(
            v, color="0.15", linewidth=1.2, linestyle=BASELINE_STYLES[k % len(BASELINE_STYLES)], label=name, zorder=1
        )
        frac = (v - (y_lo - pad)) / (y_hi - y_lo + 2 * pad)
        label_y.append(frac)
        anchor_y.append(frac)
        label_text.append(f"{name} {v:{digits}}")
    for name, v in far:
        below = v < y_lo
        label_y.append(0.0 if below else 1.0)
        anchor_y.append(None)
        label_text.append(f"{'▼' if below else '▲'} {name} {v:{digits}} (off scale)")
    if label_y:
        fig_h = cast(Figure, ax.figure).get_figheight() * 72 * 0.72
        gap = 1.35 * matplotlib.rcParams["font.size"] * 0.9 / fig_h
        placed = _repel(label_y, gap)
        trans = transforms.blended_transform_factory(ax.transAxes, ax.transAxes)
        for text, y_anchor, y_text in zip(label_text, anchor_y, placed):
            ax.annotate(
                text,
                xy=(1.0, y_anchor if y_anchor is not None else y_text),
                xycoords=trans,
                xytext=(1.03, y_text),
                textcoords=trans,
                va="center",
                ha="left",
                fontsize=8.5,
                color="0.1",
                arrowprops=None
                if y_anchor is None or abs(y_anchor - y_text) < 1e-3
                else {"arrowstyle": "-", "color": "0.5", "linewidth": 0.6},
                annotation_clip=False,
            )
    ax.set_xlabel("layer (0 = context-free token layer)")
    ax.set_ylabel(metric_info(metric).label)
    if any(c.get_gid() == "best" for c in ax.collections):
        handles.append(
            Line2D([], [], marker="o", linestyle="", markersize=10, markerfacecolor="none", color="0.3",
                   label="best single layer")
        )  # fmt: skip
    ax.legend(handles=handles, loc="best", frameon=True, framealpha=0.9, edgecolor="0.8")


def panel_title(task: str, dataset: str, split: str) -> str:
    return f"{task} ({dataset}, {split})"


def layer_scores(
    results: pd.DataFrame,
    task: str,
    metric: str,
    *,
    dataset: str | None = None,
    split: str | None = None,
    clip_baselines: bool = True,
    ax: Axes | None = None,
) -> Figure:
    """Score of ``task`` per layer: one series per encoder (mean over seeds, CI bars), baselines as lines.

    ``metric``: the task's headline (:func:`probing.tasks.headline_metrics`) or any other metric it has; its
    registered ``higher_is_better`` orients the figure. ``dataset`` is needed only when the task has several;
    ``split`` defaults to ``"test"`` when the task has several. With ``clip_baselines`` a baseline far
    outside the layer scores (more than twice their spread away) is named at the axis edge with an arrow
    instead of squeezing the layers into a sliver of the axis. With ``ax`` (e.g. from ``plt.subplots``) the
    panel is drawn there and its figure returned.
    """
    rows, dataset, split = select_rows(aggregate(results), task, metric, dataset, split)
    with matplotlib.rc_context(STYLE):
        fig, ax = figure_and_axes(ax, 6.4, 4.2)
        _draw_layer_scores(ax, rows[rows["metric"] == metric], metric, clip_baselines)
        ax.set_title(f"{panel_title(task, dataset, split)}: {metric_info(metric).label.split(' (')[0]} per layer")
    return fig


def layer_scores_panels(
    results: pd.DataFrame,
    task: str,
    metrics: Sequence[str],
    *,
    dataset: str | None = None,
    split: str | None = None,
    clip_baselines: bool = True,
) -> Figure:
    """Several metrics of one task side by side, each drawn as :func:`layer_scores` draws one (e.g. UUAS
    and DSpr. of a structural probe). Metrics the task does not have are an error."""
    if not metrics:
        raise InputError("layer_scores_panels: give at least one metric")
    agg = aggregate(results)
    rows, dataset, split = select_rows(agg, task, None, dataset, split)
    missing = [m for m in metrics if m not in set(rows["metric"])]
    if missing:
        raise InputError(
            f"task {task!r} ({dataset}/{split}) has no metric(s) {missing}; available: {listing(rows['metric'])}"
        )
    with matplotlib.rc_context(STYLE):
        fig = new_figure(5.6 * len(metrics), 4.2)
        axes = fig.subplots(1, len(metrics), squeeze=False)[0]
        for ax, name in zip(axes, metrics):
            _draw_layer_scores(ax, rows[rows["metric"] == name], name, clip_baselines)
            ax.set_title(metric_info(name).label.split(" (")[0])
        fig.suptitle(f"{panel_title(task, dataset, split)}: per layer")
    return fig


def selectivity(results: pd.DataFrame, task: str, *, dataset: str | None = None, split: str | None = None) -> Figure:
    """Task vs control-task accuracy per layer (bars with CIs), selectivity written above; one panel per encoder.

    Needs ``accuracy`` and ``control-accuracy`` rows for the same layers; ``selectivity`` rows are used
    when present, else selectivity is computed as accuracy - control accuracy (Hewitt & Liang, 2019).
    """
    agg = aggregate(results)
    rows, dataset, split = select_rows(agg, task, None, dataset, split)
    for need in ("accuracy", "control-accuracy"):
        if need not in set(rows["metric"]):
            raise InputError(
                f"task {task!r} ({dataset}/{split}) has no {need!r} rows, needed for the selectivity figure; "
                f"metrics present: {listing(rows['metric'])}"
            )
    per_series: dict[str, dict[str, dict[str, tuple[float, float, float]]]] = {}
    for r in rows.itertuples(index=False):
        parsed = split_layer(r.encoder, r.layer)
        if parsed is None or r.metric not in ("accuracy", "control-accuracy", "selectivity"):
            continue
        per_series.setdefault(parsed[0], {}).setdefault(parsed[1], {})[r.metric] = (r.value, r.ci_low, r.ci_high)
    panels = {
        name: {
            lay: m
            for lay, m in sorted(layers.items(), key=lambda kv: layer_sort_key(kv[0]))
            if "accuracy" in m and "control-accuracy" in m
        }
        for name, layers in per_series.items()
    }
    panels = {name: layers for name, layers in panels.items() if layers}
    if not panels:
        raise InputError(f"task {task!r} ({dataset}/{split}): no layer has both 'accuracy' and 'control-accuracy' rows")
    with matplotlib.rc_context(STYLE):
        fig = new_figure(max(5.0, 3.4 * len(panels)), 4.4)
        axes = fig.subplots(1, len(panels), sharey=True, squeeze=False)[0]
        for ax, (name, layers) in zip(axes, panels.items()):
            x = np.arange(len(layers))
            width = 0.38
            for k, (metric, colour, label) in enumerate(
                (
                    ("accuracy", OKABE_ITO["blue"], f"{task} accuracy"),
                    ("control-accuracy", OKABE_ITO["orange"], "control-task accuracy"),
                )
            ):
                v = np.array([layers[lay][metric][0] for lay in layers]) * 100
                lo = np.array([layers[lay][metric][1] for lay in layers]) * 100
                hi = np.array([layers[lay][metric][2] for lay in layers]) * 100
                yerr = np.vstack([np.nan_to_num(v - lo), np.nan_to_num(hi - v)])
                ax.bar(
                    x + (k - 0.5) * width,
                    v,
                    width,
                    yerr=yerr,
                    color=colour,
                    label=label,
                    capsize=3,
                    error_kw={"elinewidth": 1.0, "ecolor": "0.2"},
                    zorder=2,
                )
            for xi, lay in zip(x, layers):
                m = layers[lay]
                sel = m["selectivity"][0] if "selectivity" in m else m["accuracy"][0] - m["control-accuracy"][0]
                top = max(
                    m["accuracy"][2] if not math.isnan(m["accuracy"][2]) else m["accuracy"][0],
                    m["control-accuracy"][2] if not math.isnan(m["control-accuracy"][2]) else m["control-accuracy"][0],
                )
                ax.annotate(
                    f"sel. {signed(sel * 100, plus=False)}",
                    xy=(xi, top * 100),
                    xytext=(0, 4),
                    textcoords="offset points",
                    ha="center",
                    va="bottom",
                    fontsize=8.5,
                )
            ax.set_xticks(x, [lay if lay.isdigit() else pretty(lay) for lay in layers])
            ax.set_ylim(0, 112)
            ax.set_yticks(range(0, 101, 20))
            ax.set_title(pretty(name))
            ax.set_xlabel("layer")
        axes[0].set_ylabel("accuracy (%)")
        fig.suptitle(f"{panel_title(task, dataset, split)}: control-task selectivity")
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(
            handles,
            labels,
            loc="outside lower center",
            ncol=2,
            frameon=False,
            title="sel. = accuracy − control-task accuracy (percentage points)",
            title_fontsize=8.5,
        )
    return fig


def overview(
    results: pd.DataFrame,
    panels: Mapping[str, str],
    *,
    datasets: Mapping[str, str] | None = None,
    split: str | None = None,
) -> Figure:
    """Side-by-side layer plots for the README, one panel per task of ``panels`` (task -> the metric drawn,
    its headline; :func:`probing.tasks.overview_panels` gives the report's: one POS-tagging task and one WSD
    task). Every task named must be present."""
    agg = aggregate(results)
    present = list(dict.fromkeys(agg["task"]))
    if not panels:
        raise InputError(f"overview: no panels given; results have: {', '.join(present) or '(none)'}")
    tasks = list(panels)
    missing = [t for t in tasks if t not in present]
    if missing:
        raise InputError(f"overview: task(s) {missing} not in results; available tasks: {', '.join(present)}")
    datasets = dict(datasets or {})
    with matplotlib.rc_context(STYLE):
        fig = new_figure(5.6 * len(tasks), 4.2)
        axes = fig.subplots(1, len(tasks), squeeze=False)[0]
        for ax, task in zip(axes, tasks):
            metric = panels[task]
            rows, ds, sp = select_rows(agg, task, metric, datasets.get(task), split)
            _draw_layer_scores(ax, rows[rows["metric"] == metric], metric, clip_baselines=True)
            ax.set_title(panel_title(task, ds, sp))
        fig.suptitle("ELMo probes, layer by layer")
    return fig
