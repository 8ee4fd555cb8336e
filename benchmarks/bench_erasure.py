"""Fit time of the erasers (LEACE, INLP, the random control) on 200k x 512, and what a fresh probe reads after.

Data: bench_probe.py's synthetic activations (17 Zipf-distributed classes like POS tags, correlated noise,
uneven feature scales, 3 % ambiguous labels), fp16 as a store holds it. Erasers are fitted on the first
rows; a LinearProbe is then trained on 20k other rows and scored on 20k more (before and after erasure),
beside the majority class.

``--stores CACHE`` instead measures linear guardedness on the bundled model's demo-ud stores found in the
cache folder CACHE: UPOS erasers on layers 1, 2 and the forward half of 1, fitted on the first half of the
training sentences, a fresh LinearProbe (C = 1) trained on the erased second half and scored on the erased
test split.

    flock /tmp/probing-cpu.lock python benchmarks/bench_erasure.py            # 200k x 512
    flock /tmp/probing-cpu.lock python benchmarks/bench_erasure.py --quick    # 20k x 512
    flock /tmp/probing-cpu.lock python benchmarks/bench_erasure.py --stores ~/.cache/probing

(The ELMo code is part of an ELMo encoder's fingerprint: stores written by another version of the code are
found with ``--fingerprint``.)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
from bench_probe import make_data  # noqa: E402

from probing.encoders import get_encoder  # noqa: E402
from probing.erasure import fit_eraser  # noqa: E402
from probing.probes import LinearProbe  # noqa: E402
from probing.store import Store  # noqa: E402


def find_store(cache: Path, fingerprint: str, corpus: str, split: str) -> Store:
    for manifest in sorted((cache / "store").glob("*/manifest.json")):
        m = json.loads(manifest.read_text())
        if m["encoder"]["fingerprint"].startswith(fingerprint) and (m["corpus"]["name"], m["corpus"]["split"]) == (
            corpus,
            split,
        ):
            return Store.open(manifest.parent)
    raise SystemExit(f"{cache}: no store of the bundled model on {corpus}:{split}")


def guardedness(cache: Path, fingerprint: str | None) -> None:
    fp = fingerprint or get_encoder("default").fingerprint
    train, test = (find_store(cache, fp, "demo-ud", split) for split in ("train", "test"))
    half = int(train.offsets[train.n_sentences // 2])
    y, y_test = train.tokens["upos"].to_numpy(), test.tokens["upos"].to_numpy()
    fit_rows, probe_rows = np.arange(half), np.arange(half, len(train))
    majority = float(np.mean(y_test == pd.Series(y[probe_rows]).value_counts().idxmax()))
    print(f"bundled model, UPOS on demo-ud: erasers fit on {half} train tokens, probe on {len(probe_rows)}, ")
    print(f"scored on {len(test)} test tokens; majority class {100 * majority:.2f} %")
    print(f"{'layer':6} {'method':7} {'rank':>5} {'fit wall s':>10} {'fit CPU s':>9} {'probe %':>8} {'- majority':>10}")
    for layer in ("1", "2", "1f"):
        X_fit, X_probe = train.layer(layer, rows=fit_rows), train.layer(layer, rows=probe_rows)
        X_test = test.layer(layer)
        base = LinearProbe().fit(X_probe, y[probe_rows]).score(X_test, y_test)
        print(f"{layer:6} {'none':7} {0:5d} {'':>10} {'':>9} {100 * base:8.2f} {100 * (base - majority):10.2f}")
        rank = None
        for method in ("leace", "random", "inlp"):
            t0, c0 = time.perf_counter(), time.process_time()
            eraser = fit_eraser(X_fit, y[fit_rows], method=method, rank=rank if method == "random" else None)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            rank = eraser.rank_ if method == "leace" else rank
            if method == "leace":  # on its own fitting tokens LEACE is exact: a probe there learns the majority class
                erased_fit = eraser.transform(X_fit)
                own = LinearProbe().fit(erased_fit, y[fit_rows]).score(eraser.transform(X_test), y_test)
                print(
                    f"{layer:6} {'(probe on the fitting tokens)':>42} {100 * own:8.2f} {100 * (own - majority):10.2f}"
                )
            probe = LinearProbe().fit(eraser.transform(X_probe), y[probe_rows])
            acc = probe.score(eraser.transform(X_test), y_test)
            print(
                f"{layer:6} {method:7} {eraser.rank_:5d} {wall:10.1f} {cpu:9.1f} {100 * acc:8.2f} "
                f"{100 * (acc - majority):10.2f}",
                flush=True,
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="20k fitting rows instead of 200k")
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--stores", type=Path, help="cache folder with the bundled model's demo-ud stores")
    ap.add_argument(
        "--fingerprint", help="the stores' encoder fingerprint (a prefix; default: this code's bundled model's)"
    )
    args = ap.parse_args()
    if args.stores:
        guardedness(args.stores.expanduser(), args.fingerprint)
        return
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
