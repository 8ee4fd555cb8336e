"""Notebook 05_syntax_trees: executed like every notebook (tests/test_notebooks.py has the harness and says how), in a file of
its own so that the test command's two workers (pytest-xdist, files as units) can run it beside the others:
it is one of the two longest notebook tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_notebooks import _images, run_notebook

pytestmark = pytest.mark.notebooks


def test_05_syntax_trees(tmp_path, monkeypatch):
    s, nb, _ = run_notebook("05_syntax_trees", tmp_path, monkeypatch)
    from probing.corpora import load
    from probing.probes.structural import position_distances, punctuation_mask, uuas

    rows = s["rows"]
    table = {(t, e, l, m): (v, lo, hi) for t, e, l, m, v, lo, hi in zip(*rows.values())}
    distance = {"uuas", "dspr", "control-uuas", "control-dspr", "selectivity"}
    depth = {"root_acc", "nspr", "control-root_acc", "control-nspr", "selectivity"}
    for task, metrics in (("distance", distance), ("depth", depth)):
        for enc, layer in [("elmo", "0"), ("elmo", "1"), ("elmo", "2"), ("random-elmo", "1"), ("glove", "glove")]:
            assert {m for t, e, l, m in table if (t, e, l) == (task, enc, layer)} == metrics, (task, enc, layer)
    for (_, _, _, metric), (v, lo, hi) in table.items():
        assert lo <= v <= hi
        assert (0.0 if metric in ("uuas", "root_acc") else -1.0) <= v <= 1.0
    # the tree is in the contextual layers: at quick size too, ELMo layer 1 beats layer 0 by a wide margin
    # (all of the bundled slice: 59.7 vs 20.7), and layer 1 is above its own random-tree control
    elmo_uuas = {l: table[("distance", "elmo", l, "uuas")][0] for l in ("0", "1", "2")}
    assert elmo_uuas["1"] > elmo_uuas["0"] + 0.15
    assert table[("distance", "elmo", "1", "selectivity")][1] > 0  # the whole interval above zero
    # the position baseline, recomputed from the CoNLL-U file
    sents = list(load("demo-ud", "test").head(s["max_sentences"]))
    expected = uuas(
        position_distances([len(x.words) for x in sents]),
        [x.heads for x in sents],
        [punctuation_mask(x.upos) for x in sents],
    )
    assert table[("distance", "baseline", "position", "uuas")][0] == pytest.approx(expected, abs=1e-12)
    # the sweep's full-rank probe is the experiment's layer-1 probe (same seed, data and defaults); so are the
    # probes fit by hand for the tree figure
    sweep = s["sweep"]
    full = [v for r, m, v in zip(sweep["rank"], sweep["metric"], sweep["value"]) if r == s["dim"] and m == "uuas"]
    assert full == [pytest.approx(elmo_uuas["1"], abs=1e-12)]
    assert s["hand_uuas"] == {l: pytest.approx(elmo_uuas[l], abs=1e-12) for l in ("0", "1")}
    assert sorted(set(sweep["rank"])) == [1, 4, 16, 64, s["dim"]] and set(sweep["metric"]) == {"uuas", "dspr"}
    # the sentence drawn: gold arcs span its non-punctuation words, as do the predicted trees
    sentence = sents[s["pick"]]
    assert s["words"] == sentence.words and 10 <= len(sentence.words) <= 16
    n_words = int((~punctuation_mask(sentence.upos)).sum())
    for arcs in s["tree_arcs"]:
        assert sum(a.startswith("gold:") for a in arcs) == n_words - 1
        assert sum(a.startswith("pred:") for a in arcs) == n_words - 1
    assert [t.split(":")[0] for t in s["tree_titles"]] == ["layer 1", "layer 0"]
    assert (Path(s["out"]) / "figures" / "tree_layers_0_1.png").is_file()
    assert _images(nb) == 4  # the two metric-per-layer figures, the rank sweep, the tree
