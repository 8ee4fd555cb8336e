"""Word-identity baselines of the token-labelling kinds: the majority class and the most frequent tag per word
type, fit on the probes' training items; rows with encoder ``baseline``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from probing.probes.baselines import MajorityBaseline, MostFrequentTagBaseline
from probing.results import BASELINE_ENCODER
from probing.tasks.common import (
    Part,
    ProbeSettings,
    TaskError,
    TaskOutput,
    fraction_row,
    per_tag_rows,
)
from probing.tasks.curves import CurveOptions, CurveScores, curve_rows
from probing.tasks.labels import Items, LabelFn, VocabFn, items, split_rows, train_dev, vocabulary_splits

TAGGING_BASELINES = ("majority", "most-frequent-tag")


def _baseline_curve(model_type, tr: Items, tests: list[tuple[Part, Items]]) -> CurveScores:
    """A word-identity baseline refitted on a subset of the training items, scored on every test part."""

    def scores(sub: np.ndarray) -> list[tuple[Part, np.ndarray, np.ndarray]]:
        model = model_type().fit(tr.words[sub].tolist(), tr.y[sub])
        return [(p, (model.predict(it.words.tolist()) == it.y).astype(np.float64), it.groups) for p, it in tests]

    return scores


def tagging_baselines(
    task: str,
    train: Part,
    dev: Part | None,
    tests: Sequence[Part],
    labels: LabelFn,
    settings: ProbeSettings,
    *,
    which: Sequence[str] = TAGGING_BASELINES,
    vocabularies: Mapping[str, VocabFn] | None = None,
    curve: CurveOptions | None = None,
) -> TaskOutput:
    """Majority class and most frequent tag per word type (unknown words: the majority class), fit on the
    same training items as the probes; rows with encoder ``baseline`` (and :func:`split_rows` with
    ``vocabularies``, learning-curve rows with ``curve``)."""
    unknown = sorted(set(which) - set(TAGGING_BASELINES))
    if unknown:
        raise TaskError(f"task {task!r}: unknown tagging baseline(s) {unknown}; known: {list(TAGGING_BASELINES)}")
    tr, _ = train_dev(train, dev, labels, task)
    out = TaskOutput()
    seed = settings.seeds[0]
    models = {"majority": MajorityBaseline, "most-frequent-tag": MostFrequentTagBaseline}
    for layer in which:
        model = models[layer]()
        model.fit(tr.words.tolist(), tr.y)
        for part in tests:
            it = items(part, labels, task)
            correct = model.predict(it.words.tolist()) == it.y
            out.rows.append(
                fraction_row(task, part, BASELINE_ENCODER, layer, "accuracy", correct, it.groups, seed, settings.n_boot)
            )
            out.table("per_tag").extend(per_tag_rows(task, part, BASELINE_ENCODER, layer, it.y, correct, seed))
            if vocabularies is not None:
                splits = vocabulary_splits(it.words.tolist(), vocabularies)
                out.rows += split_rows(
                    task, part, BASELINE_ENCODER, layer, correct, it.groups, splits, seed, settings.n_boot
                )
        if curve is not None:
            scores = _baseline_curve(models[layer], tr, [(p, items(p, labels, task)) for p in tests])
            out.table("learning_curve").extend(
                curve_rows(
                    task, BASELINE_ENCODER, layer, tr.groups, curve, settings.seeds, scores, "accuracy", settings.n_boot
                )
            )
    return out
