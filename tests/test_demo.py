"""End to end: `probing demo --quick` on the bundled model and data, cold and then from the cache."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from probing.cli import main as cli_main
from probing.demo import run_demo
from probing.results import read_results

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo")
    mp = pytest.MonkeyPatch()
    mp.setenv("PROBING_CACHE", str(root / "cache"))
    mp.delenv("PROBING_DATA", raising=False)
    try:
        first = run_demo(root / "out", quick=True, progress=False)
        yield root, first, mp
    finally:
        mp.undo()


def score(results: pd.DataFrame, task: str, encoder: str, layer: str, metric: str = "accuracy") -> float:
    rows = results[
        (results["task"] == task)
        & (results["encoder"] == encoder)
        & (results["layer"] == layer)
        & (results["metric"] == metric)
        & (results["split"] == "test")
    ]
    assert len(rows), f"no {task}/{encoder}/{layer}/{metric} row"
    return float(rows["value"].mean())


def test_files_and_figures_are_written(demo):
    root, out, _ = demo
    for name in (
        "overview",
        "layer_scores_upos",
        "selectivity_upos",
        "layer_scores_wsd-1nn",
        "mix_weights",
        "umap_senses",
        "umap_pos",
    ):
        for fmt in ("png", "svg"):
            assert (root / "out" / "figures" / f"{name}.{fmt}").stat().st_size > 5_000, (name, fmt)
    html = out.report.read_text(encoding="utf-8")
    assert out.report == root / "out" / "report.html"
    assert html.count("<img") == len(out.figures)  # every figure embedded in the self-contained page
    assert "Table 4" in html
    written = read_results(root / "out" / "results")
    pd.testing.assert_frame_equal(written, out.results.results, check_dtype=False)
    prov = json.loads((root / "out" / "results" / "results.json").read_text())["provenance"]
    assert prov["demo"]["quick"] is True and prov["encoders"]["elmo"]["fingerprint"]


def test_layer_one_pos_is_far_above_the_majority_baseline(demo):
    _, out, _ = demo
    r = out.results.results
    majority = score(r, "upos", "baseline", "majority")
    layer1 = score(r, "upos", "elmo", "1")
    # The majority tag (NOUN) covers ~1/6 of UD EWT tokens; even on 200 training sentences a linear
    # probe on the first biLSTM layer of a trained biLM tags most tokens right. 40 points is a wide margin
    # below the ~85-90% it reaches, and far above what a broken pipeline (shuffled rows: ~majority) gives.
    assert majority < 0.25
    assert layer1 > majority + 0.40
    # control tasks: the probe must do better on real tags than on random per-type tags
    assert score(r, "upos", "elmo", "1", "selectivity") > 0.05


def test_wsd_and_neighbours_are_sane(demo):
    _, out, _ = demo
    r = out.results.results
    for layer in ("0", "1", "2"):
        assert 0.2 < score(r, "wsd-1nn", "elmo", layer, "f1") <= 1.0
    # WordNet's first sense is a strong baseline on SemCor (the paper: 65-66 F1 on the all-words sets)
    assert 0.4 < score(r, "wsd-1nn", "baseline", "wn-first-sense", "f1") < 0.9
    nn = out.neighbours
    assert nn.iloc[0]["source"] == "GloVe" and len(nn.iloc[0]["nearest"].split(", ")) == 10
    ctx = nn.iloc[1:]
    assert len(ctx) == 2 * 3  # the paper's two sentences x three layers
    assert ctx["cosine"].between(0, 1.0 + 1e-6).all()
    # at layer 0 (context-free) the nearest occurrence of "play" is another "play": cosine 1
    assert ctx[ctx["layer"] == "0"]["cosine"].min() > 0.999
    # where the bundled model's top layer does not separate senses, the summary and the report say so
    html = out.report.read_text(encoding="utf-8")
    if out.sense_note is not None:
        assert "layer 2 does not do better than chance" in out.sense_note
        assert "layer 2 does not do better than chance" in html and "probing download original" in html
        assert "probing download original" in out.summary().replace("\n", " ")


def test_second_run_is_served_from_the_cache(demo, capsys):
    root, first, _ = demo
    assert cli_main(["demo", "--out", str(root / "again"), "--quick"]) == 0
    printed = capsys.readouterr().out
    prov = json.loads((root / "again" / "results" / "results.json").read_text())["provenance"]
    assert all(s["cache_hit"] for s in prov["stores"].values())
    jobs_run_first = [k for k in first.results.provenance["timings"] if k.startswith("task ")]
    assert len(prov["cached_jobs"]) == len(jobs_run_first) > 0  # no probe is trained again
    pd.testing.assert_frame_equal(read_results(root / "again" / "results"), first.results.results, check_dtype=False)
    assert "upos" in printed and "report:" in printed and "nearest neighbours of 'play'" in printed


def test_table4_searches_every_play_sentence_of_the_semcor_slice(tmp_path, monkeypatch):
    """The paper searched all of SemCor; the demo searches both splits of its slice, whose sports uses of the
    noun (e.g. the paper's own source, d004.s017 "Chico_Ruiz made a spectacular play ...") are in test."""
    from probing.corpora import load
    from probing.demo import play_occurrences
    from probing.encoders import get_encoder

    monkeypatch.setenv("PROBING_CACHE", str(tmp_path))
    expected = {
        s.id for split in ("train", "test") for s in load("demo-semcor", split) if s.lemmas and "play" in s.lemmas
    }
    store = play_occurrences(get_encoder("default"))
    tokens = store.tokens
    assert set(tokens["sentence_id"]) == expected
    assert {"d004.s017", "d005.s105"} <= expected  # one test and one train sentence
    plays = tokens.loc[store.rows(lemma="play")]
    assert plays["sentence_id"].nunique() == len(expected)  # every sentence holds the lemma
