"""The ``data_efficiency`` side table from the ``learning_curve`` one: how many times more training sentences
each curve's reference needs (issue 31; the ratio is :func:`probing.probes.curves.data_efficiency_ratio`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from probing.probes.curves import data_efficiency_ratio
from probing.results.schema import DATA_EFFICIENCY_COLUMNS, metric

AT_FRACTIONS = (0.01, 0.05, 0.1)


def data_efficiency(curves: pd.DataFrame, at: Sequence[float] = AT_FRACTIONS) -> pd.DataFrame:
    """Ratio rows (``measure = "ratio"``) for every ordered pair of curves of the same task, test part, metric
    and seed: how many times more training sentences ``reference_encoder``/``reference_layer`` needs to
    reach the score that ``encoder``/``layer`` reaches with ``at_fraction`` of them (``inf``: not within
    the full set). Only fractions in ``at`` that the curve measured are used.

    curves : a ``learning_curve`` table (:data:`~probing.results.schema.LEARNING_CURVE_COLUMNS`).
    Returns a frame with :data:`~probing.results.schema.DATA_EFFICIENCY_COLUMNS`.
    """
    rows = []
    keys = ["task", "dataset", "split", "metric", "seed"]
    for (task, dataset, split, name, seed), part in curves.groupby(keys, sort=True):
        better = metric(name).higher_is_better
        series = {who: g.sort_values("n_train_sentences") for who, g in part.groupby(["encoder", "layer"], sort=False)}
        for (encoder, layer), curve in series.items():
            n = curve["n_train_sentences"].to_numpy(dtype=np.float64)
            fractions = curve["train_fraction"].to_numpy(dtype=np.float64)
            for f in at:
                hit = np.flatnonzero(np.isclose(fractions, f))
                if not hit.size:
                    continue
                for (ref_encoder, ref_layer), ref in series.items():
                    if (ref_encoder, ref_layer) == (encoder, layer):
                        continue
                    ratio = data_efficiency_ratio(
                        n,
                        curve["value"],
                        ref["n_train_sentences"],
                        ref["value"],
                        at=float(n[hit[0]]),
                        higher_is_better=better,
                    )
                    rows.append(
                        {
                            "task": task,
                            "dataset": dataset,
                            "split": split,
                            "encoder": encoder,
                            "layer": layer,
                            "reference_encoder": ref_encoder,
                            "reference_layer": ref_layer,
                            "at_fraction": float(f),
                            "ratio": ratio,
                            "measure": "ratio",
                            "epsilon": math.nan,
                            "value": math.nan,
                            "bound": "",
                            "seed": int(seed),
                        }
                    )
    return pd.DataFrame(rows, columns=DATA_EFFICIENCY_COLUMNS)
