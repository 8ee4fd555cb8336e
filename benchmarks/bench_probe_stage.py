"""Profile of an experiment's probe stage: per kind of fit, how many fits, passes over the data, wall and CPU
seconds and the GFLOPS the passes achieved; then, on one design, the probe solver against scikit-learn's.

    python benchmarks/bench_probe_stage.py --experiment default            # the demo's experiment
    python benchmarks/bench_probe_stage.py --experiment benchmarks/erase_first.toml
    python benchmarks/bench_probe_stage.py --solvers [--rows 20000] [--C 1]   # solver vs sklearn only

The experiment runs with its activation stores cached in ``--cache`` (extracted on the first run, then reused;
the probe results are not: each run starts with an empty job cache), so the time measured is the probe stage's.
Every L-BFGS solve is timed; one pass is one evaluation of the objective and its gradient, two products of the
(n, d) design with the (k, d) weights: ``4 n d k`` flops (the scalar mix: ``d`` is all its layers' widths).
Kinds of fit: ``layer`` (a layer's probe over its C grid), ``control`` (a control-task probe), ``mix`` (the
scalar mix over its C grid), ``concat`` (the concatenated layers' probe), ``mix-refit`` (the mix refitted on a
bootstrap resample), each under the variant (``erase:...`` for an erased store) of the job that fitted it.

``--solvers`` loads the bundled model's demo-ud training store (layer 1, UPOS), takes ``--rows`` tokens and fits
``LinearProbe`` at ``--C`` with its default settings, then scikit-learn's ``LogisticRegression`` with ``lbfgs``
and ``newton-cg`` at the same C and tol, and states each one's objective above the optimum (scikit-learn's
``lbfgs`` at tol 1e-8, max_iter 20000).
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import os
import shutil
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch

KINDS = {"fit_concat": "concat", "bootstrap_mix_weights": "mix-refit", "_fit_mix": "mix", "control_rows": "control"}


def _fit_kind() -> tuple[str, str]:
    """(kind of fit, variant) of the L-BFGS solve being run, read off the call stack."""
    kind, variant = "layer", "plain"
    for frame in inspect.stack()[2:]:
        name = frame.function
        if name in KINDS and kind == "layer":
            kind = KINDS[name]
        intervention = getattr(frame.frame.f_locals.get("job"), "intervention", None)
        if isinstance(intervention, str):
            variant = intervention or variant
            break
    return kind, variant


def _design_size(objective) -> tuple[int, int]:
    """(rows n, columns d) of the design an objective closure reads."""
    cells = dict(zip(objective.__code__.co_freevars, (c.cell_contents for c in objective.__closure__ or ())))
    if "rows" in cells:
        return tuple(cells["rows"].shape)  # type: ignore[return-value]
    if "x" in cells:
        return tuple(cells["x"].shape)  # type: ignore[return-value]
    design = cells["design"]
    return int(design.shape[0]), int(design.shape[1])


class Profile:
    """Wraps the solvers' ``_run_lbfgs`` to count and time every solve."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))

    @contextlib.contextmanager
    def active(self):
        import probing.probes.linear as linear
        import probing.probes.mix as mix

        original = linear._run_lbfgs

        def timed(objective, params, max_iter, tol, *scales):
            kind = _fit_kind()
            n, d = _design_size(objective)
            k = int(params[1 if len(params) == 3 else 0].shape[0])
            calls = [0]

            def counted():
                calls[0] += 1
                return objective()

            w, c = time.perf_counter(), time.process_time()
            out = original(counted, params, max_iter, tol, *scales)
            row = self.rows[kind]
            row["solves"] += 1
            row["passes"] += calls[0]
            row["wall"] += time.perf_counter() - w
            row["cpu"] += time.process_time() - c
            row["gflop"] += calls[0] * 4.0 * n * d * k / 1e9
            row["n"] = max(row["n"], n)
            return out

        linear._run_lbfgs = mix._run_lbfgs = timed
        try:
            yield self
        finally:
            linear._run_lbfgs = mix._run_lbfgs = original

    def print(self) -> None:
        head = f"{'fit kind':10} {'variant':24} {'solves':>6} {'passes':>7} {'passes/solve':>12} {'wall s':>8}"
        print(head + f" {'CPU s':>8} {'GFLOPS':>7} {'max n':>7}")
        total = defaultdict(float)
        for (kind, variant), r in sorted(self.rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            print(
                f"{kind:10} {variant[:24]:24} {r['solves']:6.0f} {r['passes']:7.0f} {r['passes'] / r['solves']:12.1f} "
                f"{r['wall']:8.1f} {r['cpu']:8.1f} {r['gflop'] / max(r['wall'], 1e-9):7.1f} {r['n']:7.0f}"
            )
            for key in ("solves", "passes", "wall", "cpu", "gflop"):
                total[key] += r[key]
        print(
            f"{'all':35} {total['solves']:6.0f} {total['passes']:7.0f} {total['passes'] / max(total['solves'], 1):12.1f} "
            f"{total['wall']:8.1f} {total['cpu']:8.1f} {total['gflop'] / max(total['wall'], 1e-9):7.1f}"
        )


def profile_experiment(experiment: str, quick: bool, cache: Path, out: Path) -> None:
    os.environ["PROBING_CACHE"] = str(cache)
    from probing.experiment import load_experiment, run_experiment

    shutil.rmtree(cache / "jobs", ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    prof = Profile()
    w, c = time.perf_counter(), time.process_time()
    with prof.active(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run_experiment(load_experiment(experiment, quick=quick), out, progress=False)
    wall, cpu = time.perf_counter() - w, time.process_time() - c
    print(f"{experiment}{' (quick)' if quick else ''}: run {wall:.1f} s wall, {cpu:.1f} s CPU (stores cached)")
    prof.print()


def objective_value(X: np.ndarray, y: np.ndarray, coef: np.ndarray, intercept: np.ndarray, C: float) -> float:
    """scikit-learn's objective divided by C n: mean cross-entropy + ||W||^2 / (2 C n), float64."""
    from scipy.special import logsumexp

    z = X.astype(np.float64) @ coef.T + intercept
    return float(np.mean(logsumexp(z, axis=1) - z[np.arange(len(z)), y]) + np.sum(coef**2) / (2 * C * len(X)))


def solvers(cache: Path, rows: int, C: float, tol: float) -> None:
    os.environ["PROBING_CACHE"] = str(cache)
    from sklearn.linear_model import LogisticRegression

    from probing.corpora import load
    from probing.encoders import get_encoder
    from probing.probes import LinearProbe
    from probing.store import extract

    store = extract(get_encoder("default"), load("demo-ud", "train"), cache_dir=cache / "store", progress=False)
    X = np.asarray(store.layer("1")[:rows], dtype=np.float32)
    labels = store.tokens["upos"].to_numpy().astype(str)[:rows]
    classes, y = np.unique(labels, return_inverse=True)
    n, d = X.shape
    print(f"bundled model layer 1, demo-ud train: {n} tokens x {d} dims, {len(classes)} UPOS classes, C={C:g}")

    def timed(fit):
        w, c = time.perf_counter(), time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = fit()
        return model, time.perf_counter() - w, time.process_time() - c

    ref, ref_wall, ref_cpu = timed(
        lambda: LogisticRegression(C=C, tol=1e-8, max_iter=20000, solver="lbfgs").fit(X.astype(np.float64), y)
    )
    best = objective_value(X, y, ref.coef_, ref.intercept_, C)
    ref_pred = ref.predict(X)
    print(f"optimum (sklearn lbfgs tol 1e-8): {best:.8f}, {ref.n_iter_[0]} iterations, {ref_wall:.1f} s wall")
    print(
        f"{'solver':28} {'iters':>6} {'wall s':>7} {'CPU s':>7} {'objective - optimum':>20} {'relative':>9} {'same pred':>9}"
    )
    candidates = [
        ("LinearProbe (default)", lambda: LinearProbe(C=C).fit(X, y)),
        (
            f"sklearn lbfgs tol {tol:g}",
            lambda: LogisticRegression(C=C, tol=tol, solver="lbfgs", max_iter=1000).fit(X, y),
        ),
        (
            f"sklearn newton-cg tol {tol:g}",
            lambda: LogisticRegression(C=C, tol=tol, solver="newton-cg", max_iter=1000).fit(X, y),
        ),
    ]
    for name, fit in candidates:
        model, wall, cpu = timed(fit)
        value = objective_value(X, y, model.coef_, model.intercept_, C)
        same = float(np.mean(model.predict(X) == ref_pred))
        iters = int(np.max(model.n_iter_))
        print(
            f"{name:28} {iters:6d} {wall:7.1f} {cpu:7.1f} {value - best:20.3e} {(value - best) / best:9.1e} {same:9.4f}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--experiment", default=None, help="an experiment name or TOML file")
    ap.add_argument("--quick", action="store_true", help="the experiment's [quick] size")
    ap.add_argument("--cache", type=Path, default=Path("bench-probe-stage-cache"), help="stores cached here")
    ap.add_argument("--out", type=Path, default=Path("bench-probe-stage-out"))
    ap.add_argument("--solvers", action="store_true", help="compare the solver with scikit-learn's on one design")
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--C", type=float, default=1.0)
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.experiment:
        profile_experiment(args.experiment, args.quick, args.cache.resolve(), args.out)
    if args.solvers:
        solvers(args.cache.resolve(), args.rows, args.C, args.tol)
    if not (args.experiment or args.solvers):
        sys.exit("give --experiment and/or --solvers")


if __name__ == "__main__":
    main()
