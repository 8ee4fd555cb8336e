"""The note where a model contradicts the paper's sense claim (issue #34, item 4)."""

from __future__ import annotations

import pandas as pd

from probing.views.sense_claim import sense_claim_note


def _scores(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["set", "panel", "score", "ci_low", "ci_high", "chance", "n", "n_senses"])


def test_names_each_lemma_whose_top_layer_is_not_above_chance():
    scores = _scores(
        [
            ("bank", "0", 0.50, 0.50, 0.50, 0.50, 28, 2),  # layer 0: not the top layer, not read
            ("bank", "2", 0.46, 0.29, 0.64, 0.50, 28, 2),  # the numbers: below chance
            ("play", "2", 0.71, 0.60, 0.80, 0.40, 60, 5),  # above chance: not named
            ("line", "2", 0.55, 0.40, 0.70, 0.45, 40, 4),  # CI reaches below chance: named
            ("time", "2", float("nan"), float("nan"), float("nan"), float("nan"), 1, 1),  # one occurrence: no score
            ("bank", "GloVe", 0.50, 0.50, 0.50, 0.50, 28, 2),
        ]
    )
    note = sense_claim_note(scores, "2", model="the bundled model")
    assert note is not None
    assert "with the bundled model layer 2 does not do better than chance for 2 of 3 lemma(s)" in note
    assert "bank 0.46 [0.29, 0.64] vs chance 0.50 (28 occurrences); line 0.55 [0.40, 0.70] vs chance 0.45" in note
    assert "play" not in note.split("95% CI:")[1].split(")")[0]
    assert "probing download original" in note


def test_no_note_where_the_top_layer_separates_every_lemma():
    scores = _scores([("play", "2", 0.71, 0.60, 0.80, 0.40, 60, 5), ("play", "1", 0.30, 0.20, 0.40, 0.40, 60, 5)])
    assert sense_claim_note(scores, "2") is None
