"""The layer-similarity heatmap (CKA, CCA, ... between every pair of layers; ``similarity.csv``).

Input: ``encoder_a, layer_a, encoder_b, layer_b, measure, value, n_tokens``
(:func:`probing.analysis.similarity.layer_similarity`). Draws on ``ax`` (a new figure when None) and returns the
``Figure``; nothing is written.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from probing.errors import InputError
from probing.figures.style import figure_and_axes

__all__ = ["similarity_heatmap", "similarity_matrix"]


def similarity_matrix(frame: pd.DataFrame, measure: str) -> tuple[pd.DataFrame, list[str]]:
    """The (k, k) matrix of ``measure`` over ``encoder:layer`` keys in their order of appearance (rows =
    ``a``, columns = ``b``; NaN where a pair is missing), and the encoder of each key."""
    missing = {"encoder_a", "layer_a", "encoder_b", "layer_b", "measure", "value"} - set(frame.columns)
    if missing:
        raise InputError(f"similarity frame lacks columns {sorted(missing)}")
    f = frame[frame.measure == measure]
    if f.empty:
        raise InputError(f"no rows for measure {measure!r}; measures present: {sorted(frame.measure.unique())}")
    a = f.encoder_a.astype(str) + ":" + f.layer_a.astype(str)
    b = f.encoder_b.astype(str) + ":" + f.layer_b.astype(str)
    keys = list(dict.fromkeys(list(a) + list(b)))
    encoders = [k.split(":", 1)[0] for k in keys]
    m = pd.DataFrame({"a": a.to_numpy(), "b": b.to_numpy(), "v": f.value.to_numpy()})
    return m.pivot_table(index="a", columns="b", values="v", aggfunc="mean").reindex(index=keys, columns=keys), encoders


def similarity_heatmap(
    frame: pd.DataFrame, measure: str = "linear_cka", *, ax: Axes | None = None, annotate: bool = True
) -> Figure:
    """Heatmap of ``measure`` between every pair of layers, encoders side by side (blocks separated by
    lines, labelled ``encoder:layer``); the token count is in the title. Colour scale 0..1."""
    matrix, encoders = similarity_matrix(frame, measure)
    k = len(matrix)
    fig, ax = figure_and_axes(ax, 1.2 + 0.55 * k, 0.9 + 0.5 * k)
    image = ax.imshow(matrix.to_numpy(dtype=float), cmap="viridis", vmin=0.0, vmax=1.0)
    ax.set_xticks(range(k), matrix.columns, rotation=45, ha="right")
    ax.set_yticks(range(k), matrix.index)
    for i in range(1, k):
        if encoders[i] != encoders[i - 1]:
            ax.axhline(i - 0.5, color="white", lw=2)
            ax.axvline(i - 0.5, color="white", lw=2)
    if annotate:
        for (i, j), v in np.ndenumerate(matrix.to_numpy(dtype=float)):
            if np.isfinite(v):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color="white" if v < 0.6 else "black")
    counts = sorted(frame.loc[frame.measure == measure, "n_tokens"].unique()) if "n_tokens" in frame else []
    n = ", ".join(str(int(c)) for c in counts)
    ax.set_title(f"{measure.replace('_', ' ')} (n_tokens = {n})" if n else measure.replace("_", " "))
    fig.colorbar(image, ax=ax, shrink=0.8)
    return fig
