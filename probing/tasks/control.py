"""Hewitt & Liang's control tasks for the token-labelling kinds: each layer's probe family and chosen C refitted
on :class:`~probing.probes.control.ControlTask` labels (one per seed), with control accuracy and
``selectivity = accuracy - control accuracy`` rows (paired bootstrap CI over sentences).
"""

from __future__ import annotations

import numpy as np

from probing.probes.control import ControlTask, selectivity
from probing.probes.linear import LinearProbe
from probing.tasks.common import (
    Part,
    ProbeSettings,
    TaskOutput,
    fraction_row,
    quiet_fit,
)
from probing.tasks.labels import Items


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


def control_rows(
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
            X_tr,
            ct.transform(tr.words.tolist()),
            X_dv,
            ct.transform(dv.words.tolist()),
            float(probe.C_),
            settings,
            seed,
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
