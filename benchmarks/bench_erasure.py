"""Fit time of the erasers (LEACE, INLP, the random control) on 200k x 512, and what a fresh probe reads after.

Data: bench_probe.py's synthetic activations (17 Zipf-distributed classes like POS tags, correlated noise,
uneven feature scales, 3 % ambiguous labels), fp16 as a store holds it. Erasers are fitted on the first
rows; a LinearProbe is then trained on 20k other rows and scored on 20k more (before and after erasure),
beside the majority class.

    flock /tmp/probing-cpu.lock python benchmarks/bench_erasure.py            # 200k x 512
    flock /tmp/probing-cpu.lock python benchmarks/bench_erasure.py --quick    # 20k x 512
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from bench_probe import make_data  # noqa: E402

from probing.erasure import fit_eraser  # noqa: E402
from probing.probes import LinearProbe  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="20k fitting rows instead of 200k")
    ap.add_argument("--dim", type=int, default=512)
    args = ap.parse_args()
    n_fit = 20_000 if args.quick else 200_000
    n_eval = 20_000
    X, y = make_data(n_fit + 2 * n_eval, args.dim, 17, seed=0)
    X = X.astype(np.float16)
    fit_X, fit_y = X[:n_fit], y[:n_fit]
    tr = slice(n_fit, n_fit + n_eval)
    te = slice(n_fit + n_eval, None)
    majority = float(np.mean(y[te] == np.bincount(y[tr]).argmax()))
    base = LinearProbe().fit(X[tr], y[tr]).score(X[te], y[te])

    rows = []
    leace_rank = None
    for method in ("leace", "inlp", "random"):
        t0, c0 = time.perf_counter(), time.process_time()
        eraser = fit_eraser(fit_X, fit_y, method=method, rank=leace_rank if method == "random" else None)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        if method == "leace":
            leace_rank = eraser.rank_
        acc = LinearProbe().fit(eraser.transform(X[tr]), y[tr]).score(eraser.transform(X[te]), y[te])
        rows.append((method, eraser.rank_, eraser.n_iter_, wall, cpu, acc))

    print(f"fit on {n_fit} x {args.dim} fp16, 17 classes; probe on {n_eval} / scored on {n_eval} other rows")
    print(f"majority class {100 * majority:.2f} %, probe before erasure {100 * base:.2f} %")
    print(f"{'method':8} {'rank':>5} {'probes':>6} {'wall s':>8} {'CPU s':>8} {'probe after %':>14}")
    for method, rank, n_iter, wall, cpu, acc in rows:
        print(f"{method:8} {rank:5d} {n_iter:6d} {wall:8.1f} {cpu:8.1f} {100 * acc:14.2f}")


if __name__ == "__main__":
    main()
