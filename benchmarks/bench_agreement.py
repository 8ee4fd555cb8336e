"""Subject-verb agreement on UD EWT by attractor count: (b) number probes per layer half (no LM head needed),
and (a) the LM's preference for the right verb form when the model has a head.

    PROBING_DATA=/path/to/shared/data python benchmarks/bench_agreement.py [--model default] [--no-lm]

Items: :func:`probing.lm.agreement_items` on EWT train (probe training) and test (evaluation). Prints
accuracy with 95% bootstrap CIs per layer / direction and attractor count, the skipped counts, wall and CPU s.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import pandas as pd

from probing.corpora.conllu import read_conllu
from probing.elmo import Elmo
from probing.lm import agreement_items, minimal_pairs
from probing.lm.agreement import agreement_probe


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="default")
    ap.add_argument("--no-lm", action="store_true", help="probes only (for a model without an LM head)")
    args = ap.parse_args()
    ewt = Path(os.environ.get("PROBING_DATA", "")) / "ud" / "en_ewt"
    train, _ = agreement_items(read_conllu(ewt / "en_ewt-ud-train.conllu"))
    test, skipped = agreement_items(read_conllu(ewt / "en_ewt-ud-test.conllu"))
    print(f"items: train {len(train)}, test {len(test)}; test skipped: {dict(skipped)}")
    print("test items per group:", test.group.value_counts().sort_index().to_dict())
    model = Elmo.from_pretrained(args.model)
    wall, cpu = time.perf_counter(), time.process_time()
    probes = agreement_probe(train, test, model)
    probe_time = (time.perf_counter() - wall, time.process_time() - cpu)
    probes["cell"] = [
        f"{a * 100:.1f} [{lo * 100:.0f}-{hi * 100:.0f}]"
        for a, lo, hi in zip(probes.accuracy, probes.ci_low, probes.ci_high)
    ]
    with pd.option_context("display.width", 200):
        print("\n(b) number probe on the word before the verb (accuracy %, 95% CI):")
        print(probes.pivot(index="layer", columns="group", values="cell").to_string())
    print(f"probes: {probe_time[0]:.0f} s wall, {probe_time[1]:.0f} s CPU")
    if not args.no_lm:
        wall, cpu = time.perf_counter(), time.process_time()
        rows = minimal_pairs(test, model=model if model.lm_head else args.model)
        rows = rows[(rows.metric == "accuracy") & (rows.level != "phenomenon")]
        rows["cell"] = [
            f"{a * 100:.1f} [{lo * 100:.0f}-{hi * 100:.0f}]" for a, lo, hi in zip(rows.value, rows.ci_low, rows.ci_high)
        ]
        print(
            "\n(a) LM prefers the right form (accuracy %, 95% CI; overall = share of all items, "
            "mean-over-groups = mean over the attractor groups):"
        )
        print(rows.pivot(index="layer", columns="group", values="cell").to_string())
        print(f"LM: {time.perf_counter() - wall:.0f} s wall, {time.process_time() - cpu:.0f} s CPU")


if __name__ == "__main__":
    main()
