"""Where a model contradicts Peters et al.'s (2018) sense claim, said next to the view that shows it.

The paper's Table 4 and its WSD results rest on the claim that the top biLSTM layer puts occurrences of the
same sense near each other. :func:`sense_claim_note` reads the explorer's leave-one-out 1-NN sense accuracy
(:func:`probing.views.senses.sense_separation`) at the top layer and, for every lemma set whose 95 % interval
does not lie above chance, states the numbers and where to check the claim with the paper's own model.
"""

from __future__ import annotations

import pandas as pd

OFFICIAL = (
    'the paper\'s model is the official "original" ELMo (`probing download original`, then model = "original" '
    "or --model original)"
)


def sense_claim_note(scores: pd.DataFrame, top: str, model: str = "this model") -> str | None:
    """A sentence per lemma set whose 1-NN sense accuracy at panel ``top`` (the top layer) is not above chance
    (``ci_low <= chance``), from ``scores`` (``Explorer.scores``: set, panel, score, ci_low, ci_high, chance,
    n); ``None`` when every set with two or more annotated occurrences is above chance there."""
    rows = scores[(scores["panel"] == top) & (scores["n"] >= 2)]
    failing = rows[rows["ci_low"] <= rows["chance"]]
    if failing.empty:
        return None
    found = "; ".join(
        f"{r.set} {r.score:.2f} [{r.ci_low:.2f}, {r.ci_high:.2f}] vs chance {r.chance:.2f} ({int(r.n)} occurrences)"
        for r in failing.itertuples(index=False)
    )
    return (
        f"Peters et al. (2018) find that the top layer puts occurrences of the same sense together; with "
        f"{model} layer {top} does not do better than chance for {len(failing)} of {len(rows)} lemma(s) "
        f"(leave-one-out 1-NN sense accuracy, 95% CI: {found}). Its sense views show what this model learned, "
        f"not the paper's result: {OFFICIAL}."
    )
