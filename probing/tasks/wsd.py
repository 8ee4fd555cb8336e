"""Word-sense disambiguation from stored activations: Peters et al.'s 1-NN sense centroids and WSD baselines.

For each layer, the centroid of every sense is the mean vector of its training (SemCor) occurrences; a
test instance takes the nearest centroid among its lemma's WordNet senses, or the WordNet first sense when
none of them occurred in training. F1 follows Raganato et al.'s scorer; every instance is answered, so
F1 = precision = recall = the mean per-instance credit, and its CI is a cluster bootstrap over sentences.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from probing.probes.wsd import MostFrequentSense, SenseCentroids, instances_from_tokens, score_wsd, wn_first_sense
from probing.results import BASELINE_ENCODER
from probing.results.metrics import WSD_METRICS
from probing.tasks.common import (
    Job,
    Part,
    ProbeSettings,
    TaskError,
    TaskKind,
    TaskOutput,
    fraction_row,
    margin_rows,
)
from probing.tasks.curves import CurveOptions, CurveScores, curve_rows

if TYPE_CHECKING:
    from probing._toml import Table

WSD_BASELINES = ("wn-first-sense", "semcor-mfs")


def instances(part: Part, task: str) -> pd.DataFrame:
    """The sense-annotated tokens of ``part``: ``row, instance_id, lemma, pos, keys, sentence_id``.

    A token without an instance id gets ``<sentence_id>.<position>``, so every instance can be scored.
    """
    tokens = part.store.tokens
    inst = instances_from_tokens(tokens)
    if inst.empty:
        raise TaskError(f"task {task!r}: {part.dataset}/{part.split} has no sense-annotated tokens")
    rows = inst["row"].to_numpy()
    inst["sentence_id"] = tokens["sentence_id"].to_numpy()[rows]
    fallback = inst["sentence_id"] + "." + tokens["position"].to_numpy()[rows].astype(str)
    inst["instance_id"] = inst["instance_id"].where(inst["instance_id"] != "", fallback)
    dup = inst["instance_id"].duplicated()
    if dup.any():
        raise TaskError(
            f"task {task!r}: {part.dataset}/{part.split} repeats instance id {inst['instance_id'][dup].iloc[0]!r}"
        )
    return inst


def _f1_row(
    task: str,
    part: Part,
    encoder: str,
    layer: str,
    inst: pd.DataFrame,
    pred: Sequence[str],
    seed: int,
    settings: ProbeSettings,
) -> tuple[dict, dict]:
    gold = dict(zip(inst["instance_id"], inst["keys"]))
    scores = score_wsd(dict(zip(inst["instance_id"], pred)), gold)
    credit = _credit(pred, inst)
    row = fraction_row(
        task,
        part,
        encoder,
        layer,
        "f1",
        credit,
        inst["sentence_id"].to_numpy(),
        seed,
        settings.n_boot,
        value=scores["F1"],
    )
    return row, scores


def wsd_1nn(
    task: str,
    encoder: str,
    train: Part,
    tests: Sequence[Part],
    settings: ProbeSettings,
    *,
    inventory=None,
    metric: str = "cosine",
    progress=None,
    curve: CurveOptions | None = None,
) -> TaskOutput:
    """F1 of 1-NN sense centroids for every layer of one encoder, on each test part (``metric`` f1); with
    ``curve`` (the ``learning_curve`` options), learning-curve rows per layer (:mod:`probing.tasks.curves`)."""
    tests = list(tests)
    train_inst = instances(train, task)
    test_inst = [(p, instances(p, task)) for p in tests]
    out = TaskOutput()
    seed = settings.seeds[0]
    single: dict[str, list[tuple[Part, np.ndarray, np.ndarray]]] = {}
    for layer in train.store.layer_names:
        if progress:
            progress(f"{task} {encoder} layer {layer}")
        model = SenseCentroids(metric=metric, inventory=inventory).fit(
            train.store.layer(layer), train_inst["keys"].tolist(), rows=train_inst["row"].to_numpy()
        )
        for part, inst in test_inst:
            details = model.predict_details(
                part.store.layer(layer), inst["lemma"].tolist(), inst["pos"].tolist(), rows=inst["row"].to_numpy()
            )
            pred = details["sense"].tolist()
            row, scores = _f1_row(task, part, encoder, layer, inst, pred, seed, settings)
            out.rows.append(row)
            credit = _credit(pred, inst)
            single.setdefault(layer, []).append((part, credit, inst["sentence_id"].to_numpy()))
            out.probes.append(
                {
                    "task": task,
                    "encoder": encoder,
                    "layer": layer,
                    "seed": seed,
                    "train": f"{train.dataset}/{train.split}",
                    "test": f"{part.dataset}/{part.split}",
                    "metric": metric,
                    "n_train": len(train_inst),
                    "n_senses": len(model.keys_),
                    "n_test": len(inst),
                    "backoff": float(details["backoff"].mean()),
                    "P": scores["P"],
                    "R": scores["R"],
                }
            )
    out.rows += margin_rows(task, encoder, single, seed, settings.n_boot)
    if curve is not None:
        for layer in train.store.layer_names:
            if progress:
                progress(f"{task} {encoder} layer {layer}: learning curve")
            curve_scores = _centroid_curve(train, layer, train_inst, test_inst, inventory, metric)
            groups = train_inst["sentence_id"].to_numpy()
            out.table("learning_curve").extend(
                curve_rows(task, encoder, layer, groups, curve, settings.seeds, curve_scores, "f1", settings.n_boot)
            )
    return out


def _credit(pred: Sequence[str], inst: pd.DataFrame) -> np.ndarray:
    """1.0 per instance whose answer is one of its gold keys (Raganato's F1 when every instance is answered)."""
    return np.array([1.0 if p in keys else 0.0 for p, keys in zip(pred, inst["keys"])])


def _centroid_curve(
    train: Part, layer: str, train_inst: pd.DataFrame, test_inst, inventory, metric: str
) -> CurveScores:
    """1-NN sense centroids of ``layer`` fitted on a subset of the training instances, scored on each test part."""

    def scores(sub: np.ndarray) -> list[tuple[Part, np.ndarray, np.ndarray]]:
        model = SenseCentroids(metric=metric, inventory=inventory).fit(
            train.store.layer(layer), train_inst["keys"].iloc[sub].tolist(), rows=train_inst["row"].to_numpy()[sub]
        )
        out = []
        for part, inst in test_inst:
            pred = model.predict(
                part.store.layer(layer), inst["lemma"].tolist(), inst["pos"].tolist(), rows=inst["row"].to_numpy()
            )
            out.append((part, _credit(list(pred), inst), inst["sentence_id"].to_numpy()))
        return out

    return scores


def wsd_baselines(
    task: str,
    train: Part,
    tests: Sequence[Part],
    settings: ProbeSettings,
    *,
    inventory=None,
    which: Sequence[str] = WSD_BASELINES,
    curve: CurveOptions | None = None,
) -> TaskOutput:
    """WordNet first sense and SemCor most frequent sense (counted on ``train``): rows with encoder ``baseline``;
    with ``curve``, the most frequent sense's learning curve (the first sense learns nothing from SemCor)."""
    unknown = sorted(set(which) - set(WSD_BASELINES))
    if unknown:
        raise TaskError(f"task {task!r}: unknown WSD baseline(s) {unknown}; known: {list(WSD_BASELINES)}")
    out = TaskOutput()
    seed = settings.seeds[0]
    mfs = MostFrequentSense(inventory).fit(instances(train, task)["keys"]) if "semcor-mfs" in which else None
    for part in tests:
        inst = instances(part, task)
        lemmas, pos = inst["lemma"].tolist(), inst["pos"].tolist()
        for name in which:
            if name == "wn-first-sense":
                pred = wn_first_sense(lemmas, pos, inventory)
            else:
                assert mfs is not None  # fitted above whenever semcor-mfs is asked for
                pred = mfs.predict(lemmas, pos)
            out.rows.append(_f1_row(task, part, BASELINE_ENCODER, name, inst, pred, seed, settings)[0])
    if curve is not None and "semcor-mfs" in which:
        train_inst = instances(train, task)
        tests_inst = [(p, instances(p, task)) for p in tests]

        def scores(sub: np.ndarray) -> list[tuple[Part, np.ndarray, np.ndarray]]:
            model = MostFrequentSense(inventory).fit(train_inst["keys"].iloc[sub])
            return [
                (p, _credit(model.predict(i["lemma"].tolist(), i["pos"].tolist()), i), i["sentence_id"].to_numpy())
                for p, i in tests_inst
            ]

        out.table("learning_curve").extend(
            curve_rows(
                task,
                BASELINE_ENCODER,
                "semcor-mfs",
                train_inst["sentence_id"].to_numpy(),
                curve,
                settings.seeds,
                scores,
                "f1",
                settings.n_boot,
            )
        )
    return out


def _run(job: Job) -> TaskOutput:
    out = wsd_1nn(
        job.task,
        job.encoder,
        job.train_part(),
        job.tests,
        job.settings,
        inventory=job.inventory,
        metric=job.options["metric"],
        progress=job.progress,
        curve=job.options.get("learning_curve"),
    )
    if job.with_baselines and job.baselines:
        out.extend(
            wsd_baselines(
                job.task,
                job.train_part(),
                job.tests,
                job.settings,
                inventory=job.inventory,
                which=job.baselines,
                curve=job.options.get("learning_curve"),
            )
        )
    return out


def _parse(t: Table) -> dict[str, Any]:
    return {"metric": t.string("metric", "cosine", choices=("cosine", "euclidean"))}


WSD_1NN = TaskKind(
    "wsd-1nn",
    run=_run,
    metrics=WSD_METRICS,
    headline="f1",
    parse=_parse,
    baselines=WSD_BASELINES,
    uses_wordnet=True,
    allows_dev=False,
    overview=True,
    task_options=("learning_curve", "erase"),
)
