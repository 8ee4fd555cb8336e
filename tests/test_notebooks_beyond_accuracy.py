"""Notebook 06_beyond_accuracy: executed like every notebook (tests/test_notebooks.py has the harness and says how), in a file of
its own so that the test command's two workers (pytest-xdist, files as units) can run it beside the others:
it is one of the two longest notebook tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_notebooks import _images, run_notebook

pytestmark = pytest.mark.notebooks


def test_06_beyond_accuracy(tmp_path, monkeypatch):
    s, nb, _ = run_notebook("06_beyond_accuracy", tmp_path, monkeypatch)
    from probing.corpora import load

    rows = s["rows"]
    table = {(e, l, m, seed): v for _, _, _, e, l, m, v, seed in zip(*rows.values())}
    splits = {(m, sp) for _, _, sp, _, _, m, _, _ in zip(*rows.values())}
    mdl = {"codelength_kbits", "uniform_kbits", "compression", "control-codelength_kbits"}
    assert {sp for m, sp in splits if m in mdl} == {"train"} and {sp for m, sp in splits if m == "accuracy"} == {"test"}
    layers = [
        ("elmo", "0"),
        ("elmo", "1"),
        ("elmo", "2"),
        ("random-elmo", "0"),
        ("random-elmo", "1"),
        ("glove", "glove"),
    ]
    for enc, layer in layers:
        for seed in (0, 1):  # mdl_seeds = 2 at quick size: every seed has its own code
            assert mdl <= {m for e, l, m, sd in table if (e, l, sd) == (enc, layer, seed)}, (enc, layer, seed)
    # the uniform code is N log2 K over the training tokens, recomputed here from the corpus
    train = list(load("demo-ud", "train").head(s["max_sentences"]))
    tags = [t for x in train for t in x.upos]
    N, K = len(tags), len(set(tags))
    assert (s["N"], s["K"]) == (N, K)
    uniform = [v for (e, l, m, sd), v in table.items() if m == "uniform_kbits"]
    assert uniform == [pytest.approx(N * np.log2(K) / 1000, rel=1e-12)] * len(uniform)
    for (e, l, m, sd), v in table.items():
        if m == "compression":
            assert v == pytest.approx(table[(e, l, "uniform_kbits", sd)] / table[(e, l, "codelength_kbits", sd)])
    for seed in (0, 1):
        # ELMo layer 1 compresses the UPOS labels (compression > 1), far better than the control task's
        # random labels per word type, and better than the same layer of the untrained network
        assert table[("elmo", "1", "compression", seed)] > 1.5
        assert table[("elmo", "1", "codelength_kbits", seed)] < table[("elmo", "1", "control-codelength_kbits", seed)]
        assert table[("elmo", "1", "codelength_kbits", seed)] < table[("random-elmo", "1", "codelength_kbits", seed)]
    assert set(s["rank_codelength"]) == {"0", "1"} and all(len(r) == 3 for r in s["rank_codelength"].values())
    # the text says the layers are ranked by selectivity (it said test accuracy): the ranking is that of the rows
    for seed, ranked in s["rank_selectivity"].items():
        sel = {l: v for (e, l, m, sd), v in table.items() if e == "elmo" and m == "selectivity" and sd == int(seed)}
        assert ranked == sorted(sel, key=lambda layer: -sel[layer])
    text = "".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "ordered from best to worst by selectivity" in text and "by test accuracy" not in text
    # similarity: every ordered pair of the 7 layers per measure; a layer with itself has CKA 1; CKA is symmetric
    sim = s["similarity"]
    n_dev = sum(len(x.words) for x in load("demo-ud", "dev").head(s["max_sentences"]))
    assert set(sim["n_tokens"]) == {min(2000, n_dev)}
    cka = {(a, la, b, lb): v for a, la, b, lb, m, v in zip(*list(sim.values())[:6]) if m == "linear_cka"}
    assert len(cka) == 7 * 7 and set(sim["measure"]) == {"linear_cka", "debiased_cka", "svcca", "pwcca"}
    for (a, la, b, lb), v in cka.items():
        assert v == pytest.approx(cka[(b, lb, a, la)], abs=1e-12)
        if (a, la) == (b, lb):
            assert v == pytest.approx(1.0, abs=1e-9)
        else:
            assert -1e-9 <= v <= 1 + 1e-9
    out = Path(s["out"])
    assert (out / "similarity.csv").is_file() and (out / "figures" / "codelength_upos.png").is_file()
    assert _images(nb) == 4  # selectivity, codelength, compression, the CKA heatmap
