"""How long each notebook takes at full size (the times their first cells state; issues 32.5, 34.4).

Executes every notebook (or those named) as a user would: full size (no ``PROBING_NOTEBOOK_QUICK``), a cold
cache of its own, offline, in a scratch folder; prints wall and CPU seconds (the kernel's, read from the
kernel process when it ends) per notebook as a table.

    python benchmarks/bench_notebooks.py                      # every notebook
    python benchmarks/bench_notebooks.py 05_syntax_trees 06_beyond_accuracy
    python benchmarks/bench_notebooks.py --quick              # the sizes the test suite runs
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def run(name: str, quick: bool) -> tuple[float, float]:
    """Wall and kernel CPU seconds of one notebook, executed from a cold cache."""
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["PROBING_CACHE"] = str(Path(tmp) / "cache")
        os.environ["PROBING_OFFLINE"] = "1"
        if quick:
            os.environ["PROBING_NOTEBOOK_QUICK"] = "1"
        else:
            os.environ.pop("PROBING_NOTEBOOK_QUICK", None)
        nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        NotebookClient(nb, kernel_name="python3", timeout=3600, resources={"metadata": {"path": tmp}}).execute()
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="notebook names without .ipynb (default: all)")
    parser.add_argument("--quick", action="store_true", help="the quick sizes the test suite runs")
    args = parser.parse_args()
    names = args.names or sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb"))
    rows = []
    for name in names:
        wall, cpu = run(name, args.quick)
        rows.append((name, wall, cpu))
        print(f"{name:<24} {wall:8.0f} s wall {cpu:8.0f} s CPU", file=sys.stderr, flush=True)
    print(f"\n{'notebook':<24} {'wall s':>8} {'CPU s':>8}   ({'quick' if args.quick else 'full'} size, cold cache)")
    for name, wall, cpu in rows:
        print(f"{name:<24} {wall:8.0f} {cpu:8.0f}")


if __name__ == "__main__":
    main()
