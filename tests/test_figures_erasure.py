"""The present-vs-used figure (issue 30): what it draws from erased, intervened and LM rows."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest

from probing.errors import InputError
from probing.figures.erasure import erasure_figures, present_vs_used
from probing.results import RESULT_COLUMNS, Intervention

# (task, encoder, intervention) -> accuracy per layer 0, 1, 2; every CI is value -/+ 0.01 (so a drop's interval
# is drop -/+ sqrt(2) * 0.01)
SCORES = {
    ("upos", "elmo", ""): (0.88, 0.96, 0.94),
    ("upos", "elmo", "erase:upos:leace"): (0.30, 0.35, 0.40),
    ("upos", "elmo", "erase:upos:random"): (0.87, 0.96, 0.93),
    ("supersense", "elmo", ""): (0.60, 0.80, 0.82),
    ("supersense", "elmo", "erase:upos:leace"): (0.50, 0.75, 0.70),
    ("supersense", "elmo", "erase:upos:random"): (0.60, 0.79, 0.82),
    # erased inside the biLM: layer 0 is the unedited model's (so the base is found), layers 1 and 2 change
    ("supersense", "elmo-no-upos", "intervene:1:upos:leace"): (0.60, 0.70, 0.72),
    ("supersense", "elmo-no-upos-random", "intervene:1:upos:random"): (0.60, 0.80, 0.81),
    ("supersense", "glove-like", ""): (0.55, 0.55, 0.55),
    ("upos", "elmo-no-upos", "intervene:1:upos:leace"): (0.88, 0.40, 0.80),
}


def results() -> pd.DataFrame:
    rows = [
        (task, "demo", "test", enc, str(layer), "accuracy", v, v - 0.01, v + 0.01, 0, tag)
        for (task, enc, tag), values in SCORES.items()
        for layer, v in enumerate(values)
    ]
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def lm_table() -> pd.DataFrame:
    rows = []
    for tag, change in (("intervene:1:upos:leace", 12.0), ("intervene:1:upos:random", 0.5)):
        for j, direction in enumerate(("forward", "backward", "both")):
            c = change + j
            rows.append((tag, "perplexity", direction, 100 + c, c, c - 1, c + 1))
    columns = ["intervention", "measure", "direction", "value", "change", "change_ci_low", "change_ci_high"]
    return pd.DataFrame(
        [("", "perplexity", d, 100.0, 0.0, 0.0, 0.0) for d in ("forward", "backward", "both")] + rows, columns=columns
    )


def bars(ax, gid: str) -> tuple[np.ndarray, np.ndarray]:
    """Heights of the bars tagged ``gid`` and their x centres."""
    patches = [p for p in ax.patches if p.get_gid() == gid]
    return np.array([p.get_height() for p in patches]), np.array([p.get_x() + p.get_width() / 2 for p in patches])


def test_used_panel_draws_drops_for_the_eraser_and_its_random_control():
    """Bars: unedited minus erased, in points, per layer (erase rows on elmo's layers 0-2, then the biLM
    intervention on layers 1 and 2, compared with elmo, found as the encoder whose layer 0 is the same)."""
    fig = present_vs_used(results(), "supersense", "accuracy", lm=lm_table())
    present, used, lm = fig.axes[:3]
    leace, _ = bars(used, "used-leace")
    random, _ = bars(used, "used-random")
    np.testing.assert_allclose(leace, [10, 5, 12, 10, 10])  # layers 0, 1, 2 erased; then biLM layers 1, 2
    np.testing.assert_allclose(random, [0, 1, 0, 0, 1])
    labels = [t.get_text() for t in used.get_xticklabels()]
    assert labels[:3] == ["layer 0", "layer 1", "layer 2"]
    assert labels[3:] == ["layer 1\nin biLM", "layer 2\nin biLM"]
    assert used.get_xlabel().startswith("in biLM: upos erased from layer 1 inside the model")
    # error bars: drop -/+ sqrt(0.01^2 + 0.01^2) in points
    segments = [c for c in used.collections if len(c.get_segments()) == 5]
    lengths = [s[1][1] - s[0][1] for s in segments[0].get_segments()]
    np.testing.assert_allclose(lengths, 2 * 100 * np.hypot(0.01, 0.01))
    # present: the upos probe unedited and after each eraser
    lines = {line.get_gid(): line.get_ydata() for line in present.lines if line.get_marker() == "o"}  # not the caps
    np.testing.assert_allclose(lines["present-unedited-elmo"], [88, 96, 94])
    np.testing.assert_allclose(lines["present-leace-elmo"], [30, 35, 40])
    np.testing.assert_allclose(lines["present-random-elmo"], [87, 96, 93])
    np.testing.assert_allclose(lines["present-leace-biLM-elmo"], [88, 40, 80])  # elmo-no-upos, beside its base
    # the LM: perplexity changes per direction, LEACE beside its control
    np.testing.assert_allclose(bars(lm, "lm-intervene:1:upos:leace")[0], [12, 13, 14])
    np.testing.assert_allclose(bars(lm, "lm-intervene:1:upos:random")[0], [0.5, 1.5, 2.5])
    assert "supersense (demo/test): present vs used" in [t.get_text() for t in fig.texts]  # the suptitle


def test_bases_override_and_unknown_base_skips_the_intervened_rows():
    """Told that the intervened encoders come from 'glove-like', the drops are against its rows; with a layer 0
    that matches no encoder, the intervened rows are left out (nothing to compare them with)."""
    fig = present_vs_used(
        results(), "supersense", "accuracy", bases={"elmo-no-upos": "glove-like", "elmo-no-upos-random": "glove-like"}
    )
    used = fig.axes[1]
    np.testing.assert_allclose(bars(used, "used-leace")[0], [10, 5, 12, -15, -17])
    table = results()
    moved = table["encoder"].str.startswith("elmo-no-upos") & (table["layer"] == "0")
    table.loc[moved, ["value", "ci_low", "ci_high"]] += 0.001
    used = present_vs_used(table, "supersense", "accuracy").axes[1]
    assert len(bars(used, "used-leace")[0]) == 3


def test_the_hook_draws_only_for_tasks_with_erased_rows_and_errors():
    """The erase option's hook hands the figure the task's headline (supersense: accuracy), which the figure
    cannot look up itself (figures never import the task kinds)."""
    from probing.tasks.erase import erase_figures

    table = results()
    assert set(erasure_figures(table, "supersense", "demo", "test", "accuracy")) == {"present_vs_used"}
    assert set(erase_figures(table, {})) == {"present_vs_used_upos", "present_vs_used_supersense"}
    plain = table[table["intervention"] == ""]
    assert erasure_figures(plain, "supersense", "demo", "test", "accuracy") == {}
    assert erase_figures(plain, {}) == {}
    with pytest.raises(InputError, match="no erased rows"):
        present_vs_used(plain, "supersense", "accuracy")
    with pytest.raises(InputError, match="no rows of task 'nope'"):
        present_vs_used(table, "nope", "accuracy")
    with pytest.raises(InputError, match="expected 'erase"):
        Intervention.parse("erase:upos")
    for text in ("", "intervene:x:upos:leace", "remove:upos:leace"):
        with pytest.raises(InputError, match="expected 'erase"):
            Intervention.parse(text)
    iv = Intervention.parse("intervene:2:upos:random")
    assert (iv.where, iv.label, iv.method, iv.layer) == ("intervene:2", "upos", "random", 2)
    for text in ("erase:upos:leace", "intervene:2:feats:Number:inlp"):  # one format, read back unchanged
        assert str(Intervention.parse(text)) == text


def test_the_report_draws_present_vs_used_through_the_erase_options_hook():
    from probing.report import draw_figures

    figs = draw_figures(results(), kinds={"upos": "tagging", "supersense": "supersense"})
    assert {"present_vs_used_upos", "present_vs_used_supersense"} <= set(figs)
    used = figs["present_vs_used_upos"].axes[1]
    # UPOS itself erased from each stored layer (guardedness), then inside the biLM (layers 1 and 2)
    np.testing.assert_allclose(bars(used, "used-leace")[0], [58, 61, 54, 56, 14])
