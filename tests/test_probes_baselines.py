"""Majority and most-frequent-tag baselines on hand-checked examples."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from probing.probes.baselines import MajorityBaseline, MostFrequentTagBaseline

TRAIN_WORDS = ["The", "dog", "runs", "the", "run", "was", "long", "dogs", "run", "the", "run"]
TRAIN_TAGS = ["DET", "NOUN", "VERB", "DET", "NOUN", "AUX", "ADJ", "NOUN", "VERB", "DET", "VERB"]
# tag counts: NOUN 3, VERB 3, DET 3, AUX 1, ADJ 1 -> three-way tie at the top


def test_majority_tie_goes_to_sorted_first_label():
    m = MajorityBaseline().fit(TRAIN_WORDS, TRAIN_TAGS)
    # DET, NOUN and VERB each occur 3 times; ties go to the first in sorted order: DET.
    assert m.majority_ == "DET"
    assert list(m.predict(["x", "y"])) == ["DET", "DET"]
    assert m.score(["a", "b", "c", "d"], ["DET", "DET", "NOUN", "VERB"]) == 0.5


def test_majority_on_clear_majority():
    m = MajorityBaseline().fit(["a"] * 5, ["X", "Y", "Y", "Z", "Y"])
    assert m.predict(["q"])[0] == "Y"
    assert m.score(["q", "r", "s"], ["Y", "Y", "X"]) == pytest.approx(2 / 3)


def test_most_frequent_tag_default_fallback():
    b = MostFrequentTagBaseline().fit(TRAIN_WORDS, TRAIN_TAGS)
    # "run": VERB twice, NOUN once -> VERB. "The" seen once as DET.
    # "Dog" unseen as written -> lowercase "dog" -> NOUN. "RUNS" -> "runs" -> VERB.
    # "cat" unseen in any case -> overall majority DET (tie broken by sorted order).
    words = ["run", "The", "Dog", "RUNS", "cat", "long"]
    assert list(b.predict(words)) == ["VERB", "DET", "NOUN", "VERB", "DET", "ADJ"]
    assert b.score(words, ["VERB", "DET", "NOUN", "VERB", "NOUN", "ADJ"]) == pytest.approx(5 / 6)


def test_exact_form_wins_over_lowercase_table():
    words = ["Will", "Will", "will", "will", "will"]
    tags = ["PROPN", "PROPN", "AUX", "AUX", "AUX"]
    b = MostFrequentTagBaseline().fit(words, tags)
    # "Will" was seen as written (PROPN x2) so the exact table decides, although lowercased
    # "will" is AUX 3 : PROPN 2.
    assert list(b.predict(["Will", "will", "WILL"])) == ["PROPN", "AUX", "AUX"]
    always = MostFrequentTagBaseline(lowercase="always").fit(words, tags)
    assert list(always.predict(["Will", "WILL"])) == ["AUX", "AUX"]
    never = MostFrequentTagBaseline(lowercase="never").fit(words, tags)
    assert list(never.predict(["Will", "WILL"])) == ["PROPN", "AUX"]  # WILL unseen -> majority AUX


def test_per_word_tie_goes_to_globally_more_frequent_tag():
    words = ["a", "a", "b", "b", "b", "c", "c"]
    tags = ["X", "Y", "Y", "Y", "Y", "X", "X"]  # Y 4 > X 3 overall; "a" is a 1:1 tie
    b = MostFrequentTagBaseline().fit(words, tags)
    assert b.predict(["a"])[0] == "Y"


def test_labels_from_a_pandas_column():
    """A token-table column gives an object array of ``str``: same predictions as a list of strings."""
    words, tags = pd.Series(TRAIN_WORDS), pd.Series(TRAIN_TAGS)
    assert tags.to_numpy().dtype == object
    query = ["run", "The", "Dog", "cat"]
    for cls in (MajorityBaseline, MostFrequentTagBaseline):
        from_column = cls().fit(words, tags.to_numpy())
        from_list = cls().fit(TRAIN_WORDS, TRAIN_TAGS)
        assert list(from_column.predict(query)) == list(from_list.predict(query))
    assert list(MostFrequentTagBaseline().fit(words, tags.to_numpy()).predict(query)) == ["VERB", "DET", "NOUN", "DET"]


def test_errors():
    with pytest.raises(ValueError, match="one label per word"):
        MostFrequentTagBaseline().fit(["a", "b"], ["X"])
    with pytest.raises(ValueError, match="lowercase must be one of"):
        MostFrequentTagBaseline(lowercase="sometimes").fit(["a"], ["X"])
    with pytest.raises(RuntimeError, match="call fit"):
        MajorityBaseline().predict(["a"])
    with pytest.raises(TypeError, match="not one string"):
        MajorityBaseline().fit("abc", ["X", "Y", "Z"])
    assert np.asarray(MajorityBaseline().fit(["a"], [3]).predict(["b"])).dtype.kind == "i"
