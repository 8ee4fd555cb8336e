"""Tests for probing.views.neighbors: exact chunked cosine search, type and occurrence neighbours, Table 4."""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from probing.glove import UnknownWordError, Vectors
from probing.views.neighbors import (
    PAPER_TABLE4_SOURCES,
    copies_of,
    cosine_topk,
    format_table,
    locate,
    neighbors,
    normalise_text,
    occurrence_neighbors,
    sentence_text,
    table4,
    type_neighbors,
)

FIXTURES = Path(__file__).parent / "fixtures" / "glove"
TOKEN_COLUMNS = ["sentence_id", "doc_id", "position", "word", "upos", "xpos", "lemma", "sense", "instance_id", "oov"]


# -- contract-following stand-ins ----------------------------------------------------------------


class FakeEncoder:
    """Layer 0: a fixed random vector per word form; layer l adds l x the mean of the other words."""

    name, fingerprint, layer_names, dim = "fake", "fake-encoder", ["0", "1", "2"], 8

    def word_vector(self, word: str) -> np.ndarray:
        return np.random.default_rng(zlib.crc32(word.encode())).standard_normal(self.dim).astype(np.float32)

    def encode(self, sentences):
        out = []
        for words in sentences:
            base = np.stack([self.word_vector(w) for w in words])
            context = (base.sum(axis=0) - base) / max(len(words) - 1, 1)
            out.append(np.stack([base + layer * context for layer in range(3)]).astype(np.float32))
        return out

    def oov_mask(self, words):
        return np.zeros(len(words), dtype=bool)


class FakeStore:
    """``tokens`` and ``layer(k)`` -> read-only fp16 memmap aligned with it, as DESIGN.md's Store."""

    def __init__(self, tokens: pd.DataFrame, paths: list[Path]) -> None:
        self.tokens, self._paths = tokens, paths

    def layer(self, k: int) -> np.ndarray:
        return np.load(self._paths[k], mmap_mode="r", allow_pickle=False)


SENTENCES = [
    ("Chico Ruiz made a spectacular play on Alusik 's grounder".split(), {5: "play%1:04:00::"}),
    ("the shortstop made a fine play at second base".split(), {5: "play%1:04:00::"}),
    ("they handed her a fat role in a successful play".split(), {9: "play%1:10:00::"}),
    ("the play opened on Broadway to good reviews".split(), {1: "play%1:10:00::"}),
    ("children play in the park after school".split(), {1: "play%2:33:00::"}),
    ("she will play the piano at the concert".split(), {2: "play%2:36:00::"}),
    ("a bank of the river flooded".split(), {1: "bank%1:17:01::"}),
    ("the bank raised its interest rates".split(), {1: "bank%1:14:00::"}),
]
GLOSSES = {
    "play%1:04:00::": "a deliberate coordinated movement in a game",
    "play%1:10:00::": "a dramatic work for the stage",
    "play%2:33:00::": "participate in games or sport",
}


def make_store(folder: Path, order: np.ndarray | None = None) -> FakeStore:
    """Encode SENTENCES with FakeEncoder into a store; ``order`` shuffles the token rows."""
    enc, records, blocks = FakeEncoder(), [], []
    for i, (words, senses) in enumerate(SENTENCES):
        for p, w in enumerate(words):
            records.append(
                {
                    "sentence_id": f"s{i}",
                    "doc_id": f"d{i}",
                    "position": p,
                    "word": w,
                    "upos": "",
                    "xpos": "",
                    "lemma": w.lower(),
                    "sense": senses.get(p, ""),
                    "instance_id": "",
                    "oov": False,
                }
            )
        blocks.append(enc.encode([words])[0])
    tokens = pd.DataFrame.from_records(records, columns=TOKEN_COLUMNS)
    stacked = np.concatenate(blocks, axis=1)
    if order is not None:
        tokens, stacked = tokens.iloc[order].reset_index(drop=True), stacked[:, order]
    paths = []
    for k in range(stacked.shape[0]):
        np.save(folder / f"layer{k}.npy", stacked[k].astype(np.float16), allow_pickle=False)
        paths.append(folder / f"layer{k}.npy")
    return FakeStore(tokens, paths)


def brute_force(matrix: np.ndarray, query: np.ndarray, allowed: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The reference: every cosine in float64, sorted by (cosine desc, row asc)."""
    m = np.asarray(matrix, dtype=np.float64)
    cos = m @ query / (np.linalg.norm(m, axis=1) * np.linalg.norm(query))
    ids = np.flatnonzero(allowed)
    order = np.lexsort((ids, -cos[ids]))[:k]
    return ids[order], cos[ids][order]


# -- cosine_topk ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_chunked_search_equals_brute_force(tmp_path, dtype):
    rng = np.random.default_rng(0)
    path = tmp_path / "m.npy"
    np.save(path, rng.standard_normal((1000, 16)).astype(dtype))
    matrix = np.load(path, mmap_mode="r")
    query = rng.standard_normal(16)
    for chunk in (37, 1000, 4096):  # many chunks, exactly one, one larger than the matrix
        ids, sims = cosine_topk(matrix, query, 10, chunk_rows=chunk)
        ref_ids, ref_sims = brute_force(matrix, query, np.ones(1000, bool), 10)
        np.testing.assert_array_equal(ids, ref_ids)
        np.testing.assert_allclose(sims, ref_sims, atol=1e-5)


def test_search_honours_rows_and_exclude():
    rng = np.random.default_rng(1)
    matrix = rng.standard_normal((500, 8)).astype(np.float32)
    query = rng.standard_normal(8)
    rows = np.sort(rng.choice(500, 200, replace=False))
    exclude = np.zeros(500, bool)
    exclude[rows[::3]] = True
    ids, sims = cosine_topk(matrix, query, 7, rows=rows, exclude=exclude, chunk_rows=16)
    allowed = np.zeros(500, bool)
    allowed[rows] = True
    allowed &= ~exclude
    ref_ids, ref_sims = brute_force(matrix, query, allowed, 7)
    np.testing.assert_array_equal(ids, ref_ids)
    np.testing.assert_allclose(sims, ref_sims, atol=1e-5)


def test_ties_break_by_row_and_zero_rows_are_skipped():
    # rows 1, 3 and 4 all equal the query direction (cosine 1); row 2 is zero (no cosine)
    matrix = np.array([[0, 1], [1, 0], [0, 0], [2, 0], [3, 0], [1, 1]], dtype=np.float32)
    ids, sims = cosine_topk(matrix, np.array([1.0, 0.0]), 2, chunk_rows=2)
    np.testing.assert_array_equal(ids, [1, 3])
    ids, _ = cosine_topk(matrix, np.array([1.0, 0.0]), 10, chunk_rows=2)
    assert 2 not in ids and len(ids) == 5, "the zero row is never a neighbour"


def test_search_rejects_bad_queries():
    m = np.eye(3, dtype=np.float32)
    with pytest.raises(ValueError, match="dimension 2"):
        cosine_topk(m, np.ones(2), 1)
    with pytest.raises(ValueError, match="zero"):
        cosine_topk(m, np.zeros(3), 1)


# -- type neighbours -----------------------------------------------------------------------------


@pytest.fixture()
def tiny(tmp_path, monkeypatch) -> Vectors:
    monkeypatch.setenv("PROBING_CACHE", str(tmp_path / "cache"))
    return Vectors.from_file(FIXTURES / "tiny.glove.txt", progress=False)


def test_type_neighbors_match_brute_force_and_skip_the_word(tiny):
    top = type_neighbors(tiny, "King", k=3)
    assert list(top.columns) == ["rank", "word", "cosine"]
    allowed = np.ones(len(tiny), bool)
    allowed[tiny.index_of("king")] = False
    ref_ids, ref_sims = brute_force(tiny.matrix, tiny["king"], allowed, 3)
    assert (
        top["word"].tolist() == [tiny.vocab[i] for i in ref_ids] == ["prince", "queen", "princess"]
    )  # cosines .994, .992, .986
    np.testing.assert_allclose(top["cosine"], ref_sims, atol=1e-6)
    assert top["rank"].tolist() == [1, 2, 3]


def test_type_neighbors_oov_is_a_clear_error(tiny):
    with pytest.raises(UnknownWordError, match="'zzyzx' is not in the vocabulary of tiny.glove.txt"):
        neighbors("zzyzx", vectors=tiny)


# -- occurrence neighbours -----------------------------------------------------------------------


def row_of(store: FakeStore, sentence: int, position: int) -> int:
    t = store.tokens
    return int(np.flatnonzero((t["sentence_id"] == f"s{sentence}") & (t["position"] == position))[0])


@pytest.mark.parametrize("shuffle", [False, True])
def test_occurrence_neighbors_match_brute_force(tmp_path, shuffle):
    n = sum(len(w) for w, _ in SENTENCES)
    order = np.random.default_rng(3).permutation(n) if shuffle else None
    store = make_store(tmp_path, order)
    query = row_of(store, 0, 5)  # "play" in the Chico Ruiz sentence
    got = occurrence_neighbors(store, query, layer=2, k=4, gloss=GLOSSES.__getitem__, chunk_rows=7)
    same = (store.tokens["sentence_id"] == "s0").to_numpy()
    matrix = store.layer(2)
    ref_ids, ref_sims = brute_force(matrix, np.asarray(matrix[query], np.float64), ~same, 4)
    np.testing.assert_array_equal(got["row"], ref_ids)
    np.testing.assert_allclose(got["cosine"], ref_sims, atol=1e-5)
    assert "s0" not in set(got["sentence_id"]), "the query's own sentence is excluded by default"
    assert list(got.columns) == [
        "rank",
        "cosine",
        "word",
        "lemma",
        "sense",
        "gloss",
        "sentence",
        "doc_id",
        "sentence_id",
        "row",
    ]
    # each sentence is rebuilt in word order, whatever the row order, with the hit marked
    for _, hit in got.iterrows():
        sid = int(hit["sentence_id"][1:])
        words, pos = SENTENCES[sid][0], int(store.tokens["position"].iat[hit["row"]])
        assert hit["sentence"] == " ".join(f"[{w}]" if i == pos else w for i, w in enumerate(words))
        key = SENTENCES[sid][1].get(pos, "")
        assert hit["sense"] == key
        assert hit["gloss"] == (GLOSSES.get(key, f"(no gloss for {key})") if key else "")


def test_own_sentence_included_when_asked_and_rows_restrict(tmp_path):
    store = make_store(tmp_path)
    query = row_of(store, 0, 5)
    got = occurrence_neighbors(store, query, layer="1", k=1, exclude_own_sentence=False)
    assert got["row"].tolist() == [query] and got["cosine"].iat[0] == pytest.approx(1.0, abs=1e-3)
    plays = np.flatnonzero(store.tokens["lemma"] == "play")
    got = occurrence_neighbors(store, query, layer=0, k=10, rows=plays)
    assert set(got["word"]) == {"play"} and len(got) == 5, "six 'play' rows minus the query's sentence"
    # layer 0 is context-free: every other 'play' has the same vector, cosine 1 (fp16 rounding aside)
    np.testing.assert_allclose(got["cosine"], 1.0, atol=1e-3)


def test_sentence_text_marks_the_word(tmp_path):
    store = make_store(tmp_path)
    assert sentence_text(store.tokens, row_of(store, 4, 1)) == "children [play] in the park after school"


def test_neighbors_in_context_uses_the_encoder_and_skips_the_same_sentence(tmp_path):
    store = make_store(tmp_path)
    words = SENTENCES[1][0]  # already in the store: it must not be its own neighbour
    got = neighbors(sentence=" ".join(words), word="play", layer=2, store=store, encoder=FakeEncoder(), k=3)
    assert "s1" not in set(got["sentence_id"])
    vector = FakeEncoder().encode([words])[0][2, 5]
    allowed = (store.tokens["sentence_id"] != "s1").to_numpy()
    ref_ids, _ = brute_force(store.layer(2), vector.astype(np.float64), allowed, 3)
    np.testing.assert_array_equal(got["row"], ref_ids)
    kept = neighbors(
        sentence=words, position=5, layer=2, store=store, encoder=FakeEncoder(), k=1, exclude_same_sentence=False
    )
    assert kept["sentence_id"].tolist() == ["s1"], "without the exclusion the identical sentence comes first"


def test_neighbors_argument_errors(tmp_path, tiny):
    store = make_store(tmp_path)
    with pytest.raises(ValueError, match="'tennis' does not occur"):
        neighbors(sentence="we play chess", word="tennis", layer=1, store=store, encoder=FakeEncoder())
    with pytest.raises(ValueError, match="store=, encoder= and layer="):
        neighbors(sentence="we play chess", position=1, store=store)
    with pytest.raises(ValueError, match="unknown layer 'top'"):
        neighbors(sentence="we play chess", position=1, layer="top", store=store, encoder=FakeEncoder())


def test_table4_layout_and_contents(tmp_path, tiny):
    store = make_store(tmp_path)
    sources = [(SENTENCES[0][0], 5), ("the actors rehearsed the play all week", 4)]
    got = table4(tiny, store, FakeEncoder(), word="play", sources=sources, layers=[0, 2], gloss=GLOSSES.__getitem__)
    assert list(got.columns) == ["source", "layer", "nearest", "cosine", "sense", "gloss", "sentence_id"]
    assert got["source"].tolist()[0] == "GloVe" and got["layer"].tolist() == ["glove", "0", "2", "0", "2"]
    expected_glove = ", ".join(type_neighbors(tiny, "play", k=10)["word"])
    assert got["nearest"].iat[0] == expected_glove and expected_glove.startswith("player, game, games, football, stage")
    assert got["source"].iat[1] == "Chico Ruiz made a spectacular [play] on Alusik 's grounder"
    assert "s0" not in set(got["sentence_id"].iloc[1:3]), "a source sentence in the store is not its own neighbour"
    # each context row equals a direct k=1 search from the encoder's vector
    for i, (words, pos) in enumerate([(SENTENCES[0][0], 5), (sources[1][0].split(), 4)]):
        for j, layer in enumerate([0, 2]):
            row = got.iloc[1 + 2 * i + j]
            vec = FakeEncoder().encode([words])[0][layer, pos]
            ref = occurrence_neighbors(store, vec, layer, k=1, exclude_sentences={"s0"} if i == 0 else ())
            assert row["nearest"] == ref["sentence"].iat[0] and row["cosine"] == pytest.approx(ref["cosine"].iat[0])


def test_format_table_is_left_aligned_and_cut():
    df = pd.DataFrame({"rank": [1, 2], "word": ["queen", "a" * 30], "cosine": [0.91234, 0.5]})
    text = format_table(df, max_colwidth=10)
    assert text.splitlines() == [
        "rank  word        cosine",
        "----  ----------  ------",
        "1     queen       0.912",
        "2     aaaaaaaaa…  0.500",
    ]


def test_real_store_gives_the_same_neighbours(tmp_path):
    """The views read a store made by probing.store.extract exactly as they read the stand-in."""
    from types import SimpleNamespace

    from probing.store import extract

    sentences = [
        SimpleNamespace(
            id=f"s{i}",
            doc_id=f"d{i}",
            words=words,
            upos=["X"] * len(words),
            xpos=[""] * len(words),
            lemmas=[w.lower() for w in words],
            instance_ids=[None] * len(words),
            senses=[(senses[p],) if p in senses else () for p in range(len(words))],
        )
        for i, (words, senses) in enumerate(SENTENCES)
    ]
    corpus = type(
        "Corpus",
        (),
        {
            "name": "views-test",
            "split": "test",
            "__iter__": lambda self: iter(sentences),
            "fingerprint": lambda self: "views-test-corpus",
        },
    )()
    real = extract(FakeEncoder(), corpus, cache_dir=tmp_path / "stores", progress=False)
    fake = make_store(tmp_path)
    query = row_of(fake, 0, 5)
    got = occurrence_neighbors(real, query, "2", k=4)
    want = occurrence_neighbors(fake, query, 2, k=4)
    pd.testing.assert_frame_equal(got.reset_index(drop=True), want, check_dtype=False)


# -- the real SemCor case (issue #15): the bundled ELMo on a committed slice of SemCor ---------------

SEMCOR_SLICE = Path(__file__).parent / "fixtures" / "wsd" / "semcor_slice" / "semcor-slice.data.xml"


@pytest.fixture(scope="module")
def semcor_slice(tmp_path_factory):
    """The bundled default ELMo's store of 8 SemCor sentences: d004.s017 ("Chico_Ruiz made a spectacular play
    on Alusik 's grounder ..."), five other sentences with the noun "play", and d107.s009/d107.s024, which
    SemCor holds twice word for word."""
    from probing.corpora import read_raganato
    from probing.encoders import get_encoder
    from probing.store import extract

    encoder = get_encoder("default")
    corpus = read_raganato(SEMCOR_SLICE, name="semcor-slice", split="all")
    store = extract(encoder, corpus, cache_dir=tmp_path_factory.mktemp("stores"), progress=False)
    return store, encoder


def test_table4_never_answers_with_the_query_sentence_on_real_semcor(semcor_slice):
    """The paper's source "Chico Ruiz made a spectacular play on Alusik 's grounder {...}" is SemCor's d004.s017,
    tokenized differently (SemCor: ``Chico_Ruiz``) and cut. Without identity exclusion that copy is the nearest
    "play" at the biLSTM layers (same words, same left context); table4 must skip it."""
    store, encoder = semcor_slice
    plays = store.rows(lemma="play")
    words, pos = PAPER_TABLE4_SOURCES[0]
    encoded = encoder.encode([words])[0]
    for layer in (1, 2):  # the bug: by vector alone the query's own sentence wins
        raw = occurrence_neighbors(store, encoded[layer, pos], layer, k=1, rows=plays)
        assert raw["sentence_id"].iat[0] == "d004.s017", raw  # cosines 0.88 and 0.81, the next 0.85 and 0.80
    got = table4(None, store, encoder, "play", sources=[PAPER_TABLE4_SOURCES[0]], rows=plays)
    assert got["layer"].tolist() == ["0", "1", "2"]
    assert "d004.s017" not in set(got["sentence_id"]), got
    assert set(got["sentence_id"]) <= {"d002.s025", "d003.s048", "d003.s054", "d003.s060", "d004.s016"}
    # the same exclusion when the query is typed as a student would (one string, "Alusik's", full stop)
    typed = neighbors(
        sentence="Chico Ruiz made a spectacular play on Alusik's grounder.", word="play", layer=2,
        store=store, encoder=encoder, k=6, rows=plays,
    )  # fmt: skip
    assert "d004.s017" not in set(typed["sentence_id"]) and len(typed) == 5


def test_a_store_row_query_skips_its_sentence_and_its_copies_by_identity(semcor_slice):
    """d107.s009 and d107.s024 are the same sentence ("Milk production may be increased by ..."): querying a word
    of one must skip both, found by (doc_id, sentence_id) and normalised text, not by the neighbour's word."""
    store, _ = semcor_slice
    tokens = store.tokens
    query = int(np.flatnonzero((tokens["sentence_id"] == "d107.s009") & (tokens["word"] == "production"))[0])
    got = occurrence_neighbors(store, query, 2, k=len(tokens))
    assert not set(got["sentence_id"]) & {"d107.s009", "d107.s024"}
    assert len(got) == len(tokens) - 2 * int((tokens["sentence_id"] == "d107.s009").sum())
    kept = occurrence_neighbors(store, query, 2, k=2, exclude_own_sentence=False)
    # without the exclusion: the query itself, then its copy's "production" (same words, same vector)
    assert kept["row"].iat[0] == query and kept["sentence_id"].tolist() == ["d107.s009", "d107.s024"]
    assert kept["cosine"].iat[1] > 0.999


def test_normalise_text_undoes_tokenisation():
    # SemCor's multiword token and split clitic vs. the paper's and a student's spelling: one text
    semcor = "Chico_Ruiz made a spectacular play on Alusik 's grounder".split()
    assert normalise_text(semcor) == normalise_text(["Chico", "Ruiz", "made", "a", "spectacular", "play", "on"] + [
        "Alusik's", "grounder"])  # fmt: skip
    assert normalise_text(["``", "Hi", "''"]) == normalise_text(["\u201c", "hi", "\u201d"]) == "''hi''"
    assert normalise_text(["a", "b"]) != normalise_text(["a", "c"])


def test_a_source_position_must_hold_the_word(tmp_path):
    """issue #15: sources=[(sentence, 7)] for "bank" silently used "on"; now an error names all four facts."""
    store = make_store(tmp_path)
    sentence = "we sat on the grassy bank of the river"
    with pytest.raises(ValueError) as err:
        table4(None, store, FakeEncoder(), word="bank", sources=[(sentence, 2)], layers=[0])
    msg = str(err.value)
    assert "position 2" in msg and "'on'" in msg and "'bank'" in msg and sentence in msg
    got = table4(None, store, FakeEncoder(), word="bank", sources=[(sentence, 5), (sentence, None)], layers=[0])
    assert got["source"].tolist() == ["we sat on the grassy [bank] of the river"] * 2  # None finds the word
    # inflected forms pass; a bare position with no word is only range-checked
    assert locate("he played well".split(), 1, "play") == 1 and locate("two banks".split(), 1, "bank") == 1
    with pytest.raises(ValueError, match="outside the sentence"):
        locate(["a"], 3)


def test_copies_of_needs_a_whole_token_cut_and_enough_words():
    """A cut copy ends where a store token ends ("the play" is not a copy of "the player ..."), and short
    queries match only whole sentences."""
    sentences = {
        "s0": "Chico_Ruiz made a spectacular play on Alusik 's grounder in the hole .",
        "s1": "Chico_Ruiz made a spectacular player on the team .",
        "s2": "He played .",
        "s3": "He played . Twice",
    }
    tokens = pd.DataFrame.from_records(
        [
            {"doc_id": "d", "sentence_id": sid, "position": p, "word": w}
            for sid, text in sentences.items()
            for p, w in enumerate(text.split())
        ]
    )
    assert copies_of(tokens, "Chico Ruiz made a spectacular play".split()) == {("d", "s0")}
    assert copies_of(tokens, "Chico Ruiz made a spectacular play on Alusik's grounder .".split()) == {("d", "s0")}
    assert copies_of(tokens, "he played .".split()) == {("d", "s2")}  # 3 words: no cut copies (s3)
    assert copies_of(tokens, "Chico Ruiz made a spectacular play".split(), cut=False) == set()


def test_copies_of_cuts_inside_a_multiword_token():
    """The paper cuts its second Table 4 source after "Garson"; SemCor writes "Garson_Kanin" as one token. That
    SemCor sentence is the source itself (it was the nearest "play" to itself at layers 1-2 before this rule),
    so it must count as a copy; a cut inside an ordinary word ("Gars") still must not."""
    text = "Olivia_De_Havilland signed to do a Broadway play for Garson_Kanin this season ."
    tokens = pd.DataFrame.from_records(
        [{"doc_id": "br-e27", "sentence_id": "s1", "position": p, "word": w} for p, w in enumerate(text.split())]
    )
    source = "Olivia De Havilland signed to do a Broadway play for Garson".split()
    assert copies_of(tokens, source) == {("br-e27", "s1")}
    assert copies_of(tokens, source[:-1] + ["Gars"]) == set()
