"""Metrics of the structural probes (Hewitt & Manning, NAACL 2019), from predicted distances or depths and
gold head arrays (:mod:`probing.probes.trees`).

Metrics, as the paper and its reporter define them:

* UUAS: minimum spanning tree of the predicted distances over the non-punctuation words (on an
  asymmetric matrix, words i and j are at ``min(d_ij, d_ji)``, as the reference sorts all ordered pairs), against
  the minimum spanning tree of the gold distances over the same words (the gold arcs whenever
  punctuation only hangs off the tree, as in UD and the Stanford Dependencies the paper used);
  undirected edges, correct edges / gold edges pooled over the corpus.
* DSpr.: for every word, Spearman between its predicted and gold distance rows (all words of the
  sentence); averaged over all words of sentences of one length, then over lengths 5 to 50.
* NSpr.: per sentence, Spearman between predicted and gold depths; averaged per length, then
  over lengths 5 to 50.
* Root%: share of sentences whose least-deep non-punctuation word (predicted) is the gold root.

Punctuation is UPOS ``PUNCT`` for UD data, else the PTB tags ``'' , . : `` -LRB- -RRB-``.
A Spearman correlation that is undefined (a constant predicted row) is left out of its mean.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.stats import rankdata

from probing.errors import InputError
from probing.probes.stats import bootstrap_ci, bootstrap_ci_mean_of_means
from probing.probes.trees import as_heads, mst_edges, tree_depths, tree_distances

SPEARMAN_LENGTHS = (5, 50)
KINDS = ("distance", "depth")  # the two structural probes: tree distances between words, word depths

Trees = Sequence[Sequence[int] | np.ndarray]
Masks = Sequence[Sequence[bool] | np.ndarray] | None


def check_kind(kind: str) -> str:
    """``kind``, checked to be one of :data:`KINDS`."""
    if kind not in KINDS:
        raise InputError(f"kind must be one of {KINDS}, got {kind!r}")
    return kind


# --- metrics ----------------------------------------------------------------------------------------


def _check_pairs(pred: Sequence, heads: Trees, what: str) -> None:
    if len(pred) != len(heads):
        raise InputError(f"{what}: {len(pred)} predictions but {len(heads)} trees")


def _punct(punct: Masks, i: int, n: int) -> np.ndarray:
    if punct is None:
        return np.zeros(n, dtype=bool)
    p = np.asarray(punct[i], dtype=bool)
    if p.shape != (n,):
        raise InputError(f"sentence {i}: punct has shape {p.shape}, expected ({n},)")
    return p


def _as_matrix(p: Any, n: int, i: int) -> np.ndarray:
    a = np.asarray(p, dtype=np.float64)
    if a.shape != (n, n):
        raise InputError(f"sentence {i}: predicted distances have shape {a.shape}, the tree has {n} words")
    return a


def _as_vector(p: Any, n: int, i: int) -> np.ndarray:
    a = np.asarray(p, dtype=np.float64)
    if a.shape != (n,):
        raise InputError(f"sentence {i}: predicted depths have shape {a.shape}, the tree has {n} words")
    return a


def _row_spearman(pred: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Spearman correlation of each row of ``pred`` with the same row of ``gold`` (NaN where undefined)."""
    rp = rankdata(pred, axis=-1)
    rg = rankdata(gold, axis=-1)
    rp -= rp.mean(axis=-1, keepdims=True)
    rg -= rg.mean(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (rp * rg).sum(-1) / np.sqrt((rp * rp).sum(-1) * (rg * rg).sum(-1))


def uuas_counts(pred_distances: Sequence, heads: Trees, punct: Masks = None) -> tuple[np.ndarray, np.ndarray]:
    """Per sentence, the gold MST edges also in the predicted MST and the gold MST edges.

    Parameters
    ----------
    pred_distances : sequence of (n_s, n_s) float
        Predicted distances, one matrix per sentence.
    heads : sequence of (n_s,) int
        Gold head arrays (1-based, 0 = root).
    punct : sequence of (n_s,) bool, optional
        Punctuation masks (None: no punctuation).

    Returns
    -------
    hits, totals : ndarray, int64 (n_sentences,)
    """
    _check_pairs(pred_distances, heads, "uuas")
    correct, total = np.zeros(len(heads), np.int64), np.zeros(len(heads), np.int64)
    for s, h in enumerate(heads):
        gold = tree_distances(h)
        p = _punct(punct, s, len(gold))
        gold_edges = set(mst_edges(gold, p))
        pred_edges = set(mst_edges(_as_matrix(pred_distances[s], len(gold), s), p))
        correct[s], total[s] = len(gold_edges & pred_edges), len(gold_edges)
    return correct, total


def uuas(pred_distances: Sequence, heads: Trees, punct: Masks = None) -> float:
    """Undirected unlabelled attachment score of the predicted distances' MSTs, pooled over sentences.

    Parameters
    ----------
    pred_distances : sequence of (n_s, n_s) float
        Predicted distances, one matrix per sentence.
    heads : sequence of (n_s,) int
        Gold head arrays (1-based, 0 = root).
    punct : sequence of (n_s,) bool, optional
        Punctuation masks (None: no punctuation).

    Returns
    -------
    float
        Edges found / gold edges, over all sentences.
    """
    correct, total = uuas_counts(pred_distances, heads, punct)
    if total.sum() == 0:
        raise InputError("uuas: no gold edge between non-punctuation words in any sentence")
    return float(correct.sum() / total.sum())


def dspr_per_sentence(pred_distances: Sequence, heads: Trees) -> np.ndarray:
    """Mean over the sentence's words of the row-wise Spearman correlation of predicted and gold distances.

    Parameters
    ----------
    pred_distances : sequence of (n_s, n_s) float
        Predicted distances, one matrix per sentence.
    heads : sequence of (n_s,) int
        Gold head arrays (1-based, 0 = root).

    Returns
    -------
    ndarray, float64 (n_sentences,)
    """
    _check_pairs(pred_distances, heads, "dspr")
    out = np.empty(len(heads))
    for s, h in enumerate(heads):
        gold = tree_distances(h)
        r = _row_spearman(_as_matrix(pred_distances[s], len(gold), s), gold.astype(np.float64))
        out[s] = np.nanmean(r) if np.isfinite(r).any() else np.nan
    return out


def nspr_per_sentence(pred_depths: Sequence, heads: Trees) -> np.ndarray:
    """Spearman correlation between predicted and gold depths of each sentence.

    Parameters
    ----------
    pred_depths : sequence of (n_s,) float
        Predicted depths, one array per sentence.
    heads : sequence of (n_s,) int
        Gold head arrays (1-based, 0 = root).

    Returns
    -------
    ndarray, float64 (n_sentences,)
    """
    _check_pairs(pred_depths, heads, "nspr")
    out = np.empty(len(heads))
    for s, h in enumerate(heads):
        gold = tree_depths(h).astype(np.float64)
        out[s] = _row_spearman(_as_vector(pred_depths[s], len(gold), s), gold)
    return out


def _length_average(values: np.ndarray, lengths: np.ndarray, span: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    keep = (lengths >= span[0]) & (lengths <= span[1]) & np.isfinite(values)
    return values[keep], lengths[keep]


def _mean_of_length_means(values: np.ndarray, lengths: np.ndarray, span: tuple[int, int], what: str) -> float:
    v, n = _length_average(values, lengths, span)
    if v.size == 0:
        raise InputError(f"{what}: no sentence of length {span[0]} to {span[1]} with a defined correlation")
    return float(np.mean([v[n == k].mean() for k in np.unique(n)]))


def dspr(pred_distances: Sequence, heads: Trees, lengths: tuple[int, int] = SPEARMAN_LENGTHS) -> float:
    """Distance Spearman: per-word row correlations averaged per sentence length, then over ``lengths``.

    Every sentence of a length has as many words, so the per-length mean over words is the mean of
    the per-sentence means.

    Parameters
    ----------
    pred_distances : sequence of (n_s, n_s) float
        Predicted distances, one matrix per sentence.
    heads : sequence of (n_s,) int
        Gold head arrays (1-based, 0 = root).
    lengths : (int, int)
        The sentence lengths averaged over, inclusive (5-50, as Hewitt & Manning).

    Returns
    -------
    float
    """
    sizes = np.array([len(h) for h in heads])
    return _mean_of_length_means(dspr_per_sentence(pred_distances, heads), sizes, lengths, "dspr")


def nspr(pred_depths: Sequence, heads: Trees, lengths: tuple[int, int] = SPEARMAN_LENGTHS) -> float:
    """Norm (depth) Spearman: per-sentence correlations averaged per length, then over ``lengths``.

    Parameters
    ----------
    pred_depths : sequence of (n_s,) float
        Predicted depths, one array per sentence.
    heads : sequence of (n_s,) int
        Gold head arrays (1-based, 0 = root).
    lengths : (int, int)
        The sentence lengths averaged over, inclusive (5-50, as Hewitt & Manning).

    Returns
    -------
    float
    """
    sizes = np.array([len(h) for h in heads])
    return _mean_of_length_means(nspr_per_sentence(pred_depths, heads), sizes, lengths, "nspr")


def root_hits(pred_depths: Sequence, heads: Trees, punct: Masks = None) -> np.ndarray:
    """Whether the least deep non-punctuation word (predicted) is the gold root, per sentence.

    A sentence of punctuation only falls back to the least deep word overall, as in the reference.

    Parameters
    ----------
    pred_depths : sequence of (n_s,) float
        Predicted depths, one array per sentence.
    heads : sequence of (n_s,) int
        Gold head arrays (1-based, 0 = root).
    punct : sequence of (n_s,) bool, optional
        Punctuation masks (None: no punctuation).

    Returns
    -------
    ndarray, bool (n_sentences,)
    """
    _check_pairs(pred_depths, heads, "root_acc")
    hits = np.zeros(len(heads), dtype=bool)
    for s, h in enumerate(heads):
        gold = as_heads(h, f"sentence {s}")
        d = _as_vector(pred_depths[s], len(gold), s).copy()
        p = _punct(punct, s, len(gold))
        if not p.all():
            d[p] = np.inf
        hits[s] = int(np.argmin(d)) == int(np.flatnonzero(gold == 0)[0])
    return hits


def root_acc(pred_depths: Sequence, heads: Trees, punct: Masks = None) -> float:
    """Share of sentences whose least deep non-punctuation word is the gold root.

    Parameters
    ----------
    pred_depths : sequence of (n_s,) float
        Predicted depths, one array per sentence.
    heads : sequence of (n_s,) int
        Gold head arrays (1-based, 0 = root).
    punct : sequence of (n_s,) bool, optional
        Punctuation masks (None: no punctuation).

    Returns
    -------
    float
    """
    hits = root_hits(pred_depths, heads, punct)
    if hits.size == 0:
        raise InputError("root_acc: no sentences")
    return float(hits.mean())


def scores_with_ci(
    kind: str,
    predictions: Sequence,
    heads: Trees,
    punct: Masks = None,
    *,
    n_boot: int = 1000,
    alpha: float = 0.05,
    seed: int = 0,
) -> list[tuple[str, float, float, float]]:
    """The structural metrics of one probe's predictions with bootstrap intervals.

    Intervals resample sentences: UUAS as a pooled ratio of edges clustered by sentence, Root% over
    sentences, DSpr./NSpr. with the per-length averaging redone in every replicate.

    Parameters
    ----------
    kind : ``"distance"`` or ``"depth"`` (:data:`KINDS`).
    predictions : sequence of (n_s, n_s) distances or (n_s,) depths, one per sentence.
    heads : sequence of (n_s,) int
        Gold head arrays.
    punct : sequence of (n_s,) bool, optional
        Punctuation masks (None: no punctuation).
    n_boot, alpha, seed : the bootstrap's replicates, level and seed.

    Returns
    -------
    list of (metric, value, ci_low, ci_high)
        uuas and dspr (distance) or root_acc and nspr (depth).
    """
    kind = check_kind(kind)
    sizes = np.array([len(h) for h in heads])
    rows = []
    if kind == "distance":
        correct, total = uuas_counts(predictions, heads, punct)
        edge_hits = np.concatenate([np.arange(t) < c for c, t in zip(correct, total, strict=True)]).astype(float)
        groups = np.repeat(np.arange(len(total)), total)
        rows.append(
            (
                "uuas",
                float(correct.sum() / total.sum()),
                *bootstrap_ci(edge_hits, groups, n_boot=n_boot, alpha=alpha, seed=seed),
            )
        )
        per_sentence, name = dspr_per_sentence(predictions, heads), "dspr"
    else:
        hits = root_hits(predictions, heads, punct).astype(float)
        rows.append(("root_acc", float(hits.mean()), *bootstrap_ci(hits, n_boot=n_boot, alpha=alpha, seed=seed)))
        per_sentence, name = nspr_per_sentence(predictions, heads), "nspr"
    v, n = _length_average(per_sentence, sizes, SPEARMAN_LENGTHS)
    if v.size:
        value = _mean_of_length_means(per_sentence, sizes, SPEARMAN_LENGTHS, name)
        rows.append((name, value, *bootstrap_ci_mean_of_means(v, n, n_boot=n_boot, alpha=alpha, seed=seed)))
    else:
        rows.append((name, math.nan, math.nan, math.nan))
    return rows
