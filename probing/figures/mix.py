"""The scalar-mix weights figure: each task's softmax-normalised layer weights s_j per encoder."""

from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from probing.errors import InputError
from probing.figures.style import SERIES_COLOURS, STYLE, check_columns, new_figure, pretty
from probing.results import layer_sort_key

WEIGHT_COLUMNS = ("task", "encoder", "layer", "weight")


def _check_weights(weights: pd.DataFrame) -> pd.DataFrame:
    check_columns(weights, WEIGHT_COLUMNS, "scalar-mix weights")
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
    with matplotlib.rc_context(STYLE):
        tasks_all = list(dict.fromkeys(grouped["task"]))
        fig = new_figure(max(5.0, 1.0 + 1.3 * len(tasks_all)), 3.6 * len(encoders) + 0.4)
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
                    color=SERIES_COLOURS[j % len(SERIES_COLOURS)],
                    label=f"layer {lay}" if lay.isdigit() else pretty(lay),
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
            ax.set_title(f"Scalar-mix weights per task ({pretty(enc)})")
            ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
        axes[-1].set_xlabel("task")
    return fig
