"""Figures of the structural probes (Hewitt & Manning): a metric per layer, the metric against the probe's
rank, and gold vs predicted trees. Labels and the percent rule come from the metric registry.

Each function draws on ``ax`` (a new figure if None) and returns the Figure; nothing is written to disk.
Input tables are tidy ``pandas.DataFrame``\\ s with ``metric, value, ci_low, ci_high`` (fractions;
``uuas`` and ``root_acc`` are drawn in percent) and NaN CIs meaning no error bar.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Arc

from probing.errors import InputError
from probing.figures.style import OKABE_ITO, check_columns, new_figure, percent_scale
from probing.probes.trees import mst_edges, tree_distances
from probing.results import metric as metric_info

__all__ = ["metric_by_layer", "rank_sweep", "tree_comparison"]

GOLD, RIGHT, WRONG = OKABE_ITO["blue"], OKABE_ITO["bluish green"], OKABE_ITO["vermillion"]


def _axes(ax: Axes | None, width: float = 5.0, height: float = 3.5) -> Axes:
    return ax if ax is not None else new_figure(width, height).add_subplot()


def _yerr(rows: pd.DataFrame, scale: float) -> np.ndarray:
    v = rows["value"].to_numpy(float) * scale
    lo = np.nan_to_num(v - rows["ci_low"].to_numpy(float) * scale, nan=0.0)
    hi = np.nan_to_num(rows["ci_high"].to_numpy(float) * scale - v, nan=0.0)
    return np.vstack([lo, hi])


def metric_by_layer(results: pd.DataFrame, metric: str, ax: Axes | None = None) -> Figure:
    """One metric per layer with 95% CIs, and baselines as labelled horizontal lines.

    results : columns ``layer, metric, value, ci_low, ci_high`` and optionally ``encoder``. Rows whose
    ``layer`` is a digit string (``"0"``, ``"1"``, ...) are points of the series named by ``encoder``
    (one line per encoder); any other ``layer`` (``"position"``, ``"glove"``, ``"control"``) is a
    baseline line whose CI is a shaded band.
    """
    check_columns(results, ["layer", "metric", "value", "ci_low", "ci_high"], "metric_by_layer")
    rows = results[results["metric"] == metric].copy()
    if rows.empty:
        raise InputError(
            f"metric_by_layer: no rows for metric {metric!r}; metrics are {sorted(set(results['metric']))}"
        )
    rows["layer"] = rows["layer"].astype(str)
    if "encoder" not in rows.columns:
        rows["encoder"] = "probe"
    scale = percent_scale(metric)
    ax = _axes(ax)
    is_layer = rows["layer"].str.fullmatch(r"\d+")
    layers = sorted({int(v) for v in rows.loc[is_layer, "layer"]})
    for encoder, series in rows[is_layer].groupby("encoder", sort=False):
        series = series.assign(x=series["layer"].astype(int)).sort_values("x")
        ax.errorbar(
            series["x"], series["value"] * scale, yerr=_yerr(series, scale), marker="o", capsize=3, label=str(encoder)
        )
    for i, (_, b) in enumerate(rows[~is_layer].iterrows()):
        color = f"C{i + 2}"
        ax.axhline(b["value"] * scale, ls="--", lw=1, color=color, label=str(b["layer"]))
        if np.isfinite(b["ci_low"]) and np.isfinite(b["ci_high"]):
            ax.axhspan(b["ci_low"] * scale, b["ci_high"] * scale, color=color, alpha=0.15, lw=0)
    ax.set_xticks(layers)
    ax.set_xlabel("layer")
    ax.set_ylabel(metric_info(metric).label)
    ax.legend(fontsize="small")
    return ax.figure  # type: ignore[return-value]


def rank_sweep(sweep: pd.DataFrame, ax: Axes | None = None) -> Figure:
    """UUAS and DSpr. (both as fractions, on one axis) against the probe's rank, log2 x axis, with CIs.

    sweep : columns ``rank, metric, value, ci_low, ci_high`` as ``probing.probes.structural.rank_sweep``
    returns.
    """
    check_columns(sweep, ["rank", "metric", "value", "ci_low", "ci_high"], "rank_sweep")
    ax = _axes(ax)
    for metric in ("uuas", "dspr"):
        rows = sweep[sweep["metric"] == metric].sort_values("rank")
        if rows.empty:
            continue
        ax.errorbar(
            rows["rank"], rows["value"], yerr=_yerr(rows, 1.0), marker="o", capsize=3, label=metric_info(metric).label
        )
    ax.set_xscale("log", base=2)
    ranks = sorted(set(sweep["rank"].astype(int)))
    ax.set_xticks(ranks, [str(r) for r in ranks])
    ax.set_xlabel("probe rank")
    ax.set_ylabel("score (fraction)")
    ax.legend(fontsize="small")
    return ax.figure  # type: ignore[return-value]


def _arc(ax: Axes, i: int, j: int, above: bool, color: str, gid: str) -> None:
    a, b = min(i, j), max(i, j)
    height = 0.4 + 0.35 * (b - a)
    arc = Arc(
        ((a + b) / 2, 0.0), b - a, 2 * height, theta1=0 if above else 180, theta2=180 if above else 360, color=color
    )
    arc.set_gid(gid)
    ax.add_patch(arc)


def tree_comparison(
    words: Sequence[str],
    heads: Sequence[int],
    predictions: Mapping[str, np.ndarray],
    punct: Sequence[bool] | None = None,
    axes: Sequence[Axes] | None = None,
) -> Figure:
    """One sentence, one panel per prediction (e.g. ``{"layer 1": D1, "layer 0": D0}``): the gold tree's
    edges above the words, the minimum spanning tree of that layer's predicted (n, n) distances below
    (bluish green where it matches a gold edge, vermillion where not), punctuation left out as UUAS does.

    Each arc's gid is ``"gold:i-j"`` or ``"pred:i-j"`` (0-based word positions, i < j).

    Parameters
    ----------
    words : sequence of str (n,)
        The sentence's words, drawn at x = 0 .. n - 1.
    heads : sequence of int (n,)
        Gold heads (1-based, 0 = root), as in CoNLL-U.
    predictions : mapping of str to ndarray (n, n)
        Panel title -> predicted distances between the n words (any float array-like; asymmetric is
        allowed, see :func:`~probing.probes.trees.mst_edges`). One panel per entry, in mapping order.
    punct : sequence of bool (n,), optional
        Punctuation words, left out of both trees.
    axes : sequence of Axes, optional
        One per prediction; default: a new figure with one row per prediction.

    Returns
    -------
    Figure
        The figure of the first panel's axes.
    """
    n = len(words)
    if len(heads) != n:
        raise InputError(f"tree_comparison: {n} words but {len(heads)} heads")
    if not predictions:
        raise InputError("tree_comparison: give at least one prediction")
    if axes is None:
        fig = new_figure(max(4.0, 0.7 * n), 2.6 * len(predictions))
        axes = fig.subplots(len(predictions), 1, squeeze=False)[:, 0].tolist()
    if len(axes) != len(predictions):
        raise InputError(f"tree_comparison: {len(predictions)} predictions but {len(axes)} axes")
    gold = set(mst_edges(tree_distances(heads), punct))
    for ax, (label, dist) in zip(axes, predictions.items(), strict=True):
        d = np.asarray(dist, dtype=float)
        if d.shape != (n, n):
            raise InputError(f"tree_comparison: prediction {label!r} has shape {d.shape}, expected ({n}, {n})")
        pred = set(mst_edges(d, punct))
        for i, j in sorted(gold):
            _arc(ax, i, j, True, GOLD, f"gold:{i}-{j}")
        for i, j in sorted(pred):
            _arc(ax, i, j, False, RIGHT if (i, j) in gold else WRONG, f"pred:{i}-{j}")
        for k, w in enumerate(words):
            ax.text(k, 0, w, ha="center", va="center", fontsize=9, bbox={"fc": "white", "ec": "none", "pad": 1})
        reach = 0.4 + 0.35 * (n - 1) + 0.2
        ax.set_xlim(-0.7, n - 0.3)
        ax.set_ylim(-reach, reach)
        ax.axis("off")
        hits = len(gold & pred)
        ax.set_title(f"{label}: gold above, predicted below ({hits}/{len(gold)} edges)", fontsize=10)
    return axes[0].figure  # type: ignore[return-value]
