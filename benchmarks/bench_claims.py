"""Issue 21's measurements with the bundled model on UD EWT: UPOS accuracy of the forward half, backward half
and both directions of layers 1 and 2 (with 95 % CIs over sentences); accuracy on tokens in vs out of GloVe's
vocabulary and the model's training vocabulary, for GloVe and each ELMo layer; and how much a sentence's
vectors change with the sentence before it, stateless vs stateful.

    PROBING_DATA=/work/shared/data python benchmarks/bench_claims.py            # all of UD EWT
    PROBING_DATA=/work/shared/data python benchmarks/bench_claims.py --quick    # first 2,000 sentences per split

Probes: L-BFGS, C chosen on UD EWT dev from {1, 10, 100}, no control task, mix or concat (not asked here).
Prints markdown tables; writes the run's results.csv under --out.
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from probing.experiment import parse_experiment, run_experiment
from probing.tasks.labels import default_vocabularies, vocabulary_splits
from probing.views.context import context_dependence

TOML = """
[experiment]
name = "bench-claims"
seeds = [0]
bootstrap = {boot}
{max_sentences}

[probe]
C = [1, 10, 100]
max_iter = 100
tol = 3e-4
control = false
mix = false
concat = false

[[encoders]]
name = "elmo"
kind = "elmo"
model = "default"

[[encoders]]
name = "glove"
kind = "glove"

[[tasks]]
name = "upos"
kind = "tagging"
label = "upos"
train = "ud-ewt:train"
dev = "ud-ewt:dev"
test = ["ud-ewt:test"]
baselines = ["most-frequent-tag"]
directions = true
oov_split = true
"""


def pct(r) -> str:
    return f"{100 * r.value:.1f} [{100 * r.ci_low:.1f}, {100 * r.ci_high:.1f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="first 2,000 sentences of each split, 200 bootstrap draws")
    ap.add_argument("--out", default="out/bench_claims")
    args = ap.parse_args()
    torch.set_num_threads(1)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    text = TOML.format(boot=200 if args.quick else 1000, max_sentences="max_sentences = 2000" if args.quick else "")
    t0 = time.time()
    res = run_experiment(parse_experiment(text), args.out, progress=True)
    df = res.results
    df = df[df["split"] == "test"]
    print(f"\n## UPOS on UD EWT test ({'quick: 2,000 sentences per split' if args.quick else 'full'})\n")
    acc = df[(df["metric"] == "accuracy") & (df["encoder"] == "elmo")].set_index("layer")
    print("| layer | forward | backward | both |\n|---|---|---|---|")
    for layer in ("1", "2"):
        print(f"| {layer} | {pct(acc.loc[layer + 'f'])} | {pct(acc.loc[layer + 'b'])} | {pct(acc.loc[layer])} |")
    print(f"\nlayer 0 (no context): {pct(acc.loc['0'])}")

    print("\n## Accuracy in vs out of vocabulary (test tokens)\n")
    metrics = ["accuracy", "accuracy-iv-glove", "accuracy-oov-glove", "accuracy-iv-train", "accuracy-oov-train"]
    print("| encoder | layer | " + " | ".join(metrics) + " |\n|" + "---|" * (len(metrics) + 2))
    keep = df[df["metric"].isin(metrics)]
    for (enc, layer), g in keep.groupby(["encoder", "layer"], sort=False):
        g = g.set_index("metric")
        print(f"| {enc} | {layer} | " + " | ".join(pct(g.loc[m]) if m in g.index else "-" for m in metrics) + " |")
    words = res.store("elmo", "ud-ewt", "test").tokens["word"].astype(str).tolist()
    splits = vocabulary_splits(words, default_vocabularies())
    print(
        f"\ntest tokens: {len(words):,}; outside GloVe: {int((~splits['glove']).sum()):,}; "
        f"outside the training vocabulary: {int((~splits['train']).sum()):,}"
    )

    print("\n## Sentence-only context (bundled model; max |difference| vs the sentence alone)\n")
    ctx = context_dependence("default")
    print("| mode | layer | max abs diff | mean abs diff | first token | last token | max abs value |")
    print("|---|---|---|---|---|---|---|")
    for r in ctx.itertuples(index=False):
        print(
            f"| {r.mode} | {r.layer} | {r.max_abs_diff:.3g} | {r.mean_abs_diff:.3g} | {r.first_token_diff:.3g} | "
            f"{r.last_token_diff:.3g} | {r.max_abs_value:.3g} |"
        )
    print(f"\ntotal {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
