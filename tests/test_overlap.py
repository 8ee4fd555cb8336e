"""The train/test overlap check: counted exactly, warned only where it can matter, stated once per pair."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import numpy as np
import pandas as pd

from probing.corpora import load
from probing.experiment.overlap import WARN_SHARE, new_overlaps, overlap, sentence_hashes
from probing.experiment.state import RunState
from probing.tasks.common import Part


def _store(sentences: list[list[str]]) -> SimpleNamespace:
    """The two things the check reads of a store: the word column and the sentence offsets."""
    return SimpleNamespace(
        tokens=pd.DataFrame({"word": [w for s in sentences for w in s]}),
        offsets=np.cumsum([0] + [len(s) for s in sentences]),
    )


def _part(name: str, sentences: list[list[str]]) -> Part:
    dataset, split = name.split("/")
    return Part(dataset, split, _store(sentences))


TRAIN = [["the", "cat", "sat"], ["Thanks"], ["a", "dog", "ran", "home"]]


def test_counts_sentences_with_repeats_and_their_tokens():
    # test: "Thanks" twice (in train), "the cat sat" (in train), "the cat" (a prefix: not the same sentence)
    test = [["Thanks"], ["the", "cat", "sat"], ["Thanks"], ["the", "cat"], ["new", "words", "here", "now"]]
    found = overlap(
        sentence_hashes(_store(TRAIN))[0],
        *sentence_hashes(_store(test)),
        role="test",
        data="d/test",
        train_name="d/train",
    )
    assert (found.shared, found.distinct, found.total) == (3, 2, 5)
    assert (found.shared_tokens, found.tokens) == (1 + 3 + 1, 1 + 3 + 1 + 2 + 4)
    assert found.describe() == (
        "3 of 5 test sentences of d/test (2 distinct; 5 of 11 tokens, 45.5%) also occur in training (d/train): "
        "scores on d/test partly measure memorisation"
    )


def test_the_demo_test_split_is_stated_not_warned():
    """demo-ud's test split repeats one-word lines of the training e-mails ("Thanks" 11 times, "Vince" 7):
    55 of 1,012 sentences but 89 of 13,340 tokens (0.7 %), below the 5 % of tokens that would warn."""

    def corpus_store(split: str) -> SimpleNamespace:
        return _store([list(s.words) for s in load("demo-ud", split)])

    found = overlap(
        sentence_hashes(corpus_store("train"))[0],
        *sentence_hashes(corpus_store("test")),
        role="test",
        data="demo-ud/test",
        train_name="demo-ud/train",
    )
    assert (found.shared, found.distinct, found.total, found.shared_tokens, found.tokens) == (55, 22, 1012, 89, 13340)
    assert not found.matters
    assert found.describe().startswith("55 of 1,012 test sentences of demo-ud/test (22 distinct; 89 of 13,340 tokens")


def test_threshold_is_a_share_of_tokens_and_an_identical_split_always_warns():
    train = [[f"w{i}"] * 10 for i in range(10)]
    # 100 test tokens: a shared 4-token sentence is 4 %, a shared 5-token one 5 %
    below = [["x"] * 96, ["w0"] * 4]
    at = [["x"] * 95, ["w0"] * 5]
    train += [["w0"] * 4, ["w0"] * 5]
    hashes = sentence_hashes(_store(train))[0]
    shares = [overlap(hashes, *sentence_hashes(_store(t)), role="test", data="t", train_name="tr") for t in (below, at)]
    assert [s.token_share for s in shares] == [0.04, 0.05] and WARN_SHARE == 0.05
    assert [s.matters for s in shares] == [False, True]
    same = overlap(hashes, *sentence_hashes(_store(train)), role="test", data="d/train", train_name="d/train")
    assert same.identical and same.matters
    assert same.describe().startswith("test data d/train is the training data: all 12 of its sentences occur in")


def test_each_pair_of_splits_is_checked_once():
    train, test = _part("d/train", TRAIN), _part("d/test", [["Thanks"], ["b"]])
    checked: set = set()
    first = new_overlaps(train, [("test", test)], checked)
    again = new_overlaps(train, [("test", _part("d/test", [["Thanks"], ["b"]]))], checked)  # another task/encoder
    other = new_overlaps(train, [("dev", _part("d/dev", [["c"]]))], checked)
    assert [f.data for f in first] == ["d/test"] and again == [] and [f.data for f in other] == ["d/dev"]


def test_the_run_warns_once_for_two_tasks_on_the_same_splits():
    run = RunState.__new__(RunState)  # only the state check_overlap uses
    run.progress, run.warnings, run.overlaps_checked = False, [], set()
    train = _part("d/train", TRAIN)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _task in ("upos", "xpos"):
            run.check_overlap(train, None, [_part("d/train", TRAIN), _part("d/test", [["Thanks"], ["b", "c"]])])
    assert [str(w.message) for w in caught] == run.warnings
    assert run.warnings == [
        "test data d/train is the training data: all 3 of its sentences occur in d/train, so its scores measure "
        "memorisation, not generalisation",
        "1 of 2 test sentences of d/test (1 distinct; 1 of 3 tokens, 33.3%) also occur in training (d/train): "
        "scores on d/test partly measure memorisation",
    ]
