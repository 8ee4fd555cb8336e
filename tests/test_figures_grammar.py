"""probing.figures.grammar: what the minimal-pairs and agreement figures draw (bar lengths and line heights are
the rows' values in percent, in the stated order), not only that they run."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.container import BarContainer, ErrorbarContainer

from probing.errors import InputError
from probing.figures.grammar import agreement_figure, minimal_pairs_figure
from probing.results import make_row


def results() -> pd.DataFrame:
    """Two phenomena (one paradigm each) and overall, the model's three directions and four references."""
    rows = []
    values = {"forward": (0.6, 0.7), "backward": (0.55, 0.8), "both": (0.65, 0.75)}
    for d, (a, b) in values.items():
        for split, v in (
            ("phenomenon:binding", a),
            ("phenomenon:ellipsis", b),
            ("paradigm:p1", a),
            ("paradigm:p2", b),
            ("overall", (a + b) / 2),
        ):
            rows.append(make_row("g", "blimp", split, "elmo", d, "accuracy", v, v - 0.05, min(v + 0.05, 1.0)))
            rows.append(make_row("g", "blimp", split, "elmo", d, "coverage", 0.9, 0.85, 0.95))
    refs = {"5-gram": (0.4, 0.5), "lstm": (0.7, 0.6), "txl": (0.7, 0.7), "gpt2": (0.9, 0.8), "human": (1.0, 0.9)}
    for layer, (a, b) in refs.items():
        for split, v in (("phenomenon:binding", a), ("phenomenon:ellipsis", b), ("overall", (a + b) / 2)):
            rows.append(make_row("g", "blimp", split, "reference", layer, "accuracy", v))
    return pd.DataFrame(rows)


def bars(fig) -> dict[str, list[float]]:
    ax = fig.axes[0]
    return {c.get_label(): [p.get_width() for p in c.patches] for c in ax.containers if isinstance(c, BarContainer)}


def test_minimal_pairs_figure_draws_each_direction_and_the_references_per_phenomenon():
    fig = minimal_pairs_figure(results(), "g")
    drawn = bars(fig)
    # the model's directions first, then the authors' 5-gram, LSTM, GPT-2 and humans (not Transformer-XL)
    assert list(drawn) == ["forward", "backward", "both", "5-gram", "LSTM", "GPT-2", "human"]
    # groups: the phenomena (sorted), then overall; bar length = value in percent
    assert drawn["forward"] == pytest.approx([60.0, 70.0, 65.0])
    assert drawn["backward"] == pytest.approx([55.0, 80.0, 67.5])
    assert drawn["GPT-2"] == pytest.approx([90.0, 80.0, 85.0])
    assert drawn["human"] == pytest.approx([100.0, 90.0, 95.0])
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["binding", "ellipsis", "overall"]
    # top to bottom: binding above ellipsis above overall
    ys = [p.get_y() for p in next(c for c in ax.containers if c.get_label() == "forward").patches]
    assert ys[0] > ys[1] > ys[2]
    chance = [line for line in ax.get_lines() if line.get_label() == "chance"]
    assert len(chance) == 1 and list(chance[0].get_xdata()) == [50, 50]


def test_pairs_without_phenomena_are_drawn_per_group():
    df = results()
    df = df[~df["split"].str.startswith("phenomenon:") & (df["encoder"] != "reference")]
    fig = minimal_pairs_figure(df, "g")
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["p1", "p2", "overall"]
    assert bars(fig)["both"] == pytest.approx([65.0, 75.0, 70.0])


def test_minimal_pairs_figure_names_what_is_missing():
    with pytest.raises(InputError, match="no 'accuracy' rows of task 'nope'"):
        minimal_pairs_figure(results(), "nope")


def test_agreement_figure_lines_are_the_accuracies_by_attractor_count():
    groups = ["attractors=0", "attractors=1", "attractors=2", "attractors=3+", "overall"]
    probe = pd.DataFrame(
        {
            "layer": ["1f"] * 5 + ["1b"] * 5,
            "group": groups * 2,
            "accuracy": [0.9, 0.7, 0.6, 0.5, 0.88, 0.95, 0.9, 0.85, 0.8, 0.94],
            "n": 10,
        }
    ).assign(ci_low=lambda d: d.accuracy - 0.1, ci_high=lambda d: np.minimum(d.accuracy + 0.05, 1.0))
    # lm rows as minimal_pairs gives them (level/group, metric/value), listed out of attractor order
    lm = pd.DataFrame(
        {
            "layer": ["forward"] * 3,
            "level": ["paradigm", "paradigm", "overall"],
            "group": ["attractors=1", "attractors=0", "overall"],
            "metric": ["accuracy"] * 3,
            "value": [0.7, 0.92, 0.81],
            "ci_low": [0.6, 0.9, 0.7],
            "ci_high": [0.8, 0.95, 0.9],
        }
    )
    fig = agreement_figure(probe=probe, lm=lm)
    lm_ax, probe_ax = fig.axes
    assert lm_ax.get_title().startswith("LM") and probe_ax.get_title().startswith("probe")

    def lines(ax) -> dict[str, list[float]]:
        return {c.get_label(): list(c.lines[0].get_ydata()) for c in ax.containers if isinstance(c, ErrorbarContainer)}

    assert lines(lm_ax) == {"forward": pytest.approx([92.0, 70.0])}  # sorted by attractors, overall left out
    assert lines(probe_ax) == {"1f": pytest.approx([90.0, 70.0, 60.0, 50.0]), "1b": pytest.approx([95, 90, 85, 80])}
    assert [t.get_text() for t in probe_ax.get_xticklabels()] == ["0", "1", "2", "3+"]
    with pytest.raises(InputError, match="give probe="):
        agreement_figure()
