"""Your own data, first class (issue #15): file specs in load(), experiments and probe_layers(); every CoNLL-U
column as a label (DEPREL, one label per FEATS feature); labels checked when the experiment is parsed."""

from __future__ import annotations

import gzip
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from probing.corpora import load
from probing.corpora.registry import file_spec
from probing.errors import ProbingError
from probing.experiment import ExperimentError, parse_experiment
from probing.results import read_provenance
from probing.tasks.labels import feature_labels, is_label, label_function

FIX = Path(__file__).parent / "fixtures"
UD = FIX / "corpora" / "data" / "ud" / "en_ewt"
SEMCOR_SLICE = FIX / "wsd" / "semcor_slice"
DEMO_UD = Path(__file__).parents[1] / "probing" / "resources" / "data" / "demo-ud"


def test_file_specs_load_and_name_the_corpus_after_the_file(tmp_path):
    corpus = load(f"conllu:{UD / 'en_ewt-ud-test.conllu'}")
    assert (corpus.name, corpus.split) == ("en_ewt-ud-test", "all")  # the stem, not "ud-ewt"
    first = next(iter(corpus))
    # every CoNLL-U column reaches the token table: DEPREL and the raw FEATS string
    assert first.deprels[:4] == ["root", "mark", "nsubj", "advcl"]
    assert first.feats[3] == "Mood=Ind|Number=Sing|Person=3|Tense=Past|VerbForm=Fin"
    text = tmp_path / "my essays.txt"
    text.write_text("One sentence here .\n\nAnother one .\n", encoding="utf-8")
    corpus = load(f"text:{text}", "test")
    assert (corpus.name, corpus.split, [s.words for s in corpus]) == (
        "my essays",
        "test",
        [["One", "sentence", "here", "."], ["Another", "one", "."]],
    )
    xml = SEMCOR_SLICE / "semcor-slice.data.xml"
    key = SEMCOR_SLICE / "semcor-slice.gold.key.txt"
    shutil.copy(xml, tmp_path / "mine.xml")
    with_key = load(f"raganato:{tmp_path / 'mine.xml'}:{key}")
    beside = load(f"raganato:{xml}")  # the key file beside the XML by default
    assert with_key.name == "mine" and beside.name == "semcor-slice"
    assert [s.senses for s in with_key] == [s.senses for s in beside]


def test_unknown_dataset_points_at_the_file_specs(tmp_path):
    mine = tmp_path / "my.conllu"
    shutil.copy(UD / "en_ewt-ud-test.conllu", mine)
    with pytest.raises(ValueError) as err:
        load(str(mine))
    assert "conllu:PATH, text:PATH or raganato:XML[:KEY]" in str(err.value)
    assert f"write conllu:{mine}" in str(err.value)  # the file exists: the message says how to name it
    with pytest.raises(ValueError, match="conllu:PATH"):
        load("conllu")
    with pytest.raises(FileNotFoundError, match="no file .*nope.conllu"):
        load(f"conllu:{tmp_path / 'nope.conllu'}")
    assert file_spec("ud-ewt") is None and file_spec("demo-ud:train") is None


def test_feats_labels_one_per_feature_and_none_where_absent():
    tokens = pd.DataFrame(
        {"feats": ["Number=Sing|Person=3", "", "Number=Plur", "Number[psor]=Sing|Poss=Yes", "Number=Sing,Plur"]}
    )
    assert feature_labels("Number")(tokens).tolist() == ["Sing", "none", "Plur", "none", "Sing,Plur"]
    assert feature_labels("Number[psor]")(tokens).tolist() == ["none", "none", "none", "Sing", "none"]
    assert feature_labels("Person")(tokens).tolist() == ["3", "none", "none", "none", "none"]
    assert label_function("feats:Poss")(tokens).tolist() == ["none", "none", "none", "Yes", "none"]
    with pytest.raises(ValueError, match="no token has FEATS"):
        feature_labels("Number")(pd.DataFrame({"feats": ["", ""]}))
    assert is_label("deprel") and is_label("feats:Tense") and is_label("feats") and not is_label("feats:")
    assert not is_label("morph") and not is_label("head")


def experiment(task: dict) -> dict:
    return {
        "experiment": {"name": "own"},
        "encoders": [{"kind": "glove"}],
        "tasks": [{"name": "t", "kind": "tagging", "label": "upos", "train": "demo-ud:train", "test": ["demo-ud:test"]} | task],
    }  # fmt: skip


def test_experiment_file_specs_and_label_checks(tmp_path):
    shutil.copy(UD / "en_ewt-ud-train.conllu", tmp_path / "essays.conllu")
    exp = parse_experiment(
        experiment({"train": "conllu:essays.conllu", "test": [{"dataset": f"conllu:{UD / 'en_ewt-ud-test.conllu'}"}]}),
        base=tmp_path,
    )
    train, (test,) = exp.tasks[0].train, exp.tasks[0].test
    # named after the file, split after the role; relative paths from the experiment's folder
    assert (train.dataset, train.split, train.format, train.path) == (
        "essays",
        "train",
        "conllu",
        tmp_path / "essays.conllu",
    )
    assert (str(test), test.format) == ("en_ewt-ud-test:test", "conllu")
    assert [s.id for s in train.load()] == [s.id for s in load(f"conllu:{tmp_path / 'essays.conllu'}")]
    with pytest.raises(ExperimentError, match=r"tasks\[0\]\.train: 'conllu:missing.conllu': no file"):
        parse_experiment(experiment({"train": "conllu:missing.conllu"}), base=tmp_path)
    with pytest.raises(ExperimentError, match=r"tasks\[0\]\.train: unknown dataset 'my'; .*conllu:PATH"):
        parse_experiment(experiment({"train": "my:train"}))
    # labels are checked at parse time, with the list of what exists
    for label in ("deprel", "feats:Number", "feats:Number[psor]"):
        parse_experiment(experiment({"label": label}))
    with pytest.raises(ExperimentError, match=r"tasks\[0\]\.label: expected .*deprel, feats, or feats:FEATURE"):
        parse_experiment(experiment({"label": "morph"}))


def head_conllu(src: Path, dest: Path, n: int) -> Path:
    """The first ``n`` sentences of a CoNLL-U file, copied unchanged."""
    out, count = [], 0
    with gzip.open(src, "rt", encoding="utf-8") as f:
        for line in f:
            out.append(line)
            if not line.strip():
                count += 1
                if count == n:
                    break
    dest.write_text("".join(out), encoding="utf-8")
    return dest


@pytest.fixture(scope="module")
def essays(tmp_path_factory):
    root = tmp_path_factory.mktemp("essays")
    train = head_conllu(DEMO_UD / "en_ewt-demo-train.conllu.gz", root / "essays-train.conllu", 40)
    test = head_conllu(DEMO_UD / "en_ewt-demo-test.conllu.gz", root / "essays-test.conllu", 20)
    return root, train, test


def test_a_feature_absent_from_the_corpus_names_the_features_it_has(essays):
    """feats:Numbr is in no training token: the error names Number (the closest) and every feature there."""
    from probing import probe_layers
    from probing.tasks.labels import feature_names

    root, train, test = essays
    have = feature_names(pd.DataFrame({"feats": ["Number=Sing|Person=3", "", "Tense=Past|VerbForm=Fin"]}))
    assert have == ["Number", "Person", "Tense", "VerbForm"]
    elmo = {"name": "elmo", "kind": "elmo", "options": str(FIX / "elmo_allennlp" / "options.json"),
            "weights": str(FIX / "elmo_allennlp" / "lm_weights.hdf5")}  # fmt: skip
    with pytest.raises(ProbingError, match=r"no training token has the feature 'Numbr' \(did you mean feats:Number\?\); "
                       r"the corpus has (\w+, )*Number, (\w+, )*Tense"):  # fmt: skip
        probe_layers(
            f"conllu:{train}", f"conllu:{test}", label="feats:Numbr", encoders=[elmo],
            probe={"C": [1.0], "max_iter": 30}, bootstrap=50, cache_dir=root / "cache", progress=False,
        )  # fmt: skip


def test_probe_layers_on_own_conllu_files_predicts_a_feature(essays):
    """One call, own files, a FEATS feature: rows named after the files; the majority baseline equals the share
    of the test tokens whose Number is the training majority, counted here from the files themselves."""
    from probing import probe_layers

    root, train, test = essays
    elmo = {"name": "elmo", "kind": "elmo", "options": str(FIX / "elmo_allennlp" / "options.json"),
            "weights": str(FIX / "elmo_allennlp" / "lm_weights.hdf5")}  # fmt: skip
    res = probe_layers(
        f"conllu:{train}", f"conllu:{test}", label="feats:Number", encoders=[elmo],
        probe={"C": [1.0], "max_iter": 30, "mix_max_iter": 30}, bootstrap=50, cache_dir=root / "cache", progress=False,
    )  # fmt: skip
    assert set(res["task"]) == {"feats:Number"} and set(res["dataset"]) == {"essays-test"}
    assert set(res["split"]) == {"test"}

    def numbers(path):
        return [
            dict(kv.split("=", 1) for kv in (s.split("|") if s else [])).get("Number", "none")
            for sent in load(f"conllu:{path}")
            for s in sent.feats
        ]

    majority = Counter(numbers(train)).most_common(1)[0][0]
    want = float(np.mean([n == majority for n in numbers(test)]))
    got = res[(res["layer"] == "majority") & (res["metric"] == "accuracy")]["value"]
    assert majority == "none" and float(got.iat[0]) == pytest.approx(want)
    acc = res[(res["encoder"] == "elmo") & (res["metric"] == "accuracy")].set_index("layer")["value"]
    assert set(acc.index) == {"0", "1", "2"} and acc.between(0, 1).all()  # quick default: no mix or concat
    assert set(res[res["metric"] == "selectivity"]["layer"]) == {"0", "1", "2"}  # each layer's control task
    for thorough, layers, grid in (
        (False, set(), [0.01, 1.0, 100.0]),
        (True, {"mix", "concat"}, [0.001, 0.01, 0.1, 1.0, 10.0, 100.0]),
    ):
        again = probe_layers(
            f"conllu:{train}", f"conllu:{test}", label="feats:Number", encoders=[elmo], thorough=thorough,
            probe={"max_iter": 30, "mix_max_iter": 30}, bootstrap=50, cache_dir=root / "cache", progress=False,
            out_dir=root / f"thorough-{thorough}",
        )  # fmt: skip
        elmo_rows = again[(again["metric"] == "accuracy") & (again["encoder"] == "elmo")]
        assert set(elmo_rows["layer"]) == {"0", "1", "2"} | layers
        assert read_provenance(root / f"thorough-{thorough}")["probe"]["Cs"] == grid


def test_probe_layers_takes_corpus_objects_and_deprel(essays):
    """A Corpus in hand works like a spec; DEPREL is a label; the results name the corpus' own name and split."""
    from probing import probe_layers

    root, train, test = essays
    res = probe_layers(
        load(f"conllu:{train}", "train").head(30), load(f"conllu:{test}", "test"), label="deprel",
        encoders=[{"name": "glove", "kind": "glove", "vectors": str(FIX / "glove" / "tiny.glove.txt")}],
        probe={"C": [1.0], "max_iter": 30, "control": False}, bootstrap=50, cache_dir=root / "cache", progress=False,
    )  # fmt: skip
    assert set(res["dataset"]) == {"essays-test"} and set(res["split"]) == {"test"} and set(res["task"]) == {"deprel"}
    deprels = [d for s in load(f"conllu:{train}").head(30) for d in s.deprels]
    majority = Counter(deprels).most_common(1)[0][0]
    test_deprels = [d for s in load(f"conllu:{test}") for d in s.deprels]
    got = res[(res["layer"] == "majority") & (res["metric"] == "accuracy")]["value"].iat[0]
    assert float(got) == pytest.approx(np.mean([d == majority for d in test_deprels]))


def test_corpus_len_iteration_and_slicing_stream_the_file():
    """len(), corpus[i] and corpus[a:b] (issue #15) agree with the list of sentences; a slice is a lazy Corpus
    with the same name and split."""
    corpus = load(f"conllu:{DEMO_UD / 'en_ewt-demo-test.conllu.gz'}", "test")
    every = list(corpus)
    assert len(corpus) == len(every) > 10
    assert corpus[0].id == every[0].id and corpus[-1].id == every[-1].id and corpus[7].id == every[7].id
    part = corpus[2:9:3]
    assert (part.name, part.split) == (corpus.name, "test") and [s.id for s in part] == [s.id for s in every[2:9:3]]
    assert [s.id for s in corpus[-3:]] == [s.id for s in every[-3:]] and len(corpus[5:5]) == 0
    with pytest.raises(IndexError, match="sentence index 100000 out of range"):
        corpus[100000]
    with pytest.raises(TypeError, match="integers or slices"):
        corpus["a"]
