"""The HTML report is one self-contained, well-formed, escaped page; Chromium renders it (when installed)."""

from __future__ import annotations

import base64
import html
import importlib.util
from html.parser import HTMLParser
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib import image  # noqa: E402

from probing import figures as F  # noqa: E402
from probing.report import figure_title, summary_table, write_report  # noqa: E402
from probing.results import METRICS, Metric  # noqa: E402
from probing.tasks import TASK_KINDS, TaskKind  # noqa: E402
from probing.verdict import verdict  # noqa: E402
from tests import browser  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EVIL = '<script>alert("pwned")</script>'
MODEL_FP = "sha256:" + "3f" * 32
CORPUS_FP = "9c1e" * 16


def _load_render_script():
    spec = importlib.util.spec_from_file_location("check_report_render", ROOT / "scripts" / "check_report_render.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


render = _load_render_script()


def row(task, encoder, layer, metric, value, lo=np.nan, hi=np.nan, dataset="ewt", seed=0):
    return dict(
        task=task,
        dataset=dataset,
        split="test",
        encoder=encoder,
        layer=layer,
        metric=metric,
        value=value,
        ci_low=lo,
        ci_high=hi,
        seed=seed,
    )


def make_results() -> pd.DataFrame:
    return pd.DataFrame(
        [
            row("upos", "elmo", "0", "accuracy", 0.90, 0.89, 0.91),
            row("upos", "elmo", "1", "accuracy", 0.96, 0.955, 0.965),
            row("upos", "elmo", "2", "accuracy", 0.95, 0.94, 0.955),
            row("upos", "random-elmo", "0", "accuracy", 0.85, 0.84, 0.86),
            row("upos", "random-elmo", "1", "accuracy", 0.80, 0.79, 0.81),
            row("upos", "baseline", "majority", "accuracy", 0.15, 0.14, 0.16),
            row("upos", "glove", "glove", "accuracy", 0.89, 0.885, 0.895),
            row("upos", "elmo", "1", "control-accuracy", 0.70, 0.69, 0.71),
            row("upos", "elmo", "1", "selectivity", 0.26),
            row("upos", "elmo", "1", "best-layer-margin", 0.01, 0.004, 0.016),
            row("upos", "elmo", "mix", "accuracy", 0.965, 0.96, 0.97),
            row("upos", "elmo", "concat", "accuracy", 0.97, 0.965, 0.975),
            row("wsd-1nn", "elmo", "1", "f1", 0.69, 0.68, 0.70, dataset="se-all"),
            row("wsd-1nn", "elmo", "2", "f1", 0.68, 0.67, 0.69, dataset="se-all"),
            row("wsd-1nn", "elmo", "1", "accuracy", 0.70, 0.69, 0.71, dataset="se-all"),
            row("wsd-1nn", "baseline", "wn-first-sense", "f1", 0.65, 0.64, 0.66, dataset="se-all"),
        ]
    )


PROVENANCE = {
    "model": {"name": "elmo-original", "fingerprint": MODEL_FP},
    "corpora": {"ud-ewt/test": CORPUS_FP},
    "probe": {"C": 1.0, "seeds": [0, 1, 2], "note": EVIL},
    "versions": {"python": "3.11", "torch": "2.13"},
}


@pytest.fixture(scope="module")
def figure_files(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("figs")
    saved = F.save(F.layer_scores(make_results(), "upos", "accuracy"), out, "layer_scores_upos")
    return {"layer_scores_upos": saved["png"], "layer_scores_upos (vector)": saved["svg"]}


@pytest.fixture(scope="module")
def report(tmp_path_factory, figure_files) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("report")
    neighbours = pd.DataFrame({"source": ["GloVe", "biLM"], "nearest neighbours": ["playing, game", f"a {EVIL} play"]})
    path = write_report(
        out,
        make_results(),
        PROVENANCE,
        figures=figure_files,
        tables={'Nearest neighbours of "play"': neighbours},
        title=f"Report {EVIL}",
    )
    return path, path.read_text(encoding="utf-8")


class Collector(HTMLParser):
    """Collects tags, attributes and text, and checks that every non-void element is closed in order."""

    VOID = {"meta", "img", "br", "hr", "link", "input", "source", "col", "wbr"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1] if self.stack else None}>")
        else:
            self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


def parse(text: str) -> Collector:
    p = Collector()
    p.feed(text)
    p.close()
    return p


def test_html_is_well_formed_and_self_contained(report):
    path, text = report
    assert path.name == "report.html"
    p = parse(text)
    assert p.errors == [] and p.stack == [], (p.errors, p.stack)
    names = [t for t, _ in p.tags]
    assert "script" not in names and "link" not in names and "iframe" not in names  # no JS, no external CSS
    assert "http://" not in text and "https://" not in text  # nothing fetched from the network
    for tag, attrs in p.tags:
        if "src" in attrs:
            assert attrs["src"].startswith("data:"), f"<{tag}> loads {attrs['src'][:40]}"


def test_every_figure_is_embedded_byte_for_byte(report, figure_files):
    _, text = report
    imgs = {a["alt"]: a for t, a in parse(text).tags if t == "img"}
    assert set(imgs) == {"Score per layer: upos", "Score per layer: upos (vector)"}  # titles in words
    imgs = {name: imgs[figure_title(name)] for name in figure_files}
    for name, path in figure_files.items():
        mime = "image/png" if path.suffix == ".png" else "image/svg+xml"
        prefix = f"data:{mime};base64,"
        assert imgs[name]["src"].startswith(prefix)
        assert base64.b64decode(imgs[name]["src"][len(prefix) :]) == path.read_bytes()
    # a 6.4-inch figure saved at 200 dpi is shown at its physical size: 6.4 * 96 CSS px
    assert imgs["layer_scores_upos"]["style"] == "width: 614px"
    assert "How to read this" in text and "0 is the context-free character-CNN token layer" in text
    # the caption states the paired test the summary uses, not the interval-overlap rule
    assert "intervals overlap are not significant" not in text and "paired bootstrap over test sentences" in text


def test_figure_titles_are_words():
    assert figure_title("layer_scores_upos") == "Score per layer: upos"
    assert figure_title("similarity_linear_cka") == "Layer similarity: linear CKA"
    assert (
        figure_title("oov_glove_upos_ewt_test")
        == "Accuracy on words inside vs outside GloVe's vocabulary: upos ewt test"
    )
    assert figure_title("my own plot") == "my own plot"


def test_verdict_best_layer_paired_test_and_baselines():
    """upos: layer 1 (96.0) over layer 2 (95.0), paired margin 1.0 [0.4, 1.6] > 0: significant. random-elmo:
    no margin row, so no test. WSD: wn-first-sense 65.0 is below layer 1's 69.0, so nothing beats every layer."""
    found = {(f.task, f.encoder): f for f in verdict(make_results())}
    up = found[("upos", "elmo")]
    assert (up.layer, up.runner_up, up.margin, up.significant, up.beaten_by) == (
        "1",
        "2",
        (0.01, 0.004, 0.016),
        True,
        (),
    )
    assert up.sentence() == (
        "upos (ewt test), elmo: best single layer 1, accuracy 96.0 [95.5, 96.5]; runner-up layer 2 (95.0), "
        "difference 1.0 [0.4, 1.6], significant (paired bootstrap over test sentences)."
    )
    rnd = found[("upos", "random-elmo")]
    assert (rnd.layer, rnd.runner_up, rnd.margin, rnd.significant) == ("0", "1", None, None)
    assert found[("wsd-1nn", "elmo")].beaten_by == ()


def test_verdict_says_when_baselines_beat_every_layer_and_honours_lower_is_better(monkeypatch):
    wsd = pd.DataFrame(
        [
            row("wsd", "elmo", "1", "f1", 0.60, 0.58, 0.62, dataset="se07"),
            row("wsd", "elmo", "2", "f1", 0.62, 0.60, 0.64, dataset="se07"),
            row("wsd", "elmo", "2", "best-layer-margin", 0.02, -0.01, 0.05, dataset="se07"),
            row("wsd", "baseline", "most-frequent-sense", "f1", 0.65, 0.63, 0.67, dataset="se07"),
            row("wsd", "baseline", "wn-first-sense", "f1", 0.64, 0.62, 0.66, dataset="se07"),
        ]
    )
    (f,) = verdict(wsd)
    assert (f.layer, f.significant) == ("2", False)
    assert [b for b, _ in f.beaten_by] == ["most-frequent-sense", "wn-first-sense"]
    assert f.sentence().endswith(
        "not significant (paired bootstrap over test sentences). Every layer is below the baselines "
        "most-frequent-sense (65.0), wn-first-sense (64.0)."
    )
    # a headline where lower is better: the best layer is the lowest, and a baseline beats it by being lower
    bits = Metric("bits", "bits per token", higher_is_better=False)
    monkeypatch.setitem(METRICS, "bits", bits)
    monkeypatch.setitem(
        TASK_KINDS, "lm-toy", TaskKind("lm-toy", run=lambda job: None, metrics=(bits,), headline="bits")
    )
    lm = pd.DataFrame(
        [
            row("lm", "elmo", "0", "bits", 9.0),
            row("lm", "elmo", "1", "bits", 5.0),
            row("lm", "elmo", "2", "bits", 6.0),
            row("lm", "baseline", "unigram", "bits", 11.0),
        ]
    )
    (f,) = verdict(lm)
    assert (f.layer, f.runner_up, f.beaten_by) == ("1", "2", ())
    (f,) = verdict(lm.assign(value=lm["value"].where(lm["layer"] != "unigram", 4.0)))
    assert f.beaten_by == (("unigram", 4.0),)


def test_report_answers_first_and_collapses_provenance(report):
    """Verdict, then the summary (compact, details behind <details>), figures, results; provenance collapsed."""
    _, text = report
    order = [text.index(s) for s in ('id="verdict"', 'id="summary"', 'id="figures"', 'id="results"', 'id="provenance"')]
    assert order == sorted(order)
    verdict_part = text[order[0] : order[1]]
    assert "Best single layer</strong> (elmo): upos: 1, wsd-1nn: 1." in verdict_part
    assert "runner-up layer 2 (95.0), difference 1.0 [0.4, 1.6], significant" in verdict_part
    summary_part = text[order[1] : order[2]]
    assert summary_part.count("<table>") == 2 and summary_part.index("<table>") < summary_part.index("<details>")
    provenance_part = text[order[4] :]
    assert provenance_part.index("<details>") < provenance_part.index(MODEL_FP)


def test_provenance_and_malicious_text_are_escaped(report):
    _, text = report
    p = parse(text)
    body = "".join(p.text)
    assert MODEL_FP in body and CORPUS_FP in body
    assert "elmo-original" in body and "2.13" in body
    assert EVIL not in text  # the raw tag never reaches the page
    assert html.escape(EVIL) in text  # ... it is shown as text instead
    assert body.count(EVIL) == 4  # as visible text: <title>, <h1>, the neighbours table, the provenance note
    assert "script" not in [t for t, _ in p.tags]


def test_summary_picks_best_layer_with_ci_selectivity_and_baselines():
    s = summary_table(make_results()).set_index(["task", "encoder"])
    elmo = s.loc[("upos", "elmo")]
    # layer 1 is the best SINGLE layer (0.96, CI 0.955-0.965; mix 0.965 and concat 0.97 are higher but are
    # combinations, shown in their own columns); its selectivity row is 0.26; its margin over layer 2 has a
    # CI above zero, so it is significant
    assert (elmo["best layer"], elmo["score"], elmo["95% CI"], elmo["selectivity"]) == (
        "1",
        "96.0",
        "[95.5, 96.5]",
        "26.0",
    )
    assert (elmo["mix"], elmo["concat"], elmo["vs next"]) == ("96.5", "97.0", "1.0 [0.4, 1.6], significant")
    assert elmo["baselines"] == "glove 89.0; majority 15.0"
    rnd = s.loc[("upos", "random-elmo")]
    assert (rnd["best layer"], rnd["score"], rnd["selectivity"], rnd["vs next"]) == ("0", "85.0", "—", "—")
    wsd = s.loc[("wsd-1nn", "elmo")]
    # WSD is summarised by F1, not by its accuracy rows
    assert (wsd["metric"], wsd["best layer"], wsd["score"], wsd["baselines"]) == (
        "f1",
        "1",
        "69.0",
        "wn-first-sense 65.0",
    )


def test_summary_and_results_tables_are_in_the_page(report):
    _, text = report
    body = "".join(parse(text).text)
    assert "[95.5, 96.5]" in body and "glove 89.0; majority 15.0" in body
    assert body.count("control-accuracy") == 1  # the one control row of the full results table
    assert "0.9550" in body  # full results keep raw fractions at 4 decimals
    assert 'Nearest neighbours of "play"' in body and "playing, game" in body


def test_errors_name_the_bad_input(tmp_path, figure_files):
    res = make_results()
    with pytest.raises(FileNotFoundError, match="missing.png"):
        write_report(tmp_path, res, {}, figures={"x": tmp_path / "missing.png"})
    pdf = tmp_path / "fig.pdf"
    pdf.write_bytes(b"%PDF-1.4")
    with pytest.raises(ValueError, match=r"fig.pdf is not a .png or .svg file"):
        write_report(tmp_path, res, {}, figures={"x": pdf})
    fake = tmp_path / "fake.png"
    fake.write_bytes(b"not a png at all, just text")
    with pytest.raises(ValueError, match=r"figure 'x': .*fake.png: not a PNG file"):
        write_report(tmp_path, res, {}, figures={"x": fake})
    with pytest.raises(ValueError, match=r"missing column\(s\) \['seed'\]"):
        write_report(tmp_path, res.drop(columns="seed"), {})
    with pytest.raises(ValueError, match="table is empty"):
        write_report(tmp_path, res.iloc[:0], {})
    with pytest.raises(TypeError, match="provenance: expected a dict"):
        write_report(tmp_path, res, ["not", "a", "dict"])
    assert not (tmp_path / "report.html").exists()  # nothing half-written after the failures
    path = write_report(tmp_path, res, {"run": 1})
    path = write_report(tmp_path, res, {"run": 2})  # overwriting works, leaves no temp files
    assert "<dt>run</dt><dd>2</dd>" in path.read_text(encoding="utf-8")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fake.png", "fig.pdf", "report.html"]


# ---------------------------------------------------------------- render check


def test_ink_fraction_tells_blank_from_drawn(tmp_path):
    white = np.ones((100, 100, 3))
    image.imsave(tmp_path / "blank.png", white)
    assert render.ink_fraction(tmp_path / "blank.png") == (0.0, 1)
    drawn = white.copy()
    drawn[10:20, 10:20] = 0.0  # a 10x10 black square: 100 of 10,000 pixels
    image.imsave(tmp_path / "drawn.png", drawn)
    assert render.ink_fraction(tmp_path / "drawn.png") == (0.01, 2)


@pytest.mark.slow
def test_chromium_renders_report(report, tmp_path):
    browser.require()
    path, _ = report
    shot = tmp_path / "shot.png"
    assert render.main([str(path), "--out", str(shot), "--window-size", "1024,1600"]) == 0
    ink, colours = render.ink_fraction(shot)
    assert image.imread(shot).shape[:2] == (1600, 1024)
    assert ink > 0.05 and colours > 50  # text, tables and a figure: far from one flat colour


@pytest.mark.slow
@pytest.mark.parametrize("width, height", [(1280, 800), (390, 844)])
def test_no_horizontal_scroll_at_laptop_and_phone_width(tmp_path, figure_files, width, height):
    """112-character store paths, a long dataset name and a long neighbour list wrap (tables scroll in their
    own box): the page's scrollWidth equals the viewport's width at 1280 and at 390 px."""
    from playwright.sync_api import sync_playwright

    exe = browser.require()
    store = "/home/student/.cache/probing/store/" + "0f3a9c" * 12 + "/layers"
    assert len(store) >= 112
    results = make_results().assign(dataset=lambda d: d["dataset"].where(d["task"] != "upos", "ud-ewt-" + "x" * 60))
    prov = {**PROVENANCE, "stores": [store, store.replace("0f", "1e")], "command": "probing run " + store}
    words = pd.DataFrame({"source": ["biLM"], "nearest neighbours": [", ".join(["playing"] * 40) + store]})
    path = write_report(tmp_path, results, prov, figures=figure_files, tables={"neighbours": words})
    with sync_playwright() as pw:
        chrome = pw.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = chrome.new_page(viewport={"width": width, "height": height})
            page.goto(path.as_uri())
            page.evaluate("() => document.querySelectorAll('details').forEach(d => d.open = true)")
            scroll, inner = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
        finally:
            chrome.close()
    assert scroll <= inner == width


@pytest.mark.slow
def test_chromium_check_fails_on_blank_page(tmp_path):
    browser.require()
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><html><body></body></html>", encoding="utf-8")
    assert render.main([str(blank), "--out", str(tmp_path / "shot.png"), "--window-size", "400,300"]) == 1


def test_draw_figures_adds_direction_and_oov_figures_when_the_rows_are_there():
    from probing.report import draw_figures
    from probing.results import make_row

    def r(layer, metric, v):
        return make_row("upos", "d", "test", "elmo", layer, metric, v, v - 0.01, v + 0.01)

    rows = [r("0", "accuracy", 0.80), r("1", "accuracy", 0.90)]
    plain = draw_figures(pd.DataFrame(rows))
    assert not any(k.startswith(("directions_", "oov_")) for k in plain)  # nothing asked, nothing drawn
    rows += [r("1f", "accuracy", 0.85), r("1b", "accuracy", 0.86)]
    rows += [r("1", "accuracy-iv-glove", 0.92), r("1", "accuracy-oov-glove", 0.70)]
    drawn = draw_figures(pd.DataFrame(rows))
    assert {"directions_upos", "oov_glove_upos"} <= set(drawn) and "oov_train_upos" not in drawn
    # the directions figure draws the halves and the whole layer in percent (forward, backward, both)
    heights = sorted(round(p.get_height(), 6) for p in drawn["directions_upos"].axes[0].patches)
    assert heights == [85.0, 86.0, 90.0]
