"""probing.probes.wsd: Raganato's scorer rules, key files, the baselines and the 1-NN sense centroids.

Sense inventories come from the bundled WordNet subset (always present); the senses used are
bank (NOUN): bank%1:17:01:: (1, sloping land), bank%1:14:00:: (2, financial institution),
bank%1:17:00:: (3, ridge), ...; play (VERB): play%2:33:00:: (1), play%2:41:12:: (2), play%2:36:12:: (3);
line (NOUN) first sense line%1:14:03::.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from probing.probes.wsd import (
    KeyFileError,
    MostFrequentSense,
    SenseCentroids,
    instances_from_tokens,
    read_key_file,
    score_wsd,
    supersense_labels,
    wn_first_sense,
    write_key_file,
)
from probing.wordnet import BundledInventory, WordNetLookupError

FIXTURES = Path(__file__).parent / "fixtures" / "wsd"
BANK1, BANK2, BANK3 = "bank%1:17:01::", "bank%1:14:00::", "bank%1:17:00::"
PLAY1, PLAY2, PLAY3 = "play%2:33:00::", "play%2:41:12::", "play%2:36:12::"
LINE1 = "line%1:14:03::"


@pytest.fixture(scope="module")
def inv() -> BundledInventory:
    return BundledInventory()


# ---- key files and the scorer ------------------------------------------------------------------


def test_read_key_file_handles_multi_keys_tabs_and_blank_lines():
    gold = read_key_file(FIXTURES / "gold.key.txt")
    assert list(gold) == ["d0.s0.t0", "d0.s0.t1", "d0.s1.t0", "d0.s1.t1", "d0.s2.t0"]  # blank line skipped
    assert gold["d0.s1.t0"] == ["line%1:14:03::", "line%1:10:01::"]
    system = read_key_file(FIXTURES / "system.key.txt")
    assert system["d0.s2.t0"] == ["peculiar%5:00:00:strange:00", "peculiar%5:00:00:unusual:00"]  # tab-separated line


def test_read_key_file_merges_repeated_ids_like_scorer_java():
    # Scorer.java keeps a set per id and adds each line's keys to it.
    keys = read_key_file(FIXTURES / "repeated.key.txt")
    assert keys == {"d0.s1.t1": ["serve%2:33:00::", "serve%2:42:03::"], "d0.s0.t0": ["play%2:33:00::"]}


def test_read_key_file_names_the_malformed_line():
    with pytest.raises(KeyFileError, match=r"malformed\.key\.txt line 3: .*'d0\.s1\.t0'"):
        read_key_file(FIXTURES / "malformed.key.txt")


def test_scorer_on_hand_made_files():
    # By hand: t0 right (1); t1 wrong (0); s1.t0 matches the second gold key (1); s1.t1 unanswered;
    # s2.t0 answers 2 keys, 1 gold -> 1/2 correct and 1/2 wrong; d9.s9.t9 is not in gold -> ignored.
    # correct = 2.5, answered = 4, gold = 5: P = 2.5/4 = 0.625, R = 2.5/5 = 0.5, F1 = 2PR/(P+R) = 5/9.
    m = score_wsd(read_key_file(FIXTURES / "system.key.txt"), read_key_file(FIXTURES / "gold.key.txt"))
    assert m["P"] == pytest.approx(0.625) and m["R"] == pytest.approx(0.5) and m["F1"] == pytest.approx(5 / 9)
    assert (m["n_gold"], m["n_answered"], m["correct"], m["n_ignored"]) == (5, 4, 2.5, 1)


def test_scorer_credit_for_several_answer_keys():
    gold = {"a": {"k1", "k2"}, "b": {"k3"}}
    # Both answer keys gold -> full credit; one of three -> 1/3; duplicates count once.
    m = score_wsd({"a": ["k1", "k2"], "b": ["k3", "x", "y", "x"]}, gold)
    assert m["correct"] == pytest.approx(1 + 1 / 3)
    assert m["P"] == pytest.approx((4 / 3) / 2) and m["R"] == pytest.approx((4 / 3) / 2)


def test_scorer_edge_cases():
    gold = {"a": "k1", "b": "k2 k3"}  # token-table style: keys joined by spaces
    assert score_wsd({"a": "k1", "b": "k3"}, gold)["F1"] == 1.0
    nothing = score_wsd({"a": None, "b": [], "zzz": "k1"}, gold)  # no answers: P is 0, not 0/0
    assert (nothing["P"], nothing["R"], nothing["F1"], nothing["n_answered"], nothing["n_ignored"]) == (0, 0, 0, 0, 1)
    with pytest.raises(ValueError, match="no instances"):
        score_wsd({"a": "k1"}, {})
    with pytest.raises(ValueError, match="'b' has no sense key"):
        score_wsd({"a": "k1"}, {"a": "k1", "b": ""})


def test_write_key_file_round_trips(tmp_path):
    answers = {"d0.s0.t0": "play%2:33:00::", "d0.s0.t1": ["bank%1:17:01::", "bank%1:14:00::"]}
    path = write_key_file(tmp_path / "out.key.txt", answers)
    assert path.read_text() == "d0.s0.t0 play%2:33:00::\nd0.s0.t1 bank%1:17:01:: bank%1:14:00::\n"
    assert read_key_file(path) == {"d0.s0.t0": ["play%2:33:00::"], "d0.s0.t1": ["bank%1:17:01::", "bank%1:14:00::"]}
    with pytest.raises(KeyFileError, match="'d0.s0.t2'"):
        write_key_file(tmp_path / "bad.key.txt", {"d0.s0.t2": []})
    assert not (tmp_path / "bad.key.txt").exists()  # atomic: nothing left behind


# ---- baselines ---------------------------------------------------------------------------------


def test_wn_first_sense(inv):
    assert wn_first_sense(["bank", "play", "Line"], ["NOUN", "VERB", "n"], inv) == [BANK1, PLAY1, LINE1]
    with pytest.raises(ValueError, match="aligned"):
        wn_first_sense(["bank"], ["NOUN", "VERB"], inv)


def test_most_frequent_sense_counts_ties_and_backoff(inv):
    train = [
        BANK2,
        BANK2,
        BANK1,  # bank: sense 2 seen twice, sense 1 once -> sense 2
        PLAY3,
        f"{PLAY2} {PLAY3}",
        PLAY2,
    ]  # play: 2 and 3 seen twice each -> tie -> WordNet order -> 2
    mfs = MostFrequentSense(inv).fit(train)
    details = mfs.predict_details(["bank", "play", "line"], ["NOUN", "VERB", "NOUN"])
    assert details["sense"].tolist() == [BANK2, PLAY2, LINE1]  # line unseen -> first sense
    assert details["count"].tolist() == [2, 2, 0] and details["backoff"].tolist() == [False, False, True]
    assert mfs.predict(["bank"], ["n"]) == [BANK2]
    with pytest.raises(RuntimeError, match="fit"):
        MostFrequentSense(inv).predict(["bank"], ["n"])


# ---- SenseCentroids ----------------------------------------------------------------------------


def _reference_centroids(X: np.ndarray, keys: list[tuple[str, ...]], rows: np.ndarray) -> dict[str, np.ndarray]:
    """The plain definition: for each key, the mean of the rows of the occurrences that carry it."""
    members: dict[str, list[int]] = {}
    for occ, row in zip(keys, rows):
        for k in occ:
            members.setdefault(k, []).append(row)
    return {k: X[r].astype(np.float64).mean(0) for k, r in members.items()}


def test_centroids_equal_the_plain_mean_on_an_fp16_memmap(tmp_path, inv):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 6)).astype(np.float16)
    mm = np.memmap(tmp_path / "layer.fp16", dtype=np.float16, mode="w+", shape=X.shape)
    mm[:] = X
    mm.flush()
    X_map = np.memmap(tmp_path / "layer.fp16", dtype=np.float16, mode="r", shape=X.shape)
    choices = [(BANK1,), (BANK2,), (BANK1, BANK2), (PLAY1,), (PLAY2, PLAY3)]
    keys = [choices[i] for i in rng.integers(0, len(choices), 25)]
    rows = rng.choice(40, size=25, replace=False)
    model = SenseCentroids(inventory=inv, chunk_rows=4).fit(X_map, keys, rows=rows)  # small chunks: sums cross blocks
    ref = _reference_centroids(X, keys, rows)
    assert sorted(model.keys_) == sorted(ref)
    for k, c in zip(model.keys_, model.centroids_):
        np.testing.assert_allclose(c, ref[k], rtol=1e-5, atol=1e-6, err_msg=k)
    # Counts: an occurrence with two keys counts for both.
    expected_counts = {k: sum(k in occ for occ in keys) for k in ref}
    assert dict(zip(model.keys_, model.counts_.tolist())) == expected_counts


def test_centroids_predict_nearest_sense_and_back_off(inv):
    # bank sense 1 lives along axis 0, sense 2 along axis 1; no bank sense 3 or line sense in training.
    X_train = np.array([[1.0, 0.1, 0], [0.9, -0.1, 0], [0.1, 1.0, 0], [-0.1, 1.2, 0]], dtype=np.float32)
    model = SenseCentroids(inventory=inv).fit(X_train, [BANK1, BANK1, BANK2, BANK2])
    X_test = np.array([[0.2, 3.0, 0.0], [5.0, 0.3, 0.0], [1.0, 1.0, 1.0]], dtype=np.float32)
    details = model.predict_details(X_test, ["bank", "bank", "line"], ["NOUN", "NOUN", "NOUN"])
    assert details["sense"].tolist() == [BANK2, BANK1, LINE1]
    assert details["backoff"].tolist() == [False, False, True] and details["n_seen"].tolist() == [2, 2, 0]
    assert math.isnan(details["score"][2])
    # The exposed scores are cosine similarities with the centroids (0.95, 0) and (0, 1.1).
    scores = model.sense_scores(X_test[:1], ["bank"], ["NOUN"])[0]
    assert list(scores) == [BANK1, BANK2]  # seen candidates, WordNet order
    q = X_test[0] / np.linalg.norm(X_test[0])
    assert scores[BANK1] == pytest.approx(q[0]) and scores[BANK2] == pytest.approx(q[1])
    assert model.score(X_test[:2], [BANK2, f"{BANK1} {BANK3}"], ["bank", "bank"], ["n", "n"]) == 1.0


def test_cosine_and_euclidean_can_disagree(inv):
    # Centroids (10, 0) and (0, 1); query (5, 4): cosine picks (10, 0) (0.78 vs 0.62), but the
    # Euclidean distance is smaller to (0, 1) (5.83 vs 6.40).
    X_train = np.array([[10.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    q = np.array([[5.0, 4.0]], dtype=np.float32)
    cos = SenseCentroids(inventory=inv).fit(X_train, [PLAY1, PLAY2])
    euc = SenseCentroids(metric="euclidean", inventory=inv).fit(X_train, [PLAY1, PLAY2])
    assert cos.predict(q, ["play"], ["VERB"]) == [PLAY1]
    assert euc.predict(q, ["play"], ["VERB"]) == [PLAY2]
    assert euc.sense_scores(q, ["play"], ["VERB"])[0][PLAY2] == pytest.approx(-math.sqrt(34))


def test_centroids_ties_go_to_wordnet_order_and_foreign_keys_are_ignored(inv):
    # Senses 3 and 2 of play have the same centroid, listed sense 3 first: sense 2 wins (WordNet order).
    # A bank centroid lies exactly on the query but is not a play sense, so it is never chosen.
    X_train = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    model = SenseCentroids(inventory=inv).fit(X_train, [PLAY3, PLAY2, BANK1])
    assert model.predict(np.array([[0.0, 1.0]], dtype=np.float32), ["play"], ["VERB"]) == [PLAY2]


def test_centroids_rows_select_occurrences_and_bad_shapes_fail(inv):
    X = np.eye(4, dtype=np.float32)
    model = SenseCentroids(inventory=inv).fit(X, [BANK1, BANK2], rows=[3, 1])
    np.testing.assert_array_equal(model.centroids_, X[[3, 1]])
    assert model.predict(X, ["bank"], ["NOUN"], rows=[1]) == [BANK2]
    with pytest.raises(ValueError, match="rows has shape"):
        SenseCentroids(inventory=inv).fit(X, [BANK1, BANK2], rows=[0])
    with pytest.raises(ValueError, match=r"rows must lie in \[0, 4\)"):
        SenseCentroids(inventory=inv).fit(X, [BANK1], rows=[4])
    with pytest.raises(ValueError, match="X has 4 rows but there are 2"):
        SenseCentroids(inventory=inv).fit(X, [BANK1, BANK2])
    with pytest.raises(ValueError, match="no occurrence has a sense key"):
        SenseCentroids(inventory=inv).fit(X[:1], [""])
    with pytest.raises(ValueError, match="'manhattan'"):
        SenseCentroids(metric="manhattan")
    with pytest.raises(WordNetLookupError, match="'qwertyuiop'"):
        model.predict(X[:1], ["qwertyuiop"], ["NOUN"])


# ---- supersenses and token tables --------------------------------------------------------------


def test_supersense_labels_use_the_first_gold_key(inv):
    labels = supersense_labels([BANK2, f"{PLAY1} {PLAY2}", "", (), (BANK1, BANK2)], inv)
    assert labels == ["noun.group", "verb.competition", "", "", "noun.object"]


def test_instances_from_tokens():
    tokens = pd.DataFrame(
        {
            "sentence_id": ["s0"] * 4,
            "word": ["The", "bank", "plays", "."],
            "lemma": ["the", "bank", "play", "."],
            "upos": ["DET", "NOUN", "VERB", "."],
            "sense": ["", BANK1, f"{PLAY1} {PLAY2}", ""],
            "instance_id": ["", "s0.t0", "s0.t1", ""],
        }
    )
    inst = instances_from_tokens(tokens)
    assert inst["row"].tolist() == [1, 2] and inst["pos"].tolist() == ["NOUN", "VERB"]
    assert inst["keys"].tolist() == [(BANK1,), (PLAY1, PLAY2)]
    with pytest.raises(ValueError, match="'sense'"):
        instances_from_tokens(tokens.drop(columns="sense"))
