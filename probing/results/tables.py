"""Reading, writing and validating the results table and its side tables.

The results table has one row per (task, dataset, split, encoder, layer, metric, seed), written as
``results.csv`` plus ``results.json`` = ``{"provenance": {...}, "results": [...]}``; the side tables are
``mix_weights.csv`` (scalar-mix weights) and ``per_tag.csv`` (accuracy per gold tag). Every write is atomic,
so a reader never sees a half-written table.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import sys
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from probing._io import atomic_open
from probing.errors import ProbingError
from probing.results.schema import (
    CSV_NAME,
    FLOAT_COLUMNS,
    INTERVENTION,
    JSON_NAME,
    RESULT_COLUMNS,
    SIDE_TABLES,
    STRING_COLUMNS,
    metric,
)

_STRING_COLUMNS = STRING_COLUMNS
_FLOAT_COLUMNS = FLOAT_COLUMNS


class ResultsFormatError(ProbingError, ValueError):
    """A results table or file does not have the expected columns or values."""


def make_row(
    task: str,
    dataset: str,
    split: str,
    encoder: str,
    layer: str | int,
    metric: str,
    value: float,
    ci_low: float = math.nan,
    ci_high: float = math.nan,
    seed: int = 0,
    intervention: str = "",
) -> dict[str, Any]:
    """One validated result row. ``layer`` is stored as a string (``0`` -> ``"0"``); ``intervention`` is ``""``
    for a row of the unedited representation."""
    row = {
        "task": task,
        "dataset": dataset,
        "split": split,
        "encoder": encoder,
        "layer": str(layer),
        "metric": metric,
        "value": float(value),
        "ci_low": float(ci_low),
        "ci_high": float(ci_high),
        "seed": int(seed),
        INTERVENTION: intervention,
    }
    if not isinstance(intervention, str):
        raise ResultsFormatError(f"result row: intervention must be a string, got {intervention!r}")
    for col in _STRING_COLUMNS:
        if not isinstance(row[col], str) or not row[col]:
            raise ResultsFormatError(f"result row: {col} must be a non-empty string, got {row[col]!r}")
    v, lo, hi = float(value), float(ci_low), float(ci_high)
    if not math.isfinite(v):
        raise ResultsFormatError(f"result row: value must be finite, got {value!r}")
    if not (math.isnan(lo) and math.isnan(hi)) and not lo <= v <= hi:
        raise ResultsFormatError(
            f"result row: expected ci_low <= value <= ci_high (or both bounds NaN), got {lo} <= {row['value']} <= {hi}"
        )
    return row


class ResultsTable:
    """Accumulates rows (``add`` takes ``make_row``'s arguments) and returns the tidy DataFrame."""

    def __init__(self, rows: Iterable[Mapping[str, Any]] = ()):
        self.rows: list[dict[str, Any]] = [make_row(**{c: r[c] for c in RESULT_COLUMNS if c in r}) for r in rows]

    def add(self, **fields: Any) -> dict[str, Any]:
        row = make_row(**fields)
        self.rows.append(row)
        return row

    def __len__(self) -> int:
        return len(self.rows)

    def to_frame(self) -> pd.DataFrame:
        return _typed(pd.DataFrame(self.rows, columns=RESULT_COLUMNS))


def _typed(df: pd.DataFrame) -> pd.DataFrame:
    if INTERVENTION not in df.columns:
        df = df.assign(**{INTERVENTION: ""})
    df = df[RESULT_COLUMNS].copy()
    df[INTERVENTION] = df[INTERVENTION].fillna("").astype(str)
    for col in _STRING_COLUMNS:
        df[col] = df[col].astype(str)
    for col in _FLOAT_COLUMNS:
        df[col] = df[col].astype(np.float64)
    df["seed"] = df["seed"].astype(np.int64)
    return df.reset_index(drop=True)


def validate_results(df: pd.DataFrame, source: str = "results table") -> pd.DataFrame:
    """Check columns and types; return the table with canonical column order and dtypes."""
    missing = [c for c in RESULT_COLUMNS if c not in df.columns and c != INTERVENTION]
    if missing:
        raise ResultsFormatError(f"{source}: missing column {missing[0]!r} (expected columns {RESULT_COLUMNS})")
    try:
        df = _typed(df)
    except (TypeError, ValueError) as exc:
        raise ResultsFormatError(f"{source}: {exc}") from None
    for col in _STRING_COLUMNS:
        empty = df.index[df[col].isin(["", "nan"])]
        if len(empty):
            raise ResultsFormatError(f"{source}: row {int(empty[0])} has an empty {col!r}")
    bad = df.index[~np.isfinite(df["value"])]
    if len(bad):
        raise ResultsFormatError(f"{source}: row {int(bad[0])} has a non-finite value")
    for name in df["metric"].unique():
        lo, hi = metric(name).bounds or (-np.inf, np.inf)
        rows = df[df["metric"] == name]
        out = rows.index[(rows["value"] < lo - 1e-9) | (rows["value"] > hi + 1e-9)]
        if len(out):
            r = df.loc[out[0]]
            raise ResultsFormatError(
                f"{source}: row {int(out[0])}: {name} value {r['value']} (task {r['task']!r}, encoder "
                f"{r['encoder']!r}, layer {r['layer']!r}) outside [{lo:g}, {hi:g}]"
                + ("; scores are fractions, not percent" if metric(name).percent else "")
            )
    has_ci = df["ci_low"].notna() & df["ci_high"].notna()
    bad = df.index[has_ci & ((df["ci_low"] > df["value"] + 1e-9) | (df["ci_high"] < df["value"] - 1e-9))]
    if len(bad):
        r = df.loc[bad[0]]
        raise ResultsFormatError(
            f"{source}: row {int(bad[0])}: CI [{r['ci_low']}, {r['ci_high']}] does not contain value {r['value']} "
            f"(task {r['task']!r}, encoder {r['encoder']!r}, layer {r['layer']!r}, metric {r['metric']!r})"
        )
    return df


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, np.generic):
        return _jsonable(value.item())
    return value


def write_results(df: pd.DataFrame, out_dir: str | os.PathLike, provenance: Mapping[str, Any]) -> tuple[Path, Path]:
    """Write ``results.csv`` and ``results.json`` into ``out_dir`` atomically; return both paths.

    NaN confidence bounds become empty CSV cells and JSON ``null``.
    """
    df = validate_results(df)
    out = Path(out_dir)
    csv_path, json_path = out / CSV_NAME, out / JSON_NAME
    records = [{k: _jsonable(v) for k, v in r.items()} for r in df.to_dict(orient="records")]
    payload = {"provenance": dict(provenance), "results": records}
    text = json.dumps(payload, indent=2, allow_nan=False, default=str)
    with atomic_open(csv_path, "w", newline="", encoding="utf-8") as f:
        df.to_csv(f, index=False)
    with atomic_open(json_path, "w", encoding="utf-8") as f:
        f.write(text + "\n")
    return csv_path, json_path


def read_results(out_dir: str | os.PathLike) -> pd.DataFrame:
    """Read ``results.csv`` from ``out_dir`` (or a path to the CSV itself), validated and typed."""
    path = Path(out_dir)
    if path.is_dir() or path.suffix != ".csv":
        path = path / CSV_NAME
    if not path.is_file():
        raise FileNotFoundError(f"no results table at {path}")
    df = pd.read_csv(
        path,
        dtype={c: str for c in (*_STRING_COLUMNS, INTERVENTION)},
        keep_default_na=False,
        na_values={c: [""] for c in _FLOAT_COLUMNS},
    )
    return validate_results(df, source=str(path))


def write_side_table(df: pd.DataFrame, out_dir: str | os.PathLike, name: str) -> Path:
    """Write the registered side table ``name`` (:data:`~probing.results.schema.SIDE_TABLES`: ``"mix_weights"``,
    ``"per_tag"``, ``"similarity"``, ``"learning_curve"``, ``"data_efficiency"`` and those of the task options)
    as ``<name>.csv`` in ``out_dir`` (atomically)."""
    columns = list(SIDE_TABLES[name].columns)
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ResultsFormatError(f"{name} table: missing column {missing[0]!r} (expected columns {columns})")
    path = Path(out_dir) / f"{name}.csv"
    with atomic_open(path, "w", newline="", encoding="utf-8") as f:
        df[columns].to_csv(f, index=False)
    return path


def read_side_table(out_dir: str | os.PathLike, name: str) -> pd.DataFrame | None:
    """Side table ``name`` of a run folder (text columns kept as text), or None when the file is absent."""
    table = SIDE_TABLES[name]
    columns = list(table.columns)
    path = Path(out_dir) / table.file
    if not path.is_file():
        return None
    df = pd.read_csv(path, dtype={c: str for c in table.text}, keep_default_na=False)
    if name == "mix_weights" and "refit" not in df.columns:
        df["refit"] = 0  # written before bootstrap refits existed: every row is a fit on all training data
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ResultsFormatError(f"{path}: missing column {missing[0]!r} (expected columns {columns})")
    return df


def read_provenance(out_dir: str | os.PathLike) -> dict[str, Any]:
    """The provenance block of ``results.json`` in ``out_dir``."""
    path = Path(out_dir) / JSON_NAME
    if not path.is_file():
        raise FileNotFoundError(f"no results.json at {path}")
    with open(path, encoding="utf-8") as f:
        payload = json.load(f)
    if not isinstance(payload, dict) or "provenance" not in payload:
        raise ResultsFormatError(f"{path}: expected an object with a 'provenance' key")
    return payload["provenance"]


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def provenance(**extra: Any) -> dict[str, Any]:
    """Versions, platform and UTC time of a run, plus any ``extra`` fields (e.g. fingerprints)."""
    import probing

    info: dict[str, Any] = {
        "probing": probing.__version__,
        "python": sys.version.split()[0],
        "torch": _version("torch"),
        "numpy": np.__version__,
        "scikit-learn": _version("scikit-learn"),
        "pandas": pd.__version__,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    info.update(extra)
    return info
