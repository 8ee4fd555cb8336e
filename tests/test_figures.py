"""Figures show exactly what the tables say: hand-made tables with known values, read back from the artists."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402
from matplotlib.container import BarContainer, ErrorbarContainer  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from probing import figures as F  # noqa: E402
from probing.tasks import headline_metrics, overview_panels  # noqa: E402


def row(task, encoder, layer, metric, value, lo=None, hi=None, *, dataset="ewt", split="test", seed=0):
    return dict(
        task=task,
        dataset=dataset,
        split=split,
        encoder=encoder,
        layer=layer,
        metric=metric,
        value=value,
        ci_low=np.nan if lo is None else lo,
        ci_high=np.nan if hi is None else hi,
        seed=seed,
    )


def make_results() -> pd.DataFrame:
    rows = [
        row("upos", "elmo", "0", "accuracy", 0.90, 0.89, 0.91),
        row("upos", "elmo", "1", "accuracy", 0.96, 0.955, 0.965),
        row("upos", "elmo", "2", "accuracy", 0.95, 0.94, 0.955),
        row("upos", "random-elmo", "0", "accuracy", 0.85, 0.845, 0.86),
        row("upos", "random-elmo", "1", "accuracy", 0.80, 0.79, 0.81),
        row("upos", "random-elmo", "2", "accuracy", 0.78, 0.77, 0.79),
        row("upos", "baseline", "most-frequent-tag", "accuracy", 0.86, 0.855, 0.865),
        row("upos", "glove", "glove", "accuracy", 0.89, 0.885, 0.895),
        row("upos", "baseline", "majority", "accuracy", 0.15, 0.14, 0.16),
        row("upos", "elmo", "0", "control-accuracy", 0.80, 0.79, 0.81),
        row("upos", "elmo", "1", "control-accuracy", 0.70, 0.69, 0.71),
        row("upos", "elmo", "2", "control-accuracy", 0.60, 0.59, 0.61),
        row("upos", "elmo", "0", "selectivity", 0.10),
        row("upos", "elmo", "1", "selectivity", 0.26),
        row("upos", "elmo", "2", "selectivity", 0.35),
        row("wsd-1nn", "elmo", "1", "f1", 0.69, 0.68, 0.70, dataset="se-all"),
        row("wsd-1nn", "elmo", "2", "f1", 0.68, 0.67, 0.69, dataset="se-all"),
        row("wsd-1nn", "baseline", "wn-first-sense", "f1", 0.65, 0.64, 0.66, dataset="se-all"),
    ]
    return pd.DataFrame(rows)


def errorbar(ax, label) -> ErrorbarContainer:
    found = [c for c in ax.containers if isinstance(c, ErrorbarContainer) and c.get_label() == label]
    assert len(found) == 1, f"expected one series labelled {label!r}, got {[c.get_label() for c in ax.containers]}"
    return found[0]


def ci_segments(container: ErrorbarContainer) -> tuple[np.ndarray, np.ndarray]:
    segs = np.array(container.lines[2][0].get_segments())
    return segs[:, 0, 1], segs[:, 1, 1]


def hline(ax, label):
    found = [ln for ln in ax.lines if ln.get_label() == label]
    assert len(found) == 1, f"expected one line labelled {label!r}, got {[ln.get_label() for ln in ax.lines]}"
    return found[0]


# ---------------------------------------------------------------- layer_scores


def test_layer_scores_plots_table_values_and_cis_in_percent():
    fig = F.layer_scores(make_results(), "upos", "accuracy")
    ax = fig.axes[0]
    elmo = errorbar(ax, "ELMo")
    # accuracy 0.90 / 0.96 / 0.95 plotted in percent
    np.testing.assert_allclose(elmo.lines[0].get_ydata(), [90, 96, 95])
    lo, hi = ci_segments(elmo)
    np.testing.assert_allclose(lo, [89, 95.5, 94])  # ci_low * 100
    np.testing.assert_allclose(hi, [91, 96.5, 95.5])  # ci_high * 100
    rnd = errorbar(ax, "random ELMo")
    np.testing.assert_allclose(rnd.lines[0].get_ydata(), [85, 80, 78])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "1", "2"]
    # the series sit over their layer (dodged by less than a quarter of a slot)
    np.testing.assert_allclose(elmo.lines[0].get_xdata(), [0, 1, 2], atol=0.25)
    assert to_hex(elmo.lines[0].get_color()) == F.OKABE_ITO["blue"].lower()
    assert to_hex(rnd.lines[0].get_color()) == F.OKABE_ITO["vermillion"].lower()


def test_layer_scores_ring_each_series_best_single_layer():
    """issue #34: the figures never marked the best layer; a ring marks it per series (the report and the
    terminal summary name the same layer), and the legend says what the ring means."""
    ax = F.layer_scores(make_results(), "upos", "accuracy").axes[0]
    rings = [c for c in ax.collections if c.get_gid() == "best"]
    centres = sorted(tuple(np.round(c.get_offsets()[0], 2)) for c in rings)
    # ELMo's best is layer 1 (96), the random ELMo's layer 0 (85); GloVe has one layer: nothing to choose
    assert [round(y, 2) for _, y in centres] == [85.0, 96.0]
    assert [round(x) for x, _ in sorted(centres, key=lambda c: c[1])] == [0, 1]
    assert "best single layer" in [t.get_text() for t in ax.get_legend().get_texts()]


def test_layer_scores_labels_and_title():
    ax = F.layer_scores(make_results(), "upos", "accuracy").axes[0]
    assert "accuracy" in ax.get_ylabel() and "%" in ax.get_ylabel()
    assert "layer" in ax.get_xlabel()
    assert "upos" in ax.get_title() and "ewt" in ax.get_title() and "test" in ax.get_title()
    # WSD's headline is F1 (the metric the WSD literature reports); the caller hands it to the figure
    assert headline_metrics(make_results()) == {"upos": "accuracy", "wsd-1nn": "f1"}
    ax = F.layer_scores(make_results(), "wsd-1nn", "f1").axes[0]
    assert ax.get_ylabel() == "F1 (%)"


def test_baselines_are_horizontal_lines_at_their_value_with_labels():
    ax = F.layer_scores(make_results(), "upos", "accuracy").axes[0]
    for label, y in (("most frequent tag", 86.0), ("GloVe", 89.0)):
        line = hline(ax, label)
        np.testing.assert_allclose(line.get_ydata(), [y, y])
        assert any(t.get_text() == f"{label} {y:.1f}" for t in ax.texts), f"no direct label for {label}"
    # majority (15 %) is far below the layer scores (78-96.5 %): named off scale, no line squeezing the axis
    assert not [ln for ln in ax.lines if ln.get_label() == "majority class"]
    assert any("majority class 15.0" in t.get_text() and "off scale" in t.get_text() for t in ax.texts)
    assert ax.get_ylim()[0] > 70
    ax = F.layer_scores(make_results(), "upos", "accuracy", clip_baselines=False).axes[0]
    np.testing.assert_allclose(hline(ax, "majority class").get_ydata(), [15, 15])
    assert ax.get_ylim()[0] < 15


def test_seeds_are_averaged_with_a_student_t_interval():
    df = make_results()
    df = df[~((df["task"] == "upos") & (df["encoder"] == "elmo") & (df["layer"] == "1") & (df["metric"] == "accuracy"))]
    seeds = [
        row("upos", "elmo", "1", "accuracy", v, v - 0.001, v + 0.001, seed=s) for s, v in enumerate([0.95, 0.96, 0.97])
    ]
    df = pd.concat([df, pd.DataFrame(seeds)], ignore_index=True)
    # mean 0.96; sd 0.01; t(0.975, df=2) = 4.302653 -> half-width 4.302653 * 0.01 / sqrt(3) = 0.024841
    half = 4.302653 * 0.01 / math.sqrt(3)
    agg = F.aggregate(df)
    r = agg.set_index(["task", "encoder", "layer", "metric"]).loc[[("upos", "elmo", "1", "accuracy")]]
    assert r["n_seeds"].item() == 3
    assert r["value"].item() == pytest.approx(0.96)
    assert r["ci_low"].item() == pytest.approx(0.96 - half, abs=1e-6)
    assert r["ci_high"].item() == pytest.approx(0.96 + half, abs=1e-6)
    elmo = errorbar(F.layer_scores(df, "upos", "accuracy").axes[0], "ELMo")
    assert elmo.lines[0].get_ydata()[1] == pytest.approx(96.0)
    lo, hi = ci_segments(elmo)
    assert hi[1] - lo[1] == pytest.approx(2 * half * 100, abs=1e-4)


def test_prefixed_layer_names_form_their_own_series_and_mix_comes_last():
    df = pd.DataFrame(
        [
            row("ptb", "elmo", "0", "accuracy", 0.88, 0.87, 0.89),
            row("ptb", "elmo", "1", "accuracy", 0.97, 0.96, 0.98),
            row("ptb", "elmo", "mix", "accuracy", 0.975, 0.97, 0.98),
            row("ptb", "elmo", "random-elmo:1", "accuracy", 0.81, 0.80, 0.82),
            row("ptb", "elmo", "random-elmo:0", "accuracy", 0.84, 0.83, 0.85),
        ]
    )
    ax = F.layer_scores(df, "ptb", "accuracy").axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "1", "scalar mix"]
    np.testing.assert_allclose(errorbar(ax, "ELMo").lines[0].get_ydata(), [88, 97, 97.5])
    rnd = errorbar(ax, "random ELMo")
    np.testing.assert_allclose(rnd.lines[0].get_ydata(), [84, 81])  # sorted by layer: 0 then 1
    np.testing.assert_allclose(rnd.lines[0].get_xdata(), [0, 1], atol=0.25)


def test_close_baseline_labels_do_not_overlap():
    df = make_results()
    extra = [row("upos", "baseline", f"b{i}", "accuracy", v) for i, v in enumerate([0.951, 0.952, 0.953, 0.949])]
    fig = F.layer_scores(pd.concat([df, pd.DataFrame(extra)]), "upos", "accuracy")
    FigureCanvasAgg(fig).draw()
    renderer = fig.canvas.get_renderer()
    # Text.get_window_extent: the label itself, without the leader line an Annotation adds
    boxes = [Text.get_window_extent(t, renderer) for t in fig.axes[0].texts]
    assert len(boxes) == 7  # b0-b3, most frequent tag, GloVe, majority
    for i in range(len(boxes)):
        for j in range(i + 1, len(boxes)):
            assert not boxes[i].overlaps(boxes[j]), f"labels {i} and {j} overlap"


def test_layer_scores_errors_name_what_is_missing():
    df = make_results()
    with pytest.raises(ValueError, match=r"task 'xpos' not in results; available tasks: upos, wsd-1nn"):
        F.layer_scores(df, "xpos", "accuracy")
    with pytest.raises(ValueError, match=r"no metric 'f1'.*accuracy"):
        F.layer_scores(df, "upos", "f1")
    two = pd.concat([df, df[df["task"] == "upos"].assign(dataset="gum")])
    with pytest.raises(ValueError, match=r"several datasets \(ewt, gum\); pass dataset="):
        F.layer_scores(two, "upos", "accuracy")
    assert F.layer_scores(two, "upos", "accuracy", dataset="gum").axes[0].get_title().startswith("upos (gum, test)")
    only_baselines = df[(df["task"] == "upos") & (df["encoder"] == "baseline")]
    with pytest.raises(ValueError, match="no per-layer results"):
        F.layer_scores(only_baselines, "upos", "accuracy")


def test_bad_results_tables_are_rejected():
    df = make_results()
    with pytest.raises(ValueError, match=r"missing column\(s\) \['ci_high'\]"):
        F.layer_scores(df.drop(columns="ci_high"), "upos", "accuracy")
    pct = df.assign(value=df["value"] * 100, ci_low=df["ci_low"] * 100, ci_high=df["ci_high"] * 100)
    with pytest.raises(ValueError, match="fractions, not percent"):
        F.layer_scores(pct, "upos", "accuracy")
    bad_ci = df.copy()
    bad_ci.loc[0, "ci_high"] = 0.5  # below value 0.90
    with pytest.raises(ValueError, match=r"CI \[0.89, 0.5\] does not contain value 0.9"):
        F.layer_scores(bad_ci, "upos", "accuracy")
    with pytest.raises(ValueError, match="duplicate rows"):
        F.layer_scores(pd.concat([df, df.iloc[[0]]]), "upos", "accuracy")
    clash = pd.concat([df, pd.DataFrame([row("upos", "elmo", "random-elmo:0", "accuracy", 0.5)])])
    with pytest.raises(ValueError, match=r"series 'random-elmo' has two results for layer '0'"):
        F.layer_scores(clash, "upos", "accuracy")


# ---------------------------------------------------------------- selectivity


def bars(ax, label) -> BarContainer:
    found = [c for c in ax.containers if isinstance(c, BarContainer) and c.get_label() == label]
    assert len(found) == 1, f"expected one bar series {label!r}, got {[c.get_label() for c in ax.containers]}"
    return found[0]


def test_selectivity_bars_and_annotations():
    fig = F.selectivity(make_results(), "upos")
    ax = fig.axes[0]
    assert ax.get_title() == "ELMo"  # random ELMo has no control rows: only the ELMo panel
    assert len(fig.axes) == 1
    np.testing.assert_allclose([p.get_height() for p in bars(ax, "upos accuracy")], [90, 96, 95])
    np.testing.assert_allclose([p.get_height() for p in bars(ax, "control-task accuracy")], [80, 70, 60])
    # selectivity rows are 0.10, 0.26, 0.35 (written above each pair, in points)
    assert [t.get_text() for t in ax.texts] == ["sel. 10.0", "sel. 26.0", "sel. 35.0"]
    assert "accuracy" in ax.get_ylabel() and "%" in ax.get_ylabel()
    assert ax.get_ylim()[0] == 0  # bars start at zero


def test_selectivity_is_computed_when_rows_are_absent_and_panels_per_encoder():
    df = make_results()
    df = df[df["metric"] != "selectivity"]
    extra = [row("upos", "random-elmo", str(i), "control-accuracy", v) for i, v in enumerate([0.9, 0.85, 0.8])]
    fig = F.selectivity(pd.concat([df, pd.DataFrame(extra)]), "upos")
    assert [ax.get_title() for ax in fig.axes] == ["ELMo", "random ELMo"]
    assert [t.get_text() for t in fig.axes[0].texts] == ["sel. 10.0", "sel. 26.0", "sel. 35.0"]  # 90-80, 96-70, 95-60
    # random ELMo: 85-90, 80-85, 78-80, with a typographic minus
    assert [t.get_text() for t in fig.axes[1].texts] == ["sel. \u22125.0", "sel. \u22125.0", "sel. \u22122.0"]


def test_selectivity_without_control_results_names_them():
    df = make_results()
    with pytest.raises(ValueError, match=r"no 'control-accuracy' rows, needed for the selectivity figure"):
        F.selectivity(df[df["metric"] != "control-accuracy"], "upos")
    with pytest.raises(ValueError, match="task 'ner' not in results"):
        F.selectivity(df, "ner")


# ---------------------------------------------------------------- mix_weights


def make_weights() -> pd.DataFrame:
    w = {"upos": [0.2, 0.5, 0.3], "wsd-1nn": [0.1, 0.3, 0.6]}
    return pd.DataFrame(
        [dict(task=t, encoder="elmo", layer=str(i), weight=v) for t, ws in w.items() for i, v in enumerate(ws)]
    )


def test_mix_weights_bar_heights_and_uniform_line():
    fig = F.mix_weights(make_weights())
    ax = fig.axes[0]
    np.testing.assert_allclose([p.get_height() for p in bars(ax, "layer 0")], [0.2, 0.1])
    np.testing.assert_allclose([p.get_height() for p in bars(ax, "layer 1")], [0.5, 0.3])
    np.testing.assert_allclose([p.get_height() for p in bars(ax, "layer 2")], [0.3, 0.6])
    np.testing.assert_allclose(hline(ax, "uniform (1/3)").get_ydata(), [1 / 3, 1 / 3])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["upos", "wsd-1nn"]
    assert "weight" in ax.get_ylabel()


def test_mix_weights_averages_seeds_and_validates():
    w = make_weights().assign(seed=0)
    w2 = w.assign(seed=1, weight=[0.4, 0.3, 0.3, 0.3, 0.3, 0.4])
    ax = F.mix_weights(pd.concat([w, w2])).axes[0]
    np.testing.assert_allclose([p.get_height() for p in bars(ax, "layer 0")], [0.3, 0.2])  # (0.2+0.4)/2, (0.1+0.3)/2
    with pytest.raises(ValueError, match=r"task 'upos', encoder 'elmo', seed '0' sum to 1.2000, expected 1"):
        F.mix_weights(w.assign(weight=w["weight"] * np.where(w["task"] == "upos", 1.2, 1.0)))
    with pytest.raises(ValueError, match="non-negative"):
        F.mix_weights(w.assign(weight=-w["weight"]))
    with pytest.raises(ValueError, match=r"missing column\(s\) \['weight'\]"):
        F.mix_weights(w.drop(columns="weight"))


def test_mix_weights_bars_are_the_all_data_fit_with_the_refits_range_and_unstable_tasks_marked():
    w = make_weights().assign(seed=0, refit=0)
    refit1 = w.assign(refit=1, weight=[0.25, 0.45, 0.3, 0.5, 0.2, 0.3])  # wsd-1nn: layer 0 moves 0.1 -> 0.5
    refit2 = w.assign(refit=2, weight=[0.15, 0.5, 0.35, 0.1, 0.3, 0.6])
    ax = F.mix_weights(pd.concat([w, refit1, refit2])).axes[0]
    layer0 = bars(ax, "layer 0")
    np.testing.assert_allclose([p.get_height() for p in layer0], [0.2, 0.1])  # refit 0 only, not the mean
    # error bars span min..max over the refits: upos layer 0 0.15..0.25, wsd-1nn layer 0 0.1..0.5
    lines = layer0.errorbar.lines[2][0].get_segments()
    np.testing.assert_allclose([(s[0][1], s[1][1]) for s in lines], [(0.15, 0.25), (0.1, 0.5)])
    # wsd-1nn only; upos moves at most 0.10 < 0.2
    assert [t.get_text() for t in ax.get_xticklabels()] == ["upos", "wsd-1nn\nunstable (range 0.40)"]
    with pytest.raises(ValueError, match=r"only bootstrap refits \(refit > 0\)"):
        F.mix_weights(pd.concat([refit1, refit2]))


# ---------------------------------------------------------------- tag_gains


def make_per_tag() -> pd.DataFrame:
    acc = {"NOUN": (0.90, 0.95, 500), "VERB": (0.80, 0.92, 300), "ADP": (0.95, 0.94, 400), "INTJ": (0.5, 0.9, 3)}
    return pd.DataFrame(
        [dict(task="upos", encoder="elmo", layer="0", tag=t, n=n, accuracy=a) for t, (a, _, n) in acc.items()]
        + [dict(task="upos", encoder="elmo", layer="1", tag=t, n=n, accuracy=b) for t, (_, b, n) in acc.items()]
    )


def test_tag_gains_sorted_with_counts():
    ax = F.tag_gains(make_per_tag(), "upos").axes[0]
    widths = [p.get_width() for p in ax.containers[0]]
    # gains in points: INTJ +40, VERB +12, NOUN +5, ADP -1; drawn top to bottom in that order
    np.testing.assert_allclose(widths, [40, 12, 5, -1], atol=1e-9)
    ys = [p.get_y() for p in ax.containers[0]]
    assert ys == sorted(ys, reverse=True)
    ticks = sorted(zip(ax.get_yticks(), (t.get_text() for t in ax.get_yticklabels())), reverse=True)
    assert [label for _, label in ticks] == ["INTJ  (n=3)", "VERB  (n=300)", "NOUN  (n=500)", "ADP  (n=400)"]
    np.testing.assert_allclose([y for y, _ in ticks], [p.get_y() + p.get_height() / 2 for p in ax.containers[0]])
    assert "percentage points" in ax.get_xlabel() and "0" in ax.get_xlabel() and "1" in ax.get_xlabel()
    assert to_hex(ax.containers[0][3].get_facecolor()) == F.OKABE_ITO["vermillion"].lower()  # the loss


def test_tag_gains_top_and_min_n():
    ax = F.tag_gains(make_per_tag(), "upos", top=2, min_n=10).axes[0]
    np.testing.assert_allclose([p.get_width() for p in ax.containers[0]], [12, 5], atol=1e-9)  # INTJ (n=3) left out


def test_tag_gains_errors():
    pt = make_per_tag()
    with pytest.raises(ValueError, match=r"no per-tag results for layer '2'; available layers: 0, 1"):
        F.tag_gains(pt, "upos", "0", "2")
    with pytest.raises(ValueError, match="task 'xpos' not in the per-tag table"):
        F.tag_gains(pt, "xpos")
    bad_n = pt.copy()
    bad_n.loc[(bad_n["layer"] == "1") & (bad_n["tag"] == "NOUN"), "n"] = 499
    with pytest.raises(ValueError, match=r"tag 'NOUN' has different token counts"):
        F.tag_gains(bad_n, "upos")
    with pytest.raises(ValueError, match="different tag sets"):
        F.tag_gains(pt[~((pt["layer"] == "1") & (pt["tag"] == "ADP"))], "upos")
    with pytest.raises(ValueError, match="several encoders"):
        F.tag_gains(pd.concat([pt, pt.assign(encoder="random-elmo")]), "upos")


# ---------------------------------------------------------------- overview and save


def test_overview_has_pos_and_wsd_panels():
    fig = F.overview(make_results(), overview_panels(make_results()))
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["upos (ewt, test)", "wsd-1nn (se-all, test)"]
    assert fig.axes[0].get_ylabel() == "accuracy (%)" and fig.axes[1].get_ylabel() == "F1 (%)"
    np.testing.assert_allclose(errorbar(fig.axes[1], "ELMo").lines[0].get_ydata(), [69, 68])
    with pytest.raises(ValueError, match=r"task\(s\) \['ptb'\] not in results"):
        F.overview(make_results(), {"upos": "accuracy", "ptb": "accuracy"})
    # panels by task kind, never by task name: a tagging task called "ner" is one; a structural task is not
    assert overview_panels(pd.DataFrame([row("ner", "elmo", "0", "accuracy", 0.5)])) == {"ner": "accuracy"}
    assert overview_panels(make_results(), {"upos": "supersense"}) == {"wsd-1nn": "f1"}
    deps = pd.DataFrame([row("deps", "elmo", "0", "uuas", 0.5)])
    assert overview_panels(deps) == {}  # a structural kind asks for no panel
    with pytest.raises(ValueError, match=r"overview: no panels given; results have: deps"):
        F.overview(deps, {})


def test_save_writes_png_at_200_dpi_and_svg_atomically(tmp_path):
    fig = F.layer_scores(make_results(), "upos", "accuracy")
    paths = F.save(fig, tmp_path, "upos_layers")
    assert set(paths) == {"png", "svg"}
    png = paths["png"].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width = int.from_bytes(png[16:20], "big")
    assert width == 6.4 * 200  # 6.4-inch figure at 200 dpi
    i = png.index(b"pHYs")
    assert int.from_bytes(png[i + 4 : i + 8], "big") == round(200 / 0.0254)  # pixels per metre
    assert ET.parse(paths["svg"]).getroot().tag.endswith("svg")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["upos_layers.png", "upos_layers.svg"]  # no temp files left
    with pytest.raises(ValueError, match="unsupported figure format"):
        F.save(fig, tmp_path, "x", formats=("jpg",))
    with pytest.raises(ValueError, match="plain file stem"):
        F.save(fig, tmp_path, "../x")


def test_one_panel_figures_draw_on_a_given_ax():
    """ax= (issue #15): the panel lands on the caller's axes, beside other panels, with the same contents as the
    function's own figure; the caller's figure comes back."""
    from matplotlib.figure import Figure

    fig = Figure()
    left, right = fig.subplots(1, 2)
    assert F.layer_scores(make_results(), "upos", "accuracy", ax=left) is fig
    assert F.tag_gains(make_per_tag(), "upos", ax=right) is fig
    assert len(fig.axes) == 2  # nothing added
    np.testing.assert_allclose(errorbar(left, "ELMo").lines[0].get_ydata(), [90, 96, 95])
    np.testing.assert_allclose([p.get_width() for p in right.containers[0]], [40, 12, 5, -1], atol=1e-9)
    own = F.layer_scores(make_results(), "upos", "accuracy").axes[0]
    assert own.get_title() == left.get_title() and own.get_ylim() == left.get_ylim()


def test_learning_curves_draw_one_line_per_layer_and_the_baselines_flat():
    from probing.figures import learning_curves

    rows = []
    for encoder, layer, top in (("elmo", "0", 0.85), ("elmo", "1", 0.93), ("glove", "glove", 0.75)):
        for seed in (0, 1):
            for f, n in ((0.01, 30), (0.1, 300), (1.0, 3000)):
                v = top - 0.05 * (1 - f) - 0.01 * seed
                rows.append(dict(task="upos", dataset="d", split="test", encoder=encoder, layer=layer,
                                 train_fraction=f, n_train_sentences=n, metric="accuracy", value=v,
                                 ci_low=v - 0.01, ci_high=v + 0.01, seed=seed))  # fmt: skip
    curves = pd.DataFrame(rows)
    results = pd.DataFrame(
        [
            dict(
                task="upos",
                dataset="d",
                split="test",
                encoder="baseline",
                layer="most-frequent-tag",
                metric="accuracy",
                value=0.8,
                ci_low=0.79,
                ci_high=0.81,
                seed=0,
            )
        ]  # fmt: skip
    )
    fig = learning_curves(curves, "upos", results=results)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and "(%)" in ax.get_ylabel()
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert set(lines) == {"ELMo layer 0", "ELMo layer 1", "GloVe", "most frequent tag"}
    # a line through the mean over the two seeds, in percent, at the measured sizes
    x, y = lines["ELMo layer 1"].get_data()
    assert list(x) == [30, 300, 3000] and y[-1] == pytest.approx((0.93 + 0.92) / 2 * 100)
    assert list(lines["most frequent tag"].get_ydata()) == [80.0, 80.0]  # flat: the full-data baseline
    from probing.errors import InputError

    with pytest.raises(InputError, match="task .pos. has no curve; tasks with curves: upos"):
        learning_curves(curves, "pos")
