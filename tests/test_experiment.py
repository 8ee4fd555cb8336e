"""The TOML experiment end to end on tiny slices of the bundled demo data with the fixture ELMo
(tests/fixtures/elmo_allennlp, Apache-2.0) and the tiny GloVe fixture; then a second run that must be a
pure cache hit; then validation errors."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import probing.elmo.elmo as elmo_module
from probing._io import PinnedHashError
from probing.corpora import load
from probing.experiment import ExperimentError, extract_activations, load_experiment, parse_experiment, run_experiment
from probing.results import RESULT_COLUMNS, read_provenance, read_results

FIX = Path(__file__).parent / "fixtures"
N = 30  # sentences per split

TOML = f"""
[experiment]
name = "tiny"
seeds = [0, 1]
bootstrap = 100
cache_dir = "cache"
max_sentences = {N}

[probe]
C = [1.0]
max_iter = 30
mix_max_iter = 30

[[encoders]]
name = "elmo"
kind = "elmo"
options = "model/options.json"
weights = "model/weights.hdf5"

[[encoders]]
name = "random-elmo"
kind = "random-elmo"
options = "model/options.json"
seed = 0

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

[[tasks]]
name = "wsd-1nn"
kind = "wsd-1nn"
train = "demo-semcor:train"
test = ["demo-semcor:test", "senseval2:test"]
skip_missing = true
wordnet = "bundled"
encoders = ["elmo"]

[[tasks]]
name = "supersense"
kind = "supersense"
train = "demo-semcor:train"
test = ["demo-semcor:test"]
wordnet = "bundled"
encoders = ["elmo", "glove"]
"""


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A folder with the experiment file, a copy of the fixture model and the GloVe fixture; the first run."""
    root = tmp_path_factory.mktemp("exp")
    (root / "model").mkdir()
    shutil.copy(FIX / "elmo_allennlp" / "options.json", root / "model" / "options.json")
    shutil.copy(FIX / "elmo_allennlp" / "lm_weights.hdf5", root / "model" / "weights.hdf5")
    shutil.copy(FIX / "glove" / "tiny.glove.txt", root / "tiny.glove.txt")
    (root / "exp.toml").write_text(TOML)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PROBING_CACHE", str(root / "probing-cache"))
        mp.delenv("PROBING_DATA", raising=False)  # senseval2 must not be found: it is skipped
        exp = load_experiment(root / "exp.toml")
        res = run_experiment(exp, root / "out", progress=False)
    return root, exp, res


def test_results_files_and_contract(setup):
    root, _, res = setup
    df = read_results(root / "out")
    assert list(pd.read_csv(root / "out" / "results.csv").columns) == RESULT_COLUMNS
    pd.testing.assert_frame_equal(df, res.results.reset_index(drop=True), check_dtype=False)
    frac = df[df.metric != "selectivity"]
    assert ((frac.value >= 0) & (frac.value <= 1)).all(), "scores are fractions, not percent"
    has_ci = df.ci_low.notna()
    assert has_ci.all()  # every score has a bootstrap CI
    assert ((df.ci_low <= df.value) & (df.value <= df.ci_high)).all()
    keys = ["task", "dataset", "split", "encoder", "layer", "metric", "seed"]
    assert not df.duplicated(keys).any()


def test_expected_rows_for_every_task_encoder_and_layer(setup):
    df = setup[2].results
    acc = df[df.metric == "accuracy"]
    layers = {"0", "1", "2", "mix", "concat"}
    for enc in ("elmo", "random-elmo"):
        assert set(acc[(acc.task == "upos") & (acc.encoder == enc)].layer) == layers
        # control tasks for every single layer, one per seed
        ctrl = df[(df.task == "upos") & (df.encoder == enc) & (df.metric == "control-accuracy")]
        assert sorted(zip(ctrl.layer, ctrl.seed)) == [(layer, s) for layer in "012" for s in (0, 1)]
    assert set(acc[(acc.task == "upos") & (acc.encoder == "glove")].layer) == {"glove"}
    assert set(acc[(acc.task == "upos") & (acc.encoder == "baseline")].layer) == {"majority", "most-frequent-tag"}
    assert set(df[df.task == "wsd-1nn"].metric) == {"f1", "best-layer-margin"}
    wsd = df[(df.task == "wsd-1nn") & (df.metric == "f1")]
    assert set(wsd.dataset) == {"demo-semcor"}
    assert set(zip(wsd.encoder, wsd.layer)) == {
        ("elmo", "0"),
        ("elmo", "1"),
        ("elmo", "2"),
        ("baseline", "wn-first-sense"),
        ("baseline", "semcor-mfs"),
    }
    sup = df[(df.task == "supersense") & (df.metric == "accuracy")]
    assert set(sup.encoder) == {"elmo", "glove", "baseline"}


def test_selectivity_is_accuracy_minus_control_exactly(setup):
    root = setup[0]
    df = read_results(root / "out")  # through the CSV: floats round-trip exactly
    sel = df[df.metric == "selectivity"]
    assert len(sel) > 0
    for r in sel.itertuples():
        same = df[(df.task == r.task) & (df.dataset == r.dataset) & (df.encoder == r.encoder) & (df.layer == r.layer)]
        acc = same[same.metric == "accuracy"].value.item()  # the deterministic probe: one row
        ctrl = same[(same.metric == "control-accuracy") & (same.seed == r.seed)].value.item()
        # the same subtraction of the same two means (to the last bit with numpy 2; numpy 1.24 sums the
        # boolean and float copies of the per-item scores in a different order, one ulp apart)
        assert r.value == pytest.approx(acc - ctrl, rel=0, abs=1e-15)


def test_majority_baseline_is_the_hand_computed_fraction(setup):
    df = setup[2].results
    train = [t for s in load("demo-ud", "train").head(N) for t in s.upos]
    test = [t for s in load("demo-ud", "test").head(N) for t in s.upos]
    majority = Counter(train).most_common(1)[0][0]
    want = sum(t == majority for t in test) / len(test)
    got = df[(df.task == "upos") & (df.layer == "majority")].value.item()
    assert got == pytest.approx(want, abs=1e-15), (majority, got, want)


def test_glove_oov_is_counted(setup):
    df = setup[2].results
    vocab = {line.split()[0] for line in (FIX / "glove" / "tiny.glove.txt").read_text().splitlines()}
    words = [w for s in load("demo-ud", "test").head(N) for w in s.words]
    want = sum(w.lower() not in vocab for w in words) / len(words)
    oov = df[df.metric == "oov-rate"]
    assert set(oov.encoder) == {"glove"}  # character ELMo has no OOV
    got = oov[oov.task == "upos"].value.item()
    assert got == pytest.approx(want, abs=1e-15) and got > 0.5  # the fixture knows only 27 words


def test_side_tables_and_provenance(setup):
    root, exp, res = setup
    mix = pd.read_csv(root / "out" / "mix_weights.csv")
    assert list(mix.columns)[:4] == ["task", "dataset", "encoder", "layer"] and "weight" in mix.columns
    sums = mix.groupby(["task", "encoder", "seed"]).weight.sum()
    assert np.allclose(sums, 1.0) and set(mix.encoder) == {"elmo", "random-elmo"}
    per_tag = pd.read_csv(root / "out" / "per_tag.csv", keep_default_na=False)
    assert {"task", "encoder", "layer", "tag", "n", "accuracy"} <= set(per_tag.columns)
    # per-tag counts are the test tags, the same for every probe
    test_tags = Counter(t for s in load("demo-ud", "test").head(N) for t in s.upos)
    upos = per_tag[(per_tag.task == "upos") & (per_tag.encoder == "elmo") & (per_tag.layer == "1")]
    assert dict(zip(upos.tag, upos.n)) == dict(test_tags)

    prov = read_provenance(root / "out")
    assert prov == json.loads(json.dumps(res.provenance, default=str))
    assert prov["seeds"] == [0, 1] and prov["probe"]["Cs"] == [1.0] and prov["probe"]["n_boot"] == 100
    assert prov["encoders"]["elmo"]["fingerprint"] == exp.encoders[0].build().fingerprint
    assert prov["torch"] and prov["numpy"] and prov["timings"]["total"] > 0
    store = prov["stores"]["elmo/demo-ud:train"]
    assert store["n_sentences"] == N and len(store["corpus_fingerprint"]) == 64
    assert store["corpus_fingerprint"] == load("demo-ud", "train").head(N).fingerprint()
    assert [s["data"] for s in prov["skipped"]] == ["senseval2:test"]
    assert "[[tasks]]" in prov["experiment_toml"]
    assert {p["layer"] for p in prov["probes"] if p["task"] == "upos" and p["encoder"] == "elmo"} == {
        "0",
        "1",
        "2",
        "mix",
        "concat",
    }


def test_results_object(setup):
    res = setup[2]
    summary = res.summary()
    # percent, mean over seeds: the upos layer-1 cell is 100 x the accuracy row
    row = res.results.query("task == 'upos' and encoder == 'elmo' and layer == '1' and metric == 'accuracy'")
    assert summary.loc[("upos", "demo-ud", "test", "elmo"), "1"] == round(row.value.item() * 100, 1)
    assert list(summary.columns[:5]) == ["0", "1", "2", "mix", "concat"]
    assert "<table" in res._repr_html_()
    assert set(res.stores) >= {("elmo", "demo-ud", "train"), ("glove", "demo-semcor", "test")}
    assert res.store("elmo", "demo-ud", "test").n_sentences == N


def test_second_run_is_a_cache_hit_and_builds_no_model(setup, monkeypatch):
    root, exp, first = setup
    monkeypatch.setenv("PROBING_CACHE", str(root / "probing-cache"))
    monkeypatch.delenv("PROBING_DATA", raising=False)

    def boom(self, *args, **kwargs):
        raise AssertionError("an Elmo model was built on a cache hit")

    monkeypatch.setattr(elmo_module.Elmo, "__init__", boom)
    second = run_experiment(load_experiment(root / "exp.toml"), root / "out2", progress=False)
    assert all(s["cache_hit"] for s in second.provenance["stores"].values())
    # 9 for upos (3 encoders x 3 splits), 2 for wsd-1nn (elmo), 2 more for supersense (glove)
    assert len(second.provenance["stores"]) == len(first.provenance["stores"]) == 13
    pd.testing.assert_frame_equal(second.results, first.results)  # deterministic, seeds fixed


def test_an_interrupted_run_resumes_from_its_finished_jobs(setup, monkeypatch):
    root, exp, first = setup
    monkeypatch.setenv("PROBING_CACHE", str(root / "probing-cache"))
    monkeypatch.delenv("PROBING_DATA", raising=False)
    import probing.experiment as experiment

    jobs = root / "cache" / experiment.JOBS_DIR  # the experiment's cache_dir = "cache"
    shutil.rmtree(jobs)  # forget the finished jobs of the fixture's first run; the stores stay

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    from dataclasses import replace

    from probing.tasks import TASK_KINDS

    with monkeypatch.context() as m:  # the 4th job (after 3 upos jobs) is interrupted
        m.setitem(TASK_KINDS, "wsd-1nn", replace(TASK_KINDS["wsd-1nn"], run=interrupted))
        with pytest.raises(KeyboardInterrupt):
            run_experiment(exp, root / "out3", progress=False)
    assert len(list(jobs.glob("*.json"))) == 3
    assert not (root / "out3" / "results.csv").exists()
    again = run_experiment(exp, root / "out3", progress=False)
    assert again.provenance["cached_jobs"] == ["upos/elmo", "upos/random-elmo", "upos/glove"]
    pd.testing.assert_frame_equal(again.results, first.results)
    pd.testing.assert_frame_equal(again.per_tag, first.per_tag)
    repeat = run_experiment(exp, root / "out4", progress=False)  # a repeated run reuses every job
    assert len(repeat.provenance["cached_jobs"]) == 6
    pd.testing.assert_frame_equal(repeat.results, first.results)


def test_extract_activations_for_the_cli(tmp_path, monkeypatch):
    model = tmp_path / "model"
    shutil.copytree(FIX / "elmo_allennlp", model)  # a folder with options.json and lm_weights.hdf5
    store = extract_activations(str(model), "demo-ud", "dev", cache_dir=tmp_path / "c", max_sentences=5, progress=False)
    assert store.n_sentences == 5 and store.layer_names == ["0", "1", "2"] and store.dim == 32
    words = [w for s in load("demo-ud", "dev").head(5) for w in s.words]
    assert store.tokens.word.tolist() == words

    def boom(self, *args, **kwargs):
        raise AssertionError("an Elmo model was built on a cache hit")

    monkeypatch.setattr(elmo_module.Elmo, "__init__", boom)
    again = extract_activations(str(model), "demo-ud", "dev", cache_dir=tmp_path / "c", max_sentences=5, progress=False)
    assert again.path == store.path


def test_bundled_experiments_validate():
    default = load_experiment("default")
    assert [e.name for e in default.encoders] == ["elmo", "random-elmo", "glove"]
    assert [t.name for t in default.tasks] == ["upos", "wsd-1nn", "supersense"]
    # sized for the demo's 10 minutes: the random twin on UPOS and WSD only, the scalar mix for ELMo only
    assert [t.encoders for t in default.tasks] == [None, None, ("elmo", "glove")]
    assert {str(r) for t in default.tasks for r in (t.train, *t.test)} <= {
        "demo-ud:train",
        "demo-ud:test",
        "demo-semcor:train",
        "demo-semcor:test",
    }
    assert default.max_sentences is None
    # sized for the demo (see its comments): one control seed, C from 0.001 to 1000 with the default patience,
    # tol 1e-4 (rows within 0.15 points of the converging 1e-6), one mix refit; full.toml keeps three seeds, the
    # same Cs and the converging default tol
    assert (
        default.probe.seeds,
        default.probe.Cs,
        default.probe.tol,
        default.probe.patience,
        default.probe.mix_refits,
    ) == ((0,), (0.001, 0.01, 0.1, 1.0, 10.0, 100.0, 1000.0), 1e-4, 2, 1)
    assert default.probe.control and default.probe.mix == ("elmo",) and default.probe.concat is False
    quick = load_experiment("default", quick=True)
    assert quick.max_sentences == 200 and quick.probe.n_boot == 200
    full = load_experiment("full")
    assert {t.name for t in full.tasks} == {
        "upos",
        "xpos",
        "number",
        "tense",
        "deprel",
        "ptb",
        "wsd-1nn",
        "supersense",
        "syntax-distance",
        "syntax-depth",
    }
    # the structural probes read UD EWT's trees, with the dev split for early stopping
    syntax = {t.kind: t for t in full.tasks if t.kind.startswith("structural-")}
    assert set(syntax) == {"structural-distance", "structural-depth"}
    assert all(
        (str(t.train), str(t.dev), t.options["rank"]) == ("ud-ewt:train", "ud-ewt:dev", None) for t in syntax.values()
    )
    assert (full.probe.seeds, full.probe.Cs, full.probe.tol, full.probe.mix_refits) == (
        (0, 1, 2),
        default.probe.Cs,
        1e-6,
        5,
    )
    assert full.probe.mix is True and full.probe.concat is True


@pytest.mark.parametrize(
    "change, message",
    [
        (("max_iter = 30", 'max_iter = "ten"'), r"\[probe\]\.max_iter: expected an integer >= 1, got 'ten'"),
        (("C = [1.0]", "Cs = [1.0]"), r"\[probe\]: unknown key\(s\) 'Cs'"),
        (("seeds = [0, 1]", "seeds = [0, 0]"), r"\[experiment\]\.seeds: expected a non-empty list of distinct"),
        (
            ('kind = "glove"', 'kind = "bert"'),
            r"encoders\[2\]\.kind: expected one of 'elmo', 'random-elmo', 'glove', 'word2vec', 'fasttext', "
            r"'transformer', got 'bert'",
        ),
        (('train = "demo-ud:train"', 'train = "demo-ud"'), r"tasks\[0\]\.train: expected 'dataset:split'"),
        (
            ('dev = "demo-ud:dev"', 'dev = "demo-ud:validation"'),
            r"tasks\[0\]\.dev: dataset 'demo-ud' has no split "
            r"'validation'; its splits are train, dev, test",
        ),
        (('test = ["demo-ud:test"]', 'test = ["ewt:test"]'), r"tasks\[0\]\.test\[0\]: unknown dataset 'ewt'"),
        (
            ('encoders = ["elmo"]', 'encoders = ["elmo", "bert"]'),
            r"tasks\[1\]\.encoders: expected a non-empty list of strings from 'elmo', 'random-elmo', 'glove'",
        ),
        (('label = "upos"', ""), r"tasks\[0\]\.label: expected a non-empty string, it is missing$"),
        (
            ('label = "upos"', 'lable = "upos"'),
            r"tasks\[0\]\.label: expected a non-empty string, it is missing \(the table has the unknown key 'lable': "
            r"a misspelling of 'label'\?\)",
        ),
        (
            ('kind = "glove"', 'kind = "glove"\nvectorz = "glove-6b-50d"'),
            r"encoders\[2\]: unknown key\(s\) 'vectorz' \(closest known key: 'vectors'\)",
        ),
        (
            ('label = "upos"', 'label = "upos"\nskip_mising = true'),
            r"tasks\[0\]: unknown key\(s\) 'skip_mising' \(closest known key: 'skip_missing'\)",
        ),
        (
            ('weights = "model/weights.hdf5"', 'weights = "model/nope.hdf5"'),
            r"encoders\[0\]\.weights: expected an "
            r"existing file, got '.*nope.hdf5'",
        ),
        (
            ('weights = "model/weights.hdf5"', 'weights = "model/weights.hdf5"\nsha256 = "c0ffee"'),
            r"encoders\[0\]\.sha256: expected 64 hex digits, got 'c0ffee'",
        ),
        (
            ("seed = 0", f'seed = 0\nsha256 = "{"0" * 64}"'),
            r"encoders\[1\]: unknown key\(s\) 'sha256'",  # a random ELMo reads no weights file to pin
        ),
        (("[[tasks]]", "[[task]]"), r"top level: unknown key\(s\) 'task'"),
        (("bootstrap = 100", "bootstrap = 100 100"), r"not valid TOML"),
        (
            ("max_iter = 30", "max_iter = 30\nmix_refits = -1"),
            r"\[probe\]\.mix_refits: expected an integer >= 0, got -1",
        ),
        (
            ("max_iter = 30", 'max_iter = 30\nmix = ["elmo", "bert"]'),
            r"\[probe\]\.mix: expected true, false or a list of names from 'elmo', 'random-elmo', 'glove', "
            r"got \['elmo', 'bert'\]",
        ),
    ],
)
def test_bad_experiment_files_name_the_key(tmp_path, change, message):
    shutil.copytree(FIX / "elmo_allennlp", tmp_path / "model")
    shutil.copy(tmp_path / "model" / "lm_weights.hdf5", tmp_path / "model" / "weights.hdf5")
    old, new = change
    assert old in TOML
    path = tmp_path / "bad.toml"
    path.write_text(TOML.replace(old, new, 1))
    with pytest.raises(ExperimentError, match=message) as info:
        load_experiment(path)
    assert str(path) in str(info.value)  # the message names the file


def test_provenance_records_the_weights_file_of_each_elmo_encoder(setup):
    """results.json names the file the ELMo encoder's weights came from: its resolved path, its size and the
    sha256 of its bytes (hashlib here); encoders without a weights file (random-elmo, glove) have none."""
    root = setup[0]
    weights = root / "model" / "weights.hdf5"
    encoders = read_provenance(root / "out")["encoders"]
    assert encoders["elmo"]["weights"] == {
        "path": str(weights.resolve()),
        "size": weights.stat().st_size,
        "sha256": hashlib.sha256(weights.read_bytes()).hexdigest(),
    }
    assert "weights" not in encoders["random-elmo"] and "weights" not in encoders["glove"]


def test_a_pinned_weights_file_that_changed_is_refused_and_a_pin_keeps_the_store_keys(tmp_path, monkeypatch):
    """``sha256 = "..."`` pins an encoder's weights: the pinned file builds an encoder with the fingerprint of
    the unpinned one (the same store keys; an unpinned spec's dict has no ``sha256``), and after one flipped
    byte the run stops before extracting anything, with a message naming the file and both hashes."""
    monkeypatch.setenv("PROBING_CACHE", str(tmp_path / "probing-cache"))
    shutil.copytree(FIX / "elmo_allennlp", tmp_path / "model")
    weights = tmp_path / "model" / "weights.hdf5"
    shutil.copy(tmp_path / "model" / "lm_weights.hdf5", weights)
    shutil.copy(FIX / "glove" / "tiny.glove.txt", tmp_path / "tiny.glove.txt")
    pinned = hashlib.sha256(weights.read_bytes()).hexdigest()
    text = TOML.replace('weights = "model/weights.hdf5"', f'weights = "model/weights.hdf5"\nsha256 = "{pinned}"')
    exp = parse_experiment(text, base=tmp_path)
    plain = parse_experiment(TOML, base=tmp_path)
    assert exp.encoders[0].options.sha256 == pinned and "sha256" not in plain.encoders[0].to_dict()
    assert exp.encoders[0].build().fingerprint == plain.encoders[0].build().fingerprint
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF
    weights.write_bytes(data)
    changed = hashlib.sha256(data).hexdigest()
    with pytest.raises(PinnedHashError, match=f"sha256 {changed} is not the pinned {pinned}") as info:
        run_experiment(parse_experiment(text, base=tmp_path), tmp_path / "out", progress=False)
    assert str(weights) in str(info.value)
    assert not (tmp_path / "out" / "results.csv").exists()
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["corpus-memo"]  # the corpus was read, no store made


def test_mix_and_concat_for_named_encoders_only(setup, tmp_path, monkeypatch):
    """``mix = ["elmo"]``: the scalar mix for that encoder alone; ``concat = []`` (or false): for none. The
    single layers (and their cached jobs) are those of a run with both probes on for every encoder."""
    root, _, first = setup
    head, tasks = TOML.split("[[tasks]]", 1)
    upos = "[[tasks]]" + tasks.split("[[tasks]]")[0]
    text = head.replace("mix_max_iter = 30", 'mix_max_iter = 30\nmix = ["elmo"]\nconcat = []') + upos
    exp = parse_experiment(text, base=root)
    assert (exp.probe.mix, exp.probe.concat) == (("elmo",), False)
    assert exp.probe.for_encoder("elmo").mix is True and exp.probe.for_encoder("random-elmo").mix is False
    assert exp.probe.to_dict()["mix"] == ["elmo"]
    monkeypatch.setenv("PROBING_CACHE", str(root / "probing-cache"))
    df = run_experiment(exp, tmp_path / "out", progress=False).results
    acc = df[(df.metric == "accuracy") & (df.task == "upos")]
    assert set(acc[acc.encoder == "elmo"].layer) == {"0", "1", "2", "mix"}
    assert set(acc[acc.encoder == "random-elmo"].layer) == {"0", "1", "2"}
    before = first.results
    for enc in ("elmo", "random-elmo"):
        for layer in "012":
            pick = (before.task == "upos") & (before.encoder == enc) & (before.layer == layer)
            now = (df.encoder == enc) & (df.layer == layer) & (df.task == "upos")
            assert sorted(df[now].value) == sorted(before[pick].value), (enc, layer)


def test_missing_tasks_and_missing_file(tmp_path):
    with pytest.raises(ExperimentError, match=r"<string>: tasks: expected a non-empty array of tables"):
        parse_experiment('[[encoders]]\nkind = "glove"\n')
    with pytest.raises(FileNotFoundError, match=r"experiment file not found: .*nothing.toml"):
        load_experiment(tmp_path / "nothing.toml")


def test_quick_overrides_apply():
    text = TOML.replace("[probe]", "[quick]\nmax_sentences = 7\nseeds = [5]\n\n[probe]")
    text = (
        text.replace("model/options.json", "elmo_allennlp/options.json")
        .replace("model/weights.hdf5", "elmo_allennlp/lm_weights.hdf5")
        .replace('"tiny.glove.txt"', '"glove/tiny.glove.txt"')
    )
    exp = parse_experiment(text, base=str(FIX))
    q = exp.quick()
    assert (q.max_sentences, q.probe.seeds, q.probe.n_boot) == (7, (5,), 200)  # bootstrap: the quick default
    assert (exp.max_sentences, exp.probe.seeds) == (N, (0, 1))
    assert math.isclose(q.probe.Cs[0], 1.0)


def test_run_table_selects_the_backend_and_is_checked():
    """``[run] backend = "ray"`` (with an optional ``address``) asks run_experiment for Ray; the default is local,
    and anything else is an error naming the key and the choices."""
    base = '[[encoders]]\nkind = "glove"\n[[tasks]]\nname = "t"\nkind = "tagging"\nlabel = "upos"\ntrain = "demo-ud:train"\n'
    base += 'test = ["demo-ud:test"]\n'
    exp = parse_experiment(base)
    assert (exp.backend, exp.ray_address) == ("local", "local")
    ray_exp = parse_experiment('[run]\nbackend = "ray"\naddress = "auto"\n' + base)
    assert (ray_exp.backend, ray_exp.ray_address) == ("ray", "auto")
    assert ray_exp.to_dict()["run"] == {"backend": "ray", "address": "auto"}
    with pytest.raises(ExperimentError, match="backend"):
        parse_experiment('[run]\nbackend = "dask"\n' + base)
    with pytest.raises(ExperimentError, match="workers"):
        parse_experiment("[run]\nworkers = 4\n" + base)


def test_a_learning_curve_writes_its_side_tables_and_leaves_the_task_rows_alone(setup, tmp_path, monkeypatch):
    """``learning_curve`` on the tiny UPOS task: ``learning_curve.csv`` and ``data_efficiency.csv`` beside
    results.csv, the same tables on ``Results``, and the task's own rows exactly those of the run without it."""
    root, _, first = setup
    head, tasks = TOML.split("[[tasks]]", 1)
    upos = "[[tasks]]" + tasks.split("[[tasks]]")[0] + "learning_curve = [0.1, 0.5, 1.0]\n"
    exp = parse_experiment(head + upos, base=root)
    monkeypatch.setenv("PROBING_CACHE", str(root / "probing-cache"))
    res = run_experiment(exp, tmp_path / "out", progress=False)
    lc = pd.read_csv(tmp_path / "out" / "learning_curve.csv", dtype={"layer": str})
    eff = pd.read_csv(tmp_path / "out" / "data_efficiency.csv", dtype={"layer": str, "reference_layer": str})
    assert len(lc) == len(res.learning_curve) and len(eff) == len(res.data_efficiency)
    # N = 30 training sentences: 3, 15, 30; every single layer of the three encoders and the trained baselines
    assert sorted(set(lc.n_train_sentences)) == [3, 15, 30]
    series = set(zip(lc.encoder, lc.layer))
    assert {("elmo", "2"), ("random-elmo", "0"), ("glove", "glove"), ("baseline", "most-frequent-tag")} <= series
    assert set(lc.seed) == {0}  # learning_curve_seeds defaults to 1: the first of the experiment's seeds
    # ratios at 1 % are absent (no such fraction), at 10 % one per ordered pair of the 9 curves
    assert set(eff.at_fraction) == {0.1} and len(eff) == 9 * 8
    upos_rows = first.results[first.results.task == "upos"].reset_index(drop=True)
    assert res.results.equals(upos_rows)
    from probing.report import build_report

    html = build_report(tmp_path / "out").read_text(encoding="utf-8")
    assert (tmp_path / "out" / "figures" / "learning_curve_upos.png").is_file()
    assert "How much training data each layer needs" in html
