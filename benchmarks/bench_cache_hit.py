"""A store hit against a cold extraction, each as a whole ``probing extract`` process (issue 19, item 1).

    PROBING_DATA=/work/shared/data python benchmarks/bench_cache_hit.py            # UD EWT dev/train, SemCor train
    PROBING_DATA=/work/shared/data python benchmarks/bench_cache_hit.py --only ud-ewt:dev

Per dataset, in a fresh cache: one cold run (parse + encode with the bundled model + write), then
``--repeats`` hits (the median is shown), then hits without the fingerprint memo (its folder removed
before each: the corpus is parsed for its key, as before the memo existed), and the bare interpreter
plus ``import probing.cli`` for reference. Wall and CPU (user+sys of the child) seconds per process.
The machine's load average is printed with the numbers: on a shared machine wall time is mostly waiting.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ("ud-ewt:dev", "ud-ewt:train", "semcor:train")


def timed(argv: list[str], env: dict) -> tuple[float, float]:
    """(wall, user+sys CPU) seconds of one child process; it must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    run = subprocess.run(argv, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if run.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed:\n{run.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=list(DATASETS), metavar="NAME:SPLIT")
    ap.add_argument("--model", default="default")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if not os.environ.get("PROBING_DATA"):
        sys.exit("set PROBING_DATA to the folder holding UD EWT and the WSD data (see probing data list)")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    py = sys.executable
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs", flush=True)
    base = [timed([py, "-c", "pass"], env) for _ in range(args.repeats)]
    cli = [timed([py, "-c", "import probing.cli"], env) for _ in range(args.repeats)]
    rows = []
    for item in args.only:
        name, split = item.split(":")
        with tempfile.TemporaryDirectory(prefix="bench-hit-") as cache:
            cmd = [py, "-m", "probing.cli", "extract", "--model", args.model, "--corpus", name, "--split", split]
            cmd += ["--cache", cache, "-q"]
            cold = timed(cmd, env)
            hits = [timed(cmd, env) for _ in range(args.repeats)]
            unmemo = []
            for _ in range(args.repeats):
                shutil.rmtree(Path(cache) / "corpus-memo", ignore_errors=True)
                unmemo.append(timed(cmd, env))
            hit_wall = statistics.median(w for w, _ in hits)
            rows.append(
                (
                    item,
                    cold,
                    (hit_wall, statistics.median(c for _, c in hits)),
                    (statistics.median(w for w, _ in unmemo), statistics.median(c for _, c in unmemo)),
                    cold[0] / hit_wall,
                )
            )
            print(f"{item}: cold {cold[0]:.1f} s, hit {hit_wall:.2f} s", flush=True)
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print()
    print(f"model {args.model}; wall / CPU seconds per whole process (median of {args.repeats}); load average {load}")
    print(f"python -c pass: {statistics.median(w for w, _ in base):.2f} / {statistics.median(c for _, c in base):.2f}")
    print(
        f"import probing.cli: {statistics.median(w for w, _ in cli):.2f} / {statistics.median(c for _, c in cli):.2f}"
    )
    print(f"{'dataset':<14} {'cold':>13} {'hit':>13} {'hit, no memo':>13} {'cold/hit wall':>14}")
    for item, cold, hit, unmemo, ratio in rows:
        cells = [f"{w:6.2f} /{c:5.2f}" for w, c in (cold, hit, unmemo)]
        print(f"{item:<14} {cells[0]:>13} {cells[1]:>13} {cells[2]:>13} {ratio:13.1f}x")


if __name__ == "__main__":
    main()
