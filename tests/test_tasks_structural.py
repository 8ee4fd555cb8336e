"""The structural-distance / structural-depth task kinds end to end: an experiment file on a tiny slice of the
bundled UD data with the fixture ELMo (tests/fixtures/elmo_allennlp, Apache-2.0) and the tiny GloVe fixture,
checked against the probes module run by hand on the same stores; then the errors for data without trees."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from probing.corpora import load
from probing.experiment import ExperimentError, parse_experiment, run_experiment
from probing.probes.structural import (
    DepthProbe,
    StoreSentences,
    position_depths,
    position_distances,
    punctuation_mask,
    root_acc,
    run_structural,
    scores_with_ci,
    store_punct,
    store_trees,
    uuas,
)

FIX = Path(__file__).parent / "fixtures"
N = 20  # sentences per split
SEED = 3
EPOCHS = 2

TOML = f"""
[experiment]
seeds = [{SEED}, 7]
bootstrap = 50
max_sentences = {N}

[[encoders]]
name = "elmo"
kind = "elmo"
options = "model/options.json"
weights = "model/weights.hdf5"

[[encoders]]
name = "glove"
kind = "glove"
vectors = "tiny.glove.txt"

[[tasks]]
name = "deps"
kind = "structural-distance"
max_epochs = {EPOCHS}
train = "demo-ud:train"
dev = "demo-ud:dev"
test = ["demo-ud:test"]

[[tasks]]
name = "depth"
kind = "structural-depth"
rank = 2
max_epochs = {EPOCHS}
train = "demo-ud:train"
test = "demo-ud:test"
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("structural")
    (root / "model").mkdir()
    shutil.copy(FIX / "elmo_allennlp" / "options.json", root / "model" / "options.json")
    shutil.copy(FIX / "elmo_allennlp" / "lm_weights.hdf5", root / "model" / "weights.hdf5")
    shutil.copy(FIX / "glove" / "tiny.glove.txt", root / "tiny.glove.txt")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PROBING_CACHE", str(root / "cache"))
        mp.delenv("PROBING_DATA", raising=False)
        exp = parse_experiment(TOML, base=root)
        res = run_experiment(exp, root / "out", progress=False)
    return exp, res


def _value(df, **where) -> float:
    rows = df
    for k, v in where.items():
        rows = rows[rows[k] == v]
    assert len(rows) == 1, where
    return float(rows["value"].iloc[0])


def test_options_are_parsed_with_the_reference_defaults(run):
    exp, _ = run
    assert exp.tasks[0].options == {"rank": None, "max_epochs": EPOCHS, "batch_size": 20, "lr": 1e-3}
    assert exp.tasks[1].options["rank"] == 2 and exp.tasks[1].baselines == ("position",)


def test_rows_for_every_layer_control_selectivity_and_the_position_baseline_once(run):
    _, res = run
    df = res.results
    distance = {"uuas", "dspr", "control-uuas", "control-dspr", "selectivity"}
    depth = {"root_acc", "nspr", "control-root_acc", "control-nspr", "selectivity"}
    for task, metrics in (("deps", distance), ("depth", depth)):
        rows = df[df.task == task]
        for enc, layers in (("elmo", ["0", "1", "2"]), ("glove", ["glove"])):
            for layer in layers:
                got = set(rows[(rows.encoder == enc) & (rows.layer == layer)].metric)
                assert got == metrics, (task, enc, layer)
        base = rows[rows.encoder == "baseline"]
        # the baseline reads only the trees: scored once per task, not once per encoder
        assert sorted(base.metric) == sorted(m for m in metrics if "-" not in m and m != "selectivity")
        assert set(base.layer) == {"position"}
    # one probe per layer, seeded with seeds[0]; the second seed adds nothing
    assert set(df.seed) == {SEED}
    assert ((df.ci_low <= df.value) & (df.value <= df.ci_high)).all()
    # selectivity is the headline minus the control task's headline, row by row
    for (task, enc, _layer), g in df.groupby(["task", "encoder", "layer"]):
        if enc == "baseline":
            continue
        head = "uuas" if task == "deps" else "root_acc"
        by = dict(zip(g.metric, g.value))
        assert by["selectivity"] == pytest.approx(by[head] - by[f"control-{head}"], abs=1e-12)


def test_probe_rows_equal_the_probes_module_run_by_hand_on_the_same_stores(run):
    """The task wires stores, seeds[0], options and the dev split exactly as run_structural / a hand fit."""
    _, res = run
    df = res.results
    train, dev, test = (res.store("elmo", "demo-ud", s) for s in ("train", "dev", "test"))
    expected = run_structural(train, dev, test, "1", "distance", seed=SEED, n_boot=50, max_epochs=EPOCHS)
    control = run_structural(train, dev, test, "1", "distance", seed=SEED, n_boot=50, max_epochs=EPOCHS, control=True)
    for metric, value, _, _ in expected + [(f"control-{m}", v, lo, hi) for m, v, lo, hi in control]:
        assert _value(df, task="deps", encoder="elmo", layer="1", metric=metric) == pytest.approx(value, abs=1e-12)
    # the depth task has no dev split: the probe holds out a seeded tenth of the training sentences
    probe = DepthProbe(rank=2, seed=SEED, max_epochs=EPOCHS).fit(StoreSentences(train, "2"), store_trees(train))
    assert probe.B_.shape == (train.dim, 2)
    pred = probe.predict(StoreSentences(test, "2"))
    for metric, value, _, _ in scores_with_ci("depth", pred, store_trees(test), store_punct(test), n_boot=50):
        assert _value(df, task="depth", encoder="elmo", layer="2", metric=metric) == pytest.approx(value, abs=1e-12)
    notes = [p for p in res.provenance["probes"] if p["task"] == "depth" and p["encoder"] == "elmo"]
    assert {p["rank"] for p in notes} == {2} and len(notes) == 6  # 3 layers, each with its control probe


def test_position_baseline_recomputed_from_the_corpus_files(run):
    """|i - j| distances and left-branching depths scored against the CoNLL-U heads read afresh."""
    _, res = run
    sents = list(load("demo-ud", "test").head(N))
    heads = [s.heads for s in sents]
    punct = [punctuation_mask(s.upos) for s in sents]
    lengths = [len(s.words) for s in sents]
    df = res.results[res.results.encoder == "baseline"]
    assert _value(df, task="deps", metric="uuas") == pytest.approx(uuas(position_distances(lengths), heads, punct))
    assert _value(df, task="depth", metric="root_acc") == pytest.approx(
        root_acc(position_depths(lengths), heads, punct)
    )


def test_headlines_summary_figures_and_report(run, tmp_path):
    from probing import figures as fg
    from probing.report import build_report, draw_figures

    _, res = run
    assert res.provenance["headlines"] == {"deps": "uuas", "depth": "root_acc"}
    summary = res.summary()
    df = res.results
    # UUAS and Root% are the summary's numbers, in percent; the position baseline is a column
    assert summary.loc[("deps", "demo-ud", "test", "elmo"), "1"] == round(
        _value(df, task="deps", encoder="elmo", layer="1", metric="uuas") * 100, 1
    )
    assert summary.loc[("depth", "demo-ud", "test", "glove"), "glove"] == round(
        _value(df, task="depth", encoder="glove", layer="glove", metric="root_acc") * 100, 1
    )
    assert summary.loc[("deps", "demo-ud", "test", "baseline"), "position"] == round(
        _value(df, task="deps", encoder="baseline", metric="uuas") * 100, 1
    )
    figures = draw_figures(df)
    assert list(figures) == ["syntax_deps", "syntax_depth"]  # the headline and its Spearman side by side
    titles = [ax.get_title() for ax in figures["syntax_deps"].axes]
    assert titles == ["UUAS", "DSpr."]
    # GloVe (its own layer) and the position baseline are labelled lines; DSpr. is shown with two decimals
    dspr = _value(df, task="deps", encoder="baseline", metric="dspr")
    texts = [t.get_text() for t in figures["syntax_deps"].axes[1].texts]
    assert f"linear position {dspr:.2f}" in texts or any(t.startswith(("▼ linear", "▲ linear")) for t in texts)
    with pytest.raises(ValueError, match=r"no metric\(s\) \['f1'\]"):
        fg.layer_scores_panels(df, "deps", ["uuas", "f1"])
    report = build_report(res.out_dir, tmp_path / "report.html", formats=("png",))
    html = report.read_text(encoding="utf-8")
    assert "syntax_deps" in html and "Structural probes (Hewitt &amp; Manning, 2019)" in html


def test_data_without_trees_is_refused_when_the_file_is_read():
    """Before any activation is extracted: the error names the key, the expectation and the value."""
    toml = TOML.replace('options = "model/options.json"\nweights = "model/weights.hdf5"', 'model = "default"')
    parse_experiment(toml)
    text = toml.replace('train = "demo-ud:train"\ndev = "demo-ud:dev"', 'train = "demo-semcor:train"', 1)
    with pytest.raises(ExperimentError, match=r"tasks\[0\]\.train: expected a dependency treebank .*demo-ud"):
        parse_experiment(text)
    bad_test = toml.replace(
        'test = "demo-ud:test"', 'test = ["demo-ud:test", {dataset = "demo-semcor", split = "test"}]'
    )
    with pytest.raises(ExperimentError, match=r"tasks\[1\]\.test: expected a dependency treebank"):
        parse_experiment(bad_test)
    with pytest.raises(ExperimentError, match=r"tasks\[1\]\.rank: expected an integer >= 1, got 0"):
        parse_experiment(toml.replace("rank = 2", "rank = 0"))


def test_a_treebank_file_without_heads_fails_at_run_time_naming_task_and_data(tmp_path):
    from test_store_fakes import FakeEncoder

    from probing.corpora import Corpus, Sentence
    from probing.store import extract
    from probing.tasks import Part, ProbeSettings, TaskError, structural_probes

    sents = [Sentence("s1", "d", ["Dogs", "bark", "."], upos=["NOUN", "VERB", "PUNCT"])]
    store = extract(
        FakeEncoder(dim=4, n_layers=1),
        Corpus.from_sentences(sents, name="flat", split="train"),
        cache_dir=tmp_path,
        progress=False,
    )
    part = Part("flat", "train", store)
    with pytest.raises(TaskError, match=r"task 'deps', flat/train: corpus flat/train .* has no dependency heads"):
        structural_probes("deps", "structural-distance", "fake", part, None, [part], ProbeSettings())
