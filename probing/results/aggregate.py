"""Averaging a results table over seeds: the one aggregation the figures, the summary and the report use."""

from __future__ import annotations

import math

import pandas as pd
from scipy import stats

from probing.errors import InputError
from probing.results.schema import INTERVENTION, RESULT_COLUMNS
from probing.results.tables import validate_results

__all__ = ["KEY_COLUMNS", "aggregate"]

KEY_COLUMNS = ["task", "dataset", "split", "encoder", "layer", "metric"]


def aggregate(results: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """Average over seeds: one row per ``task, dataset, split, encoder, layer, metric``.

    Columns: those keys plus ``value`` (mean over seeds), ``ci_low``, ``ci_high`` and ``n_seeds``.
    With one seed the row's own CI is kept; with several, the CI is the Student-t interval of the mean
    of the seed values (seed-to-seed variation), at ``confidence``.
    """
    df = _check_results(results)
    seed_key = df["seed"].astype(str)
    dup = df.assign(_seed=seed_key).duplicated(subset=KEY_COLUMNS + ["_seed"], keep=False)
    if dup.any():
        r = df[dup].iloc[0]
        raise InputError(
            "results: duplicate rows for "
            + ", ".join(f"{k}={r[k]!r}" for k in KEY_COLUMNS + ["seed"])
            + "; each key and seed must appear once"
        )
    rows = []
    for key, g in df.groupby(KEY_COLUMNS, sort=False):
        n = len(g)
        mean = float(g["value"].mean())
        if n == 1:
            lo, hi = float(g["ci_low"].iloc[0]), float(g["ci_high"].iloc[0])
        else:
            half = stats.t.ppf(0.5 + confidence / 2, n - 1) * g["value"].std(ddof=1) / math.sqrt(n)
            lo, hi = mean - half, mean + half
        rows.append((*key, mean, lo, hi, n))
    return pd.DataFrame(rows, columns=KEY_COLUMNS + ["value", "ci_low", "ci_high", "n_seeds"])


def _check_results(results: pd.DataFrame) -> pd.DataFrame:
    """Validate the results contract (:func:`validate_results`) and return a typed copy of the rows of the
    unedited representation (``intervention == ""``: erased and intervened rows are compared elsewhere)."""
    if not isinstance(results, pd.DataFrame):
        raise TypeError(f"results: expected a pandas DataFrame, got {type(results).__name__}")
    required = [c for c in RESULT_COLUMNS if c != INTERVENTION]
    missing = [c for c in required if c not in results.columns]
    if missing:
        raise InputError(f"results: missing column(s) {missing}; expected columns {required}")
    df = validate_results(results)
    return df[df[INTERVENTION] == ""].reset_index(drop=True)
