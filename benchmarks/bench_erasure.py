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

``--study CACHE`` asks why a held-out probe still reads UPOS after LEACE (README, "concept erasure"): on the
bundled model's UD EWT stores (extracted into CACHE if missing; needs PROBING_DATA), UPOS erasers on layers 1
and 2 fitted on growing random samples of training sentences, and on the contiguous first half of them; a
fresh LinearProbe trained on 20k other erased training tokens and scored on the erased test split.

    flock /tmp/probing-cpu.lock python benchmarks/bench_erasure.py --study ~/.cache/probing [--corpus demo-ud]

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

from probing.analysis.erasure import fit_eraser  # noqa: E402
from probing.encoders import get_encoder  # noqa: E402
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


def _sentence_rows(store: Store, sentences: np.ndarray) -> np.ndarray:
    """The store rows of ``sentences`` (indices), in the given order."""
    off = store.offsets
    return np.concatenate([np.arange(off[i], off[i + 1]) for i in sentences]) if len(sentences) else np.arange(0)


def study(cache: Path, corpus: str) -> None:
    """Held-out guardedness against the fitting set: its size, and a random vs a contiguous choice of sentences."""
    from probing.corpora import load
    from probing.store import extract

    enc = get_encoder("default")
    t0, c0 = time.perf_counter(), time.process_time()
    train, test = (extract(enc, load(corpus, split), cache_dir=cache, progress=False) for split in ("train", "test"))
    print(
        f"stores of {corpus}: {time.perf_counter() - t0:.0f} s wall, {time.process_time() - c0:.0f} s CPU", flush=True
    )
    y, y_test = train.tokens["upos"].to_numpy().astype(str), test.tokens["upos"].to_numpy().astype(str)
    order = np.random.default_rng(0).permutation(train.n_sentences)
    lengths = np.diff(train.offsets)[order]
    n_probe = int(np.searchsorted(np.cumsum(lengths), 20_000)) + 1  # random sentences, about 20k tokens
    probe_rows = _sentence_rows(train, np.sort(order[:n_probe]))
    rest = order[n_probe:]  # the fitting pool, in random order
    contiguous = np.sort(rest)[: len(rest) // 2]  # the first half of the pool in corpus order
    majority = float(np.mean(y_test == pd.Series(y[probe_rows]).value_counts().idxmax()))
    print(
        f"probe on {len(probe_rows)} train tokens, scored on {len(test)} test tokens; majority {100 * majority:.2f} %"
    )
    pool_tokens = np.cumsum(np.diff(train.offsets)[rest])
    n_contiguous = len(_sentence_rows(train, contiguous))
    sizes = sorted({n for n in (8_000, 34_000, 100_000) if n < pool_tokens[-1]} | {n_contiguous, int(pool_tokens[-1])})
    fits: list[tuple[str, np.ndarray]] = [
        (f"random {n}", _sentence_rows(train, rest[: int(np.searchsorted(pool_tokens, n)) + 1])) for n in sizes
    ]
    fits.append((f"contiguous {n_contiguous}", _sentence_rows(train, contiguous)))
    print(f"{'layer':6} {'fit on':18} {'method':7} {'rank':>5} {'fit wall s':>10} {'fit CPU s':>9} {'probe %':>8}")
    for layer in ("1", "2"):
        X_probe, X_test = train.layer(layer, rows=probe_rows), test.layer(layer)
        base = LinearProbe().fit(X_probe, y[probe_rows]).score(X_test, y_test)
        print(f"{layer:6} {'':18} {'none':7} {0:5d} {'':>10} {'':>9} {100 * base:8.2f}", flush=True)
        for name, rows in fits:
            X_fit = train.layer(layer, rows=rows)
            methods = ("leace", "random") if name == f"random {sizes[-1]}" else ("leace",)
            rank = None
            for method in methods:
                t0, c0 = time.perf_counter(), time.process_time()
                eraser = fit_eraser(X_fit, y[rows], method=method, rank=rank)
                wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                rank = eraser.rank_
                acc = (
                    LinearProbe().fit(eraser.transform(X_probe), y[probe_rows]).score(eraser.transform(X_test), y_test)
                )
                print(
                    f"{layer:6} {name:18} {method:7} {eraser.rank_:5d} {wall:10.1f} {cpu:9.1f} {100 * acc:8.2f}",
                    flush=True,
                )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="20k fitting rows instead of 200k")
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--stores", type=Path, help="cache folder with the bundled model's demo-ud stores")
    ap.add_argument("--study", type=Path, help="cache folder for the held-out guardedness study's stores")
    ap.add_argument("--corpus", default="ud-ewt", help="the study's UD corpus (default ud-ewt)")
    ap.add_argument(
        "--fingerprint", help="the stores' encoder fingerprint (a prefix; default: this code's bundled model's)"
    )
    args = ap.parse_args()
    if args.stores:
        guardedness(args.stores.expanduser(), args.fingerprint)
        return
    if args.study:
        study(args.study.expanduser(), args.corpus)
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
