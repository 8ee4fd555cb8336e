"""UMAP maps of word occurrences per layer: how word senses and parts of speech separate with depth.

Every figure is a thin layer over a coordinates DataFrame (:func:`umap_layers_coords`,
:func:`umap_pos_coords`), so the numbers behind a picture can be inspected or re-plotted.

Reproducibility: samples are drawn with ``numpy.random.default_rng(seed)`` and UMAP runs with
``random_state=seed``, which makes it deterministic and single-threaded (umap-learn turns off its
parallel optimisation when seeded). Identical vectors (every occurrence of a word form at the
context-free layer 0) are embedded once and share their coordinates; when fewer than
:data:`MIN_DISTINCT_FOR_UMAP` distinct vectors remain, the exact 2-D PCA projection is used
instead and the panel says so.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from probing.errors import InputError
from probing.palette import CATEGORY_COLOURS
from probing.protocols import StoreLike
from probing.views.neighbors import _layer_index, _store_layer_names, type_neighbors
from probing.views.senses import lemma_rows, sense_separation

Gloss = Callable[[str], str]

# Paul Tol's "muted" qualitative scheme (9 colours), colour-blind safe, for the part-of-speech view.
TOL_MUTED = ["#332288", "#CC6677", "#117733", "#88CCEE", "#882255", "#44AA99", "#999933", "#AA4499", "#DDCC77"]
OTHER_COLOUR = "#BBBBBB"
MIN_DISTINCT_FOR_UMAP = 10
OTHER = "other"


# -- sampling and embedding ---------------------------------------------------------------------


def stratified_sample(labels: Sequence[str] | np.ndarray, max_points: int, seed: int = 0) -> np.ndarray:
    """Sorted positions of at most ``max_points`` items, each label keeping its share of the sample.

    Quotas are proportional to label counts (largest remainder), with at least one item per label
    while the budget allows, so rare senses or tags stay visible. All items when they fit.

    Parameters
    ----------
    labels : sequence of str or ndarray (n,)
        One label per item (compared as strings).
    max_points : the sample size, at least 1 when ``n > max_points``.
    seed : seeds which items of each label are drawn.

    Returns
    -------
    ndarray (min(n, max_points),) of int64
        Positions into ``labels``, ascending; ``arange(n)`` when ``n <= max_points``.
    """
    labels = np.asarray(labels, dtype=object)
    n = len(labels)
    if n <= max_points:
        return np.arange(n)
    if max_points < 1:
        raise InputError(f"max_points must be at least 1, got {max_points}")
    rng = np.random.default_rng(seed)
    values, inverse, counts = np.unique(labels.astype(str), return_inverse=True, return_counts=True)
    exact = counts * max_points / n
    quota = np.floor(exact).astype(int)
    by_size = np.lexsort((values, -counts))  # largest labels first, ties by name: deterministic
    for i in by_size:
        if quota.sum() >= max_points:
            break
        if quota[i] == 0:
            quota[i] = 1
    leftover = max_points - quota.sum()
    if leftover > 0:
        room = np.where(quota < counts, exact - quota, -np.inf)
        quota[np.lexsort((values, -room))[:leftover]] += 1
    chosen = [rng.permutation(np.flatnonzero(inverse == i))[: quota[i]] for i in range(len(values))]
    return np.sort(np.concatenate(chosen))


def _pca_2d(x: np.ndarray) -> np.ndarray:
    """Exact 2-D PCA with a fixed sign convention (largest loading positive), padded to 2 columns."""
    centred = x - x.mean(axis=0)
    if len(x) < 2 or not np.any(centred):
        return np.zeros((len(x), 2))
    u, s, vt = np.linalg.svd(centred, full_matrices=False)
    s = np.where(s > s[0] * 1e-6, s, 0.0)  # rounding noise along a degenerate axis is not spread
    signs = np.sign(vt[np.arange(len(vt)), np.abs(vt).argmax(axis=1)])
    coords = (u * s * signs)[:, :2]
    return np.pad(coords, ((0, 0), (0, 2 - coords.shape[1])))


def embed_2d(
    x: np.ndarray, *, method: str = "umap", seed: int = 0, n_neighbors: int = 15, min_dist: float = 0.1
) -> tuple[np.ndarray, str]:
    """2-D coordinates of the rows of ``x`` and the method actually used (``"umap"`` or ``"pca"``).

    UMAP uses the cosine metric (the same similarity as the neighbour views). Duplicate rows are
    embedded once; with fewer than :data:`MIN_DISTINCT_FOR_UMAP` distinct rows, or
    ``method="pca"``, the layout is the exact PCA projection.

    Parameters
    ----------
    x : ndarray (n, dim)
        The vectors (any float dtype; converted to float32).
    method : ``"umap"`` or ``"pca"``.
    seed, n_neighbors, min_dist : UMAP's ``random_state``, ``n_neighbors`` (at most the distinct rows - 1) and
        ``min_dist``.

    Returns
    -------
    coords : ndarray (n, 2), float64
        Row i is the 2-D position of ``x[i]``; identical rows share it.
    used : str
        ``"umap"`` or ``"pca"``.
    """
    if method not in ("umap", "pca"):
        raise InputError(f"method must be 'umap' or 'pca', got {method!r}")
    x = np.asarray(x, dtype=np.float32)
    distinct, inverse = np.unique(x, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    if method == "pca" or len(distinct) < MIN_DISTINCT_FOR_UMAP:
        return _pca_2d(distinct.astype(np.float64))[inverse], "pca"
    import umap

    reducer = umap.UMAP(
        n_components=2,
        n_neighbors=min(n_neighbors, len(distinct) - 1),
        min_dist=min_dist,
        metric="cosine",
        random_state=seed,
        n_jobs=1,
    )
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*n_jobs.*")
        coords = reducer.fit_transform(distinct)
    return np.asarray(coords, dtype=np.float64)[inverse], "umap"


# -- lemma occurrences per layer ----------------------------------------------------------------


def _first_key(sense: str) -> str:
    return sense.split()[0] if sense else ""


def _legend_label(key: str, count: int, gloss: Gloss | None, other: str = "other senses / unannotated") -> str:
    if key == OTHER:
        return f"{other} ({count})"
    text = key
    if gloss is not None:
        try:
            text = gloss(key)
        except LookupError:
            text = key
    text = text if len(text) <= 42 else text[:41] + "…"
    return f"{text} ({count})"


def _layers(store: StoreLike, layers: Sequence[int | str]) -> list[tuple[int, str]]:
    names = _store_layer_names(store)
    out = []
    for layer in layers:
        i = _layer_index(layer, names)
        out.append((i, names[i] if names is not None and i < len(names) else str(layer)))
    return out


def umap_layers_coords(
    store: StoreLike,
    lemmas: Sequence[str] = ("play", "bank", "line", "serve"),
    layers: Sequence[int | str] = (0, 1, 2),
    max_points: int = 400,
    seed: int = 0,
    *,
    n_senses: int = 6,
    gloss: Gloss | None = None,
    method: str = "umap",
    all_forms: bool = False,
    color_by: str = "sense",
) -> pd.DataFrame:
    """Coordinates behind :func:`umap_layers`: one 2-D map per (lemma, layer).

    Occurrences are the store rows of each lemma spec ``LEMMA[:UPOS]`` (case-insensitive, OOV rows
    left out), by default only its most frequent word form and POS (:func:`~probing.views.senses.lemma_rows`),
    so that the map shows senses within one form; ``all_forms=True`` keeps every form and groups
    (colours) by form instead of sense. At most ``max_points`` per lemma, stratified by sense, the
    same sample at every layer. ``score, ci_low, ci_high, chance, n_scored`` give the sample's
    leave-one-out 1-NN sense accuracy at that layer (:func:`~probing.views.senses.sense_separation`). Each
    (lemma, layer) map also embeds the mean vector of the sample, a row with ``kind="type
    average"``: the one point a type-level embedding gives the whole lemma. Columns: ``lemma,
    layer, kind ("occurrence" | "type average"), row, x, y, word, sense, group, label, n_shown,
    n_total, n_distinct, method``; ``n_distinct`` counts the distinct occurrence vectors,
    ``group`` is one of the ``n_senses`` most frequent first sense keys, else ``"other"``, and
    ``label`` is its legend text (short gloss when ``gloss`` is given, else the key); ``selection``
    describes the occurrences (e.g. ``'play' (NOUN "play")``). ``color_by`` groups by another token-table
    column instead of the first sense key (``"upos"``, ``"word"``, ...; with ``all_forms`` and the default
    ``color_by`` the groups are the word forms); a
    lemma none of whose occurrences has a value (a corpus without senses) warns: its map would be all grey.
    """
    if not 1 <= n_senses <= len(CATEGORY_COLOURS):
        raise InputError(f"n_senses must be between 1 and {len(CATEGORY_COLOURS)} (distinct colours), got {n_senses}")
    tokens = store.tokens
    if color_by != "sense" and color_by not in tokens.columns:
        raise InputError(f"color_by={color_by!r} is not a token-table column; columns: {', '.join(tokens.columns)}")
    frames = []
    for lemma in lemmas:
        selection = lemma_rows(tokens, lemma, all_forms=all_forms)
        all_rows = selection.rows
        if color_by == "sense":
            keys = np.array([_first_key(s) for s in tokens["sense"].to_numpy()[all_rows]], dtype=object)
        else:
            keys = tokens[color_by].astype(str).to_numpy()[all_rows].astype(object)
        if not (keys != "").any():
            warnings.warn(
                f"lemma {lemma!r}: none of its {len(all_rows)} occurrences has a {color_by} in this store, so its "
                "map is all grey; colour by a column the corpus has, e.g. color_by='upos' or color_by='word'",
                UserWarning,
                stacklevel=2,
            )
        by_form = all_forms and color_by == "sense"  # every form shown: colour by form unless asked otherwise
        colour_by = tokens["word"].astype(str).str.lower().to_numpy()[all_rows] if by_form else keys
        ranked = pd.Series(colour_by[colour_by != ""]).value_counts()
        ranked = ranked.iloc[np.lexsort((ranked.index.to_numpy(dtype=str), -ranked.to_numpy()))]
        top = list(ranked.index[:n_senses])
        groups = np.array([k if k in top else OTHER for k in colour_by], dtype=object)
        rows = all_rows[stratified_sample(keys, max_points, seed)]
        sample_groups = groups[np.searchsorted(all_rows, rows)]
        counts = pd.Series(groups).value_counts()
        if by_form:
            labels = {g: f'"{g}" ({int(counts.get(g, 0))})' for g in top} | {
                OTHER: f"other forms ({counts.get(OTHER, 0)})"
            }
        else:
            other = "other senses / unannotated" if color_by == "sense" else f"other / no {color_by}"
            labels = {
                g: _legend_label(g, int(counts.get(g, 0)), gloss if color_by == "sense" else None, other)
                for g in top + [OTHER]
            }
        for index, name in _layers(store, layers):
            x = np.asarray(store.layer(index)[rows], dtype=np.float32)
            coords, used = embed_2d(np.vstack([x, x.mean(axis=0, keepdims=True)]), method=method, seed=seed)
            score = sense_separation(x, tokens["sense"].to_numpy()[rows], seed=seed)
            n = len(rows)
            frames.append(
                pd.DataFrame(
                    {
                        "lemma": lemma,
                        "layer": name,
                        "kind": ["occurrence"] * n + ["type average"],
                        "row": np.append(rows, -1),
                        "x": coords[:, 0],
                        "y": coords[:, 1],
                        "word": np.append(tokens["word"].to_numpy()[rows], ""),
                        "sense": np.append(tokens["sense"].to_numpy()[rows], ""),
                        "group": np.append(sample_groups, ""),
                        "label": [labels[g] for g in sample_groups] + ["type average"],
                        "n_shown": n,
                        "n_total": len(all_rows),
                        "n_distinct": len(np.unique(x, axis=0)),
                        "method": used,
                        "selection": selection.label,
                        "score": score.score,
                        "ci_low": score.ci_low,
                        "ci_high": score.ci_high,
                        "chance": score.chance,
                        "n_scored": score.n,
                    }
                )
            )
    return pd.concat(frames, ignore_index=True)


def _score_note(panel: pd.DataFrame) -> str:
    r = panel.iloc[0]
    if r["n_scored"] < 2:
        return "1-NN sense acc: n/a"
    return f"1-NN sense acc {r['score']:.2f} [{r['ci_low']:.2f}, {r['ci_high']:.2f}]\nchance {r['chance']:.2f}, n={r['n_scored']}"


def _style_map_axis(ax: Axes, title: str, method: str) -> None:
    """Title, axis names and equal scales (PCA distances are real distances; UMAP has no units)."""
    ax.set_title(title, fontsize=10)
    name = "UMAP" if method == "umap" else "PCA"
    ax.set_xlabel(f"{name} 1", fontsize=8)
    ax.set_ylabel(f"{name} 2", fontsize=8)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_aspect("equal", adjustable="datalim")


def _fallback_note(panel: pd.DataFrame, requested: str) -> str:
    """The second title line of a panel drawn by PCA instead of the method asked for (kept short: a long
    single-line title ran past the figure's left edge)."""
    if panel["method"].iat[0] == requested:
        return ""
    return f"\n{panel['n_distinct'].iat[0]} distinct vectors (PCA)"


def _draw_type_average(ax: Axes, star: pd.DataFrame) -> None:
    """The mean of the occurrences as a hollow star, so that a point under it (layer 0's single point,
    where every occurrence has the mean's vector) stays visible."""
    ax.scatter(star["x"], star["y"], marker="*", s=260, facecolors="none", edgecolors="black", linewidths=1.3, zorder=5)


def _marker_size(n: int) -> float:
    return float(np.clip(2500 / max(n, 1), 4, 30))


def _sample_note(shown: int, total: int, what: str, by: str) -> str | None:
    if shown >= total:
        return None
    return f"{shown:,} of {total:,} {what} shown (stratified by {by})"


def umap_layers(
    store: StoreLike,
    lemmas: Sequence[str] = ("play", "bank", "line", "serve"),
    layers: Sequence[int | str] = (0, 1, 2),
    max_points: int = 400,
    seed: int = 0,
    glove: Any = None,
    *,
    n_senses: int = 6,
    gloss: Gloss | None = None,
    method: str = "umap",
    all_forms: bool = False,
    color_by: str = "sense",
    ax: Axes | None = None,
) -> Figure:
    """Occurrences of each lemma at each layer, side by side, coloured by WordNet sense.

    Each lemma (``LEMMA`` or ``LEMMA:UPOS``) shows its most frequent word form and POS only, so the
    map is not a map of word forms; ``all_forms=True`` shows every form, coloured by form. Each map
    prints its leave-one-out 1-NN sense accuracy on the original vectors (95% bootstrap CI) and the
    chance level (what one vector for all occurrences, e.g. GloVe, scores).

    One map per lemma and layer (a row per lemma): a joint map of all lemmas would mostly separate
    the lemmas from each other and squeeze the sense structure within each, which is the point.
    Colours are the lemma's most frequent senses (Okabe-Ito), grey the rest; the legend gives
    short glosses (``gloss(key)``) or the sense keys, with counts.

    The hollow black star is the mean of the plotted occurrence vectors, embedded in the same map: the one
    point a type-level vector gives every occurrence. It is *not* the GloVe vector, which lives in
    another space and cannot be placed on this map. With ``glove`` (a :class:`~probing.glove.Vectors`)
    the last column says so and lists the word's GloVe type neighbours: one vector, one list,
    whatever the sense. Layer 0 is context-free, so all occurrences of a word form coincide there.

    ``color_by`` colours by another token-table column (see :func:`umap_layers_coords`). With ``ax`` (one
    lemma and one layer: one map) the map and its legend are drawn there and its figure returned.
    """
    if ax is not None and (len(lemmas) != 1 or len(layers) != 1):
        raise InputError(f"ax= draws one map: give one lemma and one layer (got {len(lemmas)} and {len(layers)})")
    coords = umap_layers_coords(
        store,
        lemmas,
        layers,
        max_points,
        seed,
        n_senses=n_senses,
        gloss=gloss,
        method=method,
        all_forms=all_forms,
        color_by=color_by,
    )
    layer_names = list(dict.fromkeys(coords["layer"]))
    if ax is not None:
        return _one_lemma_map(ax, coords, lemmas[0], layer_names[0], method)
    n_rows, n_cols = len(lemmas), len(layer_names)
    fig = Figure(figsize=(3.0 * n_cols + 3.6, 2.9 * n_rows + 0.6), layout="constrained")
    grid = fig.add_gridspec(n_rows, n_cols + 1, width_ratios=[1.0] * n_cols + [1.25])
    for r, lemma in enumerate(lemmas):
        part = coords[coords["lemma"] == lemma]
        first = part.iloc[0]
        groups = [g for g in dict.fromkeys(part["group"]) if g]
        colour_of = _group_colours(part)
        for c, name in enumerate(layer_names):
            panel_ax = fig.add_subplot(grid[r, c])
            panel = part[part["layer"] == name]
            occ = panel[panel["kind"] == "occurrence"]
            _draw_groups(panel_ax, occ, groups, colour_of)
            _draw_type_average(panel_ax, panel[panel["kind"] == "type average"])
            _style_map_axis(
                panel_ax, f"{first['selection']}, layer {name}{_fallback_note(panel, method)}", panel["method"].iat[0]
            )
            panel_ax.text(
                0.02,
                0.02,
                _score_note(occ),
                transform=panel_ax.transAxes,
                fontsize=6.5,
                va="bottom",
                ha="left",
                bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none", "pad": 1.5},
            )
        _draw_lemma_info(fig.add_subplot(grid[r, n_cols]), part, groups, colour_of, glove, lemma)
    what = "WordNet sense" if color_by == "sense" else color_by
    fig.suptitle(f"Occurrences by {what}, per layer ({_method_title(coords)}, seed {seed})", fontsize=11)
    return fig


def _draw_lemma_info(
    info: Axes, part: pd.DataFrame, groups: list[str], colour_of: dict[str, str], glove: Any, lemma: str
) -> None:
    """The column beside a lemma's maps: the legend of its groups (most frequent first, "other" last) and of
    the type-average star, then the sample note and, with ``glove``, the word's GloVe type neighbours."""
    first = part.iloc[0]
    info.axis("off")
    handles = [
        Line2D(
            [],
            [],
            marker="o",
            linestyle="",
            color=colour_of[g],
            markersize=7,
            label=part.loc[part["group"] == g, "label"].iat[0],
        )
        for g in sorted(groups, key=lambda g: (g == OTHER, -np.sum(part["group"] == g)))
    ]
    handles.append(
        Line2D(
            [],
            [],
            marker="*",
            linestyle="",
            color="black",
            markerfacecolor="none",
            markersize=12,
            label="mean of these occurrences: one\npoint for all senses, as a type\nvector such as GloVe gives",
        )
    )
    info.legend(
        handles=handles,
        loc="upper left",
        fontsize=7.5,
        frameon=False,
        title=f"{first['selection']}: {first['n_total']:,} occurrences",
        title_fontsize=8.5,
    )
    notes = []
    note = _sample_note(int(first["n_shown"]), int(first["n_total"]), "occurrences", "sense")
    if note:
        notes.append(note)
    if glove is not None:
        notes.append(_glove_note(glove, lemma))
    if notes:
        info.text(0.0, 0.0, "\n".join(notes), fontsize=7.5, va="bottom", ha="left", wrap=True, transform=info.transAxes)


def _draw_groups(ax: Axes, occ: pd.DataFrame, groups: list[str], colour_of: dict[str, str]) -> None:
    for g in sorted(groups, key=lambda g: (g != OTHER, -np.sum(occ["group"] == g))):
        pts = occ[occ["group"] == g]
        ax.scatter(
            pts["x"], pts["y"], s=_marker_size(len(occ)), c=colour_of[g], alpha=0.75, linewidths=0, rasterized=True
        )


def _one_lemma_map(ax: Axes, coords: pd.DataFrame, lemma: str, name: str, method: str) -> Figure:
    """One (lemma, layer) map on the caller's ``ax``, with its legend inside; returns the figure."""
    panel = coords[(coords["lemma"] == lemma) & (coords["layer"] == name)]
    occ = panel[panel["kind"] == "occurrence"]
    groups = [g for g in dict.fromkeys(panel["group"]) if g]
    colour_of = _group_colours(panel)
    _draw_groups(ax, occ, groups, colour_of)
    _draw_type_average(ax, panel[panel["kind"] == "type average"])
    _style_map_axis(ax, f"'{lemma}', layer {name}{_fallback_note(panel, method)}", panel["method"].iat[0])
    handles = [
        Line2D([], [], marker="o", linestyle="", color=colour_of[g], markersize=6,
               label=panel.loc[panel["group"] == g, "label"].iat[0])
        for g in sorted(groups, key=lambda g: (g == OTHER, -np.sum(occ["group"] == g)))
    ]  # fmt: skip
    ax.legend(handles=handles, fontsize=7, frameon=False, loc="best")
    return ax.figure  # type: ignore[return-value]


def _group_colours(part: pd.DataFrame) -> dict[str, str]:
    occ = part[part["kind"] == "occurrence"]
    ranked = [g for g in occ["group"].value_counts().index if g != OTHER]
    ranked.sort(key=lambda g: (-np.sum(occ["group"] == g), g))
    colours = {g: CATEGORY_COLOURS[i % len(CATEGORY_COLOURS)] for i, g in enumerate(ranked)}
    colours[OTHER] = OTHER_COLOUR
    return colours


def _glove_note(glove: Any, lemma: str) -> str:
    if lemma not in glove:
        return f"GloVe has no vector for '{lemma}'."
    words = ", ".join(type_neighbors(glove, lemma, k=6)["word"])
    return f"GloVe: ONE vector for every '{lemma}',\nwhatever the sense; nearest types:\n{words}"


def _method_title(coords: pd.DataFrame) -> str:
    methods = set(coords["method"])
    return "UMAP, cosine" if methods == {"umap"} else ("PCA" if methods == {"pca"} else "UMAP, cosine; PCA where noted")


# -- parts of speech per layer ------------------------------------------------------------------


def umap_pos_coords(
    store: StoreLike,
    layers: Sequence[int | str] = (0, 1, 2),
    max_points: int = 3000,
    seed: int = 0,
    *,
    n_tags: int = 9,
    method: str = "umap",
    color_by: str = "upos",
) -> pd.DataFrame:
    """Coordinates behind :func:`umap_pos`: a sample of tokens (stratified by the ``color_by`` column, UPOS by
    default; OOV tokens and tokens without a value left out), the same rows at every layer. Columns:
    ``layer, row, x, y, word, upos, group, n_shown, n_total, n_distinct, method``; ``upos`` holds the
    ``color_by`` value and ``group`` is one of the ``n_tags`` most frequent values, else ``"other"``."""
    if not 1 <= n_tags <= len(TOL_MUTED):
        raise InputError(f"n_tags must be between 1 and {len(TOL_MUTED)} (distinct colours), got {n_tags}")
    tokens = store.tokens
    if color_by not in tokens.columns:
        raise InputError(f"color_by={color_by!r} is not a token-table column; columns: {', '.join(tokens.columns)}")
    upos = tokens[color_by].astype(str).to_numpy()
    candidates = np.flatnonzero((upos != "") & ~tokens["oov"].to_numpy(dtype=bool))
    if len(candidates) == 0:
        raise InputError(f"the store has no tokens with a {color_by} (the {color_by} column is empty)")
    tags = upos[candidates]
    ranked = pd.Series(tags).value_counts()
    top = sorted(ranked.index, key=lambda t: (-ranked[t], t))[:n_tags]
    rows = candidates[stratified_sample(tags, max_points, seed)]
    sample_tags = upos[rows]
    groups = np.array([t if t in top else OTHER for t in sample_tags], dtype=object)
    frames = []
    for index, name in _layers(store, layers):
        x = np.asarray(store.layer(index)[rows], dtype=np.float32)
        coords, used = embed_2d(x, method=method, seed=seed)
        frames.append(
            pd.DataFrame(
                {
                    "layer": name,
                    "row": rows,
                    "x": coords[:, 0],
                    "y": coords[:, 1],
                    "word": tokens["word"].to_numpy()[rows],
                    "upos": sample_tags,
                    "group": groups,
                    "n_shown": len(rows),
                    "n_total": len(candidates),
                    "n_distinct": len(np.unique(x, axis=0)),
                    "method": used,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def umap_pos(
    store: StoreLike,
    layers: Sequence[int | str] = (0, 1, 2),
    max_points: int = 3000,
    seed: int = 0,
    *,
    n_tags: int = 9,
    method: str = "umap",
    color_by: str = "upos",
    ax: Axes | None = None,
) -> Figure:
    """A sample of the corpus per layer, coloured by universal POS tag (Tol muted; grey = other tags).

    ``color_by`` colours by another token-table column (``xpos``, ``deprel``, ...). With ``ax`` (one layer:
    one map) the map is drawn there, its legend inside, and its figure returned."""
    if ax is not None and len(layers) != 1:
        raise InputError(f"ax= draws one map: give one layer (got {len(layers)})")
    coords = umap_pos_coords(store, layers, max_points, seed, n_tags=n_tags, method=method, color_by=color_by)
    names = list(dict.fromkeys(coords["layer"]))
    if ax is None:
        fig = Figure(figsize=(3.3 * len(names) + 1.6, 3.6), layout="constrained")
        axes = fig.subplots(1, len(names), squeeze=False)[0]
    else:
        fig, axes = ax.figure, [ax]  # type: ignore[assignment]
    first = coords[coords["layer"] == names[0]]
    ranked = [g for g in first["group"].value_counts().index if g != OTHER]
    ranked.sort(key=lambda g: (-np.sum(first["group"] == g), g))
    colours = {g: TOL_MUTED[i % len(TOL_MUTED)] for i, g in enumerate(ranked)}
    colours[OTHER] = OTHER_COLOUR
    for panel_ax, name in zip(axes, names):
        panel = coords[coords["layer"] == name]
        for g in [OTHER] + ranked:
            pts = panel[panel["group"] == g]
            panel_ax.scatter(
                pts["x"], pts["y"], s=_marker_size(len(panel)), c=colours[g], alpha=0.7, linewidths=0, rasterized=True
            )
        _style_map_axis(panel_ax, f"layer {name}{_fallback_note(panel, method)}", panel["method"].iat[0])
    handles = [
        Line2D(
            [],
            [],
            marker="o",
            linestyle="",
            color=colours[g],
            markersize=6,
            label=f"{g} ({int(np.sum(first['group'] == g))})",
        )
        for g in ranked + [OTHER]
        if np.any(first["group"] == g)
    ]
    title_of = "UPOS" if color_by == "upos" else color_by
    if ax is not None:
        ax.legend(handles=handles, fontsize=7, frameon=False, title=f"{title_of} (shown)", title_fontsize=7)
        return fig
    fig.legend(handles=handles, loc="outside right center", fontsize=8, frameon=False, title=f"{title_of} (shown)")
    what = "part of speech" if color_by == "upos" else color_by
    title = f"Tokens by {what}, per layer ({_method_title(coords)}, seed {seed})"
    note = _sample_note(int(first["n_shown"].iat[0]), int(first["n_total"].iat[0]), "tokens", title_of)
    fig.suptitle(title + (f"\n{note}" if note else ""), fontsize=10)
    return fig
