"""BLiMP accuracy of an ELMo with an LM head, forward / backward / both, beside the authors' models.

    PROBING_DATA=/path/to/shared/data python benchmarks/bench_blimp.py [--model default] [--paradigms N]

All 67,000 pairs by default (``--paradigms N``: the first N paradigms only). Prints per phenomenon and
overall accuracy (the authors' aggregation: phenomenon = mean over its paradigms, overall = mean over the 67
paradigms) with 95% bootstrap CIs, coverage (pairs whose differing words are all in the head's vocabulary),
the authors' 5-gram / LSTM / Transformer-XL / GPT-2 rows (models_summary.jsonl) and human agreement, wall and CPU seconds and
tokens/s of scoring. ``--out FILE.csv`` keeps the rows.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import pandas as pd
import torch

from probing.lm.pairs import pair_outcomes, read_blimp, reference_rows, summarize
from probing.lm.score import load_model
from probing.tokenize import tokenize


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="default")
    ap.add_argument("--paradigms", type=int, default=None, help="only the first N paradigms (default all 67)")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    root = Path(os.environ.get("PROBING_DATA", ""))
    pairs = read_blimp(root / "blimp" / "BLiMP.zip")
    if args.paradigms:
        keep = list(dict.fromkeys(pairs.group))[: args.paradigms]
        pairs = pairs[pairs.group.isin(keep)].reset_index(drop=True)
    elmo, head = load_model(args.model)
    sentences = set(pairs.good) | set(pairs.bad)
    n_tokens = sum(len(tokenize(s)) + 2 for s in sentences)
    wall, cpu = time.perf_counter(), time.process_time()
    outcomes = pair_outcomes(pairs, elmo, head, batch_size=args.batch_size)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    rows = summarize(outcomes, dataset="blimp", encoder=args.model, n_boot=1000, seed=0)
    refs = reference_rows(
        root / "blimp" / "models_summary.jsonl",
        root / "blimp" / "human_validation_summary.csv",
        paradigms=list(dict.fromkeys(pairs.group)),  # the authors' rows over the same paradigms
    )
    if args.out:
        pd.concat([rows, refs]).to_csv(args.out, index=False)

    acc = rows[(rows.metric == "accuracy") & (rows.level != "paradigm")]
    table = acc.pivot_table(index="group", columns="layer", values="value")[["forward", "backward", "both"]] * 100
    ci = acc[acc.layer == "both"].set_index("group")
    table["both 95% CI"] = [f"{ci.ci_low[g] * 100:.1f}-{ci.ci_high[g] * 100:.1f}" for g in table.index]
    cov = rows[(rows.metric == "coverage") & (rows.layer == "both") & (rows.level != "paradigm")].set_index("group")
    table["coverage"] = cov.value.reindex(table.index) * 100
    ref = refs[(refs.level != "paradigm")].pivot_table(index="group", columns="layer", values="value") * 100
    table = table.join(ref[["5-gram", "lstm", "txl", "gpt2", "human"]])
    ends = ["overall", "mean-over-groups"]  # equal here: every paradigm has 1,000 pairs
    order = [g for g in table.index if g not in ends] + ends
    with pd.option_context("display.float_format", "{:.1f}".format, "display.width", 200):
        print(table.loc[order].to_string())
    print(
        f"\n{len(pairs):,} pairs, {len(sentences):,} distinct sentences, {n_tokens:,} tokens (with <S>, </S>); "
        f"scoring {wall:.0f} s wall, {cpu:.0f} s CPU, {n_tokens / wall:,.0f} tokens/s, "
        f"{torch.get_num_threads()} torch threads; model {elmo.source}, head {head.source}"
    )


if __name__ == "__main__":
    main()
