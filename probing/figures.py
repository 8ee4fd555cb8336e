"""Layer-comparison figures: one function per figure, each returns a matplotlib ``Figure``.

No function here reads or writes files; :func:`save` writes a figure atomically.

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
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import matplotlib
import numpy as np
import pandas as pd
from matplotlib import transforms
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from scipy import stats

from probing._io import atomic_path
from probing.errors import InputError
from probing.layers import is_half
from probing.results import RESULT_COLUMNS, headline_metrics, layer_sort_key, validate_results
from probing.results import metric as metric_info

__all__ = [
    "OKABE_ITO",
    "RESULT_COLUMNS",
    "WEIGHT_COLUMNS",
    "PER_TAG_COLUMNS",
    "aggregate",
    "split_layer",
    "layer_sort_key",
    "default_metric",
    "layer_scores",
    "layer_scores_panels",
    "selectivity",
    "mix_weights",
    "tag_gains",
    "overview",
    "save",
]

WEIGHT_COLUMNS = ("task", "encoder", "layer", "weight")
PER_TAG_COLUMNS = ("task", "encoder", "layer", "tag", "n", "accuracy")

# Okabe & Ito (2008), "Color Universal Design": distinguishable under the common colour-vision deficiencies.
OKABE_ITO = {
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "bluish green": "#009E73",
    "reddish purple": "#CC79A7",
    "orange": "#E69F00",
    "sky blue": "#56B4E9",
    "yellow": "#F0E442",
    "black": "#000000",
}
_SERIES_COLOURS = [OKABE_ITO[c] for c in ("blue", "vermillion", "bluish green", "reddish purple", "orange", "sky blue")]
_MARKERS = ["o", "s", "^", "D", "v", "P"]
_BASELINE_STYLES = [(0, (5, 2)), (0, (1, 1.5)), (0, (6, 2, 1, 2)), (0, (3, 3)), (0, (8, 3)), (0, (2, 3))]

_PRETTY = {
    "elmo": "ELMo",
    "random-elmo": "random ELMo",
    "glove": "GloVe",
    "majority": "majority class",
    "most-frequent-tag": "most frequent tag",
    "wn-first-sense": "WordNet 1st sense",
    "semcor-mfs": "SemCor MFS",
    "mix": "scalar mix",
    "concat": "concat",
    "position": "linear position",
}
_LAYER_RE = re.compile(r"^(?:\d+|mix|concat)$")
_PREFIXED_LAYER_RE = re.compile(r"^(?P<series>.+):(?P<layer>\d+|mix|concat)$")

_STYLE: Any = {  # rcParams (Any: matplotlib types each key as its own literal)
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "legend.fontsize": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.grid.axis": "y",
    "grid.alpha": 0.35,
    "grid.linewidth": 0.6,
    "svg.hashsalt": "probing",
    "svg.fonttype": "path",
}


def _pretty(name: str) -> str:
    return _PRETTY.get(name, name)


def _signed(v: float, plus: bool = True) -> str:
    """One decimal with a typographic minus (and a plus sign when ``plus``), as on matplotlib's axes."""
    return (f"{v:+.1f}" if plus else f"{v:.1f}").replace("-", "\u2212")


def split_layer(encoder: str, layer: str) -> tuple[str, str] | None:
    """``(series, layer)`` for a per-layer row, ``None`` for a baseline row (see module docstring)."""
    if _LAYER_RE.match(layer):
        return encoder, layer
    m = _PREFIXED_LAYER_RE.match(layer)
    if m:
        return m["series"], m["layer"]
    return None


def _check_columns(df: pd.DataFrame, required: Iterable[str], what: str) -> None:
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"{what}: expected a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise InputError(f"{what}: missing column(s) {missing}; expected columns {list(required)}")


def _check_results(results: pd.DataFrame) -> pd.DataFrame:
    """Validate the results contract (:func:`probing.results.validate_results`) and return a typed copy."""
    _check_columns(results, RESULT_COLUMNS, "results")
    return validate_results(results)


_KEYS = ["task", "dataset", "split", "encoder", "layer", "metric"]


def aggregate(results: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """Average over seeds: one row per ``task, dataset, split, encoder, layer, metric``.

    Columns: those keys plus ``value`` (mean over seeds), ``ci_low``, ``ci_high`` and ``n_seeds``.
    With one seed the row's own CI is kept; with several, the CI is the Student-t interval of the mean
    of the seed values (seed-to-seed variation), at ``confidence``.
    """
    df = _check_results(results)
    seed_key = df["seed"].astype(str)
    dup = df.assign(_seed=seed_key).duplicated(subset=_KEYS + ["_seed"], keep=False)
    if dup.any():
        r = df[dup].iloc[0]
        raise InputError(
            "results: duplicate rows for "
            + ", ".join(f"{k}={r[k]!r}" for k in _KEYS + ["seed"])
            + "; each key and seed must appear once"
        )
    rows = []
    for key, g in df.groupby(_KEYS, sort=False):
        n = len(g)
        mean = float(g["value"].mean())
        if n == 1:
            lo, hi = float(g["ci_low"].iloc[0]), float(g["ci_high"].iloc[0])
        else:
            half = stats.t.ppf(0.5 + confidence / 2, n - 1) * g["value"].std(ddof=1) / math.sqrt(n)
            lo, hi = mean - half, mean + half
        rows.append((*key, mean, lo, hi, n))
    return pd.DataFrame(rows, columns=_KEYS + ["value", "ci_low", "ci_high", "n_seeds"])


def default_metric(results: pd.DataFrame, task: str, headlines: Mapping[str, str] | None = None) -> str:
    """The headline metric of ``task`` (:func:`probing.results.headline_metrics`; ``headlines``, e.g. from a
    run's provenance, takes precedence)."""
    sub = results[results["task"].astype(str) == task]
    if sub.empty:
        raise InputError(f"task {task!r} not in results; available tasks: {_names(results['task'])}")
    return headline_metrics(sub, headlines)[task]


def _names(values: Iterable) -> str:
    return ", ".join(sorted({str(v) for v in values})) or "(none)"


def _select(
    agg: pd.DataFrame, task: str, metric: str | None, dataset: str | None, split: str | None
) -> tuple[pd.DataFrame, str, str]:
    """Rows of one task/dataset/split (and metric if given); raise naming what is missing or ambiguous."""
    sub = agg[agg["task"] == task]
    if sub.empty:
        raise InputError(f"task {task!r} not in results; available tasks: {_names(agg['task'])}")
    if dataset is None:
        datasets = sorted(set(sub["dataset"]))
        if len(datasets) > 1:
            raise InputError(f"task {task!r} has several datasets ({', '.join(datasets)}); pass dataset=")
        dataset = datasets[0]
    elif dataset not in set(sub["dataset"]):
        raise InputError(f"task {task!r} has no dataset {dataset!r}; available: {_names(sub['dataset'])}")
    sub = sub[sub["dataset"] == dataset]
    if split is None:
        splits = sorted(set(sub["split"]))
        split = "test" if "test" in splits else splits[0] if len(splits) == 1 else None
        if split is None:
            raise InputError(f"task {task!r}/{dataset!r} has several splits ({', '.join(splits)}); pass split=")
    elif split not in set(sub["split"]):
        raise InputError(f"task {task!r}/{dataset!r} has no split {split!r}; available: {_names(sub['split'])}")
    sub = sub[sub["split"] == split]
    if metric is not None:
        if metric not in set(sub["metric"]):
            raise InputError(
                f"task {task!r} ({dataset}/{split}) has no metric {metric!r}; available: {_names(sub['metric'])}"
            )
    return sub, dataset, split


def _scale(name: str) -> float:
    return metric_info(name).scale


def _series_and_baselines(rows: pd.DataFrame) -> tuple[dict[str, pd.DataFrame], list[tuple[str, float]]]:
    """Split one metric's aggregated rows into per-series layer rows and (label, value) baselines."""
    series: dict[str, list] = {}
    base_rows = []
    for r in rows.itertuples(index=False):
        if is_half(r.layer):  # one direction of a layer: drawn by probing.figures_claims.directions
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
            baselines.append((_pretty(name), rs[0].value))
        else:
            baselines.extend((f"{_pretty(name)} ({_pretty(r.encoder)})", r.value) for r in rs)
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
    scale = _scale(metric)
    series, baselines = _series_and_baselines(rows)
    if not series:
        raise InputError(
            f"no per-layer results for metric {metric!r}: every row is a baseline (layers: {_names(rows['layer'])})"
        )
    layers = sorted({lay for df in series.values() for lay in df["layer"]}, key=layer_sort_key)
    xpos = {lay: i for i, lay in enumerate(layers)}
    n = len(series)
    dodge = 0.08 if n > 1 else 0.0
    handles: list[Any] = []
    s_lo, s_hi = math.inf, -math.inf
    for i, (name, df) in enumerate(series.items()):
        colour, marker = _SERIES_COLOURS[i % len(_SERIES_COLOURS)], _MARKERS[i % len(_MARKERS)]
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
            label=_pretty(name),
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
    ax.set_xticks(range(len(layers)), [_pretty(lay) if not lay.isdigit() else lay for lay in layers])
    n_numeric = sum(lay.isdigit() for lay in layers)
    if 0 < n_numeric < len(layers):
        ax.axvline(n_numeric - 0.5, color="0.6", linewidth=0.8, linestyle=":", zorder=1)

    label_y: list[float] = []
    label_text: list[str] = []
    anchor_y: list[float | None] = []
    digits = ".1f" if scale == 100 else ".2f"
    for k, (name, v) in enumerate(near):
        ax.axhline(
            v, color="0.15", linewidth=1.2, linestyle=_BASELINE_STYLES[k % len(_BASELINE_STYLES)], label=name, zorder=1
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


def _title(task: str, dataset: str, split: str) -> str:
    return f"{task} ({dataset}, {split})"


def _new_figure(width: float, height: float) -> Figure:
    return Figure(figsize=(width, height), layout="constrained")


def _figure_and_axes(ax: Axes | None, width: float, height: float) -> tuple[Figure, Axes]:
    """A new one-panel figure of that size, or the caller's ``ax`` and the figure holding it."""
    if ax is None:
        fig = _new_figure(width, height)
        return fig, fig.add_subplot()
    root: object = getattr(ax, "figure", None)
    while root is not None and not isinstance(root, Figure):  # a SubFigure's root figure
        root = getattr(root, "figure", None)
    if not isinstance(root, Figure):
        raise InputError(f"ax= must be a matplotlib Axes inside a figure, got {ax!r}")
    return root, ax


def layer_scores(
    results: pd.DataFrame,
    task: str,
    metric: str | None = None,
    *,
    dataset: str | None = None,
    split: str | None = None,
    clip_baselines: bool = True,
    ax: Axes | None = None,
) -> Figure:
    """Score of ``task`` per layer: one series per encoder (mean over seeds, CI bars), baselines as lines.

    ``metric`` defaults to :func:`default_metric`. ``dataset`` is needed only when the task has several;
    ``split`` defaults to ``"test"`` when the task has several. With ``clip_baselines`` a baseline far
    outside the layer scores (more than twice their spread away) is named at the axis edge with an arrow
    instead of squeezing the layers into a sliver of the axis. With ``ax`` (e.g. from ``plt.subplots``) the
    panel is drawn there and its figure returned.
    """
    agg = aggregate(results)
    metric = metric or default_metric(agg, task)
    rows, dataset, split = _select(agg, task, metric, dataset, split)
    with matplotlib.rc_context(_STYLE):
        fig, ax = _figure_and_axes(ax, 6.4, 4.2)
        _draw_layer_scores(ax, rows[rows["metric"] == metric], metric, clip_baselines)
        ax.set_title(f"{_title(task, dataset, split)}: {metric_info(metric).label.split(' (')[0]} per layer")
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
    rows, dataset, split = _select(agg, task, None, dataset, split)
    missing = [m for m in metrics if m not in set(rows["metric"])]
    if missing:
        raise InputError(
            f"task {task!r} ({dataset}/{split}) has no metric(s) {missing}; available: {_names(rows['metric'])}"
        )
    with matplotlib.rc_context(_STYLE):
        fig = _new_figure(5.6 * len(metrics), 4.2)
        axes = fig.subplots(1, len(metrics), squeeze=False)[0]
        for ax, name in zip(axes, metrics):
            _draw_layer_scores(ax, rows[rows["metric"] == name], name, clip_baselines)
            ax.set_title(metric_info(name).label.split(" (")[0])
        fig.suptitle(f"{_title(task, dataset, split)}: per layer")
    return fig


def selectivity(results: pd.DataFrame, task: str, *, dataset: str | None = None, split: str | None = None) -> Figure:
    """Task vs control-task accuracy per layer (bars with CIs), selectivity written above; one panel per encoder.

    Needs ``accuracy`` and ``control-accuracy`` rows for the same layers; ``selectivity`` rows are used
    when present, else selectivity is computed as accuracy - control accuracy (Hewitt & Liang, 2019).
    """
    agg = aggregate(results)
    rows, dataset, split = _select(agg, task, None, dataset, split)
    for need in ("accuracy", "control-accuracy"):
        if need not in set(rows["metric"]):
            raise InputError(
                f"task {task!r} ({dataset}/{split}) has no {need!r} rows, needed for the selectivity figure; "
                f"metrics present: {_names(rows['metric'])}"
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
    with matplotlib.rc_context(_STYLE):
        fig = _new_figure(max(5.0, 3.4 * len(panels)), 4.4)
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
                    f"sel. {_signed(sel * 100, plus=False)}",
                    xy=(xi, top * 100),
                    xytext=(0, 4),
                    textcoords="offset points",
                    ha="center",
                    va="bottom",
                    fontsize=8.5,
                )
            ax.set_xticks(x, [lay if lay.isdigit() else _pretty(lay) for lay in layers])
            ax.set_ylim(0, 112)
            ax.set_yticks(range(0, 101, 20))
            ax.set_title(_pretty(name))
            ax.set_xlabel("layer")
        axes[0].set_ylabel("accuracy (%)")
        fig.suptitle(f"{_title(task, dataset, split)}: control-task selectivity")
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


def _check_weights(weights: pd.DataFrame) -> pd.DataFrame:
    _check_columns(weights, WEIGHT_COLUMNS, "scalar-mix weights")
    df = weights.copy()
    for col in ("task", "encoder", "layer"):
        df[col] = df[col].astype(str)
    df["weight"] = pd.to_numeric(df["weight"], errors="raise").astype(float)
    if "seed" not in df.columns:
        df["seed"] = 0
    df["seed"] = df["seed"].astype(str)
    if "refit" not in df.columns:
        df["refit"] = 0
    df["refit"] = pd.to_numeric(df["refit"], errors="raise").astype(int)
    if df.empty:
        raise InputError("scalar-mix weights: the table is empty")
    if (df["weight"] < 0).any() or df["weight"].isna().any():
        r = df[(df["weight"] < 0) | df["weight"].isna()].iloc[0]
        raise InputError(
            f"scalar-mix weights: weight {r['weight']} (task {r['task']!r}, layer {r['layer']!r}) "
            "must be a non-negative softmax-normalised weight"
        )
    missing = set(df.groupby(["task", "encoder"]).groups) - set(
        df[df["refit"] == 0].groupby(["task", "encoder"]).groups
    )
    if missing:
        task, enc = sorted(missing)[0]
        raise InputError(
            f"scalar-mix weights of task {task!r}, encoder {enc!r} have only bootstrap refits (refit > 0); "
            "expected the fit on all training data (refit 0) beside them"
        )
    key = ["task", "encoder", "layer", "seed", "refit"]
    if df.duplicated(subset=key).any():
        r = df[df.duplicated(subset=key)].iloc[0]
        raise InputError(
            f"scalar-mix weights: duplicate row for task {r['task']!r}, encoder {r['encoder']!r}, "
            f"layer {r['layer']!r}, seed {r['seed']!r}, refit {r['refit']}"
        )
    sums = df.groupby(["task", "encoder", "seed", "refit"])["weight"].sum()
    bad = sums[(sums - 1).abs() > 1e-3]
    if len(bad):
        (task, enc, seed, _), s = bad.index[0], bad.iloc[0]
        raise InputError(
            f"scalar-mix weights of task {task!r}, encoder {enc!r}, seed {seed!r} sum to {s:.4f}, "
            "expected 1 (softmax-normalised s_j, not raw parameters)"
        )
    return df


UNSTABLE_MIX_RANGE = 0.2  # a layer's weight moving more than this across seeds or refits is not a finding


def mix_weights(weights: pd.DataFrame) -> Figure:
    """Scalar-mix weights s_j per task: grouped bars (one colour per layer), a dashed line at uniform 1/L.

    Bars: the fits on all training data (``refit`` 0), averaged over seeds; error bars: min..max over
    seeds and bootstrap refits (``mix_refits``). A task whose weights move by more than
    :data:`UNSTABLE_MIX_RANGE` across them is marked "unstable" under its name. One panel per encoder.
    """
    df = _check_weights(weights)
    spread = df.groupby(["task", "encoder", "layer"], sort=False)["weight"].agg(["min", "max"])
    mean = df[df["refit"] == 0].groupby(["task", "encoder", "layer"], sort=False)["weight"].mean().rename("mean")
    grouped = spread.join(mean, how="inner").reset_index()
    encoders = list(dict.fromkeys(grouped["encoder"]))
    with matplotlib.rc_context(_STYLE):
        tasks_all = list(dict.fromkeys(grouped["task"]))
        fig = _new_figure(max(5.0, 1.0 + 1.3 * len(tasks_all)), 3.6 * len(encoders) + 0.4)
        axes = fig.subplots(len(encoders), 1, squeeze=False)[:, 0]
        for ax, enc in zip(axes, encoders):
            sub = grouped[grouped["encoder"] == enc]
            tasks = list(dict.fromkeys(sub["task"]))
            layers = sorted(set(sub["layer"]), key=layer_sort_key)
            width = 0.8 / len(layers)
            for j, lay in enumerate(layers):
                pts = sub[sub["layer"] == lay].set_index("task")
                present = [t for t in tasks if t in pts.index]
                xs = np.array([tasks.index(t) for t in present], dtype=float) + (j - (len(layers) - 1) / 2) * width
                mean = pts.loc[present, "mean"].to_numpy()
                yerr = np.vstack([mean - pts.loc[present, "min"].to_numpy(), pts.loc[present, "max"].to_numpy() - mean])
                has_spread = bool((yerr > 0).any())
                bars = ax.bar(
                    xs,
                    mean,
                    width * 0.95,
                    color=_SERIES_COLOURS[j % len(_SERIES_COLOURS)],
                    label=f"layer {lay}" if lay.isdigit() else _pretty(lay),
                    yerr=yerr if has_spread else None,
                    capsize=2,
                    zorder=2,
                )
                if len(layers) <= 4:
                    ax.bar_label(bars, labels=[f"{m:.2f}" for m in mean], fontsize=7.5, padding=2)
            n_layers = sub.groupby("task")["layer"].nunique()
            if n_layers.nunique() == 1:
                ax.axhline(
                    1 / n_layers.iloc[0],
                    color="0.3",
                    linestyle=(0, (4, 2)),
                    linewidth=1.0,
                    label=f"uniform (1/{n_layers.iloc[0]})",
                    zorder=1,
                )
            ranges = (sub["max"] - sub["min"]).groupby(sub["task"], sort=False).max()
            unstable = {t: float(ranges[t]) for t in tasks if ranges[t] > UNSTABLE_MIX_RANGE}
            labels = [f"{t}\nunstable (range {unstable[t]:.2f})" if t in unstable else t for t in tasks]
            ax.set_xticks(range(len(tasks)), labels)
            for t, label in zip(tasks, ax.get_xticklabels()):
                if t in unstable:
                    label.set_color("#b2182b")
            top = min(1.08, max(1.0 / len(layers), grouped["max"].max()) * 1.18 + 0.02)
            ax.set_ylim(0, top)
            ax.set_ylabel("softmax weight $s_j$")
            ax.set_title(f"Scalar-mix weights per task ({_pretty(enc)})")
            ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
        axes[-1].set_xlabel("task")
    return fig


def _check_per_tag(per_tag: pd.DataFrame) -> pd.DataFrame:
    _check_columns(per_tag, PER_TAG_COLUMNS, "per-tag accuracy")
    df = per_tag.copy()
    for col in ("task", "encoder", "layer", "tag"):
        df[col] = df[col].astype(str)
    df["n"] = pd.to_numeric(df["n"], errors="raise")
    df["accuracy"] = pd.to_numeric(df["accuracy"], errors="raise").astype(float)
    bad = df[(df["accuracy"] < 0) | (df["accuracy"] > 1) | df["accuracy"].isna()]
    if len(bad):
        r = bad.iloc[0]
        raise InputError(
            f"per-tag accuracy: accuracy {r['accuracy']} (tag {r['tag']!r}, layer {r['layer']!r}) "
            "outside [0, 1]; expected a fraction"
        )
    if (df["n"] <= 0).any():
        r = df[df["n"] <= 0].iloc[0]
        raise InputError(f"per-tag accuracy: n = {r['n']} for tag {r['tag']!r}; expected a positive token count")
    if "seed" not in df.columns:
        df["seed"] = 0
    df["seed"] = df["seed"].astype(str)
    return df


def tag_gains(
    per_tag: pd.DataFrame,
    task: str,
    from_layer: str = "0",
    to_layer: str = "1",
    top: int = 15,
    *,
    encoder: str | None = None,
    min_n: int = 1,
    ax: Axes | None = None,
) -> Figure:
    """Per-tag accuracy change from ``from_layer`` to ``to_layer``: the ``top`` tags that gain most.

    Horizontal bars sorted by gain (largest on top), each tag labelled with its token count ``n``.
    Seeds are averaged. ``encoder`` is needed only if the task has several; tags with fewer than
    ``min_n`` tokens are left out. With ``ax`` the panel is drawn there and its figure returned.
    """
    if top < 1:
        raise InputError(f"top must be at least 1, got {top}")
    df = _check_per_tag(per_tag)
    df = df[df["task"] == task]
    if df.empty:
        raise InputError(f"task {task!r} not in the per-tag table; available tasks: {_names(per_tag['task'])}")
    if encoder is None:
        encs = sorted(set(df["encoder"]))
        if len(encs) > 1:
            raise InputError(
                f"task {task!r} has per-tag results for several encoders ({', '.join(encs)}); pass encoder="
            )
        encoder = encs[0]
    elif encoder not in set(df["encoder"]):
        raise InputError(
            f"task {task!r} has no per-tag results for encoder {encoder!r}; available: {_names(df['encoder'])}"
        )
    df = df[df["encoder"] == encoder]
    per_layer = {}
    for lay in (from_layer, to_layer):
        sub = df[df["layer"] == str(lay)]
        if sub.empty:
            raise InputError(
                f"task {task!r}, encoder {encoder!r}: no per-tag results for layer {lay!r}; "
                f"available layers: {_names(df['layer'])}"
            )
        if sub.duplicated(subset=["tag", "seed"]).any():
            tag = sub.loc[sub.duplicated(subset=["tag", "seed"]), "tag"].iloc[0]
            raise InputError(f"task {task!r}, layer {lay!r}: tag {tag!r} appears twice for one seed")
        per_layer[lay] = sub.groupby("tag").agg(n=("n", "first"), n_max=("n", "max"), accuracy=("accuracy", "mean"))
    a, b = per_layer[from_layer], per_layer[to_layer]
    if set(a.index) != set(b.index):
        diff = sorted(set(a.index) ^ set(b.index))
        raise InputError(
            f"task {task!r}: layers {from_layer!r} and {to_layer!r} were scored on different tag "
            f"sets (only in one: {', '.join(diff[:10])}); they must share the evaluation set"
        )
    b = b.loc[a.index]
    mismatch = (a["n"] != b["n"]) | (a["n"] != a["n_max"]) | (b["n"] != b["n_max"])
    if mismatch.any():
        tag = a.index[mismatch.to_numpy()][0]
        raise InputError(
            f"task {task!r}: tag {tag!r} has different token counts n across layers or seeds; "
            "they must share the evaluation set"
        )
    table = pd.DataFrame({"n": a["n"], "gain": (b["accuracy"] - a["accuracy"]) * 100})
    table = table[table["n"] >= min_n]
    if table.empty:
        raise InputError(f"task {task!r}: no tag has at least min_n={min_n} tokens")
    table = table.sort_values(["gain", "n"], ascending=[False, False]).head(top)
    with matplotlib.rc_context({**_STYLE, "axes.grid.axis": "x"}):
        fig, ax = _figure_and_axes(ax, 6.4, 1.2 + 0.3 * len(table))
        y = np.arange(len(table))[::-1]
        colours = [OKABE_ITO["blue"] if g >= 0 else OKABE_ITO["vermillion"] for g in table["gain"]]
        bars = ax.barh(y, table["gain"], color=colours, height=0.7, zorder=2)
        ax.bar_label(bars, labels=[_signed(g) for g in table["gain"]], padding=3, fontsize=8.5)
        ax.set_yticks(y, [f"{tag}  (n={int(n):,})" for tag, n in zip(table.index, table["n"])])
        ax.axvline(0, color="0.2", linewidth=0.8)
        lo, hi = min(0.0, table["gain"].min()), max(0.0, table["gain"].max())
        pad = 0.18 * max(hi - lo, 1.0)
        ax.set_xlim(lo - (pad if lo < 0 else 0), hi + pad)
        ax.set_xlabel(f"accuracy change, layer {from_layer} → {to_layer} (percentage points)")
        ax.set_title(f"{task}: tags that gain most from layer {from_layer} → {to_layer} ({_pretty(encoder)})")
    return fig


POS_TASKS = ("ptb", "upos", "xpos")  # tasks overview() reads as part of speech, in order of preference
# a structural probe's headline metric and the Spearman correlation drawn beside it
STRUCTURAL_PAIRS = {"uuas": "dspr", "root_acc": "nspr"}


def overview(
    results: pd.DataFrame,
    tasks: Sequence[str] | None = None,
    *,
    datasets: Mapping[str, str] | None = None,
    split: str | None = None,
) -> Figure:
    """Side-by-side layer plots for the README: by default one POS task and one WSD task.

    Without ``tasks`` it picks the first of ``ptb``, ``upos``, ``xpos`` and the first task (by name) whose
    headline metric is F1, i.e. a word-sense task, that are present (at least one must be); named ``tasks``
    must all be present.
    """
    agg = aggregate(results)
    present = list(dict.fromkeys(agg["task"]))
    if tasks is None:
        pos = next((t for t in POS_TASKS if t in present), None)
        heads = headline_metrics(agg)
        wsd = next((t for t in sorted(present) if heads[t] == "f1"), None)
        tasks = [t for t in (pos, wsd) if t]
        if not tasks:
            raise InputError(
                f"overview needs a POS task ({', '.join(POS_TASKS)}) or a WSD task (F1 rows); "
                f"results have: {', '.join(present) or '(none)'}"
            )
    missing = [t for t in tasks if t not in present]
    if missing:
        raise InputError(f"overview: task(s) {missing} not in results; available tasks: {', '.join(present)}")
    datasets = dict(datasets or {})
    with matplotlib.rc_context(_STYLE):
        fig = _new_figure(5.6 * len(tasks), 4.2)
        axes = fig.subplots(1, len(tasks), squeeze=False)[0]
        for ax, task in zip(axes, tasks):
            metric = default_metric(agg, task)
            rows, ds, sp = _select(agg, task, metric, datasets.get(task), split)
            _draw_layer_scores(ax, rows[rows["metric"] == metric], metric, clip_baselines=True)
            ax.set_title(_title(task, ds, sp))
        fig.suptitle("ELMo probes, layer by layer")
    return fig


_FORMATS = {"png", "svg", "pdf"}
_METADATA = {"png": {"Software": None}, "svg": {"Date": None}, "pdf": {"CreationDate": None}}


def save(
    fig: Figure, out_dir: str | Path, name: str, formats: Sequence[str] = ("png", "svg"), dpi: int = 200
) -> dict[str, Path]:
    """Write ``fig`` as ``out_dir/name.<fmt>`` for each format, atomically; returns ``{fmt: path}``."""
    if not name or Path(name).name != name or name.startswith("."):
        raise InputError(f"figure name {name!r} must be a plain file stem without directories")
    unknown = [f for f in formats if f not in _FORMATS]
    if unknown or not formats:
        raise InputError(f"unsupported figure format(s) {unknown or '(none)'}; choose from {sorted(_FORMATS)}")
    if dpi < 72:
        raise InputError(f"dpi={dpi} is too low for a figure meant for print (use >= 200)")
    out = {}
    with matplotlib.rc_context(_STYLE):
        for fmt in formats:
            path = Path(out_dir) / f"{name}.{fmt}"
            with atomic_path(path) as tmp:
                fig.savefig(tmp, format=fmt, dpi=dpi, metadata=_METADATA[fmt])
            out[fmt] = path
    return out
