"""An interactive occurrence explorer: one linked map per layer, offline, in Jupyter or as one HTML file.

Each point is one occurrence of a chosen lemma (or word form, or a POS sample) in an activation store.
The page, drawn with Bokeh and its JavaScript inlined (no CDN, no server, no request of any kind),
offers: hover (the sentence with the word marked, lemma, POS, sense key and gloss, layer, document);
colour by sense, POS, word form or corpus; a search box (word or lemma) that highlights matches in every
panel; a click that lists the point's k nearest occurrences in the ORIGINAL space of that layer (cosine,
precomputed here, as in Peters et al. 2018, Table 4); lasso / box selection shared by all panels (one
data source); and a CSV export of the selection. A sense-separation score per layer is printed on the page.

Projections (UMAP with a fixed seed, or PCA) are cached under ``probing.paths.cache_dir()/projections``,
keyed by the stores' keys, the rows, the layer and the settings, so a second build only draws.

Bokeh is an optional dependency: ``pip install 'elmo-probing[explore]'``.
"""

from __future__ import annotations

import hashlib
import html
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from probing._io import atomic_open, atomic_path, sha256_file
from probing.errors import InputError, ProbingError
from probing.identity import code_identity, digest
from probing.palette import CATEGORY_COLOURS
from probing.paths import cache_dir
from probing.protocols import StoreLike
from probing.views.neighbors import _layer_index, _store_layer_names
from probing.views.senses import LemmaSelection, first_sense, lemma_rows, sense_separation
from probing.views.umap import OTHER_COLOUR, TOL_MUTED, embed_2d, stratified_sample

Gloss = Callable[[str], str]
COLOUR_BY = ("sense", "pos", "form", "corpus")
PROJECTION_VERSION = 2  # bump when embed_2d's output changes for a reason its code does not show
GLOVE_PANEL = "GloVe"
PAGE_WIDTH, NOTEBOOK_WIDTH, MIN_WIDTH = 1240, 980, 360  # CSS px: a 1280 px screen, a notebook column, a phone
_PANEL_MAX, _PANEL_MIN, _TOOLBAR = 340, 280, 40
_SCROLL: dict[str, str | None] = {
    "overflow-x": "auto"
}  # a table wider than a narrow window scrolls in its box, not the page


class MissingExtraError(ProbingError, ImportError):
    """The optional ``explore`` extra (Bokeh) is not installed."""


def _bokeh():
    try:
        import bokeh
    except ImportError as e:
        raise MissingExtraError("the occurrence explorer needs Bokeh: pip install 'elmo-probing[explore]'") from e
    return bokeh


# -- data: which occurrences, their vectors, projections and neighbours ---------------------------


def _corpus_name(store: StoreLike, i: int) -> str:
    corpus = (getattr(store, "manifest", None) or {}).get("corpus", {})
    name = "/".join(str(corpus[k]) for k in ("name", "split") if corpus.get(k))
    return name or f"store {i}"


def _select(
    tokens: pd.DataFrame,
    lemmas: Sequence[str] | None,
    words: Sequence[str] | None,
    pos: Sequence[str] | None,
    all_forms: bool,
) -> tuple[np.ndarray, np.ndarray, list[LemmaSelection]]:
    """Rows of one store and the set label of each row ("'play' (NOUN "play")", "word 'plays'", "NOUN")."""
    rows: list[np.ndarray] = []
    sets: list[np.ndarray] = []
    chosen: list[LemmaSelection] = []
    usable = ~tokens["oov"].to_numpy(dtype=bool)
    for spec in lemmas or ():
        sel = lemma_rows(tokens, spec, all_forms=all_forms)
        chosen.append(sel)
        rows.append(sel.rows)
        sets.append(np.full(len(sel.rows), sel.label, dtype=object))
    if words:
        forms = tokens["word"].astype(str).str.lower().to_numpy()
        tags = tokens["upos"].astype(str).to_numpy()
        for spec in words:
            word, _, tag = spec.partition(":")
            mask = usable & (forms == word.lower()) & ((tags == tag.upper()) if tag else True)
            r = np.flatnonzero(mask)
            if len(r) == 0:
                raise InputError(f"no occurrences of the word form {spec!r} in the store (word column)")
            rows.append(r)
            sets.append(np.full(len(r), f"word '{word.lower()}'" + (f" ({tag.upper()})" if tag else ""), dtype=object))
    if not lemmas and not words:
        tags = tokens["upos"].astype(str).to_numpy()
        mask = usable & (tags != "") & (np.isin(tags, [t.upper() for t in pos]) if pos else True)
        r = np.flatnonzero(mask)
        if len(r) == 0:
            raise InputError(f"no POS-tagged tokens{' with UPOS ' + ', '.join(pos) if pos else ''} in the store")
        rows.append(r)
        sets.append(tags[r].astype(object))
    all_rows = np.concatenate(rows).astype(np.int64)
    all_sets = np.concatenate(sets)
    _, first = np.unique(all_rows, return_index=True)  # an occurrence chosen twice keeps its first set
    first = np.sort(first)
    return all_rows[first], all_sets[first], chosen


def projection_identity() -> dict[str, str]:
    """What computes a projection: :data:`PROJECTION_VERSION` and the code of ``probing.views.umap``
    (:func:`probing.identity.code_identity`), and the installed umap-learn (whose layouts change between
    releases)."""
    import importlib.metadata

    try:
        umap_version = importlib.metadata.version("umap-learn")
    except importlib.metadata.PackageNotFoundError:
        umap_version = "absent"
    return {"code": code_identity(PROJECTION_VERSION, ["probing.views.umap"]), "umap-learn": umap_version}


def _rows_digest(parts: Sequence[tuple[str, np.ndarray]]) -> list[tuple[str, str]]:
    return [(key, hashlib.sha256(np.ascontiguousarray(r, dtype=np.int64).tobytes()).hexdigest()) for key, r in parts]


def cached_projection(
    x: np.ndarray, key: dict, *, method: str, seed: int, cache: bool = True
) -> tuple[np.ndarray, str]:
    """``embed_2d(x)`` -> ``((n, 2) float64, method used)``, cached by ``key`` and the settings.

    ``key`` names the vectors (store keys and row digests, layer); the settings and
    :func:`projection_identity` are added (:func:`probing.identity.digest`). Files:
    ``cache_dir()/projections/<sha256>.npy`` (written atomically, read without pickle) and ``.json`` beside
    it, which records the ``.npy`` file's sha256: a file that fails it, or has the wrong shape, is
    recomputed.

    Parameters
    ----------
    x : ndarray (n, dim)
        The vectors to project (any float dtype; fp16 memmap rows are fine).
    key : dict
        JSON-able identity of ``x`` (only ``len(x)`` of ``x`` itself enters the cache key).
    method, seed : ``"umap"`` or ``"pca"``, and UMAP's seed (:func:`probing.views.umap.embed_2d`).
    cache : read and write the cache; ``False`` always computes and writes nothing.

    Returns
    -------
    coords : ndarray (n, 2), float64
        Row i is the 2-D position of ``x[i]``.
    used : str
        ``"umap"`` or ``"pca"`` (PCA also when ``x`` has too few distinct rows for UMAP).
    """
    full = {**key, "method": method, "seed": seed, "n": len(x), "identity": projection_identity()}
    path = cache_dir() / "projections" / f"{digest(full)}.npy"
    meta = path.with_suffix(".json")
    if cache and path.is_file() and meta.is_file():
        try:
            record = json.loads(meta.read_text(encoding="utf-8"))
            if record.get("sha256") == sha256_file(path):
                coords = np.load(path, allow_pickle=False)
                used = record.get("used")
                if coords.shape == (len(x), 2) and used in ("umap", "pca"):
                    return coords, used
        except (OSError, ValueError):
            pass  # unreadable: recomputed below
    coords, used = embed_2d(x, method=method, seed=seed)
    if cache:
        with atomic_path(path) as tmp:
            with open(tmp, "wb") as f:
                np.save(f, coords, allow_pickle=False)
        with atomic_open(meta, "w", encoding="utf-8") as f:
            json.dump({**full, "used": used, "sha256": sha256_file(path)}, f)
    return coords, used


def knn_cosine(
    x: np.ndarray, k: int, *, groups: np.ndarray | None = None, chunk_rows: int = 1024
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` nearest other rows of every row of ``x`` (``(n, dim)``) by cosine, best first.

    Rows in the same ``groups`` value (e.g. the same sentence) are skipped, as are rows with a zero or
    non-finite vector (they have no cosine; their own lists are empty). Ties go to the lower row
    index, as in :func:`probing.views.neighbors.cosine_topk`. Returns ``(ids (n, k) int64, cosines
    (n, k) float32)``, padded with -1 / NaN where fewer than ``k`` rows qualify.

    Parameters
    ----------
    x : ndarray (n, dim)
        The vectors (any float dtype; computed in float32).
    k : neighbours per row.
    groups : ndarray (n,), optional
        A group id per row (e.g. sentence ids); rows of a row's own group are not its neighbours.
    chunk_rows : rows compared at a time (a ``(chunk_rows, n)`` float32 block of cosines).

    Returns
    -------
    ids : ndarray (n, k) of int64
        Row indices of each row's neighbours, best first; -1 pads.
    cosines : ndarray (n, k), float32
        Their cosines; NaN pads.
    """
    x = np.asarray(x, dtype=np.float32)
    n = len(x)
    norms = np.linalg.norm(x, axis=1)
    valid = np.isfinite(norms) & (norms > 0)
    unit = np.where(valid[:, None], x / np.where(valid, norms, 1.0)[:, None], 0.0).astype(np.float32)
    ids = np.full((n, k), -1, dtype=np.int64)
    sims_out = np.full((n, k), np.nan, dtype=np.float32)
    g = None if groups is None else np.asarray(groups)
    col = np.arange(n)
    for start in range(0, n, chunk_rows):
        stop = min(start + chunk_rows, n)
        sims = unit[start:stop] @ unit.T
        bad = ~valid[None, :] | (col[None, :] == np.arange(start, stop)[:, None])
        if g is not None:
            bad |= g[start:stop, None] == g[None, :]
        sims[bad] = -np.inf
        order = np.argsort(-sims, axis=1, kind="stable")[:, :k]  # stable: ties keep the lower index first
        best = np.take_along_axis(sims, order, axis=1)
        ok = np.isfinite(best) & valid[start:stop, None]
        ids[start:stop, : order.shape[1]] = np.where(ok, order, -1)  # fewer than k other rows: padded
        sims_out[start:stop, : order.shape[1]] = np.where(ok, best, np.nan)
    return ids, sims_out


def identical_groups(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For (n, dim) vectors: ``rep`` (n,) int64, the first row with the same vector (a row with a non-finite
    vector is its own group), and ``count`` (n,) int64, the size of each row's group.

    Parameters
    ----------
    x : ndarray (n, dim)
        The vectors; rows are the same when all their values are equal (``np.unique`` over rows).

    Returns
    -------
    rep : ndarray (n,) of int64
        For each row, the lowest row index with an identical vector (itself when unique or non-finite).
    count : ndarray (n,) of int64
        For each row, how many rows share its vector (1 for a non-finite row).
    """
    n = len(x)
    rep = np.arange(n, dtype=np.int64)
    ok = np.all(np.isfinite(x), axis=1)
    if ok.sum() > 1:
        rows = np.flatnonzero(ok)
        _, first, inverse = np.unique(np.ascontiguousarray(x[ok]), axis=0, return_index=True, return_inverse=True)
        rep[rows] = rows[first[inverse.ravel()]]
    count = np.bincount(rep, minlength=n)[rep]
    return rep, count.astype(np.int64)


def _distinct_neighbours(
    x: np.ndarray, rep: np.ndarray, count: np.ndarray, k: int, groups: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`knn_cosine` where all vectors differ; else the ``k`` nearest distinct vectors of each row's
    group (their representative rows), searched among the representatives, so ties at cosine 1 do not
    fill the list (the page names them instead)."""
    if (count == 1).all():
        return knn_cosine(x, k, groups=groups)
    reps = np.flatnonzero(rep == np.arange(len(rep)))
    ids, cos = knn_cosine(x[reps], k, groups=groups[reps])
    ids = np.where(ids >= 0, reps[np.maximum(ids, 0)], -1)
    where = np.searchsorted(reps, rep)
    return ids[where], cos[where]


def _sentence_html(words: np.ndarray, position: int) -> tuple[str, str]:
    """(escaped HTML with the word in <mark>, plain text with the word in brackets)."""
    marked = [
        f"<mark>{html.escape(str(w))}</mark>" if i == position else html.escape(str(w)) for i, w in enumerate(words)
    ]
    plain = [f"[{w}]" if i == position else str(w) for i, w in enumerate(words)]
    return " ".join(marked), " ".join(plain)


def _sentences(store: StoreLike, rows: np.ndarray) -> tuple[list[str], list[str]]:
    """Sentence of each store row, as HTML and as text; each sentence is rebuilt once."""
    tokens = store.tokens
    sid = tokens["sentence_id"].to_numpy()
    sub = tokens[tokens["sentence_id"].isin(set(sid[rows])).to_numpy()]  # hashed: np.isin on strings is O(n m)
    by_sentence: dict[Any, tuple[np.ndarray, np.ndarray]] = {}
    for s, part in sub.groupby("sentence_id", sort=False):
        order = np.argsort(part["position"].to_numpy(), kind="stable")
        by_sentence[s] = (part.index.to_numpy()[order], part["word"].to_numpy()[order])
    out_html, out_text = [], []
    for r in rows:
        index, words = by_sentence[sid[r]]
        h, t = _sentence_html(words, int(np.flatnonzero(index == r)[0]))
        out_html.append(h)
        out_text.append(t)
    return out_html, out_text


def _gloss_text(keys: np.ndarray, gloss: Gloss | None) -> list[str]:
    cache: dict[str, str] = {}
    out = []
    for key in keys:
        if key not in cache:
            text = ""
            if key and gloss is not None:
                try:
                    text = gloss(key)
                except LookupError:
                    text = ""
            cache[key] = text
        out.append(cache[key])
    return out


# -- colours --------------------------------------------------------------------------------------


def _ranked(values: np.ndarray) -> list[str]:
    counts = pd.Series(values).value_counts()
    return sorted((v for v in counts.index if v != ""), key=lambda v: (-counts[v], v))


def _palette_colours(values: np.ndarray, palette: Sequence[str]) -> tuple[np.ndarray, list[tuple[str, str, int]]]:
    """Colour per value: the most frequent values get the palette, the rest grey; legend entries."""
    ranked = _ranked(values)
    colour = {v: palette[i] for i, v in enumerate(ranked[: len(palette)])}
    counts = pd.Series(values).value_counts()
    legend = [(colour[v], v, int(counts[v])) for v in colour]
    rest = int(sum(counts[v] for v in counts.index if v not in colour))
    if rest:
        legend.append((OTHER_COLOUR, "other / none", rest))
    return np.array([colour.get(v, OTHER_COLOUR) for v in values], dtype=object), legend


def _sense_colours(
    sets: np.ndarray, keys: np.ndarray, glosses: list[str]
) -> tuple[np.ndarray, list[tuple[str, list[tuple[str, str, int]]]]]:
    """Senses coloured within each set (Okabe-Ito by frequency, grey for the rest and unannotated)."""
    out = np.full(len(keys), OTHER_COLOUR, dtype=object)
    legends = []
    gloss_of = dict(zip(keys, glosses))
    for s in dict.fromkeys(sets):
        mask = sets == s
        colours, legend = _palette_colours(keys[mask], CATEGORY_COLOURS)
        out[mask] = colours
        named = [(c, f"{v} {gloss_of.get(v, '')}".strip() if v != "other / none" else v, n) for c, v, n in legend]
        legends.append((str(s), named))
    return out, legends


def _legend_html(groups: list[tuple[str, list[tuple[str, str, int]]]]) -> str:
    parts = []
    for title, entries in groups:
        items = "".join(
            f'<span class="item"><span class="sw" style="background:{c}"></span>{html.escape(label)} ({n})</span>'
            for c, label, n in entries
        )
        parts.append(f'<div class="group"><b>{html.escape(title)}</b> {items}</div>' if title else items)
    return "".join(parts) if groups and groups[0][0] else f'<div class="group">{"".join(parts)}</div>'


# -- the explorer ---------------------------------------------------------------------------------


@dataclass
class Explorer:
    """The built explorer: ``points`` (one row per occurrence, coordinates per panel), ``neighbours``
    (per panel: ``(ids (n, k), cosines (n, k))`` into ``points``), ``scores`` (sense separation per set
    and panel) and the settings. Displays inline in Jupyter; :meth:`save` writes the HTML file."""

    points: pd.DataFrame
    panels: list[str]
    neighbours: dict[str, tuple[np.ndarray, np.ndarray]]
    scores: pd.DataFrame
    settings: dict[str, Any]
    legends: dict[str, str] = field(default_factory=dict)
    title: str = "Occurrence explorer"
    width: int | None = None
    _html: dict[int, str] = field(default_factory=dict, repr=False)

    def page(self, width: int) -> str:
        """The whole page laid out for ``width`` CSS pixels: one HTML document with all JavaScript inlined."""
        if width not in self._html:
            self._html[width] = _render(self, width)
        return self._html[width]

    @property
    def html(self) -> str:
        """The saved page (laid out for ``width``, default :data:`PAGE_WIDTH`)."""
        return self.page(self.width or PAGE_WIDTH)

    def save(self, path: str | os.PathLike) -> Path:
        """Write the page to ``path`` (atomically) and return the path."""
        path = Path(path)
        with atomic_open(path, "w", encoding="utf-8") as f:
            f.write(self.html)
        return path

    def _repr_html_(self) -> str:
        # an iframe keeps the page's Bokeh apart from any other Bokeh the notebook has loaded
        width = self.width or NOTEBOOK_WIDTH
        rows = -(-len(self.panels) // _columns(width, len(self.panels))[0])
        height = 800 + rows * 360
        return (
            f'<iframe srcdoc="{html.escape(self.page(width), quote=True)}" '
            f'style="width:100%;height:{height}px;border:0" title="{html.escape(self.title)}"></iframe>'
        )

    def __repr__(self) -> str:
        return f"Explorer({len(self.points)} occurrences, panels {self.panels}, {self.settings.get('method_used')})"


def explore(
    store: StoreLike | Sequence[StoreLike],
    lemmas: Sequence[str] | None = None,
    layers: Sequence[int | str] | None = None,
    *,
    words: Sequence[str] | None = None,
    pos: Sequence[str] | None = None,
    all_forms: bool = False,
    glove: Any = None,
    gloss: Gloss | None = None,
    max_points: int = 2000,
    seed: int = 0,
    method: str = "umap",
    k: int = 5,
    color: str = "sense",
    n_boot: int = 1000,
    cache: bool = True,
    title: str | None = None,
    width: int | None = None,
) -> Explorer:
    """Build the explorer for occurrences in ``store`` (a Store, or a list of stores of one encoder).

    Occurrences: each lemma spec ``LEMMA[:UPOS]`` in ``lemmas`` (by default its most frequent word
    form and POS only; ``all_forms=True`` keeps every form, and the page then colours by form), each
    word form ``WORD[:UPOS]`` in ``words``, or, with neither, a sample of POS-tagged tokens (only the
    tags in ``pos`` when given). At most ``max_points`` in all, stratified by set and sense, drawn
    with ``seed``. One panel per layer in ``layers`` (default: all), plus a GloVe panel (type vectors
    of each occurrence's word) when ``glove`` is given. ``gloss(key)`` adds short WordNet glosses.
    ``k`` nearest occurrences per point and panel; ``method`` "umap" (cosine, seed ``seed``) or "pca";
    ``color`` is the initial colouring (sense, pos, form, corpus). ``width``: the page's width in CSS pixels;
    panels wrap into rows to fit it (default: 1240 for the saved page, a 1280 px screen; 980 inline in
    Jupyter, a notebook's output column).

    Occurrences whose vectors are identical in a panel (every occurrence of a word form at layer 0 and in
    GloVe) are drawn there as one point sized by their count (columns ``dup_<panel>``: the count,
    ``rep_<panel>``: the row drawn for the group); their neighbour lists name the ties and then list the
    nearest *distinct* vectors.
    """
    _bokeh()
    if width is not None and (not isinstance(width, int) or width < MIN_WIDTH):
        raise InputError(f"width must be an int of at least {MIN_WIDTH} (CSS pixels), got {width!r}")
    if color not in COLOUR_BY:
        raise InputError(f"color must be one of {', '.join(COLOUR_BY)}, got {color!r}")
    if k < 1:
        raise InputError(f"k must be at least 1, got {k}")
    stores: list[StoreLike] = list(store) if isinstance(store, (list, tuple)) else [cast(StoreLike, store)]
    names0 = _store_layer_names(stores[0])
    layer_list: list[int | str] = list(layers) if layers is not None else list(names0 or (0, 1, 2))
    picked = []
    for i, st in enumerate(stores):
        rows, sets, chosen = _select(st.tokens, lemmas, words, pos, all_forms)
        picked.append((i, st, rows, sets, chosen))
    n_total = sum(len(p[2]) for p in picked)
    # stratify the sample by set and sense, over all stores at once
    strata = np.concatenate(
        [
            np.array(
                [f"{s}|{k_}" for s, k_ in zip(sets, first_sense(st.tokens["sense"].to_numpy()[rows]))], dtype=object
            )
            for _, st, rows, sets, _ in picked
        ]
    )
    keep = stratified_sample(strata, max_points, seed)
    layer_idx = [_layer_index(layer, names0) for layer in layer_list]
    panel_names = [names0[i] if names0 is not None and i < len(names0) else str(i) for i in layer_idx]
    points, stacked, row_key = _sampled(picked, keep, panel_names, layer_idx)
    points["gloss"] = _gloss_text(points["sense"].to_numpy(), gloss)
    panels = list(panel_names)
    if glove is not None:
        gv, oov = glove.lookup(points["word"].tolist())
        gv[oov] = np.nan
        stacked[GLOVE_PANEL] = gv
        panels.append(GLOVE_PANEL)
    glove_id = str(getattr(glove, "fingerprint", glove))
    used_methods, neighbours = _place(
        points, stacked, panels, row_key, glove_id, method=method, seed=seed, cache=cache, k=k
    )
    scores = _scores(points, stacked, panels, n_boot=n_boot, seed=seed)
    settings = {
        "n_shown": len(points),
        "n_total": int(n_total),
        "max_points": max_points,
        "seed": seed,
        "method": method,
        "method_used": used_methods,
        "k": k,
        "color": "form" if all_forms and color == "sense" and lemmas else color,
        "all_forms": all_forms,
        "corpora": sorted(set(points["corpus"])),
        "encoder": str((getattr(stores[0], "manifest", None) or {}).get("encoder", {}).get("name", "")),
    }
    ex = Explorer(
        points, panels, neighbours, scores, settings, title=title or _default_title(settings, lemmas), width=width
    )
    ex.legends = _legends(points)
    return ex


def _sampled(
    picked: list[tuple[int, StoreLike, np.ndarray, np.ndarray, Any]],
    keep: np.ndarray,
    panel_names: list[str],
    layer_idx: list[int],
) -> tuple[pd.DataFrame, dict[str, np.ndarray], list[tuple[str, str]]]:
    """The sampled occurrences: ``keep`` indexes the stores' selections ``picked`` one after another. Returns
    their rows (store, row, corpus, set, ids, word, form, lemma, POS, first sense, senses, sentence), each
    layer panel's vectors in that order, and the digest of the rows (the projections' cache key)."""
    offsets = np.cumsum([0] + [len(p[2]) for p in picked])
    frames = []
    vectors: dict[str, list[np.ndarray]] = {}
    key_parts = []
    for (i, st, rows, sets, _), lo, hi in zip(picked, offsets[:-1], offsets[1:]):
        mine = keep[(keep >= lo) & (keep < hi)] - lo
        r, s = rows[mine], sets[mine]
        key_parts.append((str(getattr(st, "key", f"store{i}")), r))
        t = st.tokens.iloc[r]
        sent_html, sent_text = _sentences(st, r)
        keys = first_sense(t["sense"].to_numpy())
        frames.append(
            pd.DataFrame(
                {
                    "store": i,
                    "row": r,
                    "corpus": _corpus_name(st, i),
                    "set": s,
                    "sentence_id": t["sentence_id"].astype(str).to_numpy(),
                    "doc_id": t["doc_id"].astype(str).to_numpy(),
                    "word": t["word"].astype(str).to_numpy(),
                    "form": t["word"].astype(str).str.lower().to_numpy(),
                    "lemma": t["lemma"].astype(str).to_numpy(),
                    "upos": t["upos"].astype(str).to_numpy(),
                    "sense": keys,
                    "senses": t["sense"].astype(str).to_numpy(),
                    "sentence_html": sent_html,
                    "sentence": sent_text,
                }
            )
        )
        for name, li in zip(panel_names, layer_idx):
            vectors.setdefault(name, []).append(np.asarray(st.layer(li)[r], dtype=np.float32))
    points = pd.concat(frames, ignore_index=True)
    return points, {name: np.vstack(parts) for name, parts in vectors.items()}, _rows_digest(key_parts)


def _place(
    points: pd.DataFrame,
    stacked: dict[str, np.ndarray],
    panels: list[str],
    row_key: list[tuple[str, str]],
    glove_id: str,
    *,
    method: str,
    seed: int,
    cache: bool,
    k: int,
) -> tuple[dict[str, str], dict[str, tuple[np.ndarray, np.ndarray]]]:
    """Per panel of ``stacked`` vectors: the 2-D projection (cached by the rows' digest ``row_key`` and the
    layer, or GloVe's ``glove_id``) and the groups of identical vectors, as columns ``x_``, ``y_``, ``rep_``,
    ``dup_`` of ``points``; returns the method each panel used and its ``k`` nearest distinct neighbours."""
    used_methods = {}
    neighbours = {}
    groups = (points["store"].astype(str) + "\t" + points["sentence_id"]).to_numpy()
    for name in panels:
        x = stacked[name]
        ok = np.all(np.isfinite(x), axis=1)
        coords = np.full((len(x), 2), np.nan)
        if ok.any():
            pkey = {"rows": row_key, "layer": name}
            if name == GLOVE_PANEL:
                pkey = {"rows": row_key, "glove": glove_id}
            c, used = cached_projection(x[ok], pkey, method=method, seed=seed, cache=cache)
            coords[ok] = c
            used_methods[name] = used
        rep, count = identical_groups(x)
        coords = coords[rep]  # an identical vector has one honest position: its group's
        points[f"x_{name}"] = coords[:, 0]
        points[f"y_{name}"] = coords[:, 1]
        points[f"rep_{name}"], points[f"dup_{name}"] = rep, count
        neighbours[name] = _distinct_neighbours(np.where(ok[:, None], x, 0.0), rep, count, k, groups)
    return used_methods, neighbours


def _default_title(settings: dict, lemmas: Sequence[str] | None) -> str:
    what = ", ".join(lemmas) if lemmas else "occurrences"
    enc = settings["encoder"]
    return f"Occurrence explorer: {what}" + (f" ({enc} on {', '.join(settings['corpora'])})" if enc else "")


def _scores(
    points: pd.DataFrame, stacked: dict[str, np.ndarray], panels: list[str], *, n_boot: int, seed: int
) -> pd.DataFrame:
    """Sense separation per set (lemma selection) and panel, on the panel's original vectors."""
    records = []
    for s in dict.fromkeys(points["set"]):
        mask = (points["set"] == s).to_numpy()
        for name in panels:
            x = stacked[name][mask]
            ok = np.all(np.isfinite(x), axis=1) & (np.linalg.norm(np.nan_to_num(x), axis=1) > 0)
            res = sense_separation(x[ok], points["senses"].to_numpy()[mask][ok], n_boot=n_boot, seed=seed)
            records.append({"set": s, "panel": name, **res._asdict()})
    return pd.DataFrame.from_records(records)


def _legends(points: pd.DataFrame) -> dict[str, str]:
    sense_c, sense_leg = _sense_colours(points["set"].to_numpy(), points["sense"].to_numpy(), points["gloss"].tolist())
    pos_c, pos_leg = _palette_colours(points["upos"].to_numpy(), TOL_MUTED)
    form_c, form_leg = _palette_colours(points["form"].to_numpy(), CATEGORY_COLOURS)
    corpus_c, corpus_leg = _palette_colours(points["corpus"].to_numpy(), CATEGORY_COLOURS)
    points["c_sense"], points["c_pos"], points["c_form"], points["c_corpus"] = sense_c, pos_c, form_c, corpus_c
    return {
        "sense": _legend_html(sense_leg),
        "pos": _legend_html([("", pos_leg)]),
        "form": _legend_html([("", form_leg)]),
        "corpus": _legend_html([("", corpus_leg)]),
    }


# -- the page -------------------------------------------------------------------------------------


def _resource(name: str) -> str:
    """A file of the page bundled under ``probing/resources/explorer/``: its style sheet, the tooltip template and
    the JavaScript of each callback (the arguments each script reads are named where it is attached)."""
    return resources.files("probing").joinpath(f"resources/explorer/{name}").read_text(encoding="utf-8")


def _scores_html(ex: Explorer) -> str:
    s = ex.scores
    if s.empty:
        return ""
    head = "".join(f"<th>{html.escape(p if p == GLOVE_PANEL else 'layer ' + p)}</th>" for p in ex.panels)
    body = []
    for name, part in s.groupby("set", sort=False):
        cells = []
        for p in ex.panels:
            r = part[part["panel"] == p].iloc[0]
            cells.append(
                "<td>n/a</td>" if r["n"] < 2 else f"<td>{r['score']:.2f} [{r['ci_low']:.2f}, {r['ci_high']:.2f}]</td>"
            )
        r0 = part.iloc[0]
        chance = "" if r0["n"] < 2 else f"{r0['chance']:.2f}"
        body.append(
            f"<tr><td>{html.escape(str(name))}</td><td>{int(r0['n'])}</td><td>{chance}</td>{''.join(cells)}</tr>"
        )
    return (
        "<b>Sense separation</b>: leave-one-out 1-nearest-neighbour sense accuracy (cosine, original vectors), "
        "95% bootstrap CI over occurrences; <i>chance</i> = what one vector per word form scores (GloVe, layer 0)."
        f'<table class="scores"><tr><th>occurrences</th><th>n annotated</th><th>chance</th>{head}</tr>'
        + "".join(body)
        + "</table>"
    )


def _columns(width: int, n_panels: int) -> tuple[int, int]:
    """(columns, panel size in px) so that the panels and the toolbar fit ``width``: as many columns as
    keep a panel at least ``_PANEL_MIN`` px wide (at most ``_PANEL_MAX``), the rest wrapped into rows."""
    usable = width - _TOOLBAR - 16
    ncols = max(1, min(n_panels, usable // _PANEL_MIN))
    return ncols, int(min(_PANEL_MAX, usable // ncols - 8))


def _fit_range(values: np.ndarray, margin: float) -> tuple[float, float]:
    """A panel axis range around its finite ``values``, padded by 6 % plus ``margin`` (the largest marker's
    radius as a fraction of the panel) of their span on each side (a single value gets +-1)."""
    v = values[np.isfinite(values)]
    if not len(v):
        return -1.0, 1.0
    lo, hi = float(v.min()), float(v.max())
    pad = (0.06 + margin) / (1 - 2 * margin) * (hi - lo) if hi > lo else 1.0
    return lo - pad, hi + pad


def _duplicates_html(p: pd.DataFrame, name: str, limit: int = 8) -> list[str]:
    """Per row: for the drawn row of a group of identical vectors, the hover's header and a short list of
    its sentences; "" elsewhere."""
    out = [""] * len(p)
    rep, count = p[f"rep_{name}"].to_numpy(), p[f"dup_{name}"].to_numpy()
    for r in np.unique(rep[count > 1]):
        members = np.flatnonzero(rep == r)
        forms = "', '".join(dict.fromkeys(p["word"].iloc[members]))
        shown = "".join(f"<li>{p['sentence_html'].iat[i]}</li>" for i in members[:limit])
        more = f"<li>... and {len(members) - limit} more</li>" if len(members) > limit else ""
        out[r] = (
            f"<div class='tip-dup'><b>{len(members)} occurrences of '{html.escape(forms)}' (identical at this "
            f"layer)</b><ul style='margin:2px 0 4px 14px;padding:0;max-height:150px;overflow:hidden'>{shown}{more}"
            "</ul></div>"
        )
    return out


def _sources(ex: Explorer) -> tuple[Any, Any, Any, float]:
    """The page's data sources and the base marker size: ``occurrences`` (one row per occurrence: its fields,
    per panel its coordinates, drawn coordinates (one point per group of identical vectors), group size and
    marker size; colours, search state), ``knn`` (per panel each row's ``k`` nearest rows and cosines) and
    ``marks`` (the rings around a clicked point and its neighbours, empty at first)."""
    from bokeh.models import ColumnDataSource

    p = ex.points
    n = len(p)
    base_size = float(np.clip(900 / max(n, 1) ** 0.5, 4, 10))
    data: dict[str, Any] = {
        c: p[c].tolist()
        for c in (
            "corpus", "row", "sentence_id", "doc_id", "word", "form", "lemma", "upos", "sense", "senses",
            "gloss", "set", "sentence", "sentence_html", "c_sense", "c_pos", "c_form", "c_corpus",
        )
    }  # fmt: skip
    data["lemma_lc"] = [s.lower() for s in p["lemma"]]
    for name in ex.panels:
        data[f"x_{name}"] = p[f"x_{name}"].to_numpy()
        data[f"y_{name}"] = p[f"y_{name}"].to_numpy()
        drawn = (p[f"rep_{name}"] == np.arange(n)).to_numpy()  # one point per group of identical vectors
        data[f"px_{name}"] = np.where(drawn, data[f"x_{name}"], np.nan)
        data[f"py_{name}"] = np.where(drawn, data[f"y_{name}"], np.nan)
        data[f"dup_{name}"] = p[f"dup_{name}"].to_numpy()
        data[f"dup_html_{name}"] = _duplicates_html(p, name)
        data[f"bsize_{name}"] = base_size * np.minimum(np.sqrt(data[f"dup_{name}"]), 6.0)
        data[f"size_{name}"] = data[f"bsize_{name}"].copy()
    data["color"] = p[f"c_{ex.settings['color']}"].tolist()
    data["hit"] = [0] * n
    data["alpha"] = [0.75] * n
    data["line_width"] = [0.0] * n
    k = ex.settings["k"]
    knn_data: dict[str, Any] = {"k": [k] * n}
    for name in ex.panels:
        ids, cos = ex.neighbours[name]
        for j in range(k):
            knn_data[f"nn_{name}_{j}"] = ids[:, j].astype(np.int32)
            knn_data[f"cos_{name}_{j}"] = np.round(np.nan_to_num(cos[:, j], nan=0.0), 4).astype(np.float32)
    marks: dict[str, list[Any]] = {
        **{f"{a}_{name}": [] for name in ex.panels for a in ("x", "y")},
        "kind": [],
        "mcolor": [],
    }
    return (
        ColumnDataSource(data, name="occurrences"),
        ColumnDataSource(knn_data, name="knn"),
        ColumnDataSource(marks, name="marks"),
        base_size,
    )


def _maps(ex: Explorer, source: Any, marks: Any, base_size: float, size: int) -> list[Any]:
    """One square map of ``size`` px per panel, named ``panel_<name>``: its points (hover: the tooltip),
    the rings of ``marks``, an axis range that fits its points; box selection and wheel zoom active."""
    from bokeh.models import BoxSelectTool, HoverTool, LassoSelectTool, PanTool, Range1d, ResetTool, WheelZoomTool
    from bokeh.plotting import figure

    tooltip = _resource("tooltip.html")
    plots = []
    for name in ex.panels:
        used = ex.settings["method_used"].get(name, "none")
        label = GLOVE_PANEL + " (one vector per word form)" if name == GLOVE_PANEL else f"layer {name}"
        margin = min(0.3, source.data[f"bsize_{name}"].max() / 2 / size)
        x_lo, x_hi = _fit_range(source.data[f"px_{name}"], margin)
        y_lo, y_hi = _fit_range(source.data[f"py_{name}"], margin)
        fig = figure(
            width=size,
            height=size,
            title=f"{label}: {used.upper()}",
            tools=[PanTool(), wheel := WheelZoomTool(), box := BoxSelectTool(), LassoSelectTool(), ResetTool()],
            active_drag=box,
            active_scroll=wheel,
            name=f"panel_{name}",
            x_range=Range1d(start=x_lo, end=x_hi),
            y_range=Range1d(start=y_lo, end=y_hi),
        )
        fig.xaxis.visible = fig.yaxis.visible = False
        fig.grid.visible = False
        r = fig.scatter(
            f"px_{name}",
            f"py_{name}",
            source=source,
            size=f"size_{name}",
            fill_color="color",
            fill_alpha="alpha",
            line_color="#000000",
            line_width="line_width",
            name=f"points_{name}",
            nonselection_fill_alpha=0.08,
            nonselection_line_alpha=0.1,
        )
        tip = tooltip.replace("LAYER", html.escape(name)).replace("DUP", f"dup_html_{name}")
        fig.add_tools(HoverTool(renderers=[r], tooltips=tip))
        fig.scatter(
            f"x_{name}", f"y_{name}", source=marks, size=base_size * 2.4, fill_alpha=0, line_color="mcolor",
            line_width=2.5, marker="circle",
        )  # fmt: skip
        plots.append(fig)
    return plots


def _header(ex: Explorer, stylesheets: list[Any]) -> Any:
    """The page's title and one line on what it shows and how to use it."""
    from bokeh.models.widgets import Div

    st = ex.settings
    methods = sorted(set(st["method_used"].values()))
    how = " and ".join(m.upper() for m in methods) + (" (cosine)" if "umap" in methods else "")
    sample = f"{st['n_shown']:,} of {st['n_total']:,} occurrences" + (
        " (sample stratified by set and sense)" if st["n_shown"] < st["n_total"] else ""
    )
    return Div(
        text=(
            f"<h1>{html.escape(ex.title)}</h1><div class='meta' id='meta'>{sample} &middot; projection {how}, "
            f"seed {st['seed']} &middot; neighbours: k={st['k']}, cosine in each layer's original space &middot; "
            "hover a point to read its sentence, click it for its nearest occurrences, drag a box or lasso to "
            "select (linked across panels)</div>"
        ),
        sizing_mode="stretch_width",
        name="header",
        stylesheets=stylesheets,
    )


def _render(ex: Explorer, width: int) -> str:
    """The page for ``width`` CSS pixels: the maps in :func:`_columns`' grid, which a narrower window
    re-wraps on load and on resize (``layout.js``: the same rule on the window's width, at most ``width``);
    the controls wrap to the window too."""
    _bokeh()
    from bokeh.document import Document
    from bokeh.embed import file_html
    from bokeh.layouts import column, gridplot, row
    from bokeh.models import CustomJS, InlineStyleSheet
    from bokeh.models.widgets import Button, Div, Select, TextInput
    from bokeh.resources import INLINE

    st = ex.settings
    source, knn, marks, base_size = _sources(ex)
    # Bokeh draws each widget in its own shadow root: the page's CSS does not reach it
    css: list[Any] = [InlineStyleSheet(css=_resource("explorer.css"))]
    legend = Div(text=ex.legends[st["color"]], name="legend", sizing_mode="stretch_width", stylesheets=css)
    status = Div(text="", name="search_status", width=320, stylesheets=css)
    info = Div(text="no selection: drag a box or a lasso", name="selection_info", width=260, stylesheets=css)
    out = Div(
        text="<i>Click a point to list its nearest occurrences in that layer's original space.</i>",
        name="knn_out",
        sizing_mode="stretch_width",
        stylesheets=css,
        styles=_SCROLL,
    )
    select = Select(title="Colour by", value=st["color"], options=list[Any](COLOUR_BY), width=120, name="colour_by")
    search = TextInput(title="Search (word or lemma)", placeholder="e.g. play", width=220, name="search")
    export = Button(label="Export selection (CSV)", button_type="primary", width=200, name="export", align="end")

    ncols, size = _columns(width, len(ex.panels))
    plots = _maps(ex, source, marks, base_size, size)
    panels = list(ex.panels)
    for name, fig in zip(panels, plots):
        tap = dict(source=source, knn=knn, marks=marks, out=out, plot=fig, panel=name, panels=panels)
        fig.js_on_event("tap", CustomJS(args=tap, code=_resource("tap.js")))
    select.js_on_change(
        "value",
        CustomJS(
            args=dict(select=select, source=source, legend=legend, legends=ex.legends), code=_resource("colour.js")
        ),
    )
    search.js_on_change(
        "value_input",
        CustomJS(args=dict(search=search, source=source, status=status, panels=panels), code=_resource("search.js")),
    )
    export.js_on_event(
        "button_click", CustomJS(args=dict(source=source, status=status, panels=panels), code=_resource("export.js"))
    )
    selection = CustomJS(args=dict(source=source, info=info), code=_resource("selection.js"))
    source.selected.js_on_change("indices", selection)

    scores = Div(text=_scores_html(ex), name="scores", sizing_mode="stretch_width", stylesheets=css, styles=_SCROLL)
    grid = gridplot(plots, ncols=ncols, toolbar_location="right", merge_tools=True)
    controls = row(select, search, export, status, info, styles={"flex-wrap": "wrap"})
    doc = Document()
    doc.add_root(column(_header(ex, css), controls, legend, grid, out, scores, sizing_mode="stretch_width"))
    fit = dict(grid=grid, plots=plots, width=width, panel_min=_PANEL_MIN, panel_max=_PANEL_MAX, toolbar=_TOOLBAR)
    doc.js_on_event("document_ready", CustomJS(args=fit, code=_resource("layout.js")))
    return file_html(doc, resources=INLINE, title=ex.title)


__all__ = ["COLOUR_BY", "Explorer", "MissingExtraError", "cached_projection", "explore", "knn_cosine"]
