"""What a learning curve costs and what it says (issue 31).

Runs one task of the bundled default experiment (its encoders and probe settings: control tasks, the ELMo
scalar mix) twice on cached stores, plain and with a 7-point ``learning_curve``, and prints the wall and
CPU seconds of the probes (the stores are extracted first and not counted), the curve per layer,
and the data-efficiency ratios of ELMo's layers 1 and 2 over GloVe and over layer 0 at 1 % and 10 %.

    python benchmarks/bench_learning_curve.py                   # UPOS on the bundled demo-ud slice
    PROBING_DATA=../shared/data python benchmarks/bench_learning_curve.py --full
        # UPOS on all of UD EWT, and supersense on the bundled SemCor slice
    PROBING_DATA=../shared/data python benchmarks/bench_learning_curve.py --full --curve-only
        # the curves alone: no plain run to compare with, no control tasks or scalar mix (neither enters
        # a curve), so the run's time is the curve's: the single layers and baselines at all 7 sizes
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import pandas as pd

from probing.experiment.runner import run_experiment
from probing.experiment.spec import Experiment, bundled_experiment, parse_experiment, tomllib

FRACTIONS = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0]
UPOS = {
    "name": "upos",
    "kind": "tagging",
    "label": "upos",
    "train": "demo-ud:train",
    "dev": "demo-ud:dev",
    "test": ["demo-ud:test"],
}
SUPERSENSE = {
    "name": "supersense",
    "kind": "supersense",
    "encoders": ["elmo", "glove"],
    "train": "demo-semcor:train",
    "test": ["demo-semcor:test"],
}


def experiment(task: dict, curve: bool, lean: bool = False) -> Experiment:
    """The bundled default experiment (its encoders and probe settings) with only ``task``, plus a 7-point
    ``learning_curve`` when ``curve``; ``lean`` drops the control tasks and the scalar mix."""
    data = tomllib.loads(bundled_experiment("default").read_text(encoding="utf-8"))
    data.pop("quick", None)
    if lean:
        data["probe"] |= {"control": False, "mix": []}
    data["tasks"] = [{**task, **({"learning_curve": FRACTIONS} if curve else {})}]
    return parse_experiment(data)


def timed_run(exp, out: Path, cache: Path) -> tuple[float, float, object]:
    """Wall and CPU seconds of a run whose stores are cached and whose jobs are not."""
    shutil.rmtree(cache / "jobs", ignore_errors=True)
    wall, cpu = time.perf_counter(), time.process_time()
    res = run_experiment(exp, out, progress=False)
    return time.perf_counter() - wall, time.process_time() - cpu, res


def bench(task: dict, cache: Path, work: Path, curve_only: bool = False) -> None:
    name = task["name"]
    wall, cpu = time.perf_counter(), time.process_time()
    run_experiment(experiment(task, False, lean=True), work / "warm", progress=False)  # the stores
    print(
        f"\n## {name} on {task['train']}: extraction and a lean run {time.perf_counter() - wall:.1f} s wall, "
        f"{time.process_time() - cpu:.1f} CPU s",
        flush=True,
    )
    rows = []
    if not curve_only:
        wall, cpu, _ = timed_run(experiment(task, False), work / "plain", cache)
        rows.append(("the task as default.toml runs it", wall, cpu))
    wall, cpu, res = timed_run(experiment(task, True, lean=curve_only), work / "curve", cache)
    rows.append((f"{len(FRACTIONS)}-point curve{', no control/mix' if curve_only else ''}", wall, cpu))
    curves = res.learning_curve.groupby(["encoder", "layer", "seed"]).ngroups
    print(f"\n## {name} on {task['train']}: probe cost (stores cached; {curves} curves)")
    print(f"{'run':34s} {'wall s':>8s} {'CPU s':>8s} {'x plain':>8s} {'s/curve':>8s}")
    for label, w, c in rows:
        print(f"{label:34s} {w:8.1f} {c:8.1f} {w / rows[0][1]:8.2f} {w / curves:8.1f}")
    lc = res.learning_curve
    table = lc.pivot_table(index=["encoder", "layer"], columns="n_train_sentences", values="value")
    print(f"\n{name}: {lc['metric'].iloc[0]} (%) by training sentences")
    print((table * 100).round(1).to_string())
    eff = res.data_efficiency
    eff = eff[(eff.measure == "ratio") & (eff.encoder == "elmo") & eff.layer.isin(["1", "2"])]
    refs = (eff.reference_encoder == "glove") | ((eff.reference_encoder == "elmo") & (eff.reference_layer == "0"))
    eff = eff[refs & eff.at_fraction.isin([0.01, 0.1])]
    print(f"\n{name}: data-efficiency ratio (reference sentences needed / layer's sentences)")
    print(
        eff.pivot_table(index="layer", columns=["reference_encoder", "reference_layer", "at_fraction"], values="ratio")
        .round(2)
        .to_string()
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", action="store_true", help="UD EWT (needs $PROBING_DATA) and the SemCor slice")
    ap.add_argument("--curve-only", action="store_true", help="no plain run; no control tasks or mix")
    args = ap.parse_args()
    pd.set_option("display.width", 200)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cache = work / "cache"  # private: its jobs are deleted between runs
        os.environ["PROBING_CACHE"] = str(cache)
        if args.full:
            bench(SUPERSENSE, cache, work, args.curve_only)
            ud_ewt = {"train": "ud-ewt:train", "dev": "ud-ewt:dev", "test": ["ud-ewt:test"]}
            bench(UPOS | ud_ewt, cache, work, args.curve_only)
        else:
            bench(UPOS, cache, work, args.curve_only)


if __name__ == "__main__":
    main()
