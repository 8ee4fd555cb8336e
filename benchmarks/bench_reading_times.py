"""Natural Stories reading times (Futrell et al. 2021): the bundled model's surprisal per direction as a
predictor of mean self-paced reading time, beside GPT-3 and unigram frequency.

    PROBING_DATA=/path/to/shared/data OMP_NUM_THREADS=2 python benchmarks/bench_reading_times.py [--model default]

Prints ΔLogLik per word (nats; held out over 10 folds of stories, spillover 2) and Brain-Score's Pearson r
(words not first in their sentence; ceiling 0.858, not applied), each with a 95 % bootstrap CI over words
(1,000 replicates), then the wall and CPU seconds of reading the corpus, scoring it, and the regressions.
"""

from __future__ import annotations

import argparse
import time

import pandas as pd

from probing.lm.reading_times import metrics, read_corpus, score_words
from probing.lm.score import load_model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="default")
    args = ap.parse_args()
    clock = [(time.perf_counter(), time.process_time())]

    def lap() -> str:
        clock.append((time.perf_counter(), time.process_time()))
        (w0, c0), (w1, c1) = clock[-2], clock[-1]
        return f"{w1 - w0:.1f} s wall, {c1 - c0:.1f} s CPU"

    words = read_corpus()
    print(f"read {len(words)} words of {words.story.nunique()} stories: {lap()}")
    model, head = load_model(args.model)
    fw, bw = score_words(words, model, head)
    words = words.assign(surprisal_forward=fw, surprisal_backward=bw, surprisal_both=(fw + bw) / 2)
    print(f"scored with {args.model}: {lap()}")
    rows = []
    for name in ("forward", "backward", "both", "gpt3", "unigram"):
        found = metrics(words, f"surprisal_{name}", delta_loglik=name != "unigram")
        for metric, (v, lo, hi, n) in found.items():
            rows.append((name, metric, f"{v:.4f} [{lo:.4f}, {hi:.4f}]", n))
    print(f"regressions and bootstrap: {lap()}")
    table = pd.DataFrame(rows, columns=["surprisal", "metric", "value [95% CI]", "words"])
    with pd.option_context("display.width", 200):
        print(
            table.pivot(index="surprisal", columns="metric", values="value [95% CI]")
            .loc[["forward", "backward", "both", "gpt3", "unigram"]]
            .fillna("(in the baseline)")
            .to_string()
        )


if __name__ == "__main__":
    main()
