"""The report's first lines: per task and encoder, the best single layer, how sure that is, and whether a
baseline that reads no layer beats it.

:func:`verdict` reads the tidy results table and returns one :class:`Finding` per task, dataset, split and
encoder on the task's headline metric; each renders itself as one sentence (:meth:`Finding.sentence`).
The best layer follows the metric's ``higher_is_better``; the comparison with the runner-up is the paired
bootstrap over test sentences of the ``best-layer-margin`` rows (both layers score the same sentences, so
the test is on the per-sentence differences, not on whether two intervals overlap).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from probing.figures import split_layer
from probing.layers import is_half
from probing.results.aggregate import aggregate
from probing.results.schema import CONCAT_LAYER, MIX_LAYER, layer_sort_key, metric

__all__ = ["Finding", "verdict"]


@dataclass(frozen=True)
class Finding:
    """The best single layer of one encoder on one task part.

    ``margin``: (value, ci_low, ci_high) of the paired difference best - runner-up (in the metric's own
    units, a fraction for percent metrics), or None when no ``best-layer-margin`` row names this best layer;
    ``beaten_by``: the baselines that score better than every single layer, best first, as (name, value).
    """

    task: str
    dataset: str
    split: str
    metric: str
    encoder: str
    layer: str
    value: float
    ci_low: float
    ci_high: float
    runner_up: str | None
    runner_up_value: float | None
    margin: tuple[float, float, float] | None
    beaten_by: tuple[tuple[str, float], ...]

    @property
    def significant(self) -> bool | None:
        """The paired CI of best - runner-up excludes zero (None: no paired test)."""
        if self.margin is None:
            return None
        _, lo, hi = self.margin
        return lo > 0 if metric(self.metric).higher_is_better else hi < 0

    def sentence(self) -> str:
        """E.g. "upos (ewt test), elmo: best single layer 1, accuracy 96.0 [95.5, 96.5]; runner-up layer 2
        (95.0), difference 1.0 [0.4, 1.6], significant (paired bootstrap over test sentences)." """
        m = metric(self.metric)
        score = f"{m.label.removesuffix(' (%)')} {m.format(self.value)}"
        if not (math.isnan(self.ci_low) or math.isnan(self.ci_high)):
            score += f" [{m.format(self.ci_low)}, {m.format(self.ci_high)}]"
        text = f"{self.task} ({self.dataset} {self.split}), {self.encoder}: best single layer {self.layer}, {score}"
        if self.runner_up is not None and self.runner_up_value is not None:
            text += f"; runner-up layer {self.runner_up} ({m.format(self.runner_up_value)})"
            if self.margin is not None:
                diff, lo, hi = self.margin
                word = "significant" if self.significant else "not significant"
                text += (
                    f", difference {m.format(diff)} [{m.format(lo)}, {m.format(hi)}], {word} "
                    "(paired bootstrap over test sentences)"
                )
        if self.beaten_by:
            names = ", ".join(f"{name} ({m.format(v)})" for name, v in self.beaten_by)
            text += f". Every layer is below the baseline{'s' if len(self.beaten_by) > 1 else ''} {names}"
        return text + "."


def verdict(results: pd.DataFrame) -> list[Finding]:
    """One :class:`Finding` per task, dataset, split and encoder with single-layer rows on the headline
    metric, in the table's order (seeds averaged as in the figures). Tasks without a headline metric among
    their rows (e.g. MDL codelengths, measured on the training split) are left out."""
    from probing.tasks import TASK_KINDS, headline_metrics  # on first use: the kinds' modules import torch

    agg = aggregate(results)
    headlines = {kind.headline for kind in TASK_KINDS.values()}
    found = []
    for (task, dataset, split), g in agg.groupby(["task", "dataset", "split"], sort=False):
        if not set(g["metric"]) & headlines:
            continue
        name = headline_metrics(g)[str(task)]
        better = 1.0 if metric(name).higher_is_better else -1.0
        rows = g[(g["metric"] == name) & ~g["layer"].astype(str).map(is_half)]
        series: dict[str, list] = {}
        baselines = []
        for r in rows.itertuples(index=False):
            parsed = split_layer(r.encoder, r.layer)
            if parsed is None:
                baselines.append((str(r.layer), float(r.value)))
            elif parsed[1] not in (MIX_LAYER, CONCAT_LAYER):
                series.setdefault(parsed[0], []).append((parsed[1], r))
        margins = {split_layer(r.encoder, r.layer): r for r in g[g["metric"] == "best-layer-margin"].itertuples()}
        for encoder, pts in series.items():
            ranked = sorted(pts, key=lambda p: (-better * p[1].value, layer_sort_key(p[0])))
            (layer, best), runner = ranked[0], ranked[1] if len(ranked) > 1 else None
            m = margins.get((encoder, layer))
            beaten = sorted(
                ((b, v) for b, v in baselines if better * v > better * best.value), key=lambda b: -better * b[1]
            )
            found.append(
                Finding(
                    task=str(task),
                    dataset=str(dataset),
                    split=str(split),
                    metric=name,
                    encoder=encoder,
                    layer=layer,
                    value=float(best.value),
                    ci_low=float(best.ci_low),
                    ci_high=float(best.ci_high),
                    runner_up=None if runner is None else runner[0],
                    runner_up_value=None if runner is None else float(runner[1].value),
                    margin=None if m is None or runner is None else (float(m.value), float(m.ci_low), float(m.ci_high)),
                    beaten_by=tuple(beaten),
                )
            )
    return found
