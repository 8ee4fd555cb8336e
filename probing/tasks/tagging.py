"""Token-labelling probes (POS tags, supersenses) on stored activations: the kinds ``tagging`` and ``supersense``.

For one encoder, every layer gets a linear probe (L2 strength chosen on dev accuracy), then a learned
scalar mix of all layers and the concatenation of all layers; each layer is also probed on Hewitt &
Liang's control task (one per seed) with the task's chosen C (:mod:`probing.tasks.control`), and
``selectivity = accuracy - control accuracy`` is reported per seed with a paired bootstrap CI. Word-identity
baselines (majority class, most frequent tag per word type: :mod:`probing.tasks.baselines`) read only the
token table. Labels, items and vocabularies are in :mod:`probing.tasks.labels`; the MDL option in
:mod:`probing.tasks.mdl`.

Two options of a ``[[tasks]]`` table (issue 21): ``directions = true`` also probes the forward and backward
half of each biLSTM layer (layers ``"1f"``, ``"1b"``, ...: :mod:`probing.layers`); ``oov_split = true`` adds
accuracy rows for the tokens inside and outside each vocabulary of
:func:`~probing.tasks.labels.default_vocabularies` (metrics ``accuracy-iv-glove``, ``accuracy-oov-glove``,
``accuracy-iv-train``, ``accuracy-oov-train``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from probing.layers import direction_names
from probing.probes.linear import LinearProbeCV, concat_layers
from probing.probes.mdl import FRACTIONS
from probing.probes.mix import ScalarMixProbeCV, bootstrap_mix_weights
from probing.results.metrics import TAGGING_METRICS
from probing.tasks.baselines import TAGGING_BASELINES, tagging_baselines
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
    erasure_figures,
    fraction_row,
    layer_rows,
    margin_rows,
    per_tag_rows,
    quiet_fit,
)
from probing.tasks.control import control_rows
from probing.tasks.curves import curve_rows, parse_learning_curve
from probing.tasks.labels import (
    FEATS_PREFIX,
    LABEL_FORMS,
    NO_FEATURE,
    Items,
    LabelFn,
    VocabFn,
    absent_feature,
    default_vocabularies,
    is_label,
    items,
    label_function,
    split_rows,
    supersense_labels,
    train_dev,
    vocabulary_splits,
)
from probing.tasks.mdl import mdl_rows, parse_mdl

if TYPE_CHECKING:
    from probing._toml import Table


def _cv_notes(probe: LinearProbeCV | ScalarMixProbeCV, converged: bool) -> dict:
    """The probe notes on a CV probe's choice of C."""
    return {
        "C": float(probe.C_),
        "dev_accuracy": float(probe.dev_score_),
        "n_iter": int(probe.n_iter_),
        "converged": converged,
        "l2_path": probe.l2_path_,
    }


def fit_probe(X, y, X_dev, y_dev, settings: ProbeSettings, seed: int) -> tuple[LinearProbeCV, dict]:
    """A linear probe with C chosen on dev accuracy (:class:`~probing.probes.linear.LinearProbeCV`, ties to the
    smaller C), and notes on the choice.

    Parameters
    ----------
    X, y : array-like (n, d) and (n,)
        Training tokens and their labels.
    X_dev, y_dev : array-like (n_dev, d) and (n_dev,)
        The dev tokens that choose C.
    settings : the C grid, solver and iteration limits.
    seed : Adam's shuffling seed (L-BFGS is deterministic).

    Returns
    -------
    probe : LinearProbeCV
        Fitted with the chosen C.
    notes : dict
        ``C``, ``n_iter``, ``converged`` and the ``l2_path``, for the job's provenance.
    """
    params: dict[str, Any] = {"max_iter": settings.max_iter, "tol": settings.tol, "patience": settings.patience}
    if settings.solver == "adam":
        params.update(solver="adam", random_state=seed)
    probe, converged = quiet_fit(LinearProbeCV(Cs=settings.Cs, **params).fit, X, y, X_dev, y_dev)
    return probe, _cv_notes(probe, converged)


def _fit_mix(Xs, y, Xs_dev, y_dev, settings: ProbeSettings) -> tuple[ScalarMixProbeCV, dict]:
    """The scalar mix of the layers ``Xs`` (L arrays (n, d)) with C chosen on ``Xs_dev`` (L arrays (n_dev, d))."""
    probe = ScalarMixProbeCV(
        Cs=settings.Cs, max_iter=settings.mix_max_iter, tol=settings.tol, patience=settings.patience
    )
    probe, converged = quiet_fit(probe.fit, Xs, y, Xs_dev, y_dev)
    return probe, _cv_notes(probe, converged)


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
        raise TaskError(f"task {task!r}: label {name}: {absent_feature(name, train.store.tokens)}")
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
        task_correct: dict[int, tuple[LinearProbeCV, list[np.ndarray]]] = {}
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
            control_rows(task, encoder, name, tr, dv, X_tr, X_dv, tests_x, task_correct, settings, layer_out)
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
        job.train_part(),
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
                job.train_part(),
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


def _parse_options(t: Table) -> dict[str, Any]:
    """The options every tagging-like kind shares: the seed-claim switches, the MDL and learning-curve keys."""
    return {**_parse_claims(t), **parse_mdl(t), **parse_learning_curve(t)}


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
    figures=erasure_figures,
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
    figures=erasure_figures,
    work=tagging_work,
)
