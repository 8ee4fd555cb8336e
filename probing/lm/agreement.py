"""Subject-verb number agreement items from a dependency treebank, as minimal pairs (Linzen et al. 2016 style).

An item is a finite verb or auxiliary in the present tense (``VBZ``/``VBP``), or ``was``/``were``, whose subject
(``nsubj``/``nsubj:pass`` of the verb, or of the predicate a copula or auxiliary attaches to) is a noun with a
``Number`` feature, standing before the verb, and agreeing with it. The pair is the sentence (good) and the same
sentence with the verb in the other number (bad): ``is/are``, ``was/were``, ``has/have``, and regular forms
(``VBZ`` = the lemma's ``-s`` form, ``VBP`` = the lemma). ``attractors``: nouns of the other number between subject
and verb. Items without a clean opposite form, with the subject after the verb, or whose annotated numbers
disagree are skipped and counted (:func:`agreement_items` returns the counts too).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

    from probing.corpora.base import Sentence
    from probing.elmo import Elmo

IRREGULAR = {"is": "are", "are": "is", "was": "were", "were": "was", "has": "have", "have": "has"}
SINGULAR_FORMS = {"is", "was", "has"}
SUBJECTS = ("nsubj", "nsubj:pass")
NOUNS = ("NOUN", "PROPN")


def third_singular(lemma: str) -> str:
    """The regular 3rd-person singular present of ``lemma``: ``walk`` -> ``walks``, ``watch`` -> ``watches``,
    ``try`` -> ``tries``, ``go`` -> ``goes``."""
    if lemma.endswith(("s", "sh", "ch", "x", "z", "o")):
        return lemma + "es"
    if len(lemma) > 1 and lemma.endswith("y") and lemma[-2] not in "aeiou":
        return lemma[:-1] + "ies"
    return lemma + "s"


def number_of(feats: str) -> str | None:
    for f in feats.split("|"):
        if f.startswith("Number="):
            return f.removeprefix("Number=")
    return None


def opposite(word: str, xpos: str, lemma: str) -> tuple[str, str] | None:
    """(the verb's number, its form in the other number), or None when there is no clean opposite form."""
    low = word.lower()
    if low in IRREGULAR:
        other = IRREGULAR[low]
        number = "Sing" if low in SINGULAR_FORMS else "Plur"
    elif xpos == "VBZ" and low == third_singular(lemma.lower()):
        other, number = lemma.lower(), "Sing"
    elif xpos == "VBP" and low == lemma.lower() and lemma.isalpha():
        other, number = third_singular(lemma.lower()), "Plur"
    else:
        return None
    return number, (other.capitalize() if word[:1].isupper() else other)


def sentence_items(sent: Sentence) -> tuple[list[dict], Counter]:
    """The agreement items of one parsed sentence, and the count of skipped candidates by reason."""
    skipped: Counter[str] = Counter()
    items: list[dict] = []
    if sent.heads is None or sent.deprels is None or sent.xpos is None or sent.feats is None or sent.upos is None:
        return items, skipped
    lemmas = sent.lemmas or sent.words
    children: dict[int, list[int]] = {}
    for i, h in enumerate(sent.heads):
        children.setdefault(h - 1, []).append(i)
    for v, word in enumerate(sent.words):
        if sent.xpos[v] not in ("VBZ", "VBP") and word.lower() not in ("was", "were"):
            continue
        anchor = sent.heads[v] - 1 if sent.deprels[v] in ("cop", "aux", "aux:pass") else v
        subjects = [c for c in children.get(anchor, []) if sent.deprels[c] in SUBJECTS]
        if len(subjects) != 1 or sent.upos[subjects[0]] not in NOUNS or number_of(sent.feats[subjects[0]]) is None:
            continue
        s = subjects[0]
        subject_number = number_of(sent.feats[s])
        forms = opposite(word, sent.xpos[v], lemmas[v])
        if forms is None:
            skipped["no clean opposite form"] += 1
            continue
        if s > v:
            skipped["subject after the verb"] += 1
            continue
        if forms[0] != subject_number:
            skipped["annotated numbers disagree"] += 1
            continue
        attractors = sum(
            1
            for k in range(s + 1, v)
            if sent.upos[k] in NOUNS and number_of(sent.feats[k]) not in (None, subject_number)
        )
        bad = list(sent.words)
        bad[v] = forms[1]
        items.append(
            {
                "good": " ".join(sent.words),
                "bad": " ".join(bad),
                "group": f"attractors={min(attractors, 3)}{'+' if attractors >= 3 else ''}",
                "phenomenon": None,
                "sentence_id": sent.id,
                "verb": word,
                "verb_position": v,
                "subject": sent.words[s],
                "number": subject_number,
                "attractors": attractors,
            }
        )
    return items, skipped


def agreement_items(sentences: Iterable[Sentence]) -> tuple[pd.DataFrame, Counter]:
    """Items of every sentence (columns ``good``, ``bad``, ``group`` = attractor count, 3+ pooled, and the
    item's details), and the skipped candidates by reason. Feed the items to :func:`probing.lm.minimal_pairs`."""
    import pandas as pd

    rows: list[dict] = []
    skipped: Counter[str] = Counter()
    for sent in sentences:
        found, why = sentence_items(sent)
        rows += found
        skipped += why
    return pd.DataFrame(rows), skipped


def agreement_probe(
    train: pd.DataFrame, test: pd.DataFrame, model: Elmo, *, C: float = 1.0, n_boot: int = 1000, seed: int = 0
) -> pd.DataFrame:
    """Linzen et al. (2016)'s number prediction without an LM head: a linear probe per layer and direction half
    predicts the subject's number from the vector of the word just before the verb (items from
    :func:`agreement_items`; their ``good`` sentences are embedded as whitespace tokens). The forward half has
    read only the left context; the backward half has read the verb itself, so it is an upper bound, not a
    test of agreement. Rows: ``layer`` (``0``, ``1f``, ``1b``, ...), ``group`` (attractors, and ``overall``),
    ``accuracy``, 95% bootstrap CI over sentences, ``n``."""
    import pandas as pd

    from probing.probes.linear import LinearProbe
    from probing.probes.stats import bootstrap_ci

    train = train[train.verb_position > 0]
    test = test[test.verb_position > 0]

    x_train, x_test = context_vectors(train, model), context_vectors(test, model)
    y_train, y_test = train.number.to_numpy(), test.number.to_numpy()
    groups = {
        "overall": np.ones(len(test), dtype=bool),
        **{g: (test.group == g).to_numpy() for g in sorted(set(test.group))},
    }
    sentence_ids = test.sentence_id.to_numpy()
    rows = []
    for name in x_train:
        probe = LinearProbe(C=C, random_state=seed).fit(x_train[name], y_train)
        right = (probe.predict(x_test[name]) == y_test).astype(np.float64)
        for group, mask in groups.items():
            low, high = bootstrap_ci(right[mask], sentence_ids[mask], n_boot=n_boot, seed=seed)
            value = float(right[mask].mean())
            rows.append(
                {
                    "layer": name,
                    "group": group,
                    "accuracy": value,
                    "ci_low": min(low, value),
                    "ci_high": max(high, value),
                    "n": int(mask.sum()),
                }
            )
    return pd.DataFrame(rows)


def context_vectors(items: pd.DataFrame, model: Elmo) -> dict[str, np.ndarray]:
    """Per layer name (``0``, ``1f``, ``1b``, ...): the vectors ``(n_items, dim // 2)`` of the word before each
    item's verb (layer 0 is context-free, its first copy).

    Parameters
    ----------
    items : DataFrame (n_items rows)
        Columns ``good`` (the sentence, tokens joined by single spaces) and ``verb_position`` (the verb's
        0-based token index, at least 1).
    model : Elmo
        The model embedding the sentences (each distinct one once).

    Returns
    -------
    dict of str to ndarray (n_items, dim // 2), float32
        dim = ``model.output_dim``; ``"0"`` is the token layer's first half, ``"<k>f"`` / ``"<k>b"`` the
        forward / backward half of biLSTM layer k.
    """
    from probing.layers import direction_names

    half = model.output_dim // 2
    sentences = list(dict.fromkeys(items.good))
    vectors = dict(zip(sentences, model.embed([s.split(" ") for s in sentences])))
    rows = np.stack([vectors[g][:, p - 1] for g, p in zip(items.good, items.verb_position)])  # (n, layers, dim)
    out = {"0": rows[:, 0, :half]}
    for name in direction_names(model.layer_names):
        layer = int(name[:-1])
        out[name] = rows[:, layer, :half] if name.endswith("f") else rows[:, layer, half:]
    return out
