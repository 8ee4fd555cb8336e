"""probing.figures.syntaxgym: what the circuits figure and the region plot draw (bar lengths are the rows'
values in percent, in circuit order; line heights are the mean region surprisals), not only that they run."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.container import BarContainer, ErrorbarContainer

from probing.errors import InputError
from probing.figures.syntaxgym import circuits_figure, region_figure
from probing.results import make_row


def results() -> pd.DataFrame:
    rows = []
    values = {"forward": (0.6, 0.9), "backward": (0.0, 0.5), "both": (0.4, 0.8)}
    for d, (a, b) in values.items():
        for split, v in (
            ("circuit:Agreement", a),
            ("circuit:Licensing", b),
            ("suite:number_src", a),
            ("overall", (a + b) / 2),
        ):
            rows.append(make_row("sg", "syntaxgym", split, "elmo", d, "accuracy", v, max(v - 0.1, 0), min(v + 0.1, 1)))
    for layer, (a, b) in {"grnn": (0.5, 0.2), "gpt-2": (0.7, 0.6), "gpt-2-xl": (0.8, 0.9)}.items():
        for split, v in (("circuit:Agreement", a), ("circuit:Licensing", b), ("overall", (a + b) / 2)):
            rows.append(make_row("sg", "syntaxgym", split, "reference", layer, "accuracy", v))
    return pd.DataFrame(rows)


def test_circuits_figure_draws_each_direction_and_the_default_references():
    fig = circuits_figure(results(), "sg")
    ax = fig.axes[0]
    got = {c.get_label(): [p.get_width() for p in c.patches] for c in ax.containers if isinstance(c, BarContainer)}
    # groups top to bottom: Agreement, Licensing, overall; gpt-2-xl is not among the default references
    assert got["forward"] == pytest.approx([60, 90, 75])
    assert got["backward"] == pytest.approx([0, 50, 25])
    assert got["both"] == pytest.approx([40, 80, 60])
    assert got["GRNN"] == pytest.approx([50, 20, 35]) and got["GPT-2"] == pytest.approx([70, 60, 65])
    assert set(got) == {"forward", "backward", "both", "GRNN", "GPT-2"}
    assert [t.get_text() for t in ax.get_yticklabels()] == ["Agreement", "Licensing", "SG score (overall)"]
    with pytest.raises(InputError, match="no 'accuracy' rows of task 'nope'"):
        circuits_figure(results(), "nope")


def test_region_figure_draws_the_mean_surprisal_per_region_and_condition():
    rows = []
    for item in (1, 2):
        for cond, shift in (("match", 0.0), ("mismatch", 2.0)):
            for region in (1, 2, 3):
                rows.append(("s", item, cond, region, region + shift + item, 10 - region + item))
    regions = pd.DataFrame(
        rows, columns=["suite", "item", "condition", "region", "surprisal_forward", "surprisal_backward"]
    )
    fig = region_figure(regions, "s", region_names={1: "np", 2: "verb", 3: "rest"})
    fw, bw = fig.axes[0], fig.axes[1]
    lines = {
        c.get_label(): np.asarray(c.lines[0].get_ydata(), dtype=float)  # matplotlib 3.7 gives an object array
        for c in fw.containers
        if isinstance(c, ErrorbarContainer)
    }
    # mean over items 1 and 2 adds 1.5: match = region + 1.5, mismatch = region + 3.5
    assert np.allclose(lines["match"], [2.5, 3.5, 4.5]) and np.allclose(lines["mismatch"], [4.5, 5.5, 6.5])
    back = {
        c.get_label(): np.asarray(c.lines[0].get_ydata(), dtype=float)
        for c in bw.containers
        if isinstance(c, ErrorbarContainer)
    }
    assert np.allclose(back["match"], [10.5, 9.5, 8.5])
    assert [t.get_text() for t in fw.get_xticklabels()] == ["np", "verb", "rest"]
    with pytest.raises(InputError, match="no rows of suite 'other'"):
        region_figure(regions, "other")
