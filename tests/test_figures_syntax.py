"""Structural-probe figures draw what the tables say: read the values back from the artists."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.container import ErrorbarContainer  # noqa: E402
from matplotlib.patches import Arc  # noqa: E402

from probing.figures import syntax as FS  # noqa: E402
from probing.probes.structural import position_distances, tree_distances  # noqa: E402

CAT_WORDS = ["The", "cat", "sat", "on", "the", "mat", "."]
CAT = [2, 3, 0, 6, 6, 3, 3]
CAT_PUNCT = [False] * 6 + [True]


def test_metric_by_layer_points_errorbars_and_baselines():
    results = pd.DataFrame(
        [
            ("elmo", "0", "uuas", 0.40, 0.38, 0.42),
            ("elmo", "2", "uuas", 0.50, 0.48, 0.52),
            ("elmo", "1", "uuas", 0.60, 0.58, 0.62),
            ("elmo", "1", "dspr", 0.70, 0.69, 0.71),
            ("", "position", "uuas", 0.45, np.nan, np.nan),
            ("", "glove", "uuas", 0.30, 0.29, 0.31),
        ],
        columns=["encoder", "layer", "metric", "value", "ci_low", "ci_high"],
    )
    fig = FS.metric_by_layer(results, "uuas")
    ax = fig.axes[0]
    (bars,) = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    line = bars.lines[0]
    assert line.get_xdata().tolist() == [0, 1, 2], "layers sorted"
    assert np.allclose(np.asarray(line.get_ydata(), dtype=float), [40, 60, 50]), (
        "uuas drawn in percent; dspr row left out"
    )
    (segments,) = bars.lines[2]
    lows = [seg[0][1] for seg in segments.get_segments()]
    assert np.allclose(lows, [38, 58, 48])
    hlines = {ln.get_label(): ln.get_ydata()[0] for ln in ax.get_lines() if ln.get_linestyle() == "--"}
    assert hlines == pytest.approx({"position": 45.0, "glove": 30.0})
    assert len(ax.patches) == 1, "a CI band only for the baseline that has a CI (glove)"
    with pytest.raises(ValueError, match="no rows for metric 'nspr'"):
        FS.metric_by_layer(results, "nspr")


def test_rank_sweep_plots_each_metric_against_rank():
    sweep = pd.DataFrame(
        [
            (r, m, v, v - 0.01, v + 0.01)
            for r, (u, d) in {1: (0.2, 0.4), 4: (0.5, 0.7), 2: (0.3, 0.6)}.items()
            for m, v in (("uuas", u), ("dspr", d))
        ],
        columns=["rank", "metric", "value", "ci_low", "ci_high"],
    )
    ax = FS.rank_sweep(sweep).axes[0]
    lines = {c.get_label(): c.lines[0] for c in ax.containers}
    assert lines["UUAS (%)"].get_xdata().tolist() == [1, 2, 4]
    assert np.allclose(np.asarray(lines["UUAS (%)"].get_ydata(), dtype=float), [0.2, 0.3, 0.5])
    assert np.allclose(np.asarray(lines["DSpr. (Spearman)"].get_ydata(), dtype=float), [0.4, 0.6, 0.7])
    assert ax.get_xscale() == "log"


def arcs(ax) -> dict[str, Arc]:
    return {p.get_gid(): p for p in ax.patches if isinstance(p, Arc)}


def test_tree_comparison_draws_gold_above_and_each_layers_mst_below():
    """Gold edges (punctuation out): 0-1, 1-2, 2-5, 3-5, 4-5. 'layer 1' predicts the gold distances (all 5
    right); 'layer 0' predicts |i-j|, whose MST is the chain 0-1-2-3-4-5 (3 right: 0-1, 1-2, 4-5)."""
    preds = {"layer 1": tree_distances(CAT), "layer 0": position_distances([7])[0]}
    fig = FS.tree_comparison(CAT_WORDS, CAT, preds, CAT_PUNCT)
    top, bottom = fig.axes
    gold = {"gold:0-1", "gold:1-2", "gold:2-5", "gold:3-5", "gold:4-5"}
    assert set(arcs(top)) == gold | {"pred:0-1", "pred:1-2", "pred:2-5", "pred:3-5", "pred:4-5"}
    assert set(arcs(bottom)) == gold | {"pred:0-1", "pred:1-2", "pred:2-3", "pred:3-4", "pred:4-5"}
    for gid, arc in arcs(bottom).items():
        above = (arc.theta1, arc.theta2) == (0, 180)
        assert above == gid.startswith("gold"), f"{gid}: gold above the words, predictions below"
        i, j = map(int, gid.split(":")[1].split("-"))
        assert arc.center[0] == pytest.approx((i + j) / 2) and arc.width == pytest.approx(j - i), "spans its words"
    colors = {gid: arc.get_edgecolor() for gid, arc in arcs(bottom).items()}
    assert colors["pred:2-3"] == matplotlib.colors.to_rgba(FS.WRONG)
    assert colors["pred:0-1"] == matplotlib.colors.to_rgba(FS.RIGHT)
    assert [t.get_text() for t in bottom.texts] == CAT_WORDS
    assert "3/5 edges" in bottom.get_title() and "5/5 edges" in top.get_title()
