"""What the structural tasks would add to `probing demo`: one probe fit per kind and layer on the bundled
demo-ud slice (3,074 train / 509 dev / 1,012 test sentences) with the bundled model, wall and CPU seconds.

    python benchmarks/bench_structural_demo.py                 # 1 thread (the demo's share of 2 cores)
    python benchmarks/bench_structural_demo.py --threads 2 --layers 0 1 2

The demo would fit, per structural task, one probe and one control probe for every layer of every encoder
(ELMo 3, random ELMo 3, GloVe 1): 14 fits per task. Stores are extracted first (or read from the cache),
as the demo's tagging tasks already do, so only the fits are timed.
"""

from __future__ import annotations

import argparse
import time

import torch

from probing.corpora import registry
from probing.encoders import get_encoder
from probing.probes.structural import run_structural
from probing.store import extract


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--layers", nargs="+", default=["0", "1"])
    ap.add_argument("--model", default="default")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    enc = get_encoder(args.model)
    stores = {s: extract(enc, registry.load("demo-ud", s), progress=False) for s in ("train", "dev", "test")}
    print(
        f"demo-ud: {stores['train'].n_sentences} train sentences, dim {stores['train'].dim}, {args.threads} thread(s)"
    )
    print(f"{'kind':<20} {'layer':>5} {'wall s':>8} {'cpu s':>8}  scores")
    cpu_by_kind: dict[str, list[float]] = {}
    for kind in ("distance", "depth"):
        for layer in args.layers:
            t0, c0 = time.time(), time.process_time()
            rows = run_structural(stores["train"], stores["dev"], stores["test"], layer, kind, n_boot=200)
            wall, cpu = time.time() - t0, time.process_time() - c0
            cpu_by_kind.setdefault(kind, []).append(cpu)
            scores = ", ".join(f"{m} {v:.3f}" for m, v, _, _ in rows)
            print(f"{kind:<20} {layer:>5} {wall:8.1f} {cpu:8.1f}  {scores}")
    per_task = {k: 14 * sum(v) / len(v) for k, v in cpu_by_kind.items()}
    print(
        "estimated CPU seconds per demo task (14 fits: 7 layers x probe + control): "
        + ", ".join(f"{k} {v:.0f}" for k, v in per_task.items())
    )


if __name__ == "__main__":
    main()
