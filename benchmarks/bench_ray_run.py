"""``probing run`` locally against the Ray backend with its stores extracted in shards (issue 19, item 2).

    PROBING_DATA=/work/shared/data python benchmarks/bench_ray_run.py                # default experiment, quick
    PROBING_DATA=/work/shared/data python benchmarks/bench_ray_run.py --shards 4 --cpus 4

Runs the experiment twice in fresh caches: in this process, then on a local Ray (``ray.init(num_cpus=...)``)
with ``[run] backend = "ray"`` and ``shards``. Prints per store how many fp16 values differ and by how many
fp16 steps at most (shards batch sentences differently), then how far the result rows moved: the largest
difference of ``value``/``ci_low``/``ci_high`` in points (fractions x 100) and how many rows differ at all,
and both wall times (the machine's load average with them: on a shared machine wall time is mostly waiting).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile
import time
from pathlib import Path

import numpy as np


def fp16_steps(a: np.ndarray, b: np.ndarray) -> float:
    """Largest |a - b| in units of the fp16 spacing at max(|a|, |b|) (0 when equal)."""
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    step = np.spacing(np.maximum(np.abs(a32), np.abs(b32)).astype(np.float16)).astype(np.float32)
    return float((np.abs(a32 - b32) / step).max()) if len(a32) else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", default="default")
    parser.add_argument("--full", action="store_true", help="without the file's [quick] overrides")
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--cpus", type=int, default=2, help="num_cpus of the local Ray")
    args = parser.parse_args()

    import ray

    from probing.experiment import load_experiment, run_experiment

    exp = load_experiment(args.experiment, quick=not args.full)
    runs, walls = {}, {}
    with tempfile.TemporaryDirectory(prefix="bench-ray-run-") as tmp:
        for name in ("local", "ray"):
            e = dataclasses.replace(exp, cache_dir=Path(tmp) / name)
            if name == "ray":
                ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False, configure_logging=False)
            t0 = time.perf_counter()
            runs[name] = run_experiment(
                e,
                Path(tmp) / f"out-{name}",
                progress=False,
                ray="local" if name == "ray" else None,
                shards=args.shards if name == "ray" else None,
            )
            walls[name] = time.perf_counter() - t0
        local, remote = runs["local"], runs["ray"]
        print(f"{'store':<40} {'tokens':>8} {'shards':>6} {'values differ':>14} {'max fp16 steps':>15}")
        for key, store in local.stores.items():
            other = remote.stores[key]
            differ = sum(int((store.layer(k) != other.layer(k)).sum()) for k in range(len(store.layer_names)))
            steps = max(fp16_steps(store.layer(k), other.layer(k)) for k in range(len(store.layer_names)))
            total = len(store) * store.dim * len(store.layer_names)
            info = remote.provenance["stores"][f"{key[0]}/{key[1]}:{key[2]}"]
            print(
                f"{'/'.join(key):<40} {len(store):>8} {info['ray_shards']:>6} "
                f"{differ:>7} ({differ / total:.1e}) {steps:>15.1f}"
            )
        cols = ["value", "ci_low", "ci_high"]
        gap = (remote.results[cols] - local.results[cols]).abs()
        moved = int((gap.max(axis=1) > 0).sum())
        print(
            f"\nresult rows: {len(local.results)}, {moved} differ; largest difference {gap.max().max() * 100:.3f} points"
        )
        head = local.results[local.results.metric == local.results.task.map(local.headlines)]
        hgap = gap.loc[head.index, "value"]
        print(f"headline rows: {len(head)}, largest difference {hgap.max() * 100:.3f} points")
        print(f"wall: local {walls['local']:.1f} s, Ray ({args.shards} shards, {args.cpus} CPUs) {walls['ray']:.1f} s")
        print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    ray.shutdown()


if __name__ == "__main__":
    main()
