"""Tests for probing.views.umap: stratified samples, embeddings, coordinates and figures.

Only one test runs UMAP itself (numba compiles it on first use, 10-40 s): it is marked slow. The
others use ``method="pca"``, the exact projection the module also falls back on.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from probing.glove import Vectors
from probing.palette import CATEGORY_COLOURS
from probing.views.umap import (
    OTHER_COLOUR,
    embed_2d,
    stratified_sample,
    umap_layers,
    umap_layers_coords,
    umap_pos,
    umap_pos_coords,
)

TOKEN_COLUMNS = ["sentence_id", "doc_id", "position", "word", "upos", "xpos", "lemma", "sense", "instance_id", "oov"]
FIXTURES = Path(__file__).parent / "fixtures" / "glove"
GLOSSES = {"play%1:04:00::": "a move in a game", "play%1:10:00::": "a dramatic work for the stage"}


class FakeStore:
    """``tokens`` and ``layer(k)`` -> fp16 array aligned with it, as DESIGN.md's Store."""

    layer_names = ["0", "1", "2"]

    def __init__(self, tokens: pd.DataFrame, layers: list[np.ndarray]) -> None:
        self.tokens, self._layers = tokens, layers

    def layer(self, k: int) -> np.ndarray:
        return self._layers[k]


def make_store(seed: int = 0, dim: int = 12) -> FakeStore:
    """80 'play' occurrences (senses 40/25/10, 5 unannotated), 30 'bank', 90 filler tokens.

    Layer 0 depends on the word form only (context-free); layers 1-2 put each sense in its own
    well-separated cluster, more tightly at layer 2.
    """
    rng = np.random.default_rng(seed)
    spec = (
        [("play", "play%1:04:00::", "NOUN")] * 40
        + [("plays", "play%1:10:00::", "NOUN")] * 25
        + [("play", "play%2:33:00::", "VERB")] * 10
        + [("play", "", "VERB")] * 5
        + [("bank", "bank%1:14:00::", "NOUN")] * 30
        + [(w, "", t) for w, t in [("the", "DET"), ("runs", "VERB"), ("red", "ADJ")] * 30]
    )
    centre = {key: rng.standard_normal(dim) * 3 for key in sorted({s for _, s, _ in spec})}
    form = {w: rng.standard_normal(dim) for w in sorted({w for w, _, _ in spec})}
    records, layers = [], [[], [], []]
    for i, (word, sense, upos) in enumerate(spec):
        records.append(
            {
                "sentence_id": f"s{i}",
                "doc_id": "d",
                "position": 0,
                "word": word,
                "upos": upos,
                "xpos": "",
                "lemma": "play" if word.startswith("play") else word,
                "sense": sense,
                "instance_id": "",
                "oov": False,
            }
        )
        layers[0].append(form[word])
        layers[1].append(centre[sense] + rng.standard_normal(dim) * 0.6)
        layers[2].append(centre[sense] + rng.standard_normal(dim) * 0.3)
    tokens = pd.DataFrame.from_records(records, columns=TOKEN_COLUMNS)
    return FakeStore(tokens, [np.array(layer, dtype=np.float16) for layer in layers])


def _texts(fig) -> str:
    return "\n".join(t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text")))


# -- sampling ------------------------------------------------------------------------------------


def test_stratified_sample_keeps_shares_and_rare_labels():
    labels = np.array(["a"] * 700 + ["b"] * 280 + ["c"] * 19 + ["d"])
    picked = stratified_sample(labels, 100, seed=0)
    counts = pd.Series(labels[picked]).value_counts().to_dict()
    # shares 70 / 28 / 1.9 / 0.1: floors 70, 28, 1, 0; 'd' is raised to 1 so every label shows up
    assert counts == {"a": 70, "b": 28, "c": 1, "d": 1}
    assert len(picked) == 100 and np.all(np.diff(picked) > 0), "sorted, no repeats"
    np.testing.assert_array_equal(picked, stratified_sample(labels, 100, seed=0))
    assert not np.array_equal(picked, stratified_sample(labels, 100, seed=1)), "the seed matters"


def test_stratified_sample_fills_the_budget_exactly():
    labels = np.array(["a"] * 5 + ["b"] * 5 + ["c"] * 5)
    assert len(stratified_sample(labels, 7, seed=3)) == 7  # 2.33 each: floors 2+2+2, one extra
    np.testing.assert_array_equal(stratified_sample(labels, 15), np.arange(15))  # everything when it fits
    assert len(stratified_sample(labels, 2)) == 2, "more labels than points: still exactly the budget"


# -- embedding -----------------------------------------------------------------------------------


def test_few_distinct_vectors_fall_back_to_pca_and_duplicates_coincide():
    x = np.array([[1, 0, 0], [0, 2, 0], [1, 0, 0], [0, 0, 3], [0, 2, 0]], dtype=np.float32)
    coords, method = embed_2d(x, method="umap")
    assert method == "pca", "3 distinct vectors are too few for UMAP"
    np.testing.assert_array_equal(coords[0], coords[2])
    np.testing.assert_array_equal(coords[1], coords[4])
    # the exact PCA: centred distinct rows projected on their top-2 principal axes keep all distances
    distinct = np.unique(x, axis=0).astype(np.float64)
    d_in = np.linalg.norm(distinct[:, None] - distinct[None], axis=2)
    uniq = np.unique(coords, axis=0)
    d_out = np.linalg.norm(uniq[:, None] - uniq[None], axis=2)
    np.testing.assert_allclose(np.sort(d_out.ravel()), np.sort(d_in.ravel()), atol=1e-9)
    single, _ = embed_2d(np.ones((4, 3)), method="umap")
    np.testing.assert_array_equal(single, np.zeros((4, 2)))
    with pytest.raises(ValueError, match="'umap' or 'pca'"):
        embed_2d(x, method="tsne")


# -- coordinates and figures (PCA: fast and exact) -----------------------------------------------


def test_layer_coords_sample_groups_and_type_average():
    store = make_store()
    coords = umap_layers_coords(
        store,
        ["play", "bank"],
        [0, "2"],
        max_points=40,
        gloss=GLOSSES.__getitem__,
        n_senses=2,
        method="pca",
        all_forms=True,
    )
    play = coords[(coords["lemma"] == "play") & (coords["layer"] == "2")]
    occ = play[play["kind"] == "occurrence"]
    assert (occ["n_shown"].iat[0], occ["n_total"].iat[0], len(occ)) == (40, 80, 40)
    # stratified by sense key: 40/80 of each of 40, 25, 10, 5 -> 20, 12.5, 5, 2.5 -> 20, 13, 5, 2 or 20, 12, 5, 3
    by_sense = occ["sense"].value_counts()
    assert by_sense["play%1:04:00::"] == 20 and by_sense["play%2:33:00::"] == 5
    assert by_sense["play%1:10:00::"] + by_sense[""] == 15
    # all forms: the groups (colours) are the word forms, "play" 40 + 15 and "plays" 25
    assert set(occ["group"]) == {"play", "plays"}
    assert set(occ["label"]) == {'"play" (55)', '"plays" (25)'}
    assert set(occ["selection"]) == {"'play' (all forms)"}
    same_rows = coords[(coords["lemma"] == "play") & (coords["layer"] == "0") & (coords["kind"] == "occurrence")]
    np.testing.assert_array_equal(same_rows["row"], occ["row"])  # the same sample at every layer
    # the star is the sample's mean vector embedded in the same map: with PCA it is the centroid
    star = play[play["kind"] == "type average"]
    assert len(star) == 1
    np.testing.assert_allclose(star[["x", "y"]].to_numpy()[0], occ[["x", "y"]].mean().to_numpy(), atol=1e-3)
    # layer 0 is context-free: the two word forms give exactly two points
    assert len(np.unique(same_rows[["x", "y"]].to_numpy(), axis=0)) == 2
    with pytest.raises(ValueError, match="no occurrences of lemma 'zebra'"):
        umap_layers_coords(store, ["zebra"], [1], method="pca")


def test_layer_figure_has_panels_legend_and_subsample_note(tmp_path, monkeypatch):
    monkeypatch.setenv("PROBING_CACHE", str(tmp_path / "cache"))
    glove = Vectors.from_file(FIXTURES / "tiny.glove.txt", progress=False)
    store = make_store()
    fig = umap_layers(
        store,
        ["play", "bank"],
        [1, 2],
        max_points=50,
        glove=glove,
        gloss=GLOSSES.__getitem__,
        method="pca",
        all_forms=True,
    )
    maps = [ax for ax in fig.axes if ax.axison]
    assert [ax.get_title() for ax in maps] == [
        "'play' (all forms), layer 1",
        "'play' (all forms), layer 2",
        "'bank' (all forms), layer 1",
        "'bank' (all forms), layer 2",
    ]
    assert all(ax.get_xlabel() == "PCA 1" for ax in maps)
    text = _texts(fig)
    assert "50 of 80 occurrences shown (stratified by sense)" in text
    assert "30 of" not in text, "'bank' has 30 occurrences, all shown: no note"
    assert '"plays" (25)' in text
    assert "GloVe: ONE vector for every 'play'" in text and "player, game, games" in text
    assert "GloVe has no vector for 'bank'" in text
    # the most frequent form gets the first Okabe-Ito colour, the second the second
    first = maps[0].collections
    colours = {tuple(np.round(c.get_facecolor()[0][:3], 3)) for c in first if len(c.get_facecolor())}  # not the star
    from matplotlib.colors import to_rgb

    assert {tuple(np.round(to_rgb(c), 3)) for c in CATEGORY_COLOURS[:2]} <= colours
    assert tuple(np.round(to_rgb(OTHER_COLOUR), 3)) not in colours
    fig.savefig(tmp_path / "layers.png")


def test_pos_coords_and_figure():
    store = make_store()
    coords = umap_pos_coords(store, [0, 2], max_points=100, method="pca")
    layer2 = coords[coords["layer"] == "2"]
    assert (len(layer2), layer2["n_total"].iat[0]) == (100, 200)
    # 200 tokens: NOUN 95, VERB 45, DET 30, ADJ 30 -> half of each
    assert layer2["upos"].value_counts().to_dict() == {"NOUN": 48, "VERB": 22, "DET": 15, "ADJ": 15} or layer2[
        "upos"
    ].value_counts().to_dict() == {"NOUN": 47, "VERB": 23, "DET": 15, "ADJ": 15}
    fig = umap_pos(store, [0, 2], max_points=100, method="pca")
    text = _texts(fig)
    assert "100 of 200 tokens shown (stratified by UPOS)" in text
    assert "layer 0" in text and "layer 2" in text and "NOUN (" in text


# -- UMAP itself ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_umap_is_deterministic_and_keeps_senses_apart():
    store = make_store()
    first = umap_layers_coords(store, ["play"], [2], max_points=60, seed=0, n_senses=3, all_forms=True)
    again = umap_layers_coords(store, ["play"], [2], max_points=60, seed=0, n_senses=3, all_forms=True)
    assert set(first["method"]) == {"umap"}
    pd.testing.assert_frame_equal(first, again)  # same seed, same coordinates, bit for bit
    # the senses are separate clusters in the data; in the map each point's nearest neighbour
    # should (almost always) share its sense
    occ = first[(first["kind"] == "occurrence") & (first["sense"] != "")]
    xy = occ[["x", "y"]].to_numpy()
    d = np.linalg.norm(xy[:, None] - xy[None], axis=2)
    np.fill_diagonal(d, np.inf)
    agree = np.mean(occ["sense"].to_numpy()[d.argmin(axis=1)] == occ["sense"].to_numpy())
    assert agree >= 0.95, f"nearest-neighbour sense agreement in the map {agree:.2f}"
    fig = umap_layers(store, ["play"], [2], max_points=60, seed=0, all_forms=True)
    assert "60 of 80 occurrences shown" in _texts(fig)


def test_context_free_layer_falls_back_to_pca_and_says_so():
    # layer 0 depends on the word form only: 'play' and 'plays' give 2 distinct vectors, too few
    # for UMAP, so the exact PCA layout is used (and no UMAP is run) and the title tells why
    fig = umap_layers(make_store(), ["play"], [0], max_points=80, method="umap", all_forms=True)
    (panel,) = [ax for ax in fig.axes if ax.axison]
    assert panel.get_title() == "'play' (all forms), layer 0\n2 distinct vectors (PCA)"
    assert panel.get_xlabel() == "PCA 1"
    assert "80 of 80" not in _texts(fig), "nothing was subsampled, so no note"


def test_titles_stay_inside_the_figure_and_the_star_hides_no_point():
    """issue #34: umap_senses.png clipped its left titles, and its opaque star hid layer 0's single point
    (every occurrence of one form has the mean's vector there)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    # layer 0 asks for UMAP and falls back to PCA: the longest title, in the leftmost panel
    fig = umap_layers(make_store(), ["play"], [0], max_points=80, method="umap", all_forms=True)
    FigureCanvasAgg(fig).draw()
    renderer = fig.canvas.get_renderer()
    width = fig.bbox.width
    for ax in fig.axes:
        box = ax.title.get_window_extent(renderer)
        assert box.x0 >= 0 and box.x1 <= width, ax.get_title()
    panel0 = next(ax for ax in fig.axes if "layer 0" in ax.get_title())
    star = next(c for c in panel0.collections if c.get_zorder() == 5)
    assert len(star.get_offsets()) == 1 and len(star.get_facecolor()) == 0  # hollow: the point under it shows


def test_sense_maps_default_to_one_form_and_print_the_score():
    """'play' holds noun "play" (40, one sense), noun "plays" (25) and verb "play" (15): by default the
    map shows the noun "play" only. 'play:VERB' picks the verb: 10 annotated in one sense, so the
    1-NN sense accuracy is 1 (every neighbour agrees) and so is chance; the figure prints both."""
    store = make_store()
    noun = umap_layers_coords(store, ["play"], [1], method="pca")
    assert (noun["selection"].iat[0], noun["n_total"].iat[0]) == ("'play' (NOUN \"play\")", 40)
    assert set(store.tokens["word"].to_numpy()[noun.loc[noun["kind"] == "occurrence", "row"]]) == {"play"}
    verb = umap_layers_coords(store, ["play:VERB"], [2], method="pca")
    first = verb.iloc[0]
    assert (first["n_total"], first["n_scored"], first["score"], first["chance"]) == (15, 10, 1.0, 1.0)
    fig = umap_layers(store, ["play:VERB"], [2], method="pca")
    text = _texts(fig)
    assert "'play' (VERB \"play\"), layer 2" in text
    assert "1-NN sense acc 1.00 [1.00, 1.00]\nchance 1.00, n=10" in text


def test_more_groups_than_colours_is_refused():
    # Okabe-Ito has 7 colours besides black, Tol muted 9: an 8th sense would repeat a colour
    with pytest.raises(ValueError, match="n_senses must be between 1 and 7"):
        umap_layers_coords(make_store(), ["play"], [1], n_senses=8, method="pca")
    with pytest.raises(ValueError, match="n_tags must be between 1 and 9"):
        umap_pos_coords(make_store(), [1], n_tags=10, method="pca")


def test_color_by_a_column_and_a_warning_when_nothing_is_labelled():
    """color_by= (issue #15) groups the same sample by another column; a lemma without any sense warns instead
    of drawing an all-grey map silently."""
    store = make_store()
    # all_forms: every form of the lemma (the default keeps one form and POS, which would be NOUN only)
    by_pos = umap_layers_coords(store, ["play"], [2], max_points=80, method="pca", color_by="upos", all_forms=True)
    occ = by_pos[by_pos["kind"] == "occurrence"]
    # 40 + 25 NOUN, 10 + 5 VERB occurrences of "play": all 80 shown, grouped by their tag
    assert occ["group"].value_counts().to_dict() == {"NOUN": 65, "VERB": 15}
    assert set(occ["label"]) == {"NOUN (65)", "VERB (15)"}
    unlabelled = make_store()
    unlabelled.tokens["sense"] = ""
    with pytest.warns(UserWarning, match="none of its 80 occurrences has a sense.*color_by='upos'"):
        umap_layers_coords(unlabelled, ["play"], [2], method="pca", all_forms=True)
    with pytest.raises(ValueError, match="color_by='colour' is not a token-table column"):
        umap_layers_coords(store, ["play"], [2], method="pca", color_by="colour")
    pos = umap_pos_coords(store, [1], max_points=1000, method="pca", color_by="word")
    assert set(pos["group"]) == {"play", "plays", "bank", "the", "runs", "red"}


def test_maps_draw_one_panel_on_a_given_ax():
    from matplotlib.figure import Figure

    store = make_store()
    fig = Figure()
    a, b = fig.subplots(1, 2)
    assert umap_layers(store, ["play"], [2], method="pca", all_forms=True, ax=a) is fig
    assert umap_pos(store, [1], method="pca", ax=b) is fig
    assert len(fig.axes) == 2 and "'play', layer 2" in a.get_title() and a.get_legend() is not None
    # all forms are coloured by form: "play" and "plays", then the type-average star
    assert len(a.collections) == 3
    with pytest.raises(ValueError, match="ax= draws one map"):
        umap_layers(store, ["play", "bank"], [2], ax=a)
