"""probing.figures.similarity and probing.figures.mdl: the drawn data (image array, bar heights, labels, title) match the input."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from probing.analysis.similarity import layer_similarity
from probing.figures import codelength_by_layer, compression_by_layer, similarity_heatmap


def test_heatmap_image_is_the_similarity_matrix():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 5))
    encoders = {"elmo": {"0": X, "1": X + rng.standard_normal((400, 5))}, "glove": rng.standard_normal((400, 3))}
    frame = layer_similarity(encoders, measures=("linear_cka", "cca"), max_tokens=300)
    fig = similarity_heatmap(frame, "linear_cka")
    ax = fig.axes[0]
    shown = np.asarray(ax.images[0].get_array())
    keys = ["elmo:0", "elmo:1", "glove:0"]
    assert [t.get_text() for t in ax.get_yticklabels()] == keys
    assert [t.get_text() for t in ax.get_xticklabels()] == keys
    f = frame[frame.measure == "linear_cka"]
    for _, r in f.iterrows():  # every table value sits at (row a, column b)
        i, j = keys.index(f"{r.encoder_a}:{r.layer_a}"), keys.index(f"{r.encoder_b}:{r.layer_b}")
        assert shown[i, j] == pytest.approx(r.value)
    assert np.allclose(np.diag(shown), 1.0)
    assert "n_tokens = 300" in ax.get_title()
    # one separator between the two encoders' blocks, at 1.5 (after elmo's two layers), both directions
    assert sorted({tuple(line.get_xdata()) for line in ax.lines if line.get_xdata()[0] == line.get_xdata()[1]}) == [
        (1.5, 1.5)
    ]


def test_heatmap_on_a_given_axes_and_bad_measure():
    frame = pd.DataFrame(
        {
            "encoder_a": ["e", "e"],
            "layer_a": ["0", "0"],
            "encoder_b": ["e", "e"],
            "layer_b": ["0", "0"],
            "measure": ["linear_cka", "svcca"],
            "value": [1.0, 1.0],
            "n_tokens": [10, 10],
        }
    )
    fig = Figure()
    ax = fig.add_subplot()
    assert similarity_heatmap(frame, "svcca", ax=ax) is fig
    with pytest.raises(ValueError, match="no rows for measure 'pwcca'; measures present: \\['linear_cka', 'svcca'\\]"):
        similarity_heatmap(frame, "pwcca")


def _results():
    rows = []
    for seed, shift in ((0, 0.0), (1, 2.0)):
        for layer, kbits, ctrl, comp in (("0", 170.0, 300.0, 30.0), ("1", 96.0, 515.0, 53.0)):
            rows += [
                ("upos", "elmo", layer, "codelength_kbits", kbits + shift, seed),
                ("upos", "elmo", layer, "control-codelength_kbits", ctrl + shift, seed),
                ("upos", "elmo", layer, "compression", comp + shift, seed),
            ]
    rows.append(("upos", "glove", "glove", "codelength_kbits", 250.0, 0))
    return pd.DataFrame(rows, columns=["task", "encoder", "layer", "metric", "value", "seed"])


def test_codelength_bars_show_seed_means_with_control_beside():
    fig = codelength_by_layer(_results())
    ax = fig.axes[0]
    bars = [p for p in ax.patches]
    # 3 task bars (elmo:0, elmo:1, glove) then 3 control bars (glove has none: height 0)
    heights = [b.get_height() for b in bars]
    assert heights == pytest.approx([171.0, 97.0, 250.0, 301.0, 516.0, 0.0])  # means over seeds 0 and 1
    assert bars[0].get_x() + bars[0].get_width() <= bars[3].get_x() + 1e-9  # control to the right of its task
    assert [t.get_text() for t in ax.get_xticklabels()] == ["elmo:0", "elmo:1", "glove:glove"]
    assert "upos" in ax.get_title()
    # min-max bars over the seeds: 170..172 for elmo:0
    segs = ax.containers[0].lines[2][0].get_segments()
    assert segs[0][:, 1] == pytest.approx([170.0, 172.0])


def test_compression_bars():
    fig = compression_by_layer(_results())
    ax = fig.axes[0]
    assert [p.get_height() for p in ax.patches] == pytest.approx([31.0, 54.0])
    assert any(
        np.allclose(np.asarray(line.get_ydata(), dtype=float), 1.0) for line in ax.lines
    )  # the no-compression line
    with pytest.raises(ValueError, match="no rows with metric 'compression'"):
        compression_by_layer(_results()[lambda f: f.metric != "compression"])
