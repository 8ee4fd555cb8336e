"""Time ``probe_layers`` on demo-ud (UPOS, ELMo + GloVe) with its quick default and with ``thorough=True``.

The stores are extracted first (timed apart, as "extract"), so each probe_layers row is the probes alone:
every layer and its control task (quick), plus the scalar mix, the concatenation and the full C grid
(thorough). Wall and CPU seconds of this process (all its threads).

    OMP_NUM_THREADS=2 python benchmarks/bench_probe_layers.py --cache /tmp/pl-cache            # both
    OMP_NUM_THREADS=2 python benchmarks/bench_probe_layers.py --cache /tmp/pl-cache --only quick
"""

from __future__ import annotations

import argparse
import time

from probing import probe_layers
from probing.experiment import extract_activations


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", required=True, help="store cache folder (reused between runs)")
    ap.add_argument("--only", choices=["quick", "thorough"], help="time one setting only")
    args = ap.parse_args()
    rows = []
    t0, c0 = time.time(), time.process_time()
    n_tokens = {}
    for model in ("default", "glove"):
        for split in ("train", "dev", "test"):
            store = extract_activations(model, "demo-ud", split, cache_dir=args.cache, progress=False)
            n_tokens[split] = len(store)
    rows.append(("extract (6 stores)", time.time() - t0, time.process_time() - c0))
    print(f"demo-ud tokens: {n_tokens}; extract {rows[-1][1]:.1f} s wall, {rows[-1][2]:.1f} s CPU", flush=True)
    for thorough in (False, True):
        name = "thorough" if thorough else "quick"
        if args.only not in (None, name):
            continue
        t0, c0 = time.time(), time.process_time()
        df = probe_layers(
            "demo-ud:train",
            "demo-ud:test",
            dev="demo-ud:dev",
            encoders=["elmo", "glove"],
            cache_dir=args.cache,
            progress=False,
            thorough=thorough,
        )
        layers = sorted(set(df["layer"]))
        rows.append((f"probe_layers {name} ({', '.join(layers)})", time.time() - t0, time.process_time() - c0))
        print(f"{rows[-1][0]}: {rows[-1][1]:.1f} s wall, {rows[-1][2]:.1f} s CPU", flush=True)
    print(f"{'step':<80} {'wall s':>8} {'CPU s':>8}")
    for name, wall, cpu in rows:
        print(f"{name:<80} {wall:8.1f} {cpu:8.1f}")


if __name__ == "__main__":
    main()
