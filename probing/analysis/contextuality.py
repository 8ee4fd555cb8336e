"""How contextual a layer's word vectors are (Ethayarajh 2019, "How Contextual are Contextualized Word
Representations?", EMNLP), and whether a word's spread of occurrences tells monosemous from polysemous words
(Garí Soler & Apidianaki 2021, "Let's Play Mono-Poly", TACL).

The statistics, on the rows ``X`` of one layer (one row per token):

* **self-similarity** of a word: the mean cosine between its occurrences in different contexts (pairs of its
  tokens in different sentences), :func:`self_similarity`;
* **intra-sentence similarity** of a sentence: the mean cosine of its words to the sentence's mean vector,
  :func:`intra_sentence_similarity`;
* **maximum explainable variance** of a word: the share of the squared singular values of its *uncentred*
  occurrence matrix taken by the first, ``σ1² / Σ σi²`` (the share of the occurrences' variance a single
  static vector can explain), :func:`max_explainable_variance`.

Anisotropy (vectors crowd into a narrow cone, so any two are similar) is measured as Ethayarajh does: the mean
cosine between tokens drawn uniformly from different sentences (the baseline of both cosine statistics), and
the explainable variance of uniformly drawn tokens (drawn here in the same number as each word's occurrences,
since the share grows as rows get fewer: at least ``1/n`` for ``n`` rows). An *adjusted* value is the
statistic minus its baseline. No function here reads a store: :mod:`probing.tasks.contextuality` does.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

MIN_OCCURRENCES = 5  # Ethayarajh's threshold: words in at least 5 different contexts


def unit_rows(x: np.ndarray) -> np.ndarray:
    """``x`` in float64 with every row scaled to unit length (a zero row stays zero).

    Parameters
    ----------
    x : ndarray (n, d)

    Returns
    -------
    ndarray (n, d), float64
    """
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def self_similarity(x: np.ndarray, sentences: np.ndarray) -> float:
    """The mean cosine over pairs of a word's occurrences in different sentences.

    Parameters
    ----------
    x : ndarray (n, d)
        The word's occurrences (one row per token).
    sentences : ndarray (n,)
        Each occurrence's sentence; pairs within one sentence are left out (the same context).

    Returns
    -------
    float
        NaN when every occurrence is in one sentence.
    """
    u = unit_rows(x)
    total = float(np.sum(u.sum(axis=0) ** 2)) - float(np.sum(u * u))  # all ordered pairs i != j
    _, inverse, counts = np.unique(np.asarray(sentences), return_inverse=True, return_counts=True)
    per_sentence = np.zeros((len(counts), u.shape[1]))
    np.add.at(per_sentence, inverse, u)
    same = float(np.sum(per_sentence**2)) - float(np.sum(u * u))  # ordered pairs within one sentence
    n_pairs = len(u) ** 2 - int(np.sum(counts**2))
    return (total - same) / n_pairs if n_pairs > 0 else float("nan")


def intra_sentence_similarity(x: np.ndarray) -> float:
    """The mean cosine of a sentence's word vectors to their mean vector.

    Parameters
    ----------
    x : ndarray (n, d)
        One sentence's vectors, n >= 1.

    Returns
    -------
    float
    """
    x = np.asarray(x, dtype=np.float64)
    mean = x.mean(axis=0)
    norm = np.linalg.norm(mean)
    if norm == 0:
        return 0.0
    return float(np.mean(unit_rows(x) @ (mean / norm)))


def max_explainable_variance(x: np.ndarray) -> float:
    """``σ1² / Σ σi²`` of the uncentred matrix ``x`` (0 for an all-zero matrix).

    Parameters
    ----------
    x : ndarray (n, d)

    Returns
    -------
    float
    """
    x = np.asarray(x, dtype=np.float64)
    small = x @ x.T if x.shape[0] <= x.shape[1] else x.T @ x  # its eigenvalues are the σi²
    eig = np.linalg.eigvalsh(small)
    total = float(eig.sum())
    return float(eig[-1]) / total if total > 0 else 0.0


def random_pairs(sentence_of_row: np.ndarray, n_pairs: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n_pairs`` pairs of rows drawn uniformly, the two rows of a pair in different sentences.

    Parameters
    ----------
    sentence_of_row : ndarray (n_rows,)
        The sentence of each row; at least two distinct values.
    n_pairs : pairs to draw.
    seed : the draw's seed.

    Returns
    -------
    a, b : ndarray (n_pairs,) of int
    """
    sentence_of_row = np.asarray(sentence_of_row)
    if len(np.unique(sentence_of_row)) < 2:
        raise ValueError("random pairs need tokens of at least two sentences")
    rng = np.random.default_rng(seed)
    a = np.empty(0, dtype=np.int64)
    b = np.empty(0, dtype=np.int64)
    while len(a) < n_pairs:
        i = rng.integers(0, len(sentence_of_row), size=2 * n_pairs)
        j = rng.integers(0, len(sentence_of_row), size=2 * n_pairs)
        keep = sentence_of_row[i] != sentence_of_row[j]
        a, b = np.concatenate([a, i[keep]]), np.concatenate([b, j[keep]])
    return a[:n_pairs], b[:n_pairs]


def pair_cosines(x: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The cosine of rows ``a[k]`` and ``b[k]`` of ``x`` for each k (a zero row's cosine is 0).

    Parameters
    ----------
    x : ndarray (n, d)
    a, b : ndarray (m,) of int

    Returns
    -------
    ndarray (m,), float64
    """
    return np.sum(unit_rows(x[a]) * unit_rows(x[b]), axis=1)


def word_groups(
    words: Sequence[str], sentences: np.ndarray, min_contexts: int = MIN_OCCURRENCES
) -> dict[str, np.ndarray]:
    """The rows of every word that occurs in at least ``min_contexts`` different sentences.

    Parameters
    ----------
    words : sequence (n,) of str
        The word (or any key: a lemma and part of speech) of each row.
    sentences : ndarray (n,)
        The sentence of each row.
    min_contexts : the fewest distinct sentences a word must occur in.

    Returns
    -------
    dict of str to ndarray of int
        Word -> its rows in row order, words in order of first occurrence.
    """
    rows: dict[str, list[int]] = {}
    contexts: dict[str, set] = {}
    for i, (w, s) in enumerate(zip(words, np.asarray(sentences))):
        rows.setdefault(w, []).append(i)
        contexts.setdefault(w, set()).add(s)
    return {w: np.asarray(r, dtype=np.int64) for w, r in rows.items() if len(contexts[w]) >= min_contexts}


def best_threshold(feature: np.ndarray, label: np.ndarray) -> tuple[float, bool]:
    """The one-feature classifier with the highest training accuracy: ``label = (feature > t)`` or, with
    ``below`` true, ``label = (feature <= t)``; ``t`` halfway between neighbouring sorted values (ties:
    the smallest threshold, then ``above`` before ``below``).

    Parameters
    ----------
    feature : ndarray (n,), float
    label : ndarray (n,) of bool

    Returns
    -------
    t : float
    below : bool
    """
    feature = np.asarray(feature, dtype=np.float64)
    label = np.asarray(label, dtype=bool)
    values = np.unique(feature)
    cuts = np.concatenate([[values[0] - 1.0], (values[:-1] + values[1:]) / 2, [values[-1] + 1.0]])
    best = (-1.0, 0.0, False)
    for t in cuts:
        above = float(np.mean((feature > t) == label))
        for acc, below in ((above, False), (1.0 - above, True)):
            if acc > best[0]:
                best = (acc, float(t), below)
    return best[1], best[2]


def threshold_predict(feature: np.ndarray, t: float, below: bool) -> np.ndarray:
    """What :func:`best_threshold`'s classifier says.

    Parameters
    ----------
    feature : ndarray (n,), float
    t, below : the classifier (:func:`best_threshold`).

    Returns
    -------
    ndarray (n,) of bool
    """
    feature = np.asarray(feature, dtype=np.float64)
    return feature <= t if below else feature > t


def balanced_subset(label: np.ndarray, seed: int) -> np.ndarray:
    """Indices of as many items of each class as the smaller class has, drawn without replacement (seeded),
    in index order; empty when a class is missing.

    Parameters
    ----------
    label : ndarray (n,) of bool
    seed : the draw's seed.

    Returns
    -------
    ndarray of int
    """
    label = np.asarray(label, dtype=bool)
    pos, neg = np.flatnonzero(label), np.flatnonzero(~label)
    k = min(len(pos), len(neg))
    rng = np.random.default_rng(seed)
    return np.sort(np.concatenate([rng.choice(pos, k, replace=False), rng.choice(neg, k, replace=False)]))


__all__ = [
    "MIN_OCCURRENCES",
    "balanced_subset",
    "best_threshold",
    "intra_sentence_similarity",
    "max_explainable_variance",
    "pair_cosines",
    "random_pairs",
    "self_similarity",
    "threshold_predict",
    "unit_rows",
    "word_groups",
]
