"""Integrated gradients through the bundled biLM (issue 39): the completeness gap at 16, 64 and 256 steps
(median and max over sentences), the largest difference from Captum's IntegratedGradients, the share of
attribution on the subject vs the attractors by attractor count, and time per 1,000 sentences.

    OMP_NUM_THREADS=1 PYTHONPATH=.:/path/to/captum python benchmarks/bench_attribution.py [--sentences 100]

Sentences: the first ``--sentences`` of ``--data`` (default the bundled UD EWT slice ``demo-ud``, train) with
2 to 40 words; target the forward LM's log-probability of the last word. Agreement: the verb of
:func:`probing.analysis.patching.agreement_pairs`' pairs as the target, the shares of the summed absolute
attribution. Wall and CPU seconds.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from probing.analysis.attribution import attribute_sentence
from probing.analysis.patching import agreement_pairs
from probing.corpora.registry import load
from probing.lm.score import load_model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="demo-ud")
    ap.add_argument("--sentences", type=int, default=100)
    ap.add_argument("--captum", type=int, default=20, help="sentences compared with Captum (0: skip)")
    ap.add_argument("--pairs", type=int, default=150, help="agreement items for the subject/attractor shares")
    args = ap.parse_args()
    elmo, head = load_model("default")
    sentences = [s.words for s in load(args.data, "train") if 2 <= len(s.words) <= 40][: args.sentences]
    print(f"{args.data}: {len(sentences)} sentences, {sum(map(len, sentences))} words")
    rows = []
    for steps in (16, 64, 256):
        wall, cpu = time.perf_counter(), time.process_time()
        gaps = [attribute_sentence(elmo, head, w, n_steps=steps).completeness_gap for w in sentences]
        w, c = time.perf_counter() - wall, time.process_time() - cpu
        scale = 1000 / len(sentences)
        rows.append(
            {
                "steps": steps,
                "gap median": f"{np.median(gaps):.2e}",
                "gap max": f"{np.max(gaps):.2e}",
                "s wall / 1,000 sent.": f"{w * scale:.0f}",
                "s CPU / 1,000 sent.": f"{c * scale:.0f}",
            }
        )
    print("\ncompleteness gap |sum attributions - (f(x) - f(baseline))| (nats), forward LM, last word")
    print(pd.DataFrame(rows).to_string(index=False))
    if args.captum:
        captum_difference(elmo, head, sentences[: args.captum])
    agreement_shares(elmo, head, args.data, args.pairs)


def captum_difference(elmo, head, sentences) -> None:
    """Captum's IntegratedGradients (Gauss-Legendre, 64 steps) on the same function of the words' vectors."""
    try:
        from captum.attr import IntegratedGradients
    except ImportError:
        print("\ncaptum not installed: no comparison")
        return
    from probing.analysis.attribution import _baseline, _Function

    worst = 0.0
    for words in sentences:
        position = len(words) - 1
        f = _Function(elmo, head, words, "forward", position, False)
        x = f.inputs.unsqueeze(0)
        base = x.clone()
        base[0, 1:-1] = _baseline(elmo, None, False)
        theirs = IntegratedGradients(f).attribute(x, baselines=base, n_steps=64, method="gausslegendre")
        theirs = theirs.sum(-1)[0, 1:-1].double().numpy()
        mine = attribute_sentence(elmo, head, words, n_steps=64).words_attr
        worst = max(worst, float(np.abs(mine - theirs).max()))
    print(f"\nmax |ours - Captum| over {len(sentences)} sentences, 64 steps: {worst:.2e}")


def agreement_shares(elmo, head, data: str, n: int) -> None:
    """Share of |attribution| on the subject and on the attractors, forward LM's log p(verb), by attractor count."""
    pairs = pd.concat([agreement_pairs(load(data, s)) for s in ("train", "dev", "test")], ignore_index=True).head(n)
    rows = []
    for r in pairs.itertuples():
        a = attribute_sentence(elmo, head, r.base, position=r.position, n_steps=64)
        total = np.abs(a.words_attr[: r.position]).sum()
        attractors = [k for k in range(r.subject + 1, r.position) if r.attractor >= 0 and k == r.attractor]
        rows.append(
            {
                "group": r.group,
                "subject": abs(a.words_attr[r.subject]) / total,
                "nearest attractor": (abs(a.words_attr[attractors[0]]) / total) if attractors else np.nan,
                "words before the verb": r.position,
            }
        )
    table = pd.DataFrame(rows).groupby("group").agg(["mean", "count"])
    print(
        f"\nshare of |attribution| (forward LM, log p(verb)) on the subject and the nearest attractor, {len(pairs)} items"
    )
    print(table.round(3).to_string())


if __name__ == "__main__":
    main()
