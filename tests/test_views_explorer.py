"""The occurrence explorer (probing.views.explore, in probing.views.explorer) and the sense-separation score (probing.views.senses).

Numbers are checked against hand-computed cases and a slow reference (cosine_topk); the page is
checked offline in headless Chromium (skipped, with the reason, without Chromium, playwright or Bokeh).
"""

from __future__ import annotations

import csv
import importlib.util
import io
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from probing.probes.stats import bootstrap_ci
from probing.views.neighbors import cosine_topk
from probing.views.senses import chance_agreement, lemma_rows, nn_correct, sense_separation
from tests import browser

ROOT = Path(__file__).resolve().parents[1]
TOKEN_COLUMNS = ["sentence_id", "doc_id", "position", "word", "upos", "xpos", "lemma", "sense", "instance_id", "oov"]
HAS_BOKEH = importlib.util.find_spec("bokeh") is not None
needs_bokeh = pytest.mark.skipif(not HAS_BOKEH, reason="the explore extra (bokeh) is not installed")


class FakeStore:
    """Token table + fp16 layers, as probing.store.Store; ``key`` names it for the projection cache."""

    layer_names = ["0", "1", "2"]

    def __init__(self, tokens: pd.DataFrame, layers: list[np.ndarray], key: str = "fake") -> None:
        self.tokens, self._layers, self.key = tokens, layers, key
        self.manifest = {"corpus": {"name": "toy", "split": "test"}, "encoder": {"name": "toy-elmo"}}

    def layer(self, k: int) -> np.ndarray:
        return self._layers[k]


def make_store(seed: int = 0, dim: int = 8) -> FakeStore:
    """Sentences ``s<i> : the <target> number <i>`` (4 words), target at position 1.

    Targets: 30 noun "play" (sense game 18 / drama 12), 10 "plays" (drama), 12 verb "play", 20 "bank".
    Layer 0 depends on the word form only; layers 1-2 on the sense (clusters, tighter at 2).
    """
    rng = np.random.default_rng(seed)
    spec = (
        [("play", "play", "NOUN", "play%1:04:00::")] * 18
        + [("play", "play", "NOUN", "play%1:10:00::")] * 12
        + [("plays", "play", "NOUN", "play%1:10:00::")] * 10
        + [("play", "play", "VERB", "play%2:33:00::")] * 12
        + [("bank", "bank", "NOUN", "bank%1:14:00::")] * 20
    )
    centre = {s: rng.standard_normal(dim) * 3 for s in sorted({x[3] for x in spec})}
    form = {w: rng.standard_normal(dim) for w in sorted({x[0] for x in spec} | {"the", "number", "n"})}
    records, layers = [], [[], [], []]
    for i, (word, lemma, upos, sense) in enumerate(spec):
        for pos, (w, lem, tag, sns) in enumerate(
            [
                ("the", "the", "DET", ""),
                (word, lemma, upos, sense),
                ("number", "number", "NOUN", ""),
                (f"n{i}", "n", "NUM", ""),
            ]
        ):
            records.append(
                {
                    "sentence_id": f"s{i}",
                    "doc_id": f"d{i % 3}",
                    "position": pos,
                    "word": w,
                    "upos": tag,
                    "xpos": "",
                    "lemma": lem,
                    "sense": sns,
                    "instance_id": "",
                    "oov": False,
                }
            )
            key = w if w in form else "n"
            layers[0].append(form[key])
            base = centre[sns] if sns else form[key]
            layers[1].append(base + rng.standard_normal(dim) * 0.6)
            layers[2].append(base + rng.standard_normal(dim) * 0.3)
    tokens = pd.DataFrame.from_records(records, columns=TOKEN_COLUMNS)
    return FakeStore(tokens, [np.array(layer, dtype=np.float16) for layer in layers])


# -- the sense-separation score ---------------------------------------------------------------------


def test_nn_correct_and_score_match_a_hand_computed_case():
    """Rows 0, 1, 3 are the same vector (1, 0); rows 2, 4 the same (0, 1). Leave-one-out 1-NN with ties
    scored as the share of tied rows with the right sense: row 0 (A) ties with {1: A, 3: B} -> 1/2;
    row 1 -> 1/2; row 2 (B) -> {4: B} -> 1; row 3 (B) -> {0: A, 1: A} -> 0; row 4 -> 1. Mean 3/5.
    Chance: senses A x2, B x3 -> (2*1 + 3*2) / (5*4) = 0.4. The unannotated row 5 is left out, and
    a field of two keys counts by its first."""
    x = np.array([[1, 0], [1, 0], [0, 1], [1, 0], [0, 1], [0.7, 0.7]], dtype=np.float32)
    senses = ["A", "A B", "B", "B", "B", ""]
    np.testing.assert_allclose(nn_correct(x[:5], ["A", "A", "B", "B", "B"]), [0.5, 0.5, 1.0, 0.0, 1.0])
    res = sense_separation(x, senses, n_boot=500, seed=3)
    assert res.n == 5 and res.n_senses == 2
    assert res.score == pytest.approx(0.6)
    assert res.chance == pytest.approx(0.4)
    # the interval is stats.bootstrap_ci over the per-occurrence correctness, same seed
    assert (res.ci_low, res.ci_high) == bootstrap_ci([0.5, 0.5, 1.0, 0.0, 1.0], n_boot=500, seed=3)
    assert res.ci_low <= res.score <= res.ci_high


def test_a_constant_vector_scores_exactly_chance():
    """One vector for every occurrence (GloVe, layer 0 with one form): every other row ties, so an
    A row scores 1/4 (one other A among 4) and a B row 2/4: (2*0.25 + 3*0.5) / 5 = 0.4 = chance."""
    x = np.ones((5, 3))
    labels = ["A", "A", "B", "B", "B"]
    assert nn_correct(x, labels).mean() == pytest.approx(0.4)
    assert chance_agreement(labels) == pytest.approx(0.4)
    with pytest.raises(ValueError, match="row 1 is zero"):
        nn_correct(np.array([[1.0, 0], [0, 0]]), ["A", "B"])
    # one row has no neighbour: refused, not scored 1.0 against itself
    with pytest.raises(ValueError, match="at least 2 rows, got 1"):
        nn_correct(np.ones((1, 3)), ["A"])


def test_too_few_annotated_occurrences_give_nan_not_a_number():
    res = sense_separation(np.ones((3, 2)), ["A", "", ""])
    assert res.n == 1 and np.isnan(res.score) and "too few" in res.text()


# -- which occurrences ------------------------------------------------------------------------------


def test_lemma_rows_default_to_the_most_frequent_form_and_pos():
    """'play': noun "play" 30, noun "plays" 10, verb "play" 12 -> the noun "play" (30 rows) by default."""
    tokens = make_store().tokens
    sel = lemma_rows(tokens, "play")
    assert (sel.form, sel.upos, len(sel.rows), sel.n_lemma) == ("play", "NOUN", 30, 52)
    assert sel.label == "'play' (NOUN \"play\")"
    assert set(tokens["word"].iloc[sel.rows]) == {"play"} and set(tokens["upos"].iloc[sel.rows]) == {"NOUN"}
    verb = lemma_rows(tokens, "play:VERB")
    assert (verb.form, verb.upos, len(verb.rows)) == ("play", "VERB", 12)
    every = lemma_rows(tokens, "play", all_forms=True)
    assert (every.form, len(every.rows)) == (None, 52)
    with pytest.raises(ValueError, match="no occurrences of lemma 'zebra'"):
        lemma_rows(tokens, "zebra")


# -- neighbours and projections ---------------------------------------------------------------------


def test_knn_cosine_matches_the_reference_search():
    """Every row's list equals cosine_topk's with its own sentence excluded (the slow reference);
    a zero row has no neighbours and is nobody's neighbour."""
    from probing.views.explorer import knn_cosine

    rng = np.random.default_rng(1)
    x = rng.standard_normal((60, 6)).astype(np.float32)
    x[7] = 0
    x[30] = x[40] = x[20]  # exact ties (different sentences): the lower index comes first
    groups = np.repeat(np.arange(20), 3)
    ids, sims = knn_cosine(x, 4, groups=groups, chunk_rows=16)
    for i in range(60):
        if i == 7:
            assert (ids[i] == -1).all() and np.isnan(sims[i]).all()
            continue
        ref_ids, ref_sims = cosine_topk(x, x[i], 4, exclude=groups == groups[i])
        np.testing.assert_array_equal(ids[i], ref_ids)
        np.testing.assert_allclose(sims[i], ref_sims, atol=1e-6)
        assert 7 not in ids[i]
    assert list(ids[20, :2]) == [30, 40] and list(ids[40, :2]) == [20, 30]


def test_projections_are_cached_by_key(tmp_path, monkeypatch):
    """The second call with the same key reads the file: embed_2d runs once; another seed recomputes."""
    from probing.views import explorer as ex_mod

    monkeypatch.setenv("PROBING_CACHE", str(tmp_path))
    calls = []
    real = ex_mod.embed_2d

    def counting(x, **kw):
        calls.append(kw)
        return real(x, **kw)

    monkeypatch.setattr(ex_mod, "embed_2d", counting)
    x = np.random.default_rng(0).standard_normal((30, 5))
    a, used = ex_mod.cached_projection(x, {"layer": "1"}, method="pca", seed=0)
    b, _ = ex_mod.cached_projection(x, {"layer": "1"}, method="pca", seed=0)
    ex_mod.cached_projection(x, {"layer": "1"}, method="pca", seed=1)
    assert used == "pca" and len(calls) == 2
    np.testing.assert_array_equal(a, b)
    assert len(list((tmp_path / "projections").glob("*.npy"))) == 2


# -- the explorer object and page -------------------------------------------------------------------


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    if not HAS_BOKEH:
        pytest.skip("the explore extra (bokeh) is not installed")
    import os

    from probing.glove import Vectors
    from probing.views.explorer import explore

    cache = tmp_path_factory.mktemp("cache")
    old = os.environ.get("PROBING_CACHE")
    os.environ["PROBING_CACHE"] = str(cache)
    try:
        glove = Vectors.from_file(ROOT / "tests" / "fixtures" / "glove" / "tiny.glove.txt", progress=False)
        ex = explore(
            make_store(), ["play", "bank"], method="pca", glove=glove, k=3, n_boot=200, gloss=lambda key: f"gloss {key}"
        )
    finally:
        if old is None:
            del os.environ["PROBING_CACHE"]
        else:
            os.environ["PROBING_CACHE"] = old
    path = ex.save(tmp_path_factory.mktemp("page") / "explorer.html")
    return ex, path


@needs_bokeh
def test_explorer_points_scores_and_neighbours(built):
    """Default: the noun "play" (30) and "bank" (20): 50 points, 3 layer panels + GloVe.
    Layer 2 puts each sense in a tight cluster, so 1-NN sense accuracy there is 1; layer 0 gives
    one vector per form, so "play" scores exactly chance there: senses 18 / 12 ->
    (18*17 + 12*11) / (30*29) = 438 / 870."""
    ex, _ = built
    p = ex.points
    assert len(p) == 50 and ex.panels == ["0", "1", "2", "GloVe"]
    assert set(p["form"]) == {"play", "bank"} and set(p.loc[p["lemma"] == "play", "upos"]) == {"NOUN"}
    s = ex.scores.set_index(["set", "panel"])
    play = "'play' (NOUN \"play\")"
    assert s.loc[(play, "2"), "score"] == pytest.approx(1.0)
    assert s.loc[(play, "0"), "score"] == pytest.approx(438 / 870)
    assert s.loc[(play, "0"), "chance"] == pytest.approx(438 / 870)
    # the sentence of a point, its word marked
    first = p.iloc[0]
    assert first["sentence"] == f"the [{first['word']}] number n{first['sentence_id'][1:]}"
    assert "<mark>" in first["sentence_html"]
    # neighbours at layer 2 of a "game" occurrence are other "game" occurrences (its tight cluster)
    ids, cos = ex.neighbours["2"]
    game = int(np.flatnonzero(p["sense"] == "play%1:04:00::")[0])
    assert (p["sense"].to_numpy()[ids[game]] == "play%1:04:00::").all() and (np.diff(cos[game]) <= 0).all()
    assert ex.settings["seed"] == 0 and ex.settings["n_shown"] == 50
    # layer 0 and GloVe: one vector per word form, so 30 "play" rows and 20 "bank" rows share one each; the
    # neighbour lists skip the ties (the page names them) and give the nearest distinct vectors
    for panel in ("0",):
        assert sorted(p.groupby(f"rep_{panel}").size().tolist()) == [20, 30]
        assert (p[f"x_{panel}"].groupby(p[f"rep_{panel}"]).nunique() == 1).all()
    assert (p["dup_1"] == 1).all() and (p["rep_1"] == np.arange(50)).all()
    ids0, cos0 = ex.neighbours["0"]
    bank = int(np.flatnonzero(p["lemma"] == "bank")[0])
    assert (ids0[p["lemma"] == "play", 0] == bank).all() and (ids0[:, 1:] == -1).all()


def test_identical_vectors_group_and_panels_wrap_to_the_width():
    """Rows 0, 2, 4 share a vector, 1 and 3 another; NaN rows stay alone. 1240 px holds four 288 px panels
    (1240 - 40 toolbar - 16 margin = 1184 = 4 x 296); a 980 px notebook column three of 300 px, wrapped."""
    from probing.views.explorer import _columns, identical_groups

    a, b = [1.0, 2.0], [0.5, -1.0]
    x = np.array([a, b, a, b, a, [np.nan, 0.0], [np.nan, 0.0], [3.0, 3.0]])
    rep, count = identical_groups(x)
    assert rep.tolist() == [0, 1, 0, 1, 0, 5, 6, 7] and count.tolist() == [3, 2, 3, 2, 3, 1, 1, 1]
    assert _columns(1240, 4) == (4, 288) and _columns(980, 4) == (3, 300) and _columns(400, 4) == (1, 336)


@needs_bokeh
def test_word_forms_pos_sample_and_two_corpora(tmp_path, monkeypatch):
    """words= picks a form (10 "plays"); with neither lemmas nor words, a POS sample (only NOUN here:
    30 + 10 + 20 targets + 72 "number" = 132 nouns, 40 drawn); two stores give two corpora, each its colour."""
    from probing.views.explorer import explore

    monkeypatch.setenv("PROBING_CACHE", str(tmp_path))
    store = make_store()
    plays = explore(store, words=["plays"], layers=[2], method="pca", n_boot=50)
    assert len(plays.points) == 10 and set(plays.points["set"]) == {"word 'plays'"}
    nouns = explore(store, pos=["NOUN"], layers=[1], method="pca", max_points=40, n_boot=50)
    assert len(nouns.points) == 40 and set(nouns.points["upos"]) == {"NOUN"}
    assert nouns.settings["n_total"] == 132
    other = make_store(seed=1)
    other.key, other.manifest = "fake2", {"corpus": {"name": "toy2"}, "encoder": {"name": "toy-elmo"}}
    both = explore([store, other], ["bank"], layers=[1], method="pca", n_boot=50)
    assert both.points.groupby("corpus").size().to_dict() == {"toy/test": 20, "toy2": 20}
    assert both.points.groupby("corpus")["c_corpus"].nunique().to_dict() == {"toy/test": 1, "toy2": 1}
    assert both.points["c_corpus"].nunique() == 2


@needs_bokeh
def test_page_is_self_contained_and_displays_in_jupyter(built):
    ex, path = built
    text = path.read_text(encoding="utf-8")
    assert "<script src=" not in text and "<link " not in text, "every byte of JavaScript and CSS inline"
    assert "50 of 50 occurrences" in text and "seed 0" in text and "Sense separation" in text
    frame = ex._repr_html_()
    assert frame.startswith("<iframe srcdoc=") and "&lt;script" in frame


def test_the_public_name_is_the_function():
    """Scripts and notebooks call probing.views.explore(store, lemmas=[...], layers=...)."""
    import probing.views
    from probing.views.explorer import explore

    assert probing.views.explore is explore and "explore" in probing.views.__all__


def test_missing_extra_names_the_pip_command(monkeypatch):
    from probing.views import explorer as ex_mod

    monkeypatch.setitem(sys.modules, "bokeh", None)
    with pytest.raises(ex_mod.MissingExtraError, match=r"pip install 'elmo-probing\[explore\]'"):
        ex_mod.explore(make_store(), ["play"])


# -- in a real browser ------------------------------------------------------------------------------


def _shot_module():
    spec = importlib.util.spec_from_file_location("screenshot_explorer", ROOT / "scripts" / "screenshot_explorer.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


MODEL_JS = """(name) => [...Bokeh.documents[0].all_models].find(m => { try { return m.name === name } catch (e) {
  return false } })"""


def model(page, name: str, attribute: str):
    """An attribute of the Bokeh model called ``name`` (e.g. a Div's text, a source's data), as the page has it."""
    return page.evaluate(f"([n, a]) => ({MODEL_JS})(n)[a]", [name, attribute])


@pytest.fixture(scope="module")
def chrome(built):
    """One headless Chromium for the browser tests of this module (skips without it; fails with CI=true)."""
    exe = browser.require(bokeh=True)
    from playwright.sync_api import sync_playwright

    shot = _shot_module()
    with sync_playwright() as pw:
        instance = pw.chromium.launch(executable_path=exe, args=shot.CHROMIUM_ARGS)
        yield shot, instance
        instance.close()


@pytest.mark.slow
def test_browser_hover_search_export_offline(built, chrome):
    """Offline Chromium: no request leaves the page; hovering the most isolated point of layer 2 shows
    its sentence; searching "bank" highlights the 20 "bank" points; a box selection exported as CSV
    holds exactly the selected occurrences."""
    ex, path = built
    shot, browser = chrome
    p = ex.points
    lonely = _lonely(p, "2")
    if True:
        if True:
            page, requests = shot.open_page(browser, path)
            page.mouse.move(*shot.point_xy(page, "2", lonely))
            tip = page.locator(".tip-sentence").first
            tip.wait_for(state="visible", timeout=10000)
            assert tip.inner_text().strip() == p["sentence"].iat[lonely].replace("[", "").replace("]", "")

            page.locator("input[type=text]").first.fill("bank")
            page.wait_for_timeout(300)
            hits = page.evaluate(
                "() => [...Bokeh.documents[0].all_models].find(m => { try { return m.name === 'occurrences' }"
                " catch (e) { return false } }).data.hit.reduce((a, b) => a + b, 0)"
            )
            assert hits == 20 == int((p["lemma"] == "bank").sum())
            assert "20</b> of 50 occurrences match" in page.locator("text=occurrences match").first.inner_html()

            page.locator("select").first.select_option("pos")  # colour by POS: every point takes its POS colour
            page.wait_for_timeout(300)
            colours = page.evaluate(
                "() => { const d = [...Bokeh.documents[0].all_models].find(m => { try { return m.name === "
                "'occurrences' } catch (e) { return false } }).data; return [Array.from(d.color), Array.from(d.c_pos)] }"
            )
            assert colours[0] == colours[1] == p["c_pos"].tolist()

            left, top, right, bottom = shot.frame_box(page, "1")  # box-select the left half of layer 1
            page.mouse.move(left + 2, top + 2)
            page.mouse.down()
            page.mouse.move((left + right) / 2, bottom - 2, steps=8)
            page.mouse.up()
            selected = page.evaluate(
                "() => [...Bokeh.documents[0].all_models].find(m => { try { return m.name === 'occurrences' }"
                " catch (e) { return false } }).selected.indices"
            )
            assert 0 < len(selected) < 50
            with page.expect_download(timeout=10000) as info:
                page.get_by_role("button", name="Export selection (CSV)").click()
            rows = list(csv.DictReader(io.StringIO(Path(info.value.path()).read_text(encoding="utf-8"))))
            assert sorted(int(r["row"]) for r in rows) == sorted(int(p["row"].iat[i]) for i in selected)
            by_row = p.set_index("row")
            assert all(r["sentence"] == by_row.loc[int(r["row"]), "sentence"] for r in rows)
            assert requests == [], f"the page tried to fetch {requests}"
            # the recorder does see a request: the same page with one remote image
            leaky = path.with_name("leaky.html")
            head, _, tail = path.read_text(encoding="utf-8").rpartition("</body>")
            leaky.write_text(head + '<img src="http://example.invalid/x.png"></body>' + tail, encoding="utf-8")
            _, leaked = shot.open_page(browser, leaky)
            assert any("example.invalid" in u for u in leaked)


def _lonely(p: pd.DataFrame, panel: str) -> int:
    """The point of ``panel`` farthest from its nearest other point (hovering it hits it alone)."""
    xy = p[[f"x_{panel}", f"y_{panel}"]].to_numpy()
    span = xy.max(axis=0) - xy.min(axis=0)
    d = np.linalg.norm((xy[:, None] - xy[None]) / span, axis=2) + np.eye(len(xy)) * 9
    return int(d.min(axis=1).argmax())


@pytest.mark.slow
@pytest.mark.parametrize("width", [None, 1000])
def test_browser_layout_fits_laptop_and_notebook_and_wheel_zooms(built, chrome, tmp_path, width):
    """At 1280x800 (the default page) and in a 1000 px notebook column (width=1000): every panel and the
    toolbar lie inside the viewport, nothing scrolls sideways; the wheel zooms without picking the tool;
    each panel's range fits its points."""
    from probing.views.explorer import explore

    ex, path = built
    shot, browser = chrome
    viewport = 1280 if width is None else width
    if width is not None:
        os.environ["PROBING_CACHE"] = str(tmp_path)
        try:
            ex = explore(make_store(), ["play", "bank"], method="pca", k=3, n_boot=20, width=width)
        finally:
            del os.environ["PROBING_CACHE"]
        path = ex.save(tmp_path / "narrow.html")
    page, _ = shot.open_page(browser, path)
    page.set_viewport_size({"width": viewport, "height": 800})
    page.wait_for_timeout(300)
    scroll = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert scroll[0] <= scroll[1] == viewport
    toolbar = page.evaluate(
        "() => { const tb = [...Bokeh.documents[0].all_models].find(m => m.type === 'Toolbar');"
        " const r = [...Bokeh.index.find_by_id(tb.id)][0].el.getBoundingClientRect(); return [r.left, r.right] }"
    )
    assert 0 <= toolbar[0] < toolbar[1] <= viewport
    for name in ex.panels:
        left, top, right, bottom = shot.frame_box(page, name)
        assert 0 <= left < right <= viewport, (name, left, right)
        xs = [shot.point_xy(page, name, i)[0] for i in range(len(ex.points))]
        assert left <= min(xs) and max(xs) <= right, f"panel {name}: points outside the map"
    x0 = page.evaluate(f"() => ({MODEL_JS})('panel_1').x_range.start")
    left, top, right, bottom = shot.frame_box(page, "1")
    page.mouse.move((left + right) / 2, (top + bottom) / 2)
    page.mouse.wheel(0, -300)
    page.wait_for_timeout(300)
    assert page.evaluate(f"() => ({MODEL_JS})('panel_1').x_range.start") > x0, "the wheel did not zoom in"


@pytest.mark.slow
@pytest.mark.parametrize("viewport", [1000, 390])
def test_browser_saved_page_wraps_to_a_laptop_and_a_phone_window(built, chrome, viewport):
    """The saved page (laid out for 1240 px) opened in a narrower window (a 1000 px laptop window with a side
    bar, a 390 px phone): nothing scrolls sideways (``scrollWidth`` within the window), the panels wrap into
    as many columns as fit (1000 px: three, 390 px: one) and each panel and the toolbar lie inside the window.
    At 1240 px the page held four columns and the five controls in one row: 1165 px wide at 1000."""
    ex, path = built
    shot, browser = chrome
    page, _ = shot.open_page(browser, path)
    page.set_viewport_size({"width": viewport, "height": 800})
    page.wait_for_timeout(500)
    scroll_width, window_width = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert window_width == viewport and scroll_width <= viewport, (
        f"page {scroll_width} px wide in a {viewport} px window"
    )
    boxes = {name: shot.frame_box(page, name) for name in ex.panels}
    for name, (left, _, right, _) in boxes.items():
        assert 0 <= left < right <= viewport, (name, left, right)
    tops = sorted({round(top) for _, top, _, _ in boxes.values()})
    assert len(tops) == -(-len(ex.panels) // (3 if viewport == 1000 else 1)), f"rows of panels at y = {tops}"
    toolbar = page.evaluate(
        "() => { const tb = [...Bokeh.documents[0].all_models].find(m => m.type === 'Toolbar');"
        " const r = [...Bokeh.index.find_by_id(tb.id)][0].el.getBoundingClientRect(); return [r.left, r.right] }"
    )
    assert 0 <= toolbar[0] < toolbar[1] <= viewport


@pytest.mark.slow
def test_browser_hover_lines_and_collapsed_identical_vectors(built, chrome):
    """Hover: the sentence, "lemma · POS · word", "sense gloss" and "layer · doc · corpus" lines. At layer
    0 every "play" occurrence has one vector: one point, whose hover says so and lists a few sentences."""
    ex, path = built
    shot, browser = chrome
    p = ex.points
    page, _ = shot.open_page(browser, path)
    i = _lonely(p, "2")
    page.mouse.move(*shot.point_xy(page, "2", i))
    tip = page.locator(".tip").first
    tip.wait_for(state="visible", timeout=10000)
    lines = [line.strip() for line in tip.inner_text().splitlines() if line.strip()]
    r = p.iloc[i]
    assert lines == [
        r["sentence"].replace("[", "").replace("]", ""),
        f"{r['lemma']} · {r['upos']} · {r['word']}",
        f"{r['sense']} gloss {r['sense']}",
        f"layer 2 · {r['doc_id']} · {r['corpus']}",
    ]
    page.mouse.move(0, 0)
    page.wait_for_timeout(200)
    play = int(np.flatnonzero((p["lemma"] == "play").to_numpy())[0])
    assert p["rep_0"].iat[play] == play and p["dup_0"].iat[play] == 30
    page.mouse.move(*shot.point_xy(page, "0", play))
    dup = page.locator(".tip-dup").first
    dup.wait_for(state="visible", timeout=10000)
    assert dup.inner_text().startswith("30 occurrences of 'play' (identical at this layer)")
    assert "... and 22 more" in dup.inner_text()
    assert page.locator(".tip").count() == 1, "the 29 identical occurrences are not drawn under it"


@pytest.mark.slow
def test_browser_click_lists_neighbours_and_rings_them(built, chrome):
    """A click writes the k nearest occurrences (the store's cosines, in order) and rings the point and its
    neighbours in every panel; at layer 0 the list names the 29 ties and then the distinct vectors."""
    ex, path = built
    shot, browser = chrome
    p = ex.points
    page, _ = shot.open_page(browser, path)
    i = _lonely(p, "2")
    page.mouse.click(*shot.point_xy(page, "2", i))
    page.wait_for_timeout(300)
    text = model(page, "knn_out", "text")
    ids, cos = ex.neighbours["2"]
    assert "3 nearest occurrences at layer 2" in text
    for j, c in zip(ids[i], cos[i]):
        assert f"<td>{c:.3f}</td><td>{p['sentence_html'].iat[j]}" in text
    marks = model(page, "marks", "data")
    assert marks["kind"] == ["query", "neighbour", "neighbour", "neighbour"]
    for panel in ex.panels:
        want = [p[f"x_{panel}"].iat[j] for j in [i, *ids[i]]]
        assert np.allclose(np.asarray(marks[f"x_{panel}"], dtype=float), want, equal_nan=True)
    play = int(np.flatnonzero((p["lemma"] == "play").to_numpy())[0])
    page.mouse.click(*shot.point_xy(page, "0", play))
    page.wait_for_timeout(300)
    text = model(page, "knn_out", "text")
    assert "29 occurrences at cosine 1.000: identical vectors" in text
    bank = int(np.flatnonzero((p["lemma"] == "bank").to_numpy())[0])
    assert "1 nearest distinct vectors at layer 0" in text and "(20 identical occurrences)" in text
    assert ex.neighbours["0"][0][play].tolist() == [bank, -1, -1]


@pytest.mark.slow
def test_browser_colour_by_recolours_points_and_legend(built, chrome):
    ex, path = built
    shot, browser = chrome
    page, _ = shot.open_page(browser, path)
    assert model(page, "legend", "text") == ex.legends["sense"]
    for mode in ("pos", "form", "sense"):
        page.locator("select").first.select_option(mode)
        page.wait_for_timeout(200)
        assert model(page, "occurrences", "data")["color"] == ex.points[f"c_{mode}"].tolist()
        assert model(page, "legend", "text") == ex.legends[mode]


@pytest.mark.slow
def test_browser_box_and_lasso_select_across_panels_with_count(built, chrome):
    """A box over the left half of layer 1, then a lasso triangle: the selection is exactly the points
    inside (from their pixel positions), shared by every panel, and the count text says how many."""
    from matplotlib.path import Path as Polygon

    ex, path = built
    shot, browser = chrome
    p = ex.points
    page, _ = shot.open_page(browser, path)
    left, top, right, bottom = shot.frame_box(page, "1")
    xy = np.array([shot.point_xy(page, "1", i) for i in range(len(p))])
    page.mouse.move(left + 2, top + 2)
    page.mouse.down()
    page.mouse.move((left + right) / 2, bottom - 2, steps=8)
    page.mouse.up()
    page.wait_for_timeout(200)
    inside = np.flatnonzero((xy[:, 0] <= (left + right) / 2) & (xy[:, 1] <= bottom - 2))
    selected = sorted(page.evaluate(f"() => ({MODEL_JS})('occurrences').selected.indices"))
    assert selected == inside.tolist() and 0 < len(selected) < len(p)
    assert model(page, "selection_info", "text") == f"<b>{len(selected)}</b> selected (in every panel)"

    page.get_by_title("Lasso Select").first.click()
    triangle = [(left + 2, top + 2), (right - 2, top + 2), (left + 2, bottom - 2)]
    page.mouse.move(*triangle[0])
    page.mouse.down()
    for a, b in zip(triangle, triangle[1:] + triangle[:1]):
        for t in np.linspace(0, 1, 12)[1:]:
            page.mouse.move(a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1]))
    page.mouse.up()
    page.wait_for_timeout(200)
    lasso = sorted(page.evaluate(f"() => ({MODEL_JS})('occurrences').selected.indices"))
    want = np.flatnonzero(Polygon(triangle).contains_points(xy)).tolist()
    assert lasso == want and 0 < len(lasso) < len(p) and lasso != selected
    assert model(page, "selection_info", "text") == f"<b>{len(lasso)}</b> selected (in every panel)"


@needs_bokeh
def test_cli_explore_writes_the_page_and_checks_layers(tmp_path, monkeypatch, capsys):
    """`probing explore` resolves the store like `neighbors` (extract_activations), writes the page
    and prints the score per panel; an unknown layer is a clear error (exit 2)."""
    from probing import cli, experiment

    monkeypatch.setenv("PROBING_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(experiment, "extract_activations", lambda *a, **kw: make_store())
    out = tmp_path / "ex.html"
    argv = ["explore", "--model", "m", "--corpus", "c", "--lemma", "play", "--lemma", "bank", "--method", "pca"]
    assert cli.main(argv + ["--layers", "1,2", "--out", str(out), "-q"]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out}: 50 occurrences, panels 1, 2" in printed
    assert "'play' (NOUN \"play\") 2: 1-NN sense accuracy 1.00" in printed
    assert out.stat().st_size > 1_000_000, "Bokeh's JavaScript (about 1.7 MB) is inlined"
    assert cli.main(argv + ["--layers", "1,7", "--out", str(out)]) == 2
    assert "no layer 7 in this store" in capsys.readouterr().err
