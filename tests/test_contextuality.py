"""The contextuality statistics (Ethayarajh 2019) against slow straightforward references, and the
``contextuality`` task kind on a store whose answers are known by construction."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence

import numpy as np
import pytest

from probing._toml import ExperimentError
from probing.analysis.contextuality import (
    balanced_subset,
    best_threshold,
    intra_sentence_similarity,
    max_explainable_variance,
    pair_cosines,
    random_pairs,
    self_similarity,
    threshold_predict,
    word_groups,
)
from probing.corpora import Corpus, Sentence
from probing.errors import InputError
from probing.store import extract
from probing.tasks.common import Job, Part, ProbeSettings, TaskError
from probing.tasks.contextuality import CONTEXTUALITY, ContextualityOptions, layer_statistics
from probing.tasks.registry import TASK_KINDS
from probing.wordnet import BundledInventory

RNG = np.random.default_rng(0)


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def ref_self_similarity(x: np.ndarray, sentences: Sequence) -> float:
    """Ethayarajh's definition, pair by pair: the mean cosine over ordered pairs in different sentences."""
    sims = [cos(x[i], x[j]) for i, j in itertools.permutations(range(len(x)), 2) if sentences[i] != sentences[j]]
    return float(np.mean(sims))


def ref_mev(x: np.ndarray) -> float:
    s = np.linalg.svd(x, compute_uv=False)
    return float(s[0] ** 2 / np.sum(s**2))


def test_self_similarity_matches_the_pairwise_reference():
    x = RNG.normal(size=(9, 6))
    sentences = [0, 0, 1, 2, 2, 2, 3, 4, 4]  # pairs within sentences 0, 2 and 4 are left out
    assert self_similarity(x, np.array(sentences)) == pytest.approx(ref_self_similarity(x, sentences), abs=1e-12)


def test_self_similarity_known_values():
    v = RNG.normal(size=5)
    # one vector in every context: cosine 1; scaled copies too (cosine ignores length)
    assert self_similarity(np.stack([v, 2 * v, 0.5 * v]), np.arange(3)) == pytest.approx(1.0)
    # orthogonal occurrences: cosine 0
    assert self_similarity(np.eye(4), np.arange(4)) == pytest.approx(0.0)
    # all in one sentence: no pair in different contexts
    assert np.isnan(self_similarity(np.eye(3), np.zeros(3)))


def test_intra_sentence_similarity_matches_the_reference():
    x = RNG.normal(size=(7, 4))
    mean = x.mean(axis=0)
    expected = np.mean([cos(row, mean) for row in x])
    assert intra_sentence_similarity(x) == pytest.approx(expected, abs=1e-12)
    # identical words: every word is its sentence's mean
    assert intra_sentence_similarity(np.tile(RNG.normal(size=3), (4, 1))) == pytest.approx(1.0)


@pytest.mark.parametrize("shape", [(5, 8), (12, 3)])  # fewer and more rows than columns (both Gram forms)
def test_explained_variance_is_the_first_singular_values_share(shape):
    x = RNG.normal(size=shape) + 2.0  # uncentred: the offset must count
    assert max_explainable_variance(x) == pytest.approx(ref_mev(x), abs=1e-12)


def test_explained_variance_known_values():
    v = RNG.normal(size=6)
    assert max_explainable_variance(np.stack([v, -3 * v, 2 * v])) == pytest.approx(1.0)  # rank one
    assert max_explainable_variance(np.eye(4)) == pytest.approx(0.25)  # n orthonormal rows: 1/n
    assert max_explainable_variance(np.zeros((3, 2))) == 0.0


def test_random_pairs_are_in_different_sentences_and_seeded():
    sentence = np.repeat(np.arange(4), [1, 5, 2, 3])
    a, b = random_pairs(sentence, 500, seed=3)
    assert len(a) == len(b) == 500 and np.all(sentence[a] != sentence[b])
    a2, b2 = random_pairs(sentence, 500, seed=3)
    assert np.array_equal(a, a2) and np.array_equal(b, b2)
    x = RNG.normal(size=(11, 3))
    assert pair_cosines(x, a[:3], b[:3]) == pytest.approx([cos(x[i], x[j]) for i, j in zip(a[:3], b[:3])])
    with pytest.raises(ValueError, match="two sentences"):
        random_pairs(np.zeros(4), 2, 0)


def test_word_groups_count_sentences_not_tokens():
    words = ["a", "a", "a", "b", "b", "a"]
    sentences = np.array([0, 0, 0, 1, 2, 1])
    # "a" has 4 tokens in 2 sentences, "b" 2 tokens in 2 sentences
    assert {w: r.tolist() for w, r in word_groups(words, sentences, 2).items()} == {"a": [0, 1, 2, 5], "b": [3, 4]}
    assert word_groups(words, sentences, 3) == {}


def test_best_threshold_is_the_best_by_brute_force():
    feature = RNG.normal(size=40)
    label = feature + RNG.normal(scale=0.8, size=40) < 0.1  # low values lean positive: "below"
    t, below = best_threshold(feature, label)
    acc = np.mean(threshold_predict(feature, t, below) == label)
    brute = max(
        max(np.mean((feature > c) == label), np.mean((feature <= c) == label)) for c in np.concatenate([feature, [-99]])
    )
    assert acc == pytest.approx(brute) and below


def test_balanced_subset_draws_the_smaller_class_size():
    label = np.array([True] * 7 + [False] * 3)
    idx = balanced_subset(label, seed=0)
    assert label[idx].sum() == 3 and (~label[idx]).sum() == 3 and np.all(np.diff(idx) > 0)
    assert balanced_subset(np.ones(4, dtype=bool), 0).size == 0


# --- the task kind on a store -----------------------------------------------------------------------------

MONO = ["oxygen", "river", "advice", "airport"]  # one WordNet noun sense each (bundled inventory)
POLY = ["bank", "cell", "line", "money"]  # 10, 7, 30 and 3 noun senses
FILLER = ["the", "near", "by", "of", "a", "with"]
INV = BundledInventory()


def vec(word: str, dim: int = 8) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "little")
    return np.random.default_rng(seed).normal(size=dim)


class SenseContextEncoder:
    """Layer 0: one vector per word type (static). Layer 1: the same, plus the mean of the sentence's other
    words for the polysemous nouns only, so their occurrences spread with context and the others do not."""

    name = "sense-context"
    fingerprint = "sense-context/1"
    layer_names = ["0", "1"]
    dim = 8

    def encode(self, sentences):
        out = []
        for words in sentences:
            x0 = np.stack([vec(w) for w in words])
            x1 = x0.copy()
            for i, w in enumerate(words):
                if w in POLY:
                    x1[i] += 2.0 * np.delete(x0, i, axis=0).mean(axis=0)
            out.append(np.stack([x0, x1]).astype(np.float32))
        return out

    def oov_mask(self, words):
        return np.zeros(len(words), dtype=bool)


def corpus(split: str, n: int, seed: int) -> Corpus:
    rng = np.random.default_rng(seed)
    sents = []
    for i in range(n):
        nouns = [str(w) for w in rng.choice(MONO + POLY, size=2, replace=False)]
        fill = [str(w) for w in rng.choice(FILLER, size=3)]
        words = [fill[0], nouns[0], fill[1], fill[2], nouns[1]]
        sents.append(
            Sentence(
                id=f"{split}{i}",
                doc_id="d0",
                words=words,
                upos=["DET", "NOUN", "ADP", "DET", "NOUN"],
                lemmas=words,
            )
        )
    return Corpus.from_sentences(sents, name="ctx", split=split)


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    cache = tmp_path_factory.mktemp("ctx-stores")
    enc = SenseContextEncoder()
    return {
        s: Part("ctx", s, extract(enc, corpus(s, n, seed), cache_dir=cache, progress=False))
        for s, n, seed in (("train", 40, 1), ("test", 30, 2))
    }


SETTINGS = ProbeSettings(seeds=(0,), n_boot=50)


def run(parts, **options) -> list[dict]:
    opts = {**vars(ContextualityOptions()), **options}
    job = Job(
        "ctx",
        "sense-context",
        parts["train"],
        None,
        [parts["test"]],
        SETTINGS,
        options=opts,
        baselines=("log-frequency",),
        inventory=INV,
    )
    return CONTEXTUALITY.run(job).rows


@pytest.fixture(scope="module")
def rows(parts):
    return run(parts)


def value(rows, encoder, layer, metric) -> float:
    (v,) = [r["value"] for r in rows if (r["encoder"], r["layer"], r["metric"]) == (encoder, layer, metric)]
    return v


def test_the_kind_is_registered_with_its_metrics():
    kind = TASK_KINDS["contextuality"]
    assert kind is CONTEXTUALITY and kind.headline == "self-similarity"
    assert {m.name for m in kind.metrics} == {
        "self-similarity",
        "self-similarity-adjusted",
        "intra-sentence-similarity",
        "intra-sentence-similarity-adjusted",
        "explained-variance",
        "explained-variance-adjusted",
        "mono-poly-accuracy",
    }


def test_a_static_layer_has_self_similarity_one_and_all_variance_explained(rows):
    # layer 0 gives every occurrence of a word the same vector
    assert value(rows, "sense-context", "0", "self-similarity") == pytest.approx(1.0, abs=1e-3)
    assert value(rows, "sense-context", "0", "explained-variance") == pytest.approx(1.0, abs=1e-3)
    # layer 1 spreads the polysemous nouns with their context: lower on both
    assert value(rows, "sense-context", "1", "self-similarity") < 0.99
    assert value(rows, "sense-context", "1", "explained-variance") < 0.99


def test_rows_equal_the_reference_on_the_stored_vectors(rows, parts):
    """Every geometry row recomputed from the store with the slow references: the words are the 8 nouns and
    6 fillers (each in 5+ of 30 sentences), the baselines are the kind's own draws."""
    store = parts["test"].store
    tokens = store.tokens
    sentence = np.repeat(np.arange(len(store.offsets) - 1), np.diff(store.offsets))
    from probing.tasks.contextuality import _words

    words = _words("ctx", parts["test"], ContextualityOptions(), 0)
    assert set(words.groups) <= set(MONO + POLY + FILLER) and len(words.groups) >= 12
    for layer in ("0", "1"):
        x = np.asarray(store.layer(layer), dtype=np.float64)
        stats = layer_statistics(store.layer(layer), words)
        base = np.mean([cos(x[i], x[j]) for i, j in zip(*words.pairs)])
        assert stats["cosine-baseline"] == pytest.approx(base, abs=1e-9)
        selfsim = [
            ref_self_similarity(x[(tokens.word == w).to_numpy()], sentence[(tokens.word == w).to_numpy()])
            for w in words.groups
        ]
        assert value(rows, "sense-context", layer, "self-similarity") == pytest.approx(np.mean(selfsim), abs=1e-9)
        assert value(rows, "sense-context", layer, "self-similarity-adjusted") == pytest.approx(
            np.mean(selfsim) - base, abs=1e-9
        )
        mev = [ref_mev(x[(tokens.word == w).to_numpy()]) for w in words.groups]
        mev_base = [ref_mev(x[words.random_rows[w]]) for w in words.groups]
        assert value(rows, "sense-context", layer, "explained-variance") == pytest.approx(np.mean(mev), abs=1e-9)
        assert value(rows, "sense-context", layer, "explained-variance-adjusted") == pytest.approx(
            np.mean(mev) - np.mean(mev_base), abs=1e-9
        )
        offsets = store.offsets
        intra = [
            np.mean([cos(r, x[offsets[i] : offsets[i + 1]].mean(axis=0)) for r in x[offsets[i] : offsets[i + 1]]])
            for i in range(len(offsets) - 1)
        ]
        assert value(rows, "sense-context", layer, "intra-sentence-similarity") == pytest.approx(
            np.mean(intra), abs=1e-9
        )


def test_mono_poly_reads_the_spread_of_the_polysemous_words(rows):
    # layer 1: only the polysemous nouns move with context, so a self-similarity threshold separates them all;
    # layer 0: every word's self-similarity is 1, no threshold separates the balanced classes: 50 %
    assert value(rows, "sense-context", "1", "mono-poly-accuracy") == pytest.approx(1.0)
    assert value(rows, "sense-context", "0", "mono-poly-accuracy") == pytest.approx(0.5)
    # the nouns are drawn uniformly, so frequency says little: the baseline row exists and is a fraction
    assert 0.0 <= value(rows, "baseline", "log-frequency", "mono-poly-accuracy") <= 1.0


def test_every_row_has_a_ci_around_its_value(rows):
    for r in rows:
        assert r["ci_low"] <= r["value"] <= r["ci_high"], r


def test_mono_poly_off_gives_no_such_rows(parts):
    assert not [r for r in run(parts, mono_poly=False) if r["metric"] == "mono-poly-accuracy"]


def test_too_few_contexts_is_an_error_naming_the_key(parts):
    with pytest.raises(TaskError, match="min_contexts"):
        run(parts, min_contexts=1000)
    with pytest.raises(TaskError, match="min_contexts must be at least 2"):
        ContextualityOptions(min_contexts=1)


def test_the_options_are_read_from_a_task_table(tmp_path):
    from probing.experiment.spec import load_experiment

    toml = tmp_path / "e.toml"
    toml.write_text(
        '[[encoders]]\nname = "g"\nkind = "glove"\n[[tasks]]\nkind = "contextuality"\ntrain = "demo-semcor:train"\n'
        'test = ["demo-semcor:test"]\nmin_contexts = 3\nbaseline_pair = 10\n'
    )
    with pytest.raises(ExperimentError, match="closest known key: 'baseline_pairs'"):
        load_experiment(toml)
    toml.write_text(toml.read_text().replace("baseline_pair ", "baseline_pairs "))
    (task,) = load_experiment(toml).tasks
    assert task.options == {"min_contexts": 3, "baseline_pairs": 10, "mono_poly": True}


def test_the_figure_has_one_panel_per_statistic_and_a_line_per_encoder(rows):
    import pandas as pd

    from probing.figures.ladder import CONTEXTUALITY_PANELS, contextuality_figure

    fig = contextuality_figure(pd.DataFrame(rows), "ctx", "ctx", "test")
    axes = fig.axes
    assert [a.get_title() for a in axes] == [
        "self-similarity",
        "intra-sentence similarity",
        "max. explainable variance (%)",
    ]
    assert len(axes) == len(CONTEXTUALITY_PANELS)
    # one encoder with layers 0 and 1: an adjusted (solid) and a raw (dotted) line per panel, two points each
    for ax in axes:
        assert [len(line.get_xdata()) for line in ax.get_lines()] == [2, 2]
    raw = axes[0].get_lines()[1].get_ydata()
    assert raw[0] == pytest.approx(value(rows, "sense-context", "0", "self-similarity"))
    with pytest.raises(InputError, match="no rows"):
        contextuality_figure(pd.DataFrame(rows), "other", "ctx", "test")


def test_ladder_figure_draws_each_encoders_best_layer_in_ladder_order():
    import pandas as pd

    from probing.figures.ladder import best_layers, ladder_figure

    def row(encoder, layer, v):
        return dict(
            task="pos",
            dataset="d",
            split="test",
            encoder=encoder,
            layer=layer,
            metric="accuracy",
            value=v,
            ci_low=v - 0.01,
            ci_high=v + 0.01,
            intervention="",
        )

    rows = [
        row("elmo", "0", 0.80),
        row("elmo", "1", 0.95),
        row("elmo", "mix", 0.99),
        row("glove", "glove", 0.85),
        row("word2vec", "word2vec", 0.83),
        {**row("elmo", "2", 0.999), "intervention": "erase:upos:leace"},
    ]
    df = pd.DataFrame(rows)
    best = best_layers(df, "pos", "accuracy", ["word2vec", "glove", "random-elmo", "elmo"])
    # ladder order kept, encoders without rows left out; ELMo's best single layer is 1 (mix and erased rows skipped)
    assert best.encoder.tolist() == ["word2vec", "glove", "elmo"] and best.layer.tolist() == ["word2vec", "glove", "1"]
    fig = ladder_figure(df, {"pos": "accuracy"}, ["word2vec", "glove", "elmo"])
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["word2vec", "GloVe", "ELMo"]
    assert ax.lines[0].get_ydata().tolist() == pytest.approx([83.0, 85.0, 95.0])  # percent


def test_the_ladder_experiment_names_the_encoders_in_ladder_order():
    from probing.experiment.spec import load_experiment

    exp = load_experiment("ladder")
    assert [(e.name, e.kind) for e in exp.encoders] == [
        ("word2vec", "word2vec"),
        ("fasttext", "fasttext"),
        ("glove", "glove"),
        ("random-elmo", "random-elmo"),
        ("elmo", "elmo"),
        ("minilm", "transformer"),
    ]
    assert [t.kind for t in exp.tasks] == ["tagging", "supersense", "wsd-1nn", "structural-distance", "contextuality"]
    assert exp.encoders[0].options.vectors == "twin" and exp.encoders[5].options.pooling == "first"


def test_probing_run_and_report_draw_the_contextuality_figure(tmp_path, isolated_cache):
    """End to end on the bundled SemCor slice (first 60 sentences) with GloVe: the runner gives the kind its
    stores and WordNet, the report draws the kind's figure (figures/contextuality_<task>)."""
    from probing import cli

    toml = tmp_path / "ctx.toml"
    toml.write_text(
        "[experiment]\nseeds = [0]\nbootstrap = 50\nmax_sentences = 60\n"
        '[[encoders]]\nname = "glove"\nkind = "glove"\n'
        '[[tasks]]\nname = "geometry"\nkind = "contextuality"\ntrain = "demo-semcor:train"\ntest = ["demo-semcor:test"]\n'
        "min_contexts = 3\n"
    )
    out = tmp_path / "out"
    assert cli.main(["run", str(toml), "--out", str(out), "--quiet"]) == 0
    import pandas as pd

    res = pd.read_csv(out / "results.csv")
    glove = res[(res.encoder == "glove") & (res.metric == "self-similarity")]
    assert glove.value.tolist() == pytest.approx([1.0], abs=1e-3)  # static vectors: every occurrence the same
    assert "log-frequency" in set(res.layer)
    assert cli.main(["report", str(out)]) == 0
    assert sorted(p.name for p in (out / "figures").glob("contextuality_geometry*"))


def weighted_corpus(split: str, n: int) -> Corpus:
    """Sentence i holds POLY[i % 4] and (MONO + POLY)[i % 8]: each polysemous noun occurs 3n/8 times, each
    monosemous one n/8 times, so frequency alone separates them."""
    sents = []
    for i in range(n):
        words = ["the", POLY[i % 4], "of", "the", (MONO + POLY)[i % 8]]
        sents.append(
            Sentence(
                id=f"{split}{i}", doc_id="d0", words=words, upos=["DET", "NOUN", "ADP", "DET", "NOUN"], lemmas=words
            )
        )
    return Corpus.from_sentences(sents, name="weighted", split=split)


def test_the_log_frequency_baseline_reads_frequency(tmp_path):
    enc = SenseContextEncoder()
    parts = {
        s: Part("weighted", s, extract(enc, weighted_corpus(s, n), cache_dir=tmp_path, progress=False))
        for s, n in (("train", 40), ("test", 56))
    }
    rows = run(parts, min_contexts=5)
    # polysemous nouns: 15 + 21 occurrences over both parts, monosemous: 5 + 7; any threshold between separates
    assert value(rows, "baseline", "log-frequency", "mono-poly-accuracy") == pytest.approx(1.0)


def test_the_new_kinds_say_which_package_they_need(monkeypatch, tmp_path):
    """Without gensim or transformers installed (simulated), building the kinds is an InputError naming the extra."""
    import importlib.util

    from probing.encoders import ENCODER_KINDS
    from probing.encoders.static_trained import train_static

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name in ("gensim", "transformers") else real(name, *a)
    )
    with pytest.raises(InputError, match=r"elmo-probing\[static\]"):
        ENCODER_KINDS["word2vec"].encoder(ENCODER_KINDS["word2vec"].options(str(tmp_path)))
    with pytest.raises(InputError, match=r"elmo-probing\[static\]"):
        train_static("word2vec", tmp_path / "t.txt", tmp_path / "out")
    with pytest.raises(InputError, match=r"elmo-probing\[transformer\]"):
        ENCODER_KINDS["transformer"].encoder(ENCODER_KINDS["transformer"].options(str(tmp_path)))
