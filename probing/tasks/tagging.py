"""Token-labelling probes (POS tags, supersenses) on stored activations, with control tasks and baselines.

For one encoder, every layer gets a linear probe (L2 strength chosen on dev accuracy), then a learned
scalar mix of all layers and the concatenation of all layers; each layer is also probed on Hewitt &
Liang's control task (one per seed) with the task's chosen C, and ``selectivity = accuracy - control
accuracy`` is reported per seed with a paired bootstrap CI. Word-identity baselines (majority class, most
frequent tag per word type) read only the token table.

An item is a token whose label is not ``""``; labels come from a :data:`LabelFn` on the store's token table:
a column (``label = "upos"``, ``"xpos"``, ``"lemma"``, ``"deprel"``, ``"feats"``: the whole FEATS string) or one
morphological feature, ``label = "feats:Number"`` (the feature's value in FEATS, ``"none"`` where the token
has no such feature: every token is an item).

Two options of a ``[[tasks]]`` table (issue 21): ``directions = true`` also probes the forward and backward
half of each biLSTM layer (layers ``"1f"``, ``"1b"``, ...: :mod:`probing.layers`); ``oov_split = true`` adds
accuracy rows for the tokens inside and outside each vocabulary of :func:`default_vocabularies` (metrics
``accuracy-iv-glove``, ``accuracy-oov-glove``, ``accuracy-iv-train``, ``accuracy-oov-train``).
"""

from __future__ import annotations

import difflib
import functools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from probing.layers import direction_names
from probing.probes.baselines import MajorityBaseline, MostFrequentTagBaseline
from probing.probes.control import ControlTask, selectivity
from probing.probes.linear import LinearProbe, concat_layers, select_l2
from probing.probes.mdl import FRACTIONS, control_codelength, online_codelength
from probing.probes.mix import ScalarMixProbe, bootstrap_mix_weights, select_mix_l2
from probing.protocols import StoreLike
from probing.results import BASELINE_ENCODER, make_row
from probing.store.format import TOKEN_COLUMNS
from probing.tasks.common import (
    Job,
    Part,
    ProbeSettings,
    Step,
    StepResult,
    TaskError,
    TaskKind,
    TaskOutput,
    check_layers,
    compute_step,
    fraction_row,
    holdout_dev,
    layer_rows,
    margin_rows,
    per_tag_rows,
    quiet_fit,
    sentence_groups,
)
from probing.tasks.curves import CurveScores, curve_rows, parse_learning_curve
from probing.tasks.metrics import TAGGING_METRICS

if TYPE_CHECKING:
    from probing._toml import Table

LabelFn = Callable[[pd.DataFrame], np.ndarray]
VocabFn = Callable[[Sequence[str]], np.ndarray]
"""Words -> bool ``(n_words,)``: which of them are in a vocabulary."""
TAGGING_BASELINES = ("majority", "most-frequent-tag")
# token-table columns that are not per-token labels a probe could predict
_NOT_LABELS = {"sentence_id", "doc_id", "position", "word", "sense", "instance_id", "oov", "head"}
LABEL_COLUMNS = tuple(c for c in TOKEN_COLUMNS if c not in _NOT_LABELS)
FEATS_PREFIX = "feats:"
NO_FEATURE = "none"
_FEATURE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*(\[[a-z0-9]+\])?$")  # UD: Number, Number[psor]
LABEL_FORMS = (
    f"{', '.join(LABEL_COLUMNS)}, or {FEATS_PREFIX}FEATURE (one FEATS feature, e.g. feats:Number, feats:Tense)"
)


def column_labels(column: str) -> LabelFn:
    """Labels from a token-table column (``upos``, ``xpos``)."""

    def labels(tokens: pd.DataFrame) -> np.ndarray:
        if column not in tokens.columns:
            raise TaskError(f"the token table has no column {column!r}")
        return tokens[column].fillna("").astype(str).to_numpy()

    labels.__name__ = column
    return labels


def feature_labels(feature: str) -> LabelFn:
    """The value of one FEATS feature per token (``Number=Sing|Person=3`` -> ``Sing`` for ``Number``; multiple
    values stay as written, ``Sing,Plur``), :data:`NO_FEATURE` where the token lacks it."""
    if not _FEATURE_NAME.match(feature):
        raise TaskError(f"{feature!r} is not a FEATS feature name (e.g. Number, Tense, Person, Number[psor])")
    pattern = rf"(?:^|\|){re.escape(feature)}=([^|]*)"

    def labels(tokens: pd.DataFrame) -> np.ndarray:
        if "feats" not in tokens.columns:
            raise TaskError("the token table has no FEATS column (a store written before it existed: re-extract)")
        feats = tokens["feats"].fillna("").astype(str)
        if not (feats != "").any():
            raise TaskError(f"label {FEATS_PREFIX}{feature}: no token has FEATS (is the corpus CoNLL-U with FEATS?)")
        return feats.str.extract(pattern, expand=False).fillna(NO_FEATURE).astype(str).to_numpy()

    labels.__name__ = f"{FEATS_PREFIX}{feature}"
    return labels


def feature_names(tokens: pd.DataFrame) -> list[str]:
    """The FEATS feature names that occur in a token table (sorted; empty without a FEATS column)."""
    if "feats" not in tokens.columns:
        return []
    pairs = tokens["feats"].fillna("").astype(str).str.split("|").explode()
    return sorted({p.split("=", 1)[0] for p in pairs if "=" in p})


def _absent_feature(label: str, tokens: pd.DataFrame) -> str:
    """The error text for a ``feats:X`` label that no training token has: the features the corpus has, the
    closest first."""
    have = feature_names(tokens)
    close = difflib.get_close_matches(label[len(FEATS_PREFIX) :], have, n=1, cutoff=0.6)
    hint = f" (did you mean {FEATS_PREFIX}{close[0]}?)" if close else ""
    return f"no training token has the feature {label[len(FEATS_PREFIX) :]!r}{hint}; the corpus has " + (
        ", ".join(have) or "no FEATS"
    )


def label_function(label: str) -> LabelFn:
    """The :data:`LabelFn` of a tagging task's ``label`` (see the module docstring)."""
    if label.startswith(FEATS_PREFIX):
        return feature_labels(label[len(FEATS_PREFIX) :])
    return column_labels(label)


def is_label(label: str) -> bool:
    """Whether ``label`` is a tagging label: one of :data:`LABEL_COLUMNS` or ``feats:FEATURE``."""
    if label.startswith(FEATS_PREFIX):
        return _FEATURE_NAME.match(label[len(FEATS_PREFIX) :]) is not None
    return label in LABEL_COLUMNS


def supersense_labels(inventory=None) -> LabelFn:
    """The lexname (WordNet supersense, e.g. ``noun.person``) of each annotated token's first gold key."""
    from probing.probes.wsd import supersense_labels as lexnames

    def labels(tokens: pd.DataFrame) -> np.ndarray:
        senses = tokens["sense"].fillna("").astype(str).to_numpy()
        out = np.full(len(senses), "", dtype=object)
        annotated = np.flatnonzero(np.char.str_len(senses.astype(str)) > 0)
        out[annotated] = lexnames(senses[annotated].tolist(), inventory)
        return out.astype(str)

    labels.__name__ = "supersense"
    return labels


def default_vocabularies() -> dict[str, VocabFn]:
    """The vocabularies ``oov_split`` splits by: ``glove`` (GloVe 6B, lowercased lookups: its OOV tokens get
    the zero vector) and ``train`` (the bundled model's training vocabulary, case-sensitive:
    :func:`probing.encoders.training_vocabulary`)."""
    from probing.encoders import training_vocabulary
    from probing.glove import Vectors

    glove = Vectors.glove_6b_50d()
    train = training_vocabulary("default")
    return {
        "glove": lambda words: ~np.asarray(glove.lookup(list(words))[1], dtype=bool),
        "train": lambda words: np.fromiter((w in train for w in words), dtype=bool, count=len(words)),
    }


def vocabulary_splits(words: Sequence[str], vocabularies: Mapping[str, VocabFn]) -> dict[str, np.ndarray]:
    """For each vocabulary, the in-vocabulary mask of ``words`` (bool ``(n_words,)``)."""
    out = {}
    for name, fn in vocabularies.items():
        mask = np.asarray(fn(words), dtype=bool)
        if mask.shape != (len(words),):
            raise TaskError(f"vocabulary {name!r} gave a mask of shape {mask.shape} for {len(words)} words")
        out[name] = mask
    return out


def split_rows(
    task: str,
    part: Part,
    encoder: str,
    layer: str,
    correct: np.ndarray,
    groups: np.ndarray,
    splits: Mapping[str, np.ndarray],
    seed: int,
    n_boot: int,
) -> list[dict]:
    """``accuracy-iv-NAME`` and ``accuracy-oov-NAME`` rows (accuracy on the tokens inside / outside
    vocabulary NAME, with a cluster-bootstrap CI over sentences); a group with no token has no row."""
    rows = []
    for name, inside in splits.items():
        for group, mask in (("iv", inside), ("oov", ~inside)):
            if mask.any():
                metric = f"accuracy-{group}-{name}"
                rows.append(fraction_row(task, part, encoder, layer, metric, correct[mask], groups[mask], seed, n_boot))
    return rows


@dataclass
class Items:
    """The labelled tokens of one store: their rows, labels, words and sentence ids."""

    store: StoreLike
    rows: np.ndarray
    y: np.ndarray
    words: np.ndarray
    groups: np.ndarray
    oov: np.ndarray

    def take(self, rows: np.ndarray) -> Items:
        pos = np.searchsorted(self.rows, rows)
        return Items(self.store, rows, self.y[pos], self.words[pos], self.groups[pos], self.oov[pos])


def items(part: Part, labels: LabelFn, task: str) -> Items:
    tokens = part.store.tokens
    y = np.asarray(labels(tokens))
    rows = np.flatnonzero(y != "").astype(np.int64)
    if len(rows) == 0:
        raise TaskError(
            f"task {task!r}: {part.dataset}/{part.split} has no labelled tokens "
            f"(label {getattr(labels, '__name__', 'labels')!r} is empty everywhere)"
        )
    oov = tokens["oov"].to_numpy(dtype=bool) if "oov" in tokens.columns else np.zeros(len(tokens), bool)
    return Items(
        part.store,
        rows,
        y[rows].astype(str),
        tokens["word"].to_numpy()[rows].astype(str),
        sentence_groups(part.store, rows),
        oov[rows],
    )


def train_dev(train: Part, dev: Part | None, labels: LabelFn, task: str) -> tuple[Items, Items]:
    """Training and dev items; without a dev part, every 10th training sentence is held out as dev."""
    tr = items(train, labels, task)
    if dev is not None:
        return tr, items(dev, labels, task)
    tr_rows, dv_rows = holdout_dev(train.store, tr.rows)
    return tr.take(tr_rows), tr.take(dv_rows)


def fit_probe(X, y, X_dev, y_dev, settings: ProbeSettings, seed: int) -> tuple[LinearProbe, dict]:
    """A linear probe with C chosen on dev accuracy (:func:`~probing.probes.linear.select_l2`, ties to the
    smaller C), and notes on the choice."""
    params: dict[str, Any] = {"max_iter": settings.max_iter, "tol": settings.tol}
    if settings.solver == "adam":
        params.update(solver="adam", random_state=seed)
    probe, converged = quiet_fit(select_l2, X, y, X_dev, y_dev, Cs=settings.Cs, **params)
    return probe, {
        "C": float(probe.C),
        "dev_accuracy": float(probe.dev_score_),
        "n_iter": int(probe.n_iter_),
        "converged": converged,
        "l2_path": probe.l2_path_,
    }


def _fit_control(X, y_control, X_dev, y_dev_control, C: float, settings: ProbeSettings, seed: int):
    """The control probe: the task probe's family and C on control labels (a constant if only one label)."""
    classes = np.unique(y_control)
    if len(classes) < 2:
        return lambda X_: np.full(X_.shape[0], classes[0], dtype=classes.dtype)
    if settings.solver == "lbfgs":
        probe = LinearProbe(C=C, max_iter=settings.max_iter, tol=settings.tol)
        probe, _ = quiet_fit(probe.fit, X, y_control)
    else:
        probe = LinearProbe(C=C, solver="adam", max_iter=settings.max_iter, tol=settings.tol, random_state=seed)
        probe, _ = quiet_fit(probe.fit, X, y_control, X_dev, y_dev_control)
    return probe.predict


def _fit_mix(Xs, y, Xs_dev, y_dev, settings: ProbeSettings) -> tuple[ScalarMixProbe, dict]:
    probe, converged = quiet_fit(
        select_mix_l2, Xs, y, Xs_dev, y_dev, Cs=settings.Cs, max_iter=settings.mix_max_iter, tol=settings.tol
    )
    return probe, {
        "C": float(probe.C),
        "dev_accuracy": float(probe.dev_score_),
        "n_iter": int(probe.n_iter_),
        "converged": converged,
        "l2_path": probe.l2_path_,
    }


def _score(
    task: str,
    encoder: str,
    layer: str,
    predict,
    tests: list[tuple[Part, Items, object]],
    seed: int,
    settings: ProbeSettings,
    out: TaskOutput,
    splits: Sequence[Mapping[str, np.ndarray]] | None = None,
) -> list[np.ndarray]:
    """Accuracy rows and per-tag rows of ``predict`` on each test part (and, with ``splits``, one in-vocabulary
    mask per vocabulary for each part, the :func:`split_rows`); returns the per-item correctness."""
    correct_per_part = []
    for i, (part, it, X) in enumerate(tests):
        correct = predict(X) == it.y
        out.rows.append(fraction_row(task, part, encoder, layer, "accuracy", correct, it.groups, seed, settings.n_boot))
        out.per_tag += per_tag_rows(task, part, encoder, layer, it.y, correct, seed)
        if splits is not None:
            out.rows += split_rows(task, part, encoder, layer, correct, it.groups, splits[i], seed, settings.n_boot)
        correct_per_part.append(correct)
    return correct_per_part


def tagging_probes(
    task: str,
    encoder: str,
    train: Part,
    dev: Part | None,
    tests: Sequence[Part],
    labels: LabelFn,
    settings: ProbeSettings,
    *,
    progress=None,
    directions: bool = False,
    vocabularies: Mapping[str, VocabFn] | None = None,
    mdl: Mapping[str, Any] | None = None,
    curve: dict[str, Any] | None = None,
    step: Step = compute_step,
) -> TaskOutput:
    """Probe every layer of one encoder's stores, then the scalar mix and the concatenation of its layers.

    ``train``/``dev``/``tests`` hold the same encoder's activations for those splits; results are rows for
    each test part. ``progress`` (optional) is called with a short description before each probe.
    ``directions``: also probe each biLSTM layer's forward and backward half (rows with layers ``"1f"``,
    ``"1b"``, ...; no control task, margin, mix or concat for them). ``vocabularies`` (name -> in-vocabulary
    test): add :func:`split_rows` for every probe. ``mdl``
    (the MDL options of :func:`mdl_rows`, or None) adds online-codelength rows for every single layer;
    ``curve`` (the ``learning_curve`` options, or None) learning-curve rows (:mod:`probing.tasks.curves`).
    ``step`` runs each layer's probes, the mix and the concatenation as the steps :func:`tagging_work` names
    (:attr:`~probing.tasks.common.Job.step`: kept by the runner, so an interrupted job resumes at the layer).
    """
    tests = list(tests)
    if not tests:
        raise TaskError(f"task {task!r}: no test data")
    layer_names = check_layers(task, encoder, [train] + ([dev] if dev else []) + tests)
    tr, dv = train_dev(train, dev, labels, task)
    name = getattr(labels, "__name__", "")
    if name.startswith(FEATS_PREFIX) and (tr.y == NO_FEATURE).all():
        raise TaskError(f"task {task!r}: label {name}: {_absent_feature(name, train.store.tokens)}")
    if len(np.unique(tr.y)) < 2:
        raise TaskError(
            f"task {task!r}: the training items of {train.dataset}/{train.split} all have the label "
            f"{str(tr.y[0])!r}; a probe needs at least two classes (use more sentences)"
        )
    test_items = [(p, items(p, labels, task)) for p in tests]
    splits = (
        None if vocabularies is None else [vocabulary_splits(it.words.tolist(), vocabularies) for _, it in test_items]
    )
    out = TaskOutput()
    note = {
        "task": task,
        "encoder": encoder,
        "train": f"{train.dataset}/{train.split}",
        "n_train": len(tr.rows),
        "n_dev": len(dv.rows),
        "dev": f"{dev.dataset}/{dev.split}" if dev else "held out from train",
    }
    has_oov = bool(tr.oov.any() or any(it.oov.any() for _, it in test_items))
    if has_oov:
        note.update(n_train_oov=int(tr.oov.sum()), n_test_oov=[int(it.oov.sum()) for _, it in test_items])

    def load(layer: str) -> tuple:
        return (
            layer_rows(tr.store, layer, tr.rows),
            layer_rows(dv.store, layer, dv.rows),
            [layer_rows(p.store, layer, it.rows) for p, it in test_items],
        )

    data = {name: load(name) for name in layer_names}
    single: dict[str, list[tuple[Part, np.ndarray, np.ndarray]]] = {}
    tell = progress or (lambda _msg: None)

    def fit_layer(name: str) -> StepResult:
        layer_out = TaskOutput()
        X_tr, X_dv, X_te = data[name]
        tests_x = [(p, it, X) for (p, it), X in zip(test_items, X_te)]
        task_correct: dict[int, tuple[LinearProbe, list[np.ndarray]]] = {}
        for seed in settings.probe_seeds:
            tell(
                f"{task} {encoder} layer {name} (seed {seed})"
                if len(settings.probe_seeds) > 1
                else f"{task} {encoder} layer {name}"
            )
            probe, info = fit_probe(X_tr, tr.y, X_dv, dv.y, settings, seed)
            layer_out.probes.append({**note, "layer": name, "seed": seed, **info})
            task_correct[seed] = (
                probe,
                _score(task, encoder, name, probe.predict, tests_x, seed, settings, layer_out, splits),
            )
        if settings.control:
            tell(f"{task} {encoder} layer {name}: control tasks")
            _control(task, encoder, name, tr, dv, X_tr, X_dv, tests_x, task_correct, settings, layer_out)
        if has_oov:
            for part, it in test_items:
                layer_out.rows.append(
                    fraction_row(
                        task, part, encoder, name, "oov-rate", it.oov, it.groups, settings.seeds[0], settings.n_boot
                    )
                )
        return layer_out, task_correct[settings.probe_seeds[0]][1]

    for name in layer_names:
        layer_out, first = step(f"layer {name}", functools.partial(fit_layer, name))
        out.extend(layer_out)
        single[name] = [(p, ok, it.groups) for (p, it), ok in zip(test_items, first)]

    out.rows += margin_rows(task, encoder, single, settings.probe_seeds[0], settings.n_boot)

    def fit_half(name: str) -> StepResult:
        half_out = TaskOutput()
        X_tr, X_dv, X_te = load(name)
        tests_x = [(p, it, X) for (p, it), X in zip(test_items, X_te)]
        for seed in settings.probe_seeds:
            tell(f"{task} {encoder} layer {name}" + (f" (seed {seed})" if len(settings.probe_seeds) > 1 else ""))
            probe, info = fit_probe(X_tr, tr.y, X_dv, dv.y, settings, seed)
            half_out.probes.append({**note, "layer": name, "seed": seed, **info})
            _score(task, encoder, name, probe.predict, tests_x, seed, settings, half_out, splits)
        return half_out, []

    for name in direction_names(layer_names) if directions else []:
        out.extend(step(f"layer {name}", functools.partial(fit_half, name))[0])

    def fit_curve(name: str, curve: dict[str, Any]) -> StepResult:
        tell(f"{task} {encoder} layer {name}: learning curve")
        X_tr, X_dv, X_te = data[name]
        scores = _probe_curve(X_tr, X_dv, X_te, tr, dv, test_items, settings)
        full = [(p, ok.astype(np.float64), g) for p, ok, g in single[name]]
        rows = curve_rows(
            task, encoder, name, tr.groups, curve, settings.seeds, scores, "accuracy", settings.n_boot, full
        )
        return TaskOutput(learning_curve=rows), []

    def fit_mdl(name: str, mdl: Mapping[str, Any]) -> StepResult:
        tell(f"{task} {encoder} layer {name}: online codelength")
        return mdl_rows(task, encoder, name, train, tr, dv, data[name][0], data[name][1], settings, mdl), []

    def fit_mix() -> StepResult:
        mix_out = TaskOutput()
        tell(f"{task} {encoder} scalar mix")
        Xs = [data[n] for n in layer_names]
        probe, info = _fit_mix([x[0] for x in Xs], tr.y, [x[1] for x in Xs], dv.y, settings)
        seed = settings.seeds[0]
        mix_out.probes.append(
            {
                **note,
                "layer": "mix",
                "seed": seed,
                **info,
                "mix_weights": probe.mix_weights_.tolist(),
                "gamma": probe.gamma_,
            }
        )
        tests_x: list[tuple[Part, Items, object]] = [
            (p, it, [x[2][i] for x in Xs]) for i, (p, it) in enumerate(test_items)
        ]
        _score(task, encoder, "mix", probe.predict, tests_x, seed, settings, mix_out, splits)
        weights = [probe.mix_weights_]
        if settings.mix_refits:
            tell(f"{task} {encoder} scalar mix: {settings.mix_refits} bootstrap refits")
            weights += list(
                quiet_fit(
                    bootstrap_mix_weights,
                    probe,
                    [x[0] for x in Xs],
                    tr.y,
                    tr.groups,
                    settings.mix_refits,
                    random_state=seed,
                )[0]
            )
        mix_out.mix_weights += [
            {
                "task": task,
                "dataset": train.dataset,
                "encoder": encoder,
                "layer": n,
                "weight": float(w),
                "seed": seed,
                "refit": refit,
            }
            for refit, row in enumerate(weights)
            for n, w in zip(layer_names, row)
        ]
        return mix_out, []

    def fit_concat() -> StepResult:
        concat_out = TaskOutput()
        tell(f"{task} {encoder} concatenated layers")
        Xs = [data[n] for n in layer_names]
        X_tr, X_dv = concat_layers([x[0] for x in Xs]), concat_layers([x[1] for x in Xs])
        tests_x: list[tuple[Part, Items, object]] = [
            (p, it, concat_layers([x[2][i] for x in Xs])) for i, (p, it) in enumerate(test_items)
        ]
        for seed in settings.probe_seeds:
            probe, info = fit_probe(X_tr, tr.y, X_dv, dv.y, settings, seed)
            concat_out.probes.append({**note, "layer": "concat", "seed": seed, **info})
            _score(task, encoder, "concat", probe.predict, tests_x, seed, settings, concat_out, splits)
        return concat_out, []

    if curve is not None:
        for name in layer_names:
            out.extend(step(f"curve {name}", functools.partial(fit_curve, name, curve))[0])
    if mdl is not None:
        for name in layer_names:
            out.extend(step(f"mdl {name}", functools.partial(fit_mdl, name, mdl))[0])
    if len(layer_names) > 1 and settings.mix:
        out.extend(step("mix", fit_mix)[0])
    if len(layer_names) > 1 and settings.concat:
        out.extend(step("concat", fit_concat)[0])
    return out


def _probe_curve(X_tr, X_dv, X_te, tr: Items, dv: Items, tests: list[tuple[Part, Items]], settings: ProbeSettings):
    """The layer's probe (C chosen on the dev items) refitted on a subset of the training items, scored on
    every test part: a :data:`~probing.tasks.curves.CurveScores`. A subset with one label predicts it."""

    def scores(sub: np.ndarray) -> list[tuple[Part, np.ndarray, np.ndarray]]:
        y = tr.y[sub]
        if len(np.unique(y)) < 2:
            predict = lambda X: np.full(X.shape[0], y[0], dtype=y.dtype)  # noqa: E731
        else:
            predict = fit_probe(X_tr[sub], y, X_dv, dv.y, settings, settings.probe_seeds[0])[0].predict
        return [(p, (predict(X) == it.y).astype(np.float64), it.groups) for (p, it), X in zip(tests, X_te)]

    return scores


def _baseline_curve(model_type, tr: Items, tests: list[tuple[Part, Items]]) -> CurveScores:
    """A word-identity baseline refitted on a subset of the training items, scored on every test part."""

    def scores(sub: np.ndarray) -> list[tuple[Part, np.ndarray, np.ndarray]]:
        model = model_type().fit(tr.words[sub].tolist(), tr.y[sub])
        return [(p, (model.predict(it.words.tolist()) == it.y).astype(np.float64), it.groups) for p, it in tests]

    return scores


def _control(
    task: str,
    encoder: str,
    layer: str,
    tr: Items,
    dv: Items,
    X_tr,
    X_dv,
    tests: list[tuple[Part, Items, object]],
    task_correct: dict,
    settings: ProbeSettings,
    out: TaskOutput,
) -> None:
    """Control-task accuracy and selectivity of one layer, one row each per seed and test part."""
    for seed in settings.seeds:
        probe, correct = task_correct.get(seed, task_correct[settings.probe_seeds[0]])
        ct = ControlTask(seed=seed).fit(tr.words.tolist(), tr.y)
        predict = _fit_control(
            X_tr, ct.transform(tr.words.tolist()), X_dv, ct.transform(dv.words.tolist()), float(probe.C), settings, seed
        )
        for (part, it, X), task_ok in zip(tests, correct):
            control_ok = predict(X) == ct.transform(it.words.tolist())
            acc, ctrl = float(task_ok.mean()), float(control_ok.mean())
            out.rows.append(
                fraction_row(
                    task, part, encoder, layer, "control-accuracy", control_ok, it.groups, seed, settings.n_boot
                )
            )
            out.rows.append(
                fraction_row(
                    task,
                    part,
                    encoder,
                    layer,
                    "selectivity",
                    task_ok.astype(np.float64) - control_ok.astype(np.float64),
                    it.groups,
                    seed,
                    settings.n_boot,
                    value=selectivity(acc, ctrl),
                )
            )


MDL_PROBES = ("linear", "mlp")
MDL_EPSILON = 0.5  # bits per token: the loss at which SDL and eSC are read off the online code


def mdl_fractions(n_sentences: int) -> tuple[float, ...]:
    """Voita & Titov's block fractions (:data:`probing.probes.mdl.FRACTIONS`) less the leading ones whose
    block would hold no sentence (``int(f * n_sentences) < 1``: fewer than 1000 training sentences), so
    the first block is the first non-empty one."""
    kept = tuple(f for f in FRACTIONS if int(f * n_sentences) >= 1)
    if len(kept) < 2:
        raise TaskError(f"online codelength needs at least 2 blocks; {n_sentences} training sentences give {kept}")
    return kept


def mdl_rows(
    task: str,
    encoder: str,
    layer: str,
    train: Part,
    tr: Items,
    dv: Items,
    X_tr,
    X_dv,
    settings: ProbeSettings,
    options: Mapping[str, Any],
) -> TaskOutput:
    """Online-codelength rows of one layer on the training items (Voita & Titov 2020), and a note per seed.

    One set of rows per seed in the first ``options["seeds"]`` of ``settings.seeds``: ``codelength_kbits``,
    ``uniform_kbits``, ``compression`` (:func:`probing.probes.mdl.online_codelength`) and ``control-codelength_kbits``
    (:func:`~probing.probes.mdl.control_codelength` on the control task of the same seed). The seed draws the
    sentence order (and the control labels); the dev items stop each block's training early: the linear
    probe picks its L2 strength from ``settings.Cs`` per block by dev cross-entropy, the MLP stops on dev loss
    (without a dev split, the task's held-out tenth of the training sentences is the dev set and is not coded).
    Each seed also gives ``data_efficiency`` rows: Whitney et al.'s SDL (``sdl_kbits``) and eSC
    (``esc_sentences``) at ``options["epsilon"]`` bits per token (:data:`MDL_EPSILON` by default).
    X_tr, X_dv: (n_train, d), (n_dev, d) activations of the items ``tr``, ``dv``."""
    probe = options.get("probe", "linear")
    kwargs: dict[str, Any] = {
        "probe": probe,
        "X_dev": X_dv,
        "fractions": mdl_fractions(len(np.unique(tr.groups))),
        "max_iter": settings.max_iter,
    }
    if probe == "linear":
        kwargs["Cs"] = settings.Cs
    else:
        kwargs.update(hidden_layers=options.get("hidden_layers", 1), width=options.get("width", 256))
    out = TaskOutput()
    for seed in settings.seeds[: options.get("seeds", 1)]:
        code, ok = quiet_fit(online_codelength, X_tr, tr.y, tr.groups, y_dev=dv.y, seed=seed, **kwargs)
        control, control_ok = quiet_fit(
            control_codelength,
            X_tr,
            tr.y,
            tr.words.tolist(),
            tr.groups,
            control_seed=seed,
            words_dev=dv.words.tolist(),
            seed=seed,
            **kwargs,
        )
        values = {**code.metrics(), "control-codelength_kbits": control.codelength_kbits}
        out.rows += [
            make_row(task, train.dataset, train.split, encoder, layer, name, value, seed=seed)
            for name, value in values.items()
        ]
        epsilon = float(options.get("epsilon", MDL_EPSILON))
        sdl, complete = code.surplus_description_length(epsilon)
        esc = code.sample_complexity(epsilon)
        for measure, value, bound in (
            ("sdl_kbits", sdl / 1000, "" if complete else "lower"),
            ("esc_sentences", esc, ""),
        ):
            out.data_efficiency.append(
                {
                    "task": task,
                    "dataset": train.dataset,
                    "split": train.split,
                    "encoder": encoder,
                    "layer": layer,
                    "reference_encoder": "",
                    "reference_layer": "",
                    "at_fraction": math.nan,
                    "ratio": math.nan,
                    "measure": measure,
                    "epsilon": epsilon,
                    "value": value,
                    "bound": bound,
                    "seed": seed,
                }
            )
        out.probes.append(
            {
                "task": task,
                "encoder": encoder,
                "layer": layer,
                "seed": seed,
                "mdl": code.params,
                "mdl_control": control.params,
                "mdl_block_tokens": code.block_tokens.tolist(),
                "converged": ok and control_ok,
            }
        )
    return out


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
    curve: dict[str, Any] | None = None,
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
            out.per_tag += per_tag_rows(task, part, BASELINE_ENCODER, layer, it.y, correct, seed)
            if vocabularies is not None:
                splits = vocabulary_splits(it.words.tolist(), vocabularies)
                out.rows += split_rows(
                    task, part, BASELINE_ENCODER, layer, correct, it.groups, splits, seed, settings.n_boot
                )
        if curve is not None:
            scores = _baseline_curve(models[layer], tr, [(p, items(p, labels, task)) for p in tests])
            out.learning_curve += curve_rows(
                task, BASELINE_ENCODER, layer, tr.groups, curve, settings.seeds, scores, "accuracy", settings.n_boot
            )
    return out


def tagging_work(settings: ProbeSettings, layer_names: Sequence[str], options: Mapping[str, Any]) -> dict[str, int]:
    """A tagging job's units of work per step of :func:`tagging_probes` (:attr:`TaskKind.work`). A unit is
    one fit of a probe on one layer for one C (a control probe: one); a fit over the k layers of the
    concatenation counts k, one of the scalar mix k x ``mix_max_iter / max_iter`` (its iteration budget;
    its bootstrap refits as many as its C values), and
    a learning curve or an online code one fit per C, size and seed (the code's control: as many again)."""
    fits, k = len(settings.Cs) * len(settings.probe_seeds), len(layer_names)
    control = len(settings.seeds) if settings.control else 0
    work = {f"layer {n}": fits + control for n in layer_names}
    if options.get("directions"):
        work.update({f"layer {n}": fits for n in direction_names(layer_names)})
    if options.get("learning_curve"):
        curve = options["learning_curve"]
        orders = min(curve["seeds"], len(settings.seeds))
        work.update({f"curve {n}": fits * len(curve["fractions"]) * orders for n in layer_names})
    if options.get("mdl"):
        code = len(settings.Cs) * len(FRACTIONS) * 2 * min(options["mdl"].get("seeds", 1), len(settings.seeds))
        work.update({f"mdl {n}": code for n in layer_names})
    if k > 1 and settings.mix:
        work["mix"] = round(k * (len(settings.Cs) + settings.mix_refits) * settings.mix_max_iter / settings.max_iter)
    if k > 1 and settings.concat:
        work["concat"] = k * fits
    return work


def _run(job: Job, labels: LabelFn) -> TaskOutput:
    vocabularies = default_vocabularies() if job.options.get("oov_split") else None
    out = tagging_probes(
        job.task,
        job.encoder,
        job.train,
        job.dev,
        job.tests,
        labels,
        job.settings,
        progress=job.progress,
        directions=bool(job.options.get("directions")),
        vocabularies=vocabularies,
        mdl=job.options.get("mdl"),
        curve=job.options.get("learning_curve"),
        step=job.step,
    )
    if job.with_baselines and job.baselines:
        out.extend(
            tagging_baselines(
                job.task,
                job.train,
                job.dev,
                job.tests,
                labels,
                job.settings,
                which=job.baselines,
                vocabularies=vocabularies,
                curve=job.options.get("learning_curve"),
            )
        )
    return out


def _parse_claims(t: Table) -> dict[str, Any]:
    """``directions`` and ``oov_split`` (both false by default; only a true one enters the options, so the
    cache keys of existing experiments do not change)."""
    return {key: True for key in ("directions", "oov_split") if t.boolean(key, False)}


def _parse_mdl(t: Table) -> dict[str, Any]:
    """The MDL keys: ``mdl`` (false), ``mdl_probe`` ("linear" | "mlp"), ``mdl_seeds`` (1: how many of the
    experiment's seeds get their own codelength), ``mdl_hidden_layers`` (1 | 2) and ``mdl_width`` (256) for
    the MLP, ``mdl_epsilon`` (:data:`MDL_EPSILON` bits per token: where SDL and eSC are read). Without ``mdl = true`` nothing is added to the options (so existing jobs keep their cache keys)."""
    on = t.boolean("mdl", False)
    probe = t.string("mdl_probe", "linear", choices=MDL_PROBES)
    seeds = t.integer("mdl_seeds", 1, minimum=1)
    hidden = t.integer("mdl_hidden_layers", 1, minimum=1, maximum=2)
    width = t.integer("mdl_width", 256, minimum=1)
    epsilon = t.number("mdl_epsilon", MDL_EPSILON)
    if not on:
        for key in ("mdl_probe", "mdl_seeds", "mdl_hidden_layers", "mdl_width", "mdl_epsilon"):
            if key in t.data:
                raise t.fail(key, "mdl = true beside it (the key has no effect without it)", t.data[key])
        return {}
    if probe != "mlp":
        for key in ("mdl_hidden_layers", "mdl_width"):
            if key in t.data:
                raise t.fail(key, 'mdl_probe = "mlp" beside it (the linear probe has no hidden layers)', t.data[key])
    mdl: dict[str, Any] = {"probe": probe, "seeds": seeds}
    if probe == "mlp":
        mdl.update(hidden_layers=hidden, width=width)
    if "mdl_epsilon" in t.data:
        mdl["epsilon"] = float(epsilon)
    return {"mdl": mdl}


def _parse_options(t: Table) -> dict[str, Any]:
    """The options every tagging-like kind shares: the seed-claim switches, the MDL and learning-curve keys."""
    return {**_parse_claims(t), **_parse_mdl(t), **parse_learning_curve(t)}


def _parse_label(t: Table) -> dict[str, Any]:
    label = t.string("label")
    if not is_label(label):
        raise t.fail("label", f"a label to predict: {LABEL_FORMS}", label)
    return {"label": label, **_parse_options(t)}


TAGGING = TaskKind(
    "tagging",
    run=lambda job: _run(job, label_function(job.options["label"])),
    parse=_parse_label,
    metrics=TAGGING_METRICS,
    headline="accuracy",
    baselines=TAGGING_BASELINES,
    overview=True,
    work=tagging_work,
)
SUPERSENSE = TaskKind(
    "supersense",
    run=lambda job: _run(job, supersense_labels(job.inventory)),
    parse=_parse_options,
    metrics=TAGGING_METRICS,
    headline="accuracy",
    baselines=TAGGING_BASELINES,
    uses_wordnet=True,
    work=tagging_work,
)
