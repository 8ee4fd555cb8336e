"""The terminal summary marks each row's best single layer (issue #34, item 5)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from probing.results.display import format_summary


def _summary() -> pd.DataFrame:
    """Shaped like ``Results.summary()``: rows task/dataset/split/encoder, columns layers, percent."""
    index = pd.MultiIndex.from_tuples(
        [
            ("upos", "demo-ud", "test", "baseline"),
            ("upos", "demo-ud", "test", "elmo"),
            ("upos", "demo-ud", "test", "glove"),
            ("upos", "demo-ud", "test", "random-elmo"),
        ],
        names=["task", "dataset", "split", "encoder"],
    )
    cols = ["0", "1", "1f", "2", "mix", "concat", "glove", "majority"]
    nan = np.nan
    values = [
        [nan, nan, nan, nan, nan, nan, nan, 15.2],
        [88.0, 94.1, 95.0, 93.4, 96.0, 96.5, nan, nan],  # 1f (a half), mix and concat beat layer 1: not single layers
        [nan, nan, nan, nan, nan, nan, 80.1, nan],  # one layer: nothing to choose between
        [77.9, 77.0, nan, 77.9, nan, nan, nan, nan],  # a tie: the first of the two, as report.py picks it
    ]
    return pd.DataFrame(values, index=index, columns=pd.Index(cols, name="layer"))


def test_best_single_layer_is_marked_per_row():
    text = format_summary(_summary(), {"upos": "accuracy"})
    lines = text.splitlines()
    elmo = next(line for line in lines if " elmo " in f" {line} ")
    assert "94.1*" in elmo and elmo.count("*") == 1
    random = next(line for line in lines if "random-elmo" in line)
    assert random.split() == ["random-elmo", "77.9*", "77.0", "77.9"]
    assert "*" not in next(line for line in lines if "baseline" in line)
    assert "*" not in next(line for line in lines if " glove " in f" {line} " and "80.1" in line)
    assert lines[-1] == "* best single layer of the row"
