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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from probing.layers import direction_names, is_half
from probing.probes.linear import LinearProbeCV, concat_layers
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
    fraction_row,
    layer_rows,
    margin_rows,
    per_tag_rows,
    quiet_fit,
)
from probing.tasks.control import control_rows
from probing.tasks.curves import CurveOptions, curve_rows
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
from probing.tasks.mdl import MDLOptions, mdl_rows

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

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
        out.table("per_tag").extend(per_tag_rows(task, part, encoder, layer, it.y, correct, seed))
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
    mdl: MDLOptions | None = None,
    curve: CurveOptions | None = None,
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
    job = _TaggingSteps(task, encoder, train, tr, dv, test_items, settings, splits, note, has_oov, progress)
    out = TaskOutput()
    for name in layer_names:
        job.data[name] = job.load(name)
    for name in layer_names:
        layer_out, first = step(f"layer {name}", functools.partial(job.fit_layer, name))
        out.extend(layer_out)
        job.single[name] = [(p, ok, it.groups) for (p, it), ok in zip(test_items, first)]
    out.rows += margin_rows(task, encoder, job.single, settings.probe_seeds[0], settings.n_boot)
    for name in direction_names(layer_names) if directions else []:
        out.extend(step(f"layer {name}", functools.partial(job.fit_half, name))[0])
    if curve is not None:
        for name in layer_names:
            out.extend(step(f"curve {name}", functools.partial(job.fit_curve, name, curve))[0])
    if mdl is not None:
        for name in layer_names:
            out.extend(step(f"mdl {name}", functools.partial(job.fit_mdl, name, mdl))[0])
    if len(layer_names) > 1 and settings.mix:
        out.extend(step("mix", functools.partial(job.fit_mix, layer_names))[0])
    if len(layer_names) > 1 and settings.concat:
        out.extend(step("concat", functools.partial(job.fit_concat, layer_names))[0])
    return out


@dataclass
class _TaggingSteps:
    """One tagging job's items and layers, shared by its steps (:func:`tagging_probes`): each ``fit_*`` is one
    step and returns its rows and the arrays later steps read."""

    task: str
    encoder: str
    train: Part
    tr: Items
    dv: Items
    tests: list[tuple[Part, Items]]
    settings: ProbeSettings
    splits: list[dict[str, np.ndarray]] | None
    note: dict[str, Any]
    has_oov: bool
    progress: Callable[[str], None] | None
    data: dict[str, tuple] = field(default_factory=dict)
    single: dict[str, list[tuple[Part, np.ndarray, np.ndarray]]] = field(default_factory=dict)

    def tell(self, msg: str) -> None:
        if self.progress is not None:
            self.progress(f"{self.task} {self.encoder} {msg}")

    def load(self, layer: str) -> tuple:
        """Layer ``layer`` at the training, dev and each test part's items."""
        tr, dv = self.tr, self.dv
        return (
            layer_rows(tr.store, layer, tr.rows),
            layer_rows(dv.store, layer, dv.rows),
            [layer_rows(p.store, layer, it.rows) for p, it in self.tests],
        )

    def _probes(
        self, name: str, X, out: TaskOutput, announce: bool = True
    ) -> dict[int, tuple[LinearProbeCV, list[np.ndarray]]]:
        """The layer's probe per probe seed (each ``announce``d to the progress), scored into ``out``:
        seed -> (probe, per-part correctness)."""
        X_tr, X_dv, X_te = X
        settings = self.settings
        tests_x = [(p, it, X) for (p, it), X in zip(self.tests, X_te)]
        fitted = {}
        for seed in settings.probe_seeds:
            if announce:
                self.tell(f"layer {name}" + (f" (seed {seed})" if len(settings.probe_seeds) > 1 else ""))
            probe, info = fit_probe(X_tr, self.tr.y, X_dv, self.dv.y, settings, seed)
            out.probes.append({**self.note, "layer": name, "seed": seed, **info})
            correct = _score(self.task, self.encoder, name, probe.predict, tests_x, seed, settings, out, self.splits)
            fitted[seed] = (probe, correct)
        return fitted

    def fit_layer(self, name: str) -> StepResult:
        """A single layer: its probes, control tasks and OOV rates."""
        out, settings = TaskOutput(), self.settings
        X_tr, X_dv, X_te = self.data[name]
        task_correct = self._probes(name, self.data[name], out)
        if settings.control:
            self.tell(f"layer {name}: control tasks")
            tests_x = [(p, it, X) for (p, it), X in zip(self.tests, X_te)]
            control_rows(
                self.task, self.encoder, name, self.tr, self.dv, X_tr, X_dv, tests_x, task_correct, settings, out
            )
        if self.has_oov:
            for part, it in self.tests:
                out.rows.append(
                    fraction_row(
                        self.task,
                        part,
                        self.encoder,
                        name,
                        "oov-rate",
                        it.oov,
                        it.groups,
                        settings.seeds[0],
                        settings.n_boot,
                    )
                )
        return out, task_correct[settings.probe_seeds[0]][1]

    def fit_half(self, name: str) -> StepResult:
        """One direction's half of a biLSTM layer: its probes only."""
        out = TaskOutput()
        self._probes(name, self.load(name), out)
        return out, []

    def fit_curve(self, name: str, curve: CurveOptions) -> StepResult:
        self.tell(f"layer {name}: learning curve")
        X_tr, X_dv, X_te = self.data[name]
        settings = self.settings
        scores = _probe_curve(X_tr, X_dv, X_te, self.tr, self.dv, self.tests, settings)
        full = [(p, ok.astype(np.float64), g) for p, ok, g in self.single[name]]
        rows = curve_rows(
            self.task,
            self.encoder,
            name,
            self.tr.groups,
            curve,
            settings.seeds,
            scores,
            "accuracy",
            settings.n_boot,
            full,
        )
        return TaskOutput(tables={"learning_curve": rows}), []

    def fit_mdl(self, name: str, mdl: MDLOptions) -> StepResult:
        self.tell(f"layer {name}: online codelength")
        X_tr, X_dv, _ = self.data[name]
        return mdl_rows(self.task, self.encoder, name, self.train, self.tr, self.dv, X_tr, X_dv, self.settings, mdl), []

    def fit_mix(self, layer_names: list[str]) -> StepResult:
        """The scalar mix of every layer, and its weights (with their bootstrap refits)."""
        out, settings, tr = TaskOutput(), self.settings, self.tr
        self.tell("scalar mix")
        Xs = [self.data[n] for n in layer_names]
        probe, info = _fit_mix([x[0] for x in Xs], tr.y, [x[1] for x in Xs], self.dv.y, settings)
        seed = settings.seeds[0]
        out.probes.append(
            {
                **self.note,
                "layer": "mix",
                "seed": seed,
                **info,
                "mix_weights": probe.mix_weights_.tolist(),
                "gamma": probe.gamma_,
            }
        )
        tests_x: list[tuple[Part, Items, object]] = [
            (p, it, [x[2][i] for x in Xs]) for i, (p, it) in enumerate(self.tests)
        ]
        _score(self.task, self.encoder, "mix", probe.predict, tests_x, seed, settings, out, self.splits)
        weights = [probe.mix_weights_]
        if settings.mix_refits:
            self.tell(f"scalar mix: {settings.mix_refits} bootstrap refits")
            refits = quiet_fit(
                bootstrap_mix_weights,
                probe,
                [x[0] for x in Xs],
                tr.y,
                tr.groups,
                settings.mix_refits,
                random_state=seed,
            )[0]
            weights += list(refits)
        out.table("mix_weights").extend(
            {
                "task": self.task,
                "dataset": self.train.dataset,
                "encoder": self.encoder,
                "layer": n,
                "weight": float(w),
                "seed": seed,
                "refit": refit,
            }
            for refit, row in enumerate(weights)
            for n, w in zip(layer_names, row)
        )
        return out, []

    def fit_concat(self, layer_names: list[str]) -> StepResult:
        """The probes of every layer concatenated."""
        self.tell("concatenated layers")
        Xs = [self.data[n] for n in layer_names]
        X = (
            concat_layers([x[0] for x in Xs]),
            concat_layers([x[1] for x in Xs]),
            [concat_layers([x[2][i] for x in Xs]) for i in range(len(self.tests))],
        )
        out = TaskOutput()
        self._probes("concat", X, out, announce=False)
        return out, []


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
    its bootstrap refits as many as its C values). The options' steps (``curve <layer>``, ``mdl <layer>``)
    are counted by the options (:attr:`~probing.tasks.options.TaskOption.work`)."""
    fits, k = len(settings.Cs) * len(settings.probe_seeds), len(layer_names)
    control = len(settings.seeds) if settings.control else 0
    work = {f"layer {n}": fits + control for n in layer_names}
    if options.get("directions"):
        work.update({f"layer {n}": fits for n in direction_names(layer_names)})
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


def _parse_label(t: Table) -> dict[str, Any]:
    label = t.string("label")
    if not is_label(label):
        raise t.fail("label", f"a label to predict: {LABEL_FORMS}", label)
    return {"label": label, **_parse_claims(t)}


def tagging_figures(results: pd.DataFrame, task: str, dataset: str, split: str) -> dict[str, Figure]:
    """The tagging kinds' own figures of a (task, dataset, split) group: ``selectivity`` with control-task rows,
    ``directions`` with forward/backward half rows (``directions = true``), ``oov_glove`` and ``oov_train``
    with the in/out-of-vocabulary split (``oov_split = true``)."""
    from probing import figures as fg

    rows = results[(results["task"] == task) & (results["dataset"] == dataset) & (results["split"] == split)]
    metrics = set(rows["metric"])
    out = {}
    if {"accuracy", "control-accuracy"} <= metrics:
        out["selectivity"] = fg.selectivity(results, task, dataset=dataset, split=split)
    if any(is_half(str(layer)) for layer in rows["layer"]):
        out["directions"] = fg.directions(results, task, "accuracy", dataset=dataset, split=split)
    for vocabulary in ("glove", "train"):
        if f"accuracy-oov-{vocabulary}" in metrics:
            out[f"oov_{vocabulary}"] = fg.oov_split(results, task, vocabulary, dataset=dataset, split=split)
    return out


TAGGING_OPTIONS = ("mdl", "learning_curve", "erase")


TAGGING = TaskKind(
    "tagging",
    run=lambda job: _run(job, label_function(job.options["label"])),
    parse=_parse_label,
    metrics=TAGGING_METRICS,
    headline="accuracy",
    baselines=TAGGING_BASELINES,
    overview=True,
    figures=tagging_figures,
    work=tagging_work,
    task_options=TAGGING_OPTIONS,
)


SUPERSENSE = TaskKind(
    "supersense",
    run=lambda job: _run(job, supersense_labels(job.inventory)),
    parse=_parse_claims,
    metrics=TAGGING_METRICS,
    headline="accuracy",
    baselines=TAGGING_BASELINES,
    uses_wordnet=True,
    figures=tagging_figures,
    work=tagging_work,
    task_options=TAGGING_OPTIONS,
)
