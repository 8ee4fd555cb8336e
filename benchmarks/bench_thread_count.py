"""The same numbers at any thread count, in the real pipeline: ``probing run EXP [--quick]`` in fresh processes
at 1 and 2 threads, with and without ``OPENBLAS_CORETYPE=Haswell``, each with its own empty cache; optionally
restricted to the AVX2 code paths (torch's, MKL's and oneDNN's kernels, by their environment variables), as an
AVX2-only CPU runs them.

    python benchmarks/bench_thread_count.py [--experiment default] [--full] [--paths native avx2]
        [--threads 1 2] [--coretype unset Haswell] [--out DIR]

Prints one row per run (sha256 of results.csv, mix_weights.csv and per_tag.csv, wall and CPU seconds) and,
per code path and ``OPENBLAS_CORETYPE`` (which picks numpy's OpenBLAS kernels: another code path), whether
the thread counts wrote the same bytes. Runs on different code paths may differ (float kernels round
differently); runs on one path at different thread counts must not.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

FILES = ("results.csv", "mix_weights.csv", "per_tag.csv")
AVX2 = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.is_file() else "-"


def run(out: Path, experiment: str, quick: bool, threads: int, paths: str, coretype: str) -> dict:
    """One fresh ``probing run`` in ``out`` (its own cache); the digests of its tables and its times."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "MKL_CBWR")}
    env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), PROBING_CACHE=str(out / "cache"))
    if paths == "avx2":
        env.update(AVX2)
    if coretype != "unset":
        env["OPENBLAS_CORETYPE"] = coretype
    cmd = [sys.executable, "-m", "probing.cli", "run", experiment, "--out", str(out / "run"), "-q"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([*cmd, *(["--quick"] if quick else [])], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "paths": paths,
        "threads": threads,
        "OPENBLAS_CORETYPE": coretype,
        **{f: _sha(out / "run" / f) for f in FILES},
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--experiment", default="default")
    ap.add_argument("--full", action="store_true", help="the experiment at full size (default: --quick)")
    ap.add_argument("--paths", nargs="+", default=["native", "avx2"], choices=["native", "avx2"])
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--coretype", nargs="+", default=["unset", "Haswell"])
    ap.add_argument("--out", type=Path, default=Path("bench-thread-count"))
    args = ap.parse_args()
    rows = []
    for paths in args.paths:
        for coretype in args.coretype:
            for threads in args.threads:
                tag = f"{paths}-{coretype}-{threads}"
                rows.append(run(args.out / tag, args.experiment, not args.full, threads, paths, coretype))
                print(" ".join(f"{k}={v}" for k, v in rows[-1].items()), flush=True)
    print()
    header = ["paths", "threads", "OPENBLAS_CORETYPE", *FILES, "wall_s", "cpu_s"]
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    for r in rows:
        print(" | ".join(str(r[h]) for h in header))
    for paths in args.paths:
        for coretype in args.coretype:
            same = {
                tuple(r[f] for f in FILES) for r in rows if (r["paths"], r["OPENBLAS_CORETYPE"]) == (paths, coretype)
            }
            verdict = "byte-identical" if len(same) == 1 else "DIFFERENT"
            print(f"{paths}, OPENBLAS_CORETYPE={coretype}: {verdict} at {len(args.threads)} thread counts")


if __name__ == "__main__":
    main()
