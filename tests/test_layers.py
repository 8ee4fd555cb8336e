"""probing.layers: layer halves ("1f"/"1b") in the store and the tagging task; with them (issue 21) the OOV split,
sentence-only context and the figures of both.

The ELMo checks use the tiny trained ELMo of tests/fixtures/elmo_allennlp (Apache-2.0, see its NOTICE); the
task checks use synthetic encoders whose answer is known by construction.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from test_tasks_tagging import TAG_OF, TAGSET, VOCAB, _rng, tagged_corpus

from probing.elmo import Elmo
from probing.elmo.chars import batch_char_ids
from probing.encoders import ElmoEncoder, elmo_options_path, training_vocabulary
from probing.experiment import ExperimentError, fit_layer_probes, parse_experiment
from probing.figures import directions, oov_split
from probing.layers import LayerError, direction_names, resolve
from probing.results import make_row
from probing.store import extract
from probing.tasks import Part, ProbeSettings, column_labels, tagging_baselines, tagging_probes
from probing.views.context import context_dependence
from probing.views.misspellings import misspellings

FIX = Path(__file__).parent / "fixtures"
ELMO = FIX / "elmo_allennlp"
SENTENCES = [["The", "king", "met", "the", "queen", "."], ["Play", "it", "again", ",", "Sam"], ["Hi"]]
FAST = ProbeSettings(Cs=(1.0,), max_iter=60, seeds=(0,), n_boot=50, control=False, mix=False, concat=False)


class _Corpus:
    name, split = "claims", "test"

    def __iter__(self):
        from probing.corpora.base import Sentence

        for i, words in enumerate(SENTENCES):
            yield Sentence(id=f"s{i}", doc_id="d0", words=list(words))

    def fingerprint(self) -> str:
        return hashlib.sha256(repr(SENTENCES).encode()).hexdigest()


@pytest.fixture(scope="module")
def elmo_store(tmp_path_factory):
    enc = ElmoEncoder(ELMO / "options.json", ELMO / "lm_weights.hdf5")
    return extract(enc, _Corpus(), cache_dir=tmp_path_factory.mktemp("s"), progress=False)


def test_halves_are_the_forward_and_backward_lstm_outputs(elmo_store):
    """Store layer "1" is [forward | backward]: "1f"/"2f" must equal the forward LSTM's own outputs and
    "1b"/"2b" the backward LSTM's, computed here straight from the biLM (boundary tokens dropped)."""
    elmo = Elmo.from_files(ELMO / "options.json", ELMO / "lm_weights.hdf5")
    half = elmo_store.dim // 2
    for i, words in enumerate(SENTENCES):
        ids = torch.from_numpy(batch_char_ids([words], elmo.options.max_characters_per_token))
        with torch.no_grad():
            _, fw, bw, _, _ = elmo.bilm(ids)
        rows = slice(int(elmo_store.offsets[i]), int(elmo_store.offsets[i + 1]))
        for k in (1, 2):
            got_f = elmo_store.layer(f"{k}f", dtype=np.float32)[rows]
            got_b = elmo_store.layer(f"{k}b", rows=np.arange(rows.start, rows.stop), dtype=np.float32)
            assert got_f.shape == (len(words), half)
            np.testing.assert_allclose(got_f, fw[k - 1][0, 1:-1].numpy(), atol=2e-3, rtol=2e-3)  # fp16 store
            np.testing.assert_allclose(got_b, bw[k - 1][0, 1:-1].numpy(), atol=2e-3, rtol=2e-3)
    whole = np.asarray(elmo_store.layer("1"))
    np.testing.assert_array_equal(np.asarray(elmo_store.layer("1f")), whole[:, :half])  # a view, same bytes
    assert elmo_store.layer_index("2b") == elmo_store.layer_index("2") == 2
    assert elmo_store.layer_columns("1b") == slice(half, 2 * half) and elmo_store.layer_columns(1) == slice(None)


def test_token_layer_glove_and_unknown_layers_have_no_halves(elmo_store):
    with pytest.raises(LayerError, match="layer '0' .* has no forward half: only biLSTM layers"):
        elmo_store.layer("0f")
    with pytest.raises(KeyError, match=r"no layer named '3' \(for the half '3b'\)"):
        elmo_store.layer("3b")
    with pytest.raises(LayerError, match="no layer named 'glovef'"):
        resolve("glovef", ["glove"], 50)
    with pytest.raises(LayerError, match="odd width 7"):
        resolve("1f", ["0", "1"], 7)
    assert direction_names(["0", "1", "2"]) == ["1f", "1b", "2f", "2b"] and direction_names(["glove"]) == []


class HalfEncoder:
    """Layer 1 = [tag one-hot + 0.05 noise | unit noise]: its forward half holds the tag, its backward half
    nothing; layer 0 is noise."""

    name = "half"
    layer_names = ["0", "1"]
    dim = 10
    fingerprint = hashlib.sha256(b"half-encoder/1").hexdigest()

    def encode(self, sentences):
        out = []
        for words in sentences:
            arr = _rng("half", tuple(words)).standard_normal((2, len(words), self.dim)).astype(np.float32)
            code = np.zeros((len(words), 5), np.float32)
            code[np.arange(len(words)), [TAGSET.index(TAG_OF[w]) for w in words]] = 1.0
            arr[1, :, :5] = code + 0.05 * arr[1, :, :5]
            out.append(arr)
        return out

    def oov_mask(self, words):
        return np.zeros(len(words), bool)


@pytest.fixture(scope="module")
def half_parts(tmp_path_factory):
    cache = tmp_path_factory.mktemp("half")
    corpora = {
        "train": tagged_corpus("synth", "train", 60, VOCAB[:50], 1),
        "dev": tagged_corpus("synth", "dev", 15, VOCAB[:50], 2),
        "test": tagged_corpus("synth", "test", 30, VOCAB, 3),
    }
    return {s: Part("synth", s, extract(HalfEncoder(), c, cache_dir=cache, progress=False)) for s, c in corpora.items()}


def test_directions_rows_read_the_half_that_holds_the_tag(half_parts):
    p = half_parts
    out = tagging_probes(
        "upos", "half", p["train"], p["dev"], [p["test"]], column_labels("upos"), FAST, directions=True
    )
    acc = pd.DataFrame(out.rows).query("metric == 'accuracy'").set_index("layer")["value"]
    assert sorted(acc.index) == ["0", "1", "1b", "1f"]  # no "0f"/"0b": the token layer has no halves
    assert acc["1f"] == 1.0 and acc["1"] == 1.0  # the code is separable with margin 1 >> noise 0.05
    assert acc["1b"] < 0.6  # noise: near the 40 % majority class, far from 100 %
    margin = pd.DataFrame(out.rows).query("metric == 'best-layer-margin'")
    assert list(margin["layer"]) == ["1"]  # halves do not compete for the best single layer


def test_oov_split_rows_partition_the_accuracy(half_parts):
    """accuracy-iv-X and accuracy-oov-X are accuracies on a partition of the test tokens, so their
    count-weighted mean is the accuracy; the most-frequent-tag baseline on words never seen in training
    predicts the majority tag (NOUN), so its OOV accuracy is the share of NOUN among those tokens."""
    p = half_parts
    seen = set(VOCAB[:50])
    vocabs = {"seen": lambda words: np.array([w in seen for w in words])}
    out = tagging_probes(
        "upos", "half", p["train"], p["dev"], [p["test"]], column_labels("upos"), FAST, vocabularies=vocabs
    )
    out.extend(
        tagging_baselines("upos", p["train"], p["dev"], [p["test"]], column_labels("upos"), FAST, vocabularies=vocabs)
    )
    df = pd.DataFrame(out.rows)
    words = p["test"].store.tokens["word"].to_numpy()
    n_iv = int(np.isin(words, list(seen)).sum())
    n_oov = len(words) - n_iv
    assert 0 < n_oov < len(words)
    for (enc, layer), g in df.groupby(["encoder", "layer"]):
        v = g.set_index("metric")["value"]
        want = (n_iv * v["accuracy-iv-seen"] + n_oov * v["accuracy-oov-seen"]) / len(words)
        assert v["accuracy"] == pytest.approx(want, abs=1e-12), (enc, layer)
        assert (g["ci_low"] <= g["value"]).all() and (g["value"] <= g["ci_high"]).all()
    mft = df.query("layer == 'most-frequent-tag' and metric == 'accuracy-oov-seen'")["value"].item()
    unseen = [w for w in words if w not in seen]
    assert mft == pytest.approx(np.mean([TAG_OF[w] == "NOUN" for w in unseen]))


def test_task_options_are_parsed_and_checked():
    base = (
        '[[encoders]]\nkind = "glove"\nname = "g"\nvectors = "glove/tiny.glove.txt"\n\n[[tasks]]\nname = "pos"\n'
        'kind = "tagging"\nlabel = "upos"\ntrain = { dataset = "demo-ud", split = "train" }\n'
        'test = [{ dataset = "demo-ud", split = "test" }]\n'
    )
    exp = parse_experiment(base + "directions = true\noov_split = true\n", base=str(FIX))
    assert dict(exp.tasks[0].options) == {"label": "upos", "directions": True, "oov_split": True}
    assert dict(parse_experiment(base + "directions = false\n", base=str(FIX)).tasks[0].options) == {"label": "upos"}
    with pytest.raises(ExperimentError, match=r"tasks\[0\]\.oov_split: expected true or false, got 'yes'"):
        parse_experiment(base + 'oov_split = "yes"\n', base=str(FIX))


def test_bundled_training_vocabulary():
    """The shipped word list is the default model's softmax vocabulary: at most training.json's vocab_size
    words (fewer when fewer training words reach min_count), less <S>, </S> and <UNK>; case-sensitive.
    Millions of training tokens give tens of thousands of words, common inflections included."""
    vocab = training_vocabulary("default")
    config = json.loads((elmo_options_path("default").parent / "training.json").read_text())["config"]
    assert 30_000 < len(vocab) <= config["vocab_size"] - 3
    assert {"the", "The", "play", "played", "plays"} <= vocab
    assert not {"<S>", "</S>", "<UNK>", "", "qzxvbnm"} & vocab


def test_stateless_vectors_do_not_depend_on_the_preceding_sentence():
    """Stateless: each sentence starts from zero state, so with one sentence per batch the vectors after any
    predecessor are bitwise those of the sentence alone (difference exactly 0), and batched with its
    predecessor they differ only by float rounding of the different batch (<= 1e-5). Stateful: the
    predecessor's final state seeds the sentence, so the LSTM layers differ by O(0.1-1), the
    context-free token layer 0 not at all."""
    exact = context_dependence(str(ELMO), batch_size=1).set_index(["mode", "layer"])["max_abs_diff"]
    batched = context_dependence(str(ELMO)).set_index(["mode", "layer"])["max_abs_diff"]
    for layer in ("0", "1", "2"):
        assert exact["stateless", layer] == 0.0
        assert batched["stateless", layer] <= 1e-5
    assert exact["stateful", "0"] == 0.0
    assert exact["stateful", "1"] > 0.05 and exact["stateful", "2"] > 0.05


def test_misspellings_table(elmo_store, tmp_path, monkeypatch):
    """A form unknown to GloVe gets its zero vector (no neighbours, NaN cosine); ELMo has a vector for it,
    and the correct form's cosine with itself is 1."""
    from probing.glove import Vectors

    monkeypatch.setenv("PROBING_CACHE", str(tmp_path))
    glove = Vectors.from_file(FIX / "glove" / "tiny.glove.txt", progress=False)
    tokens = elmo_store.tokens.assign(
        upos=["DET", "NOUN", "VERB", "DET", "NOUN", "PUNCT", "VERB", "PRON", "ADV", "PUNCT", "PROPN", "INTJ"]
    )
    elmo_store._tokens = tokens
    probes = fit_layer_probes(elmo_store, ["0", "1f"])
    enc = ElmoEncoder(ELMO / "options.json", ELMO / "lm_weights.hdf5")
    table = misspellings([(SENTENCES[0], 1, "kign")], enc, elmo_store, probes, glove=glove, k=2)
    assert list(table["representation"]) == ["glove", "glove", "layer 0", "layer 0", "layer 1f", "layer 1f"]
    g = table[table["representation"] == "glove"].set_index("form")
    assert bool(g.at["correct", "has_vector"]) and not bool(g.at["misspelled", "has_vector"])
    assert np.isnan(g.at["misspelled", "cosine_to_correct"]) and g.at["misspelled", "neighbours"].startswith("(out")
    e = table[table["representation"] != "glove"]
    assert e["has_vector"].all()
    assert np.allclose(e.loc[e["form"] == "correct", "cosine_to_correct"], 1.0)
    assert (e.loc[e["form"] == "misspelled", "cosine_to_correct"] < 1.0 - 1e-6).all()


def _rows(values: dict[str, tuple[float, float, float]], metric: str = "accuracy") -> pd.DataFrame:
    return pd.DataFrame(
        [
            make_row(
                task="upos",
                dataset="d",
                split="test",
                encoder="elmo",
                layer=layer,
                metric=metric,
                value=v,
                ci_low=lo,
                ci_high=hi,
                seed=0,
            )
            for layer, (v, lo, hi) in values.items()
        ]
    )


def test_directions_figure_draws_the_values():
    vals = {
        "0": (0.8, 0.78, 0.82),
        "1": (0.9, 0.88, 0.92),
        "1f": (0.85, 0.83, 0.87),
        "1b": (0.86, 0.84, 0.88),
        "2": (0.91, 0.9, 0.92),
        "2f": (0.8, 0.79, 0.81),
        "2b": (0.83, 0.8, 0.85),
    }
    fig = directions(_rows(vals), "upos", "accuracy")
    ax = fig.axes[0]
    heights = [round(p.get_height(), 6) for p in ax.patches]
    # bars in order: forward (layers 1, 2), backward (1, 2), both (1, 2), in percent
    assert heights == [85.0, 80.0, 86.0, 83.0, 90.0, 91.0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["layer 1", "layer 2"]
    assert ax.lines[-1].get_ydata()[0] == pytest.approx(80.0)  # layer 0 reference line
    with pytest.raises(Exception, match="directions = true"):
        directions(_rows({"1": (0.9, 0.88, 0.92)}), "upos", "accuracy")


def test_oov_figure_draws_the_values():
    df = pd.concat(
        [
            _rows({"0": (0.9, 0.85, 0.95), "1": (0.95, 0.9, 0.97), "1f": (0.5, 0.4, 0.6)}, "accuracy"),
            _rows({"0": (0.92, 0.9, 0.94), "1": (0.96, 0.95, 0.97), "1f": (0.5, 0.4, 0.6)}, "accuracy-iv-glove"),
            _rows({"0": (0.7, 0.6, 0.8), "1": (0.8, 0.7, 0.9), "1f": (0.5, 0.4, 0.6)}, "accuracy-oov-glove"),
        ]
    )
    ax = oov_split(df, "upos", "glove").axes[0]
    assert [round(p.get_height(), 6) for p in ax.patches] == [92.0, 96.0, 70.0, 80.0]  # halves left out
