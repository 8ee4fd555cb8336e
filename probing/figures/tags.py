"""The per-tag figure: which gold tags gain most from layer 0 to layer 1."""

from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from probing.errors import InputError
from probing.figures.style import OKABE_ITO, STYLE, check_columns, figure_and_axes, listing, pretty, signed

PER_TAG_COLUMNS = ("task", "encoder", "layer", "tag", "n", "accuracy")


def _check_per_tag(per_tag: pd.DataFrame) -> pd.DataFrame:
    check_columns(per_tag, PER_TAG_COLUMNS, "per-tag accuracy")
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
        raise InputError(f"task {task!r} not in the per-tag table; available tasks: {listing(per_tag['task'])}")
    if encoder is None:
        encs = sorted(set(df["encoder"]))
        if len(encs) > 1:
            raise InputError(
                f"task {task!r} has per-tag results for several encoders ({', '.join(encs)}); pass encoder="
            )
        encoder = encs[0]
    elif encoder not in set(df["encoder"]):
        raise InputError(
            f"task {task!r} has no per-tag results for encoder {encoder!r}; available: {listing(df['encoder'])}"
        )
    df = df[df["encoder"] == encoder]
    per_layer = {}
    for lay in (from_layer, to_layer):
        sub = df[df["layer"] == str(lay)]
        if sub.empty:
            raise InputError(
                f"task {task!r}, encoder {encoder!r}: no per-tag results for layer {lay!r}; "
                f"available layers: {listing(df['layer'])}"
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
    with matplotlib.rc_context({**STYLE, "axes.grid.axis": "x"}):
        fig, ax = figure_and_axes(ax, 6.4, 1.2 + 0.3 * len(table))
        y = np.arange(len(table))[::-1]
        colours = [OKABE_ITO["blue"] if g >= 0 else OKABE_ITO["vermillion"] for g in table["gain"]]
        bars = ax.barh(y, table["gain"], color=colours, height=0.7, zorder=2)
        ax.bar_label(bars, labels=[signed(g) for g in table["gain"]], padding=3, fontsize=8.5)
        ax.set_yticks(y, [f"{tag}  (n={int(n):,})" for tag, n in zip(table.index, table["n"])])
        ax.axvline(0, color="0.2", linewidth=0.8)
        lo, hi = min(0.0, table["gain"].min()), max(0.0, table["gain"].max())
        pad = 0.18 * max(hi - lo, 1.0)
        ax.set_xlim(lo - (pad if lo < 0 else 0), hi + pad)
        ax.set_xlabel(f"accuracy change, layer {from_layer} → {to_layer} (percentage points)")
        ax.set_title(f"{task}: tags that gain most from layer {from_layer} → {to_layer} ({pretty(encoder)})")
    return fig
