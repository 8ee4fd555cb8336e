"""Probing tasks on stores built from synthetic encoders whose answers are known by construction.

* ``LayerKEncoder``: only layer k holds the POS tag (a one-hot code plus small noise); the other layers are
  noise, different for every token. Per-layer probing must rank layer k first, the scalar mix must weight it
  most, and its control-task selectivity must be high (a tag code cannot memorise word types).
* ``ContextEncoder``: layer 0 depends on the word only, layer 1 on the previous word, so the sense of "bank"
  in "river bank" / "money bank" is visible in layer 1 and invisible in layer 0.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from probing.corpora.base import Corpus, Sentence
from probing.store import extract
from probing.tasks import (
    Part,
    ProbeSettings,
    TaskError,
    column_labels,
    supersense_labels,
    tagging_baselines,
    tagging_probes,
    wsd_1nn,
    wsd_baselines,
)
from probing.tasks.common import DEV_EVERY, holdout_dev
from probing.tasks.curves import CurveOptions
from probing.tasks.labels import items
from probing.tasks.mdl import MDLOptions
from probing.wordnet import inventory

TAGS = ["NOUN", "NOUN", "VERB", "ADJ", "DET"]  # word i has tag TAGS[i % 5]: NOUN is the majority (40 %)
VOCAB = [f"w{i}" for i in range(60)]
TAG_OF = {w: TAGS[i % 5] for i, w in enumerate(VOCAB)}
TAGSET = sorted(set(TAGS))
K = 1  # the informative layer
SETTINGS = ProbeSettings(Cs=(0.1, 10.0), max_iter=50, mix_max_iter=60, seeds=(0, 1), n_boot=200)


def _rng(*key) -> np.random.Generator:
    return np.random.default_rng(int.from_bytes(hashlib.sha256(repr(key).encode()).digest()[:8], "little"))


class LayerKEncoder:
    """Layer ``K`` = one-hot tag code (+ noise 0.05); layers != K = unit noise, unique per token."""

    name = "fake"
    layer_names = ["0", "1", "2"]
    dim = 8
    fingerprint = hashlib.sha256(f"layer-k-encoder/{K}".encode()).hexdigest()
    oov_words = frozenset({"w7", "w8"})

    def encode(self, sentences):
        out = []
        for words in sentences:
            arr = np.empty((3, len(words), self.dim), np.float32)
            for layer in range(3):
                noise = _rng(tuple(words), layer).standard_normal((len(words), self.dim))
                if layer == K:
                    code = np.zeros((len(words), self.dim))
                    code[np.arange(len(words)), [TAGSET.index(TAG_OF[w]) for w in words]] = 1.0
                    arr[layer] = code + 0.05 * noise
                else:
                    arr[layer] = noise
            out.append(arr)
        return out

    def oov_mask(self, words):
        return np.array([w in self.oov_words for w in words])


def tagged_corpus(name: str, split: str, n: int, vocab: list[str], seed: int) -> Corpus:
    rng = np.random.default_rng(seed)
    sents = []
    for i in range(n):
        words = [vocab[j] for j in rng.integers(0, len(vocab), size=int(rng.integers(4, 11)))]
        sents.append(
            Sentence(
                id=f"{split}{i}",
                doc_id=f"{split}-d{i // 5}",
                words=words,
                upos=[TAG_OF[w] for w in words],
                xpos=[""] * len(words),
            )
        )
    return Corpus.from_sentences(sents, name=name, split=split)


@pytest.fixture(scope="module")
def pos_parts(tmp_path_factory):
    cache = tmp_path_factory.mktemp("stores")
    enc = LayerKEncoder()
    train_vocab = VOCAB[:50]  # test also draws w50..w59, never seen in training
    corpora = {
        "train": tagged_corpus("synth", "train", 80, train_vocab, 1),
        "dev": tagged_corpus("synth", "dev", 20, train_vocab, 2),
        "test": tagged_corpus("synth", "test", 40, VOCAB, 3),
    }
    return {s: Part("synth", s, extract(enc, c, cache_dir=cache, progress=False)) for s, c in corpora.items()}


@pytest.fixture(scope="module")
def pos_out(pos_parts):
    p = pos_parts
    return tagging_probes("upos", "fake", p["train"], p["dev"], [p["test"]], column_labels("upos"), SETTINGS)


def frame(rows) -> pd.DataFrame:
    return pd.DataFrame(rows)


def test_only_the_informative_layer_scores(pos_out):
    df = frame(pos_out.rows)
    acc = df[df.metric == "accuracy"].set_index("layer")["value"]
    per_layer = acc[["0", "1", "2"]]
    assert per_layer.idxmax() == str(K), per_layer
    assert per_layer[str(K)] > 0.97  # the tag code is linearly separable (noise 0.05 << 1)
    # noise layers cannot beat guessing much: the majority tag is 40 % of tokens
    assert per_layer.drop(str(K)).max() < 0.6, per_layer
    assert acc["mix"] > 0.95 and acc["concat"] > 0.95


def test_mix_weights_concentrate_on_the_informative_layer(pos_out):
    w = frame(pos_out.tables["mix_weights"]).set_index("layer")["weight"]
    assert w.sum() == pytest.approx(1.0, abs=1e-9)  # softmax-normalised
    assert w.idxmax() == str(K) and w[str(K)] > 0.5, w
    assert set(frame(pos_out.tables["mix_weights"])["refit"]) == {0}  # mix_refits = 0: only the fit on all data


def test_mix_refits_add_one_weight_row_per_layer_and_refit(pos_parts):
    """mix_refits = 2: the all-data fit (refit 0, the same weights as without refits) plus two bootstrap
    refits; only layer K carries the tag, so every refit also puts most weight on it."""
    p = pos_parts
    settings = replace(SETTINGS, mix_refits=2)
    out = tagging_probes("upos", "fake", p["train"], p["dev"], [p["test"]], column_labels("upos"), settings)
    w = frame(out.tables["mix_weights"])
    assert sorted(w.groupby("refit")["layer"].apply(list).items()) == [(r, ["0", "1", "2"]) for r in (0, 1, 2)]
    base = tagging_probes("upos", "fake", p["train"], p["dev"], [p["test"]], column_labels("upos"), SETTINGS)
    assert w[w.refit == 0]["weight"].tolist() == frame(base.tables["mix_weights"])["weight"].tolist()
    for _, g in w.groupby("refit"):
        assert g["weight"].sum() == pytest.approx(1.0, abs=1e-9)
        assert g.set_index("layer")["weight"].idxmax() == str(K)
    assert w[w.refit == 1]["weight"].tolist() != w[w.refit == 2]["weight"].tolist()  # different resamples


def test_rows_are_fractions_with_cis_and_selectivity_is_the_difference(pos_out):
    df = frame(pos_out.rows)
    assert ((df.value >= 0) & (df.value <= 1))[df.metric != "selectivity"].all()
    assert ((df.ci_low <= df.value) & (df.value <= df.ci_high)).all()
    assert (df.ci_high > df.ci_low).any()  # real intervals, not points
    for layer in ("0", "1", "2"):
        rows = df[df.layer == layer]
        acc = rows[rows.metric == "accuracy"].value.item()
        ctrl = rows[rows.metric == "control-accuracy"].set_index("seed").value
        sel = rows[rows.metric == "selectivity"].set_index("seed").value
        assert list(ctrl.index) == list(SETTINGS.seeds) == list(sel.index)  # one control task per seed
        for seed in SETTINGS.seeds:
            assert sel[seed] == acc - ctrl[seed]  # exactly, per row
    # the deterministic L-BFGS probe is fit once: one accuracy row per layer, carrying the first seed
    assert (df[df.metric == "accuracy"].seed == SETTINGS.seeds[0]).all()
    # a one-hot tag code cannot memorise random per-type labels; the noise layers cannot do either task
    sel = df[(df.metric == "selectivity") & (df.layer == str(K))].value
    assert sel.min() > 0.4, sel


def test_oov_tokens_are_counted(pos_parts, pos_out):
    df = frame(pos_out.rows)
    oov = df[df.metric == "oov-rate"]
    tokens = pos_parts["test"].store.tokens
    expected = tokens.word.isin(LayerKEncoder.oov_words).mean()
    assert 0 < expected < 0.1
    assert set(oov.layer) == {"0", "1", "2"} and np.allclose(oov.value, expected)


def test_per_tag_accuracy_matches_the_overall_accuracy(pos_parts, pos_out):
    pt = frame(pos_out.tables["per_tag"])
    df = frame(pos_out.rows)
    tokens = pos_parts["test"].store.tokens
    counts = Counter(tokens.upos)
    for layer, g in pt.groupby("layer"):
        assert dict(zip(g.tag, g.n)) == dict(counts)
        overall = df[(df.layer == layer) & (df.metric == "accuracy")].value.item()
        assert (g.n * g.accuracy).sum() / g.n.sum() == pytest.approx(overall, abs=1e-12)


def test_baselines_equal_hand_computed_fractions(pos_parts):
    p = pos_parts
    out = tagging_baselines("upos", p["train"], p["dev"], [p["test"]], column_labels("upos"), SETTINGS)
    got = frame(out.rows).set_index("layer")["value"]
    train_tags = p["train"].store.tokens.upos
    test = p["test"].store.tokens
    majority = Counter(train_tags).most_common(1)[0][0]
    assert majority == "NOUN"
    assert got["majority"] == pytest.approx((test.upos == majority).mean(), abs=1e-15)
    # each word has one tag, so the most frequent tag is right for every word seen in training; unseen
    # words (w50..w59, never in the training vocabulary) get the majority tag
    seen = set(p["train"].store.tokens.word)
    expected = np.where(test.word.isin(seen), True, test.upos == majority).mean()
    assert (~test.word.isin(seen)).any()
    assert got["most-frequent-tag"] == pytest.approx(expected, abs=1e-15)
    assert set(frame(out.rows).encoder) == {"baseline"}


def test_without_dev_every_tenth_training_sentence_is_held_out(pos_parts):
    p = pos_parts
    settings = ProbeSettings(Cs=(1.0,), max_iter=20, seeds=(0,), n_boot=20, control=False, mix=False, concat=False)
    out = tagging_probes("upos", "fake", p["train"], None, [p["test"]], column_labels("upos"), settings)
    note = out.probes[0]
    offsets = p["train"].store.offsets
    dev_tokens = sum(offsets[i + 1] - offsets[i] for i in range(DEV_EVERY - 1, len(offsets) - 1, DEV_EVERY))
    assert note["n_dev"] == dev_tokens and note["n_train"] + note["n_dev"] == len(p["train"].store)
    rows = np.arange(len(p["train"].store))
    train, dev = holdout_dev(p["train"].store, rows)
    assert len(dev) == dev_tokens and not set(train) & set(dev)
    # the training and dev items are taken by store row: a row that is no item of the part is refused
    # (searchsorted alone would hand it the next item's label)
    labelled = items(p["train"], column_labels("upos"), "upos")
    assert labelled.take(labelled.rows[[2, 0]]).y.tolist() == labelled.y[[2, 0]].tolist()
    with pytest.raises(TaskError, match=f"store row {len(p['train'].store)} is not one of these items' rows"):
        labelled.take(np.array([labelled.rows[0], len(p["train"].store)]))


def test_adam_probes_are_fit_once_per_seed(pos_parts):
    p = pos_parts
    settings = ProbeSettings(Cs=(1.0,), max_iter=5, solver="adam", seeds=(0, 1), n_boot=20, mix=False, concat=False)
    out = tagging_probes("upos", "fake", p["train"], p["dev"], [p["test"]], column_labels("upos"), settings)
    df = frame(out.rows)
    acc = df[(df.metric == "accuracy") & (df.layer == str(K))].set_index("seed").value
    assert sorted(acc.index) == [0, 1] and (acc > 0.9).all()  # stochastic training: one probe per seed
    sel = df[(df.metric == "selectivity") & (df.layer == str(K))].set_index("seed").value
    ctrl = df[(df.metric == "control-accuracy") & (df.layer == str(K))].set_index("seed").value
    for seed in (0, 1):  # each seed's selectivity uses that seed's probe
        assert sel[seed] == acc[seed] - ctrl[seed]


def test_no_labelled_tokens_or_one_class_is_a_clear_error(pos_parts):
    p = pos_parts
    with pytest.raises(TaskError, match=r"task 'xpos': synth/train has no labelled tokens .*'xpos'"):
        tagging_probes("xpos", "fake", p["train"], p["dev"], [p["test"]], column_labels("xpos"), SETTINGS)

    def only_nouns(tokens):
        return np.where(tokens["upos"] == "NOUN", "NOUN", "")

    with pytest.raises(TaskError, match=r"task 'nouns': the training items of synth/train all have the label 'NOUN'"):
        tagging_probes("nouns", "fake", p["train"], p["dev"], [p["test"]], only_nouns, SETTINGS)


# ----------------------------------------------------------------------------- word sense

INV = inventory("bundled")
BANK = INV.senses("bank", "n")
RIVER_BANK, MONEY_BANK = "bank%1:17:01::", "bank%1:14:00::"  # sloping land (noun.object); institution (noun.group)


class ContextEncoder:
    """Layer 0: a vector per word type; layer 1: the vector of the previous word (context only)."""

    name = "ctx"
    layer_names = ["0", "1"]
    dim = 6
    fingerprint = hashlib.sha256(b"context-encoder").hexdigest()

    def encode(self, sentences):
        out = []
        for words in sentences:
            word_vecs = np.stack([_rng("w", w).standard_normal(self.dim) for w in words])
            prev = np.stack(
                [_rng("w", words[i - 1] if i else "<s>").standard_normal(self.dim) for i in range(len(words))]
            )
            out.append(np.stack([word_vecs, prev]).astype(np.float32))
        return out

    def oov_mask(self, words):
        return np.zeros(len(words), bool)


def sense_corpus(split: str, pattern: list[str]) -> Corpus:
    """One sentence per entry: "the river bank ." (river sense) or "the money bank ." (money sense)."""
    sents = []
    for i, kind in enumerate(pattern):
        key = RIVER_BANK if kind == "river" else MONEY_BANK
        words = ["the", kind, "bank", "."]
        sents.append(
            Sentence(
                id=f"{split}{i}",
                doc_id="d0",
                words=words,
                upos=["DET", "NOUN", "NOUN", "."],
                lemmas=["the", kind, "bank", "."],
                senses=[(), (), (key,), ()],
                instance_ids=[None, None, f"{split}{i}.t0", None],
            )
        )
    return Corpus.from_sentences(sents, name="senses", split=split)


@pytest.fixture(scope="module")
def sense_parts(tmp_path_factory):
    cache = tmp_path_factory.mktemp("sense-stores")
    enc = ContextEncoder()
    train = sense_corpus("train", ["money"] * 6 + ["river"] * 4)
    test = sense_corpus("test", ["river"] * 7 + ["money"] * 3)
    return {
        s: Part("senses", s, extract(enc, c, cache_dir=cache, progress=False))
        for s, c in (("train", train), ("test", test))
    }


def test_bank_senses_are_in_the_bundled_inventory():
    assert RIVER_BANK in BANK and MONEY_BANK in BANK
    assert INV.lexname(RIVER_BANK) == "noun.object" and INV.lexname(MONEY_BANK) == "noun.group"


def test_1nn_reads_the_sense_from_context(sense_parts):
    p = sense_parts
    out = wsd_1nn("wsd-1nn", "ctx", p["train"], [p["test"]], SETTINGS, inventory=INV)
    rows = frame(out.rows)
    f1 = rows[rows.metric == "f1"].set_index("layer")["value"]
    assert f1["1"] == 1.0  # the previous word separates the senses perfectly
    # layer 0 is the same vector for every "bank": both centroids tie, and ties go to WordNet order
    first_seen = next(k for k in BANK if k in (RIVER_BANK, MONEY_BANK))
    assert f1["0"] == pytest.approx((7 if first_seen == RIVER_BANK else 3) / 10)
    # plus the best layer's margin over the next: layer 1 (F1 1.0) over layer 0, paired by instance
    margin = rows[rows.metric == "best-layer-margin"]
    assert margin.layer.tolist() == ["1"] and margin.value.item() == pytest.approx(1.0 - f1["0"])
    assert set(rows.metric) == {"f1", "best-layer-margin"}


def test_wsd_baselines_equal_hand_computed_f1(sense_parts):
    p = sense_parts
    out = wsd_baselines("wsd-1nn", p["train"], [p["test"]], SETTINGS, inventory=INV)
    f1 = frame(out.rows).set_index("layer")["value"]
    # SemCor MFS: money (6 of 10 training instances), right on 3 of 10 test instances
    assert f1["semcor-mfs"] == pytest.approx(0.3)
    # WordNet first sense of bank (n) is the sloping-land sense (river): 7 of 10
    assert BANK[0] == RIVER_BANK and f1["wn-first-sense"] == pytest.approx(0.7)


def test_supersense_labels_are_lexnames_of_the_first_gold_key(sense_parts):
    tokens = sense_parts["test"].store.tokens
    labels = supersense_labels(INV)(tokens)
    expected = [
        ("noun.object" if w == "river" else "noun.group") if s else ""
        for w, s in zip(tokens.word.shift(1, fill_value=""), tokens.sense)
    ]
    assert labels.tolist() == expected


def test_supersense_probe_on_context_layer(sense_parts):
    p = sense_parts
    settings = ProbeSettings(Cs=(10.0,), max_iter=50, seeds=(0,), n_boot=50, mix=False, concat=False)
    out = tagging_probes("supersense", "ctx", p["train"], None, [p["test"]], supersense_labels(INV), settings)
    acc = frame(out.rows).query("metric == 'accuracy'").set_index("layer")["value"]
    assert acc["1"] == 1.0  # the previous word gives the supersense
    assert acc["0"] == pytest.approx(0.3)  # one vector for all "bank"s: the training majority (group), 3 of 10


# ----------------------------------------------------------------------------- learning curves (issue 31)

CURVE = CurveOptions((0.1, 0.5, 1.0), 2)


def test_nested_prefixes_keep_int_f_n_sentences_of_one_seeded_order():
    from probing.tasks.curves import nested_prefixes

    groups = np.repeat([f"s{i}" for i in range(40)], 3)  # 40 sentences of 3 items
    points = nested_prefixes(groups, [0.5, 0.01, 0.1, 0.11, 1.0], seed=0)
    # 0.01 keeps int(0.4) = 0 sentences and 0.11 no more than 0.1 (int(4.4) = 4): both left out
    assert [(p.fraction, p.n_sentences) for p in points] == [(0.1, 4), (0.5, 20), (1.0, 40)]
    assert [len(p.items) for p in points] == [12, 60, 120]
    for small, large in zip(points, points[1:]):
        assert set(small.items) <= set(large.items)
    again = nested_prefixes(groups, [0.1], seed=0)[0].items
    other = nested_prefixes(groups, [0.1], seed=1)[0].items
    assert np.array_equal(again, points[0].items) and not np.array_equal(other, points[0].items)
    assert len(set(groups[points[0].items])) == 4  # whole sentences


def test_a_learning_curve_ends_where_the_full_task_is(pos_parts):
    p = pos_parts
    out = tagging_probes(
        "upos", "fake", p["train"], p["dev"], [p["test"]], column_labels("upos"), SETTINGS, curve=CURVE
    )
    lc = frame(out.tables["learning_curve"])
    # 3 layers x 3 sizes x 2 sentence orders, on one test part; 80 training sentences give 8, 40, 80
    assert len(lc) == 18 and sorted(set(lc.n_train_sentences)) == [8, 40, 80]
    assert set(lc.seed) == {0, 1} and set(lc.metric) == {"accuracy"}
    assert (lc.ci_low <= lc.value).all() and (lc.value <= lc.ci_high).all()
    # the full set is the same data in any order: the task's own row (reused, not refitted) ...
    full = frame(out.rows).query("metric == 'accuracy'").set_index("layer")["value"]
    for (layer, seed), v in lc[lc.train_fraction == 1.0].set_index(["layer", "seed"])["value"].items():
        assert v == full[layer], (layer, seed)
    # ... which is what a refit on every training item gives
    from probing.tasks.labels import items, train_dev
    from probing.tasks.tagging import _probe_curve

    tr, dv = train_dev(p["train"], p["dev"], column_labels("upos"), "upos")
    test_items = [(p["test"], items(p["test"], column_labels("upos"), "upos"))]
    X = [p["train"].store.layer("0", rows=tr.rows), p["dev"].store.layer("0", rows=dv.rows)]
    X_te = [p["test"].store.layer("0", rows=test_items[0][1].rows)]
    refit = _probe_curve(X[0], X[1], X_te, tr, dv, test_items, SETTINGS)(np.arange(len(tr.rows)))
    assert refit[0][1].mean() == full["0"]
    # the tag code of layer K is learnt from 8 sentences already; the noise layers are far below it
    small = lc[lc.n_train_sentences == 8].groupby("layer")["value"].mean()
    assert small[str(K)] > 0.95 and small.drop(str(K)).max() < 0.7


def test_trained_baselines_get_curves_too(pos_parts):
    p = pos_parts
    out = tagging_baselines("upos", p["train"], p["dev"], [p["test"]], column_labels("upos"), SETTINGS, curve=CURVE)
    lc = frame(out.tables["learning_curve"])
    assert set(lc.layer) == {"majority", "most-frequent-tag"} and set(lc.encoder) == {"baseline"}
    full = frame(out.rows).set_index("layer")["value"]
    end = lc[(lc.train_fraction == 1.0) & (lc.seed == 0)].set_index("layer")["value"]
    assert end.to_dict() == full.to_dict()


def test_wsd_curves_end_at_the_full_f1(sense_parts):
    p = sense_parts
    out = wsd_1nn("wsd-1nn", "ctx", p["train"], [p["test"]], SETTINGS, inventory=INV, curve=CURVE)
    lc = frame(out.tables["learning_curve"])
    f1 = frame(out.rows).query("metric == 'f1'").set_index("layer")["value"]
    end = lc[lc.train_fraction == 1.0].groupby("layer")["value"].agg(["min", "max"])
    assert (end["min"] == end["max"]).all() and end["min"].to_dict() == f1.to_dict()
    # 10 training sentences: 0.1 keeps 1 sentence (one sense seen), 0.5 keeps 5
    assert sorted(set(lc.n_train_sentences)) == [1, 5, 10]
    base = frame(
        wsd_baselines("wsd-1nn", p["train"], [p["test"]], SETTINGS, inventory=INV, curve=CURVE).tables["learning_curve"]
    )
    assert set(base.layer) == {"semcor-mfs"}  # the WordNet first sense learns nothing from SemCor


def test_learning_curve_keys_are_checked():
    from pathlib import Path

    from probing._toml import ExperimentError, Table
    from probing.tasks.curves import parse_learning_curve

    def parse(data):
        return parse_learning_curve(Table(data, "tasks[0]", "exp.toml", Path(".")))

    assert parse({}) is None
    assert parse({"learning_curve": [1, 0.1]}) == CurveOptions((0.1, 1.0), 1)
    for bad in ([0.0, 0.5], [0.5, 1.5], [], [0.5, 0.5], "0.5", [True]):
        with pytest.raises(ExperimentError, match=r"exp.toml: tasks\[0\].learning_curve: expected a non-empty list"):
            parse({"learning_curve": bad})
    with pytest.raises(ExperimentError, match=r"tasks\[0\].learning_curve_seeds: expected learning_curve beside it"):
        parse({"learning_curve_seeds": 2})


def test_data_efficiency_reads_ratios_off_the_curves():
    from probing.results.efficiency import data_efficiency

    sizes = [10, 100, 1000]
    rows = []
    for layer, shift in (("1", 1.0), ("0", 10.0)):
        for f, n in zip((0.01, 0.1, 1.0), sizes):
            v = 0.5 + 0.1 * np.log10(n / shift)
            rows.append(
                dict(task="upos", dataset="d", split="test", encoder="elmo", layer=layer, train_fraction=f,
                     n_train_sentences=n, metric="accuracy", value=v, ci_low=v, ci_high=v, seed=0)
            )  # fmt: skip
    eff = data_efficiency(pd.DataFrame(rows), at=(0.01, 0.1, 1.0)).set_index(["layer", "at_fraction"])
    # layer 0 is layer 1's curve moved right tenfold: it needs 10x the sentences for layer 1's 1 % and 10 %
    # scores (the latter exactly at its full set), and never reaches layer 1's full-set score
    assert eff.loc[("1", 0.01), "ratio"] == pytest.approx(10.0)
    assert eff.loc[("1", 0.1), "ratio"] == pytest.approx(10.0)
    assert eff.loc[("1", 1.0), "ratio"] == np.inf
    assert eff.loc[("0", 0.01), "ratio"] == pytest.approx(1.0)  # bounded by layer 1's first size
    assert eff.loc[("1", 0.01), "reference_layer"] == "0" and set(eff.measure) == {"ratio"}


def test_mdl_adds_sdl_and_esc_rows(pos_parts):
    p = pos_parts
    out = tagging_probes(
        "upos", "fake", p["train"], p["dev"], [p["test"]], column_labels("upos"), SETTINGS,
        mdl=MDLOptions("linear", 1, epsilon=0.5),
    )  # fmt: skip
    eff = frame(out.tables["data_efficiency"])
    assert set(eff.measure) == {"sdl_kbits", "esc_sentences"} and set(eff.epsilon) == {0.5}
    sdl = eff[eff.measure == "sdl_kbits"].set_index("layer")["value"]
    code = frame(out.rows).query("metric == 'codelength_kbits'").set_index("layer")["value"]
    # SDL only counts the loss above epsilon: below the codelength, and smallest for the layer holding the tags
    assert (sdl <= code).all() and sdl.idxmin() == str(K)
