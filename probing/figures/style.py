"""The figures' one style: the palette (Okabe & Ito), display names, matplotlib settings, the axes helper,
the percent rule, listing helpers and :func:`save`, which writes a figure atomically."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import matplotlib
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from probing._io import atomic_path
from probing.errors import InputError
from probing.palette import OKABE_ITO
from probing.results import metric as metric_info

SERIES_COLOURS = [OKABE_ITO[c] for c in ("blue", "vermillion", "bluish green", "reddish purple", "orange", "sky blue")]
MARKERS = ["o", "s", "^", "D", "v", "P"]
BASELINE_STYLES = [(0, (5, 2)), (0, (1, 1.5)), (0, (6, 2, 1, 2)), (0, (3, 3)), (0, (8, 3)), (0, (2, 3))]

PRETTY = {
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

STYLE: Any = {  # rcParams (Any: matplotlib types each key as its own literal)
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


def slug(text: str) -> str:
    """``text`` as part of a file stem: runs of anything but letters, digits, ``_`` and ``-`` become ``-``."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-") or "x"


def group_names(rows: pd.DataFrame) -> dict[tuple[str, str, str], str]:
    """The figure-name suffix of each (task, dataset, split) group of ``rows``, in order of appearance: the
    task, or ``<task>_<dataset>_<split>`` where the task has several groups (as file stems, :func:`slug`)."""
    keys = [tuple(map(str, k)) for k in rows[["task", "dataset", "split"]].drop_duplicates().itertuples(index=False)]
    count = {task: sum(k[0] == task for k in keys) for task, _, _ in keys}
    return {k: slug(k[0] if count[k[0]] == 1 else "_".join(k)) for k in keys}  # type: ignore[misc]


def pretty(name: str) -> str:
    """The display name of an encoder, layer or baseline."""
    return PRETTY.get(name, name)


def signed(v: float, plus: bool = True) -> str:
    """One decimal with a typographic minus (and a plus sign when ``plus``), as on matplotlib's axes."""
    return (f"{v:+.1f}" if plus else f"{v:.1f}").replace("-", "\u2212")


def check_columns(df: pd.DataFrame, required: Iterable[str], what: str) -> None:
    """TypeError unless ``df`` is a DataFrame, InputError naming the ``required`` columns it lacks."""
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"{what}: expected a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise InputError(f"{what}: missing column(s) {missing}; expected columns {list(required)}")


def listing(values: Iterable) -> str:
    """The distinct ``values`` as a sorted, comma-separated list for an error message."""
    return ", ".join(sorted({str(v) for v in values})) or "(none)"


def percent_scale(name: str) -> float:
    """The percent rule: 100 for a metric that is a fraction (shown in percent), else 1."""
    return metric_info(name).scale


def new_figure(width: float, height: float) -> Figure:
    """An empty figure of that size (inches) with the constrained layout."""
    return Figure(figsize=(width, height), layout="constrained")


def figure_and_axes(ax: Axes | None, width: float, height: float) -> tuple[Figure, Axes]:
    """A new one-panel figure of that size, or the caller's ``ax`` and the figure holding it."""
    if ax is None:
        fig = new_figure(width, height)
        return fig, fig.add_subplot()
    root: object = getattr(ax, "figure", None)
    while root is not None and not isinstance(root, Figure):  # a SubFigure's root figure
        root = getattr(root, "figure", None)
    if not isinstance(root, Figure):
        raise InputError(f"ax= must be a matplotlib Axes inside a figure, got {ax!r}")
    return root, ax


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
    with matplotlib.rc_context(STYLE):
        for fmt in formats:
            path = Path(out_dir) / f"{name}.{fmt}"
            with atomic_path(path) as tmp:
                fig.savefig(tmp, format=fmt, dpi=dpi, metadata=_METADATA[fmt])
            out[fmt] = path
    return out
