"""SyntaxGym (Hu et al. 2020): the bundled model on all 34 suites, per direction, beside the authors' models.

    OMP_NUM_THREADS=2 python benchmarks/bench_syntaxgym.py [--model default] [--max-items N] [--suites]

Scores every bundled suite with :func:`probing.lm.syntaxgym.score_suite`, evaluates its predictions and
prints accuracy (%) per circuit and the SG score (the mean over the 31 suites the authors count) for the
forward, backward and both-direction LM, with 95 % bootstrap CIs over items (1,000 replicates), beside GRNN,
JRNN, GPT-2 and the n-gram (the authors' per-item results, bundled); ``--suites`` adds the per-suite table.
Then the wall and CPU seconds of scoring and evaluation (loading the model excluded, printed apart).
"""

from __future__ import annotations

import argparse
import time

import pandas as pd

from probing.lm.score import load_model
from probing.lm.syntaxgym import (
    bundled_suites,
    evaluate_predictions,
    item_outcomes,
    load_suite,
    reference_table,
    score_suite,
    summarize,
)

REFERENCES = {"grnn": "GRNN", "jrnn": "JRNN", "gpt-2-pretrained": "GPT-2", "ngram_bllip-lg": "n-gram"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="default")
    ap.add_argument("--max-items", type=int, default=None, help="the first N items of each suite (quick runs)")
    ap.add_argument("--suites", action="store_true", help="print the per-suite table too")
    args = ap.parse_args()
    wall, cpu = time.perf_counter(), time.process_time()
    model, head = load_model(args.model)
    load = (time.perf_counter() - wall, time.process_time() - cpu)
    wall, cpu = time.perf_counter(), time.process_time()
    outcomes, n_items = [], {}
    for name in bundled_suites():
        suite = load_suite(name)
        if args.max_items:
            from dataclasses import replace

            suite = replace(suite, items=suite.items[: args.max_items])
        n_items[name] = len(suite.items)
        outcomes.append(item_outcomes(evaluate_predictions(score_suite(suite, model, head), suite)))
    table = summarize(pd.concat(outcomes, ignore_index=True), n_boot=1000, seed=0)
    run = (time.perf_counter() - wall, time.process_time() - cpu)
    refs = reference_table(items={s: range(1, n + 1) for s, n in n_items.items()})
    refs = refs[refs.model.isin(list(REFERENCES))].pivot(index="split", columns="model", values="value")
    refs = refs.rename(columns=REFERENCES)[list(REFERENCES.values())] * 100
    table["cell"] = [
        f"{v * 100:.1f} [{lo * 100:.0f}-{hi * 100:.0f}]" for v, lo, hi in zip(table.value, table.ci_low, table.ci_high)
    ]
    cells = table.pivot(index="split", columns="direction", values="cell")[["forward", "backward", "both"]]
    out = cells.join(refs.round(1))
    order = [s for s in out.index if s.startswith("circuit:")] + ["overall"]
    with pd.option_context("display.width", 220, "display.max_rows", 100):
        print(f"{args.model} on {len(n_items)} SyntaxGym suites, {sum(n_items.values())} items (accuracy %, 95% CI)")
        print(out.loc[order].rename(index=lambda s: s.removeprefix("circuit:")).to_string())
        if args.suites:
            print(out.loc[sorted(s for s in out.index if s.startswith("suite:"))].to_string())
    print(f"load model: {load[0]:.1f} s wall, {load[1]:.1f} s CPU")
    print(f"34 suites scored and evaluated: {run[0]:.1f} s wall, {run[1]:.1f} s CPU")


if __name__ == "__main__":
    main()
