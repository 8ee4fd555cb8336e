"""Time LinearProbe (torch L-BFGS) against sklearn LogisticRegression(lbfgs) at the same C and tol.

Synthetic data shaped like contextual-embedding activations: 17 classes with Zipf-like frequencies
(like POS tags), class means plus low-rank correlated noise plus isotropic noise, then per-feature
offsets and log-normal scales with a few very large dimensions (as in ELMo's layers); 3% of labels
are redrawn at random (ambiguous tokens), so the training set is not separable. fp32.

    python benchmarks/bench_probe.py            # 200k x 1024, 17 classes
    python benchmarks/bench_probe.py --quick    # 50k rows
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import torch
from scipy.special import logsumexp
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from probing.probes.linear import LinearProbe


def make_data(n: int, d: int, k: int, seed: int, chunk: int = 20000):
    """Return (X fp32 (n, d), y int) drawn from one fixed synthetic 'activation' distribution."""
    rng = np.random.default_rng(seed)
    prior = 1.0 / np.arange(1, k + 1)
    prior /= prior.sum()
    means = rng.standard_normal((k, d)).astype(np.float32) * (5.0 / np.sqrt(d))  # pairwise gap ~7 sd
    rank = 64
    basis = (rng.standard_normal((rank, d)) * (3.0 / np.sqrt(1 + np.arange(rank)))[:, None]).astype(np.float32)
    offset = rng.normal(0.0, 2.0, d).astype(np.float32)
    scale = np.exp(rng.normal(0.0, 0.7, d)).astype(np.float32)
    scale[rng.choice(d, 8, replace=False)] *= 20.0
    data_rng = np.random.default_rng(seed + 1)
    y = data_rng.choice(k, size=n, p=prior)
    label = np.where(data_rng.random(n) < 0.03, data_rng.choice(k, size=n, p=prior), y)  # 3% ambiguous
    X = np.empty((n, d), dtype=np.float32)
    for s in range(0, n, chunk):
        e = min(s + chunk, n)
        block = data_rng.standard_normal((e - s, d), dtype=np.float32)
        block += data_rng.standard_normal((e - s, rank), dtype=np.float32) @ basis
        block += means[y[s:e]]
        X[s:e] = block * scale + offset
    return X, label


def objective(X, y, coef, intercept, C, chunk: int = 20000) -> float:
    """sklearn's objective divided by C n: mean cross-entropy + ||W||^2 / (2 C n), in float64."""
    total = 0.0
    for s in range(0, len(X), chunk):
        z = X[s : s + chunk].astype(np.float64) @ coef.T + intercept
        if z.shape[1] == 1:
            z = np.column_stack([np.zeros(len(z)), z[:, 0]])
        total += float(np.sum(logsumexp(z, axis=1) - z[np.arange(len(z)), y[s : s + chunk]]))
    return total / len(X) + float(np.sum(coef**2)) / (2 * C * len(X))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="50k training rows instead of 200k")
    ap.add_argument("--rows", type=int, default=None)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--classes", type=int, default=17)
    ap.add_argument("--C", type=float, default=1.0)
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--max-iter", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--skip-sklearn", action="store_true")
    args = ap.parse_args()
    n = args.rows or (50_000 if args.quick else 200_000)

    torch.set_num_threads(args.threads)
    t = time.perf_counter()
    X, y = make_data(n + 20_000, args.dim, args.classes, seed=0)
    X_test, y_test, X, y = X[n:], y[n:], X[:n], y[:n]
    print(f"data: {n} x {args.dim}, {args.classes} classes, fp32 ({time.perf_counter() - t:.1f} s to make)")

    rows = []
    with threadpool_limits(limits=args.threads), warnings.catch_warnings():
        warnings.simplefilter("always", ConvergenceWarning)
        models = [("LinearProbe (torch L-BFGS)", LinearProbe(C=args.C, tol=args.tol, max_iter=args.max_iter))]
        if not args.skip_sklearn:
            sk = LogisticRegression(C=args.C, tol=args.tol, max_iter=args.max_iter, solver="lbfgs")
            models.append(("sklearn LogisticRegression(lbfgs)", sk))
        for name, model in models:
            t = time.perf_counter()
            model.fit(X, y)
            secs = time.perf_counter() - t
            n_iter = int(np.max(model.n_iter_))
            obj = objective(X, y, model.coef_, model.intercept_, args.C)
            rows.append((name, secs, n_iter, model.score(X, y), model.score(X_test, y_test), obj))
            print(f"  {name}: {secs:.1f} s", flush=True)

    print(f"\nC={args.C}, tol={args.tol}, max_iter={args.max_iter}, threads={args.threads}")
    print("objective = mean cross-entropy + ||W||^2 / (2 C n), float64, on the training rows; lower is")
    print("closer to the common optimum. 'done' = stopped before max_iter.")
    print(
        f"{'solver':36s} {'fit s':>8s} {'iters':>6s} {'done':>5s} {'train acc':>10s} {'test acc':>9s} {'objective':>14s}"
    )
    for name, secs, n_iter, tr, te, obj in rows:
        done = "yes" if n_iter < args.max_iter else "no"
        print(f"{name:36s} {secs:8.1f} {n_iter:6d} {done:>5s} {100 * tr:10.2f} {100 * te:9.2f} {obj:14.8f}")
    if len(rows) == 2:
        print(
            f"speed-up: {rows[1][1] / rows[0][1]:.1f}x; test accuracy difference "
            f"{100 * (rows[0][4] - rows[1][4]):+.2f} points"
        )


if __name__ == "__main__":
    main()
