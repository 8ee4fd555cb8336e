"""MDL probing (``mdl = true``) and the ``[similarity]`` table in an experiment file, end to end on tiny slices
of the bundled demo data with the fixture ELMo (tests/fixtures/elmo_allennlp, Apache-2.0) and the tiny GloVe
fixture: the rows equal direct calls of :func:`probing.probes.mdl.online_codelength` and
:func:`probing.analysis.similarity.layer_similarity` on the run's own stores; then the report and bad keys."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from probing.analysis.similarity import layer_similarity
from probing.experiment import ExperimentError, load_experiment, parse_experiment, run_experiment
from probing.probes.control import ControlTask
from probing.probes.mdl import FRACTIONS, online_codelength
from probing.report import build_report, summary_table
from probing.results import SIMILARITY_COLUMNS, read_results
from probing.tasks import TASK_KINDS, Job, Part

FIX = Path(__file__).parent / "fixtures"
N = 40  # sentences per split: blocks from the 0.032 fraction on (int(0.032 * 40) = 1 sentence)

TOML = f"""
[experiment]
name = "beyond"
seeds = [0, 1]
bootstrap = 50
cache_dir = "cache"
max_sentences = {N}

[probe]
C = [0.1, 1.0]
max_iter = 30
mix = false
concat = false

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
name = "upos"
kind = "tagging"
label = "upos"
train = "demo-ud:train"
dev = "demo-ud:dev"
test = ["demo-ud:test"]
mdl = true
mdl_seeds = 2

[similarity]
dataset = "demo-ud:dev"
measures = ["linear_cka", "pwcca"]
max_tokens = 300
seed = 3
"""

MDL_METRICS = {"codelength_kbits", "uniform_kbits", "compression", "control-codelength_kbits"}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("beyond")
    (root / "model").mkdir()
    shutil.copy(FIX / "elmo_allennlp" / "options.json", root / "model" / "options.json")
    shutil.copy(FIX / "elmo_allennlp" / "lm_weights.hdf5", root / "model" / "weights.hdf5")
    shutil.copy(FIX / "glove" / "tiny.glove.txt", root / "tiny.glove.txt")
    (root / "exp.toml").write_text(TOML)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PROBING_CACHE", str(root / "probing-cache"))
        exp = load_experiment(root / "exp.toml")
        res = run_experiment(exp, root / "out", progress=False)
    return root, exp, res


def _labelled(store):
    """Rows with a UPOS tag, their tags, words and sentence ids (as the tagging task reads them)."""
    tokens = store.tokens
    y = tokens["upos"].fillna("").astype(str).to_numpy()
    rows = np.flatnonzero(y != "")
    return rows, y[rows], tokens["word"].astype(str).to_numpy()[rows], tokens["sentence_id"].to_numpy()[rows]


def test_mdl_rows_for_every_layer_encoder_and_seed_on_the_training_split(setup):
    df = setup[2].results
    mdl = df[df.metric.isin(MDL_METRICS)]
    assert set(mdl.dataset + ":" + mdl.split) == {"demo-ud:train"}  # the code sends the training labels
    # mdl_seeds = 2: seeds 0 and 1 of [experiment] seeds, each with all four metrics
    layers = [("elmo", "0"), ("elmo", "1"), ("elmo", "2"), ("glove", "glove")]
    want = {(enc, layer, m, s) for enc, layer in layers for m in MDL_METRICS for s in (0, 1)}
    assert set(zip(mdl.encoder, mdl.layer, mdl.metric, mdl.seed)) == want
    assert len(mdl) == len(want)


def test_mdl_values_equal_a_direct_online_codelength_call_on_the_same_stores(setup):
    _, _, res = setup
    df = res.results
    train, dev = res.store("elmo", "demo-ud", "train"), res.store("elmo", "demo-ud", "dev")
    rows, y, words, groups = _labelled(train)
    d_rows, d_y, d_words, _ = _labelled(dev)
    n_sent = len(np.unique(groups))
    fractions = tuple(f for f in FRACTIONS if int(f * n_sent) >= 1)
    assert fractions[0] == 0.032 and n_sent == N  # 40 sentences: the first five fractions give empty blocks
    K = len(np.unique(y))
    for layer in ("0", "2"):
        X, X_dev = np.asarray(train.layer(layer))[rows], np.asarray(dev.layer(layer))[d_rows]
        for seed in (0, 1):
            got = df[(df.encoder == "elmo") & (df.layer == layer) & (df.seed == seed)].set_index("metric").value
            kw = dict(X_dev=X_dev, seed=seed, fractions=fractions, Cs=(0.1, 1.0), max_iter=30)
            code = online_codelength(X, y, groups, y_dev=d_y, **kw)
            assert got["codelength_kbits"] == pytest.approx(code.codelength_bits / 1000, rel=1e-12)
            # the uniform code sends every training label with log2 K bits, whatever the layer
            assert got["uniform_kbits"] == pytest.approx(len(rows) * math.log2(K) / 1000, rel=1e-12)
            assert got["compression"] == pytest.approx(code.uniform_bits / code.codelength_bits, rel=1e-12)
            # the control task of the same seed: one random label per word type, the same K
            ct = ControlTask(seed=seed).fit(words.tolist(), y)
            control = online_codelength(
                X, ct.transform(words.tolist()), groups, y_dev=ct.transform(d_words.tolist()), n_classes=K, **kw
            )
            assert got["control-codelength_kbits"] == pytest.approx(control.codelength_bits / 1000, rel=1e-12)
    elmo1 = df[(df.encoder == "elmo") & (df.layer == "1")]
    # on 40 sentences a probe still learns UPOS from ELMo layer 1: shorter than the uniform code
    assert (elmo1[elmo1.metric == "compression"].value > 1).all()


def test_accuracy_rows_do_not_change_with_mdl(setup):
    """The job with mdl on adds MDL rows only: every other row equals the same job with mdl off."""
    _, exp, res = setup
    task = exp.tasks[0]
    parts = {s: Part("demo-ud", s, res.store("elmo", "demo-ud", s)) for s in ("train", "dev", "test")}
    outs = []
    for options in ({"label": "upos"}, dict(task.options)):
        job = Job(
            task="upos",
            encoder="elmo",
            train=parts["train"],
            dev=parts["dev"],
            tests=[parts["test"]],
            settings=exp.probe,
            options=options,
            with_baselines=False,
        )
        outs.append(pd.DataFrame(TASK_KINDS["tagging"].run(job).rows))
    without, with_mdl = outs
    assert not without.metric.isin(MDL_METRICS).any()
    pd.testing.assert_frame_equal(without, with_mdl[~with_mdl.metric.isin(MDL_METRICS)].reset_index(drop=True))


def test_similarity_csv_equals_a_direct_layer_similarity_call(setup):
    root, _, res = setup
    path = root / "out" / "similarity.csv"
    assert pd.read_csv(path).columns.tolist() == SIMILARITY_COLUMNS
    assert SIMILARITY_COLUMNS == ["encoder_a", "layer_a", "encoder_b", "layer_b", "measure", "value", "n_tokens"]
    csv = pd.read_csv(path, dtype={"layer_a": str, "layer_b": str})
    stores = {e: res.store(e, "demo-ud", "dev") for e in ("elmo", "glove")}
    want = layer_similarity(stores, measures=("linear_cka", "pwcca"), max_tokens=300, seed=3)
    pd.testing.assert_frame_equal(csv, want, check_dtype=False, rtol=1e-12)
    pd.testing.assert_frame_equal(res.similarity, want)
    assert set(csv.n_tokens) == {300}
    # a layer compared with itself: CKA = 1
    diag = csv[(csv.encoder_a == csv.encoder_b) & (csv.layer_a == csv.layer_b) & (csv.measure == "linear_cka")]
    assert len(diag) == 4 and np.allclose(diag.value, 1.0)


def test_report_draws_mdl_and_similarity_figures_and_keeps_the_summary(setup):
    root = setup[0]
    report = build_report(root / "out", figures_dir=root / "figs", formats=("png",))
    names = {p.stem for p in (root / "figs").glob("*.png")}
    assert {"codelength_upos", "compression_upos", "similarity_linear_cka", "layer_scores_upos"} <= names
    html = report.read_text()
    assert "online codelength" in html and "kernel alignment" in html
    # the summary reads the test split only: the MDL rows on the training split have no accuracy
    summary = summary_table(read_results(root / "out"))
    assert set(summary.split) == {"test"} and set(summary.metric) == {"accuracy"}


def test_no_similarity_table_means_no_csv_and_an_empty_frame(setup, tmp_path):
    root, exp, _ = setup
    (tmp_path / "similarity.csv").write_text("stale\n")
    from dataclasses import replace

    small = replace(exp, tasks=(), similarity=None)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PROBING_CACHE", str(root / "probing-cache"))
        res = run_experiment(small, tmp_path, progress=False)
    assert res.similarity.empty and res.similarity.columns.tolist() == SIMILARITY_COLUMNS
    assert not (tmp_path / "similarity.csv").exists()  # a stale map of an earlier run is removed


def _header() -> str:
    """The experiment's tables before [[tasks]], with the bundled model's name instead of fixture files."""
    head = TOML.split("[[tasks]]")[0]
    return head.replace('options = "model/options.json"\nweights = "model/weights.hdf5"', 'model = "default"')


TASK = '[[tasks]]\nkind = "tagging"\nlabel = "upos"\ntrain = "demo-ud:train"\ntest = ["demo-ud:test"]\n'


def test_mdl_false_leaves_the_options_and_cache_key_unchanged():
    base, task = _header(), TASK
    plain = parse_experiment(base + task).tasks[0]
    off = parse_experiment(base + task + "mdl = false\n").tasks[0]
    assert dict(plain.options) == dict(off.options) == {"label": "upos"}
    mlp = parse_experiment(base + task + 'mdl = true\nmdl_probe = "mlp"\nmdl_width = 64\n').tasks[0]
    assert mlp.to_dict()["mdl"] == {"probe": "mlp", "seeds": 1, "hidden_layers": 1, "width": 64}
    supersense = TASK.replace('kind = "tagging"\nlabel = "upos"', 'kind = "supersense"').replace(
        "demo-ud", "demo-semcor"
    )
    sup = parse_experiment(base + supersense + "mdl = true\nmdl_seeds = 2\n").tasks[0]
    assert sup.kind == "supersense" and list(sup.options) == ["mdl"]
    assert sup.to_dict()["mdl"] == {"probe": "linear", "seeds": 2}


@pytest.mark.parametrize(
    ("extra", "where", "expected"),
    [
        ('mdl = "yes"\n', "tasks[0].mdl", "true or false"),
        ('mdl = true\nmdl_probe = "svm"\n', "tasks[0].mdl_probe", "'linear', 'mlp'"),
        ("mdl = true\nmdl_width = 64\n", "tasks[0].mdl_width", 'mdl_probe = "mlp"'),
        ('mdl_probe = "mlp"\n', "tasks[0].mdl_probe", "mdl = true"),
        ("mdl = true\nmdl_seeds = 0\n", "tasks[0].mdl_seeds", ""),
        ('\n[similarity]\ndataset = "demo-ud"\n', "[similarity].dataset", "'dataset:split'"),
        ("\n[similarity]\nmax_tokens = 100\n", "[similarity].dataset", "it is missing"),
        ('\n[similarity]\ndataset = "demo-ud:dev"\nmeasures = ["cka"]\n', "[similarity].measures", "linear_cka"),
        ('\n[similarity]\ndataset = "demo-ud:dev"\nencoders = ["bert"]\n', "[similarity].encoders", "'elmo'"),
        ('\n[similarity]\ndataset = "demo-ud:dev"\nmax_tokens = 2\n', "[similarity].max_tokens", ""),
        ('\n[similarity]\ndataset = "demo-ud:dev"\ntokens = 5\n', "[similarity]", "unknown key(s) 'tokens'"),
    ],
)
def test_bad_keys_name_the_key(extra, where, expected):
    with pytest.raises(ExperimentError) as e:
        parse_experiment(_header() + TASK + extra, source="exp.toml")
    assert f"exp.toml: {where}" in str(e.value) and expected in str(e.value)
