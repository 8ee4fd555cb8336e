"""The summary table as printed in a terminal, with each row's best single layer marked."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from probing.layers import is_half
from probing.results.schema import BASELINE_ENCODER, CONCAT_LAYER, MIX_LAYER, metric

BEST_MARK = "*"


def format_summary(summary: pd.DataFrame, headlines: Mapping[str, str]) -> str:
    """``Results.summary()`` (one row per task, dataset, split, encoder; one column per layer; percent) as
    text, the best single layer of each encoder's row marked with ``*`` (by the task's headline metric in
    ``headlines``; the mix, the concatenation, direction halves and baselines are not single layers), and a
    line that says what the mark means."""
    if summary.empty:
        return ""
    cells = summary.apply(lambda col: col.map(lambda v: "" if pd.isna(v) else f"{v:.1f}")).astype(object)
    marked = False
    for i, key in enumerate(summary.index):
        task, encoder = key[0], key[3]
        if encoder == BASELINE_ENCODER:
            continue
        row = summary.iloc[i]
        single = row[[c for c in summary.columns if c not in (MIX_LAYER, CONCAT_LAYER) and not is_half(c)]].dropna()
        if len(single) < 2:
            continue
        best = single.idxmax() if metric(headlines[task]).higher_is_better else single.idxmin()
        cells.iloc[i, list(summary.columns).index(best)] += BEST_MARK
        marked = True
    text = cells.to_string()
    return text + (f"\n{BEST_MARK} best single layer of the row" if marked else "")
