"""The tidy results table: rows, files, round trip, validation errors, provenance."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

import probing
from probing.results import (
    RESULT_COLUMNS,
    ResultsFormatError,
    ResultsTable,
    make_row,
    provenance,
    read_provenance,
    read_results,
    write_results,
)


def small_table() -> pd.DataFrame:
    t = ResultsTable()
    t.add(
        task="pos",
        dataset="ud_ewt",
        split="test",
        encoder="elmo",
        layer=0,
        metric="accuracy",
        value=0.91,
        ci_low=0.90,
        ci_high=0.92,
        seed=0,
    )
    t.add(task="pos", dataset="ud_ewt", split="test", encoder="elmo", layer="mix", metric="accuracy", value=0.97)
    t.add(
        task="pos",
        dataset="ud_ewt",
        split="test",
        encoder="glove",
        layer="glove",
        metric="selectivity",
        value=0.12,
        ci_low=0.1,
        ci_high=0.14,
        seed=3,
    )
    return t.to_frame()


def test_columns_and_types():
    df = small_table()
    assert list(df.columns) == RESULT_COLUMNS
    assert df["layer"].tolist() == ["0", "mix", "glove"]  # layer names are strings
    assert df["seed"].dtype == np.int64 and df["value"].dtype == np.float64
    assert math.isnan(df.loc[1, "ci_low"]) and math.isnan(df.loc[1, "ci_high"])


def test_round_trip(tmp_path):
    df = small_table()
    prov = provenance(corpus_fingerprint="abc123")
    csv_path, json_path = write_results(df, tmp_path, prov)
    back = read_results(tmp_path)
    pd.testing.assert_frame_equal(back, df)  # "0" stays a string, NaN bounds stay NaN
    payload = json.loads(json_path.read_text())
    assert payload["provenance"]["corpus_fingerprint"] == "abc123"
    assert payload["results"][1]["ci_low"] is None  # NaN -> null (JSON has no NaN)
    assert payload["results"][0]["layer"] == "0"
    assert read_provenance(tmp_path) == payload["provenance"]
    assert read_results(csv_path).equals(back)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.csv", "results.json"]  # no temp files


def test_missing_column_names_column_and_file(tmp_path):
    small_table().drop(columns=["ci_high"]).to_csv(tmp_path / "results.csv", index=False)
    with pytest.raises(ResultsFormatError, match=r"results\.csv: missing column 'ci_high'"):
        read_results(tmp_path)
    with pytest.raises(FileNotFoundError, match="no results table"):
        read_results(tmp_path / "nowhere")


def test_bad_values_rejected(tmp_path):
    with pytest.raises(ResultsFormatError, match="ci_low <= value <= ci_high"):
        make_row("pos", "ewt", "test", "elmo", "1", "accuracy", 0.9, ci_low=0.95, ci_high=0.99)
    with pytest.raises(ResultsFormatError, match="encoder must be a non-empty string"):
        make_row("pos", "ewt", "test", "", "1", "accuracy", 0.9)
    with pytest.raises(ResultsFormatError, match="value must be finite"):
        make_row("pos", "ewt", "test", "elmo", "1", "accuracy", float("nan"))
    df = small_table().astype({"value": object})
    df.loc[2, "value"] = "not a number"
    with pytest.raises(ResultsFormatError, match="results table"):
        write_results(df, tmp_path, {})
    assert not (tmp_path / "results.csv").exists()


def test_failed_write_keeps_previous_files(tmp_path):
    write_results(small_table(), tmp_path, {"run": 1})
    before = (tmp_path / "results.csv").read_bytes(), (tmp_path / "results.json").read_bytes()
    newer = small_table().assign(value=0.5, ci_low=np.nan, ci_high=np.nan)
    with pytest.raises(ValueError):  # NaN is not JSON: fails before either file is replaced
        write_results(newer, tmp_path, {"run": 2, "score": float("nan")})
    after = (tmp_path / "results.csv").read_bytes(), (tmp_path / "results.json").read_bytes()
    assert after == before


def test_provenance_fields():
    prov = provenance(git="deadbeef")
    assert prov["probing"] == probing.__version__
    assert prov["numpy"] == np.__version__
    for key in ("python", "torch", "scikit-learn", "platform", "time"):
        assert prov[key], key
    assert prov["git"] == "deadbeef"
    assert prov["time"].endswith("+00:00")  # UTC
