"""Structural probes (Hewitt & Manning, NAACL 2019): is the dependency tree linearly encoded in a layer?

A distance probe learns B of shape (dim, rank) so that ``||B^T (h_i - h_j)||^2`` approximates the
number of arcs between words i and j of the gold tree; a depth probe makes ``||B^T h_i||^2``
approximate the depth of word i. Training follows the reference implementation
(john-hewitt/structural-probes): B ~ U(-0.05, 0.05); L1 loss per sentence divided by the squared
sentence length (distance) or by the length (depth), averaged over the sentences of a batch of 20;
Adam at lr 1e-3; the learning rate times 0.1 whenever the dev loss does not fall (patience 0);
the parameters of the epoch with the lowest dev loss are kept (an epoch counts as better when it
beats the best by more than 1e-4) and training stops 5 epochs after the last improvement, or
after 40 epochs.

Trees are head arrays: ``heads[i]`` is the 1-based position of word i's head, 0 for the root
(the CoNLL-U convention, and the ``head`` column of the store's token table).

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

import heapq
import math
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch
from scipy.stats import rankdata

from probing.corpora.base import check_tree
from probing.devices import torch_device
from probing.errors import InputError
from probing.probes.stats import bootstrap_ci, bootstrap_ci_mean_of_means

PTB_PUNCT = frozenset({"''", ",", ".", ":", "``", "-LRB-", "-RRB-"})
SPEARMAN_LENGTHS = (5, 50)
KINDS = ("structural-distance", "structural-depth")

Trees = Sequence[Sequence[int] | np.ndarray]
Masks = Sequence[Sequence[bool] | np.ndarray] | None


# --- trees ------------------------------------------------------------------------------------------


def _heads(heads: Sequence[int] | np.ndarray, where: str = "tree") -> np.ndarray:
    h = np.asarray(heads)
    if h.ndim != 1 or h.size == 0 or not np.issubdtype(h.dtype, np.integer):
        raise InputError(f"{where}: heads must be a non-empty 1-D integer array, got {h.dtype} shape {h.shape}")
    check_tree([int(v) for v in h], where)
    return h.astype(np.int64)


def _ancestors(heads: np.ndarray) -> np.ndarray:
    """Boolean (n, n): A[i, k] is True iff word k is word i or one of its ancestors."""
    n = len(heads)
    anc = np.eye(n, dtype=bool)
    node = np.arange(n)
    parent = heads - 1  # -1 for the root
    for _ in range(n):
        alive = node >= 0
        if not alive.any():
            break
        node = np.where(alive, parent[np.maximum(node, 0)], -1)
        rows = np.flatnonzero(node >= 0)
        anc[rows, node[rows]] = True
    return anc


def tree_depths(heads: Sequence[int] | np.ndarray) -> np.ndarray:
    """int64 (n,): number of arcs from each word to the root (the root has depth 0)."""
    return _ancestors(_heads(heads)).sum(axis=1).astype(np.int64) - 1


def tree_distances(heads: Sequence[int] | np.ndarray) -> np.ndarray:
    """int64 (n, n): number of arcs on the path between words i and j of the tree.

    With A the ancestor-or-self matrix, d(i, j) = |A_i| + |A_j| - 2 |A_i & A_j|: the shared
    ancestors are exactly those of the lowest common ancestor.
    """
    a = _ancestors(_heads(heads)).astype(np.int64)
    size = a.sum(axis=1)
    return size[:, None] + size[None, :] - 2 * (a @ a.T)


def punctuation_mask(upos: Sequence[str] | None = None, xpos: Sequence[str] | None = None) -> np.ndarray:
    """bool (n,): UPOS ``PUNCT`` when UPOS is given and not all empty, else a PTB punctuation tag."""
    if upos is not None and any(upos):
        return np.array([u == "PUNCT" for u in upos], dtype=bool)
    if xpos is not None:
        return np.array([x in PTB_PUNCT for x in xpos], dtype=bool)
    raise InputError("punctuation_mask needs upos or xpos tags")


def mst_edges(distances: np.ndarray, punct: Sequence[bool] | np.ndarray | None = None) -> list[tuple[int, int]]:
    """Edges (i < j, 0-based) of a minimum spanning tree over the non-punctuation words.

    Kruskal's algorithm as in the reference implementation (``prims_matrix_to_edges`` of Hewitt & Manning's
    ``reporter.py``): every ordered pair (i, j), i != j, in row-major order, stably sorted by
    ``distances[i, j]``. An asymmetric matrix (a user's predictions, e.g. from a non-PSD bilinear probe)
    therefore links i and j at ``min(d_ij, d_ji)``, and ties go to the pair whose smaller entry comes
    first in row-major order. ``distances`` is (n, n).
    """
    d = np.asarray(distances, dtype=np.float64)
    if d.ndim != 2 or d.shape[0] != d.shape[1]:
        raise InputError(f"mst_edges: distances must be a square (n, n) array, got shape {d.shape}")
    keep = np.ones(len(d), dtype=bool) if punct is None else ~np.asarray(punct, dtype=bool)
    if keep.shape != (len(d),):
        raise InputError(f"mst_edges: punct has shape {keep.shape}, expected ({len(d)},)")
    words = np.flatnonzero(keep)
    if len(words) < 2:
        return []
    i, j = np.meshgrid(words, words, indexing="ij")
    upper = i < j
    i, j = i[upper], j[upper]
    forward = d[i, j] <= d[j, i]  # the entry the reference meets first among the pair's two
    n = len(d)
    order = np.lexsort((np.where(forward, i * n + j, j * n + i), np.where(forward, d[i, j], d[j, i])))
    parent = list(range(len(d)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    edges = []
    for k in order:
        a, b = find(int(i[k])), find(int(j[k]))
        if a != b:
            parent[a] = b
            edges.append((int(i[k]), int(j[k])))
            if len(edges) == len(words) - 1:
                break
    return edges


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
    """Per sentence: (gold MST edges also in the predicted MST, gold MST edges), both int64 (n_sentences,)."""
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

    pred_distances : one (n, n) array per sentence; heads : one (n,) head array per sentence;
    punct : one bool (n,) mask per sentence (None: no punctuation).
    """
    correct, total = uuas_counts(pred_distances, heads, punct)
    if total.sum() == 0:
        raise InputError("uuas: no gold edge between non-punctuation words in any sentence")
    return float(correct.sum() / total.sum())


def dspr_per_sentence(pred_distances: Sequence, heads: Trees) -> np.ndarray:
    """float64 (n_sentences,): mean over the sentence's words of the row-wise Spearman correlation."""
    _check_pairs(pred_distances, heads, "dspr")
    out = np.empty(len(heads))
    for s, h in enumerate(heads):
        gold = tree_distances(h)
        r = _row_spearman(_as_matrix(pred_distances[s], len(gold), s), gold.astype(np.float64))
        out[s] = np.nanmean(r) if np.isfinite(r).any() else np.nan
    return out


def nspr_per_sentence(pred_depths: Sequence, heads: Trees) -> np.ndarray:
    """float64 (n_sentences,): Spearman between predicted and gold depths of each sentence."""
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
    """
    sizes = np.array([len(h) for h in heads])
    return _mean_of_length_means(dspr_per_sentence(pred_distances, heads), sizes, lengths, "dspr")


def nspr(pred_depths: Sequence, heads: Trees, lengths: tuple[int, int] = SPEARMAN_LENGTHS) -> float:
    """Norm (depth) Spearman: per-sentence correlations averaged per length, then over ``lengths``."""
    sizes = np.array([len(h) for h in heads])
    return _mean_of_length_means(nspr_per_sentence(pred_depths, heads), sizes, lengths, "nspr")


def root_hits(pred_depths: Sequence, heads: Trees, punct: Masks = None) -> np.ndarray:
    """bool (n_sentences,): the least deep non-punctuation word (predicted) is the gold root.

    A sentence of punctuation only falls back to the least deep word overall, as in the reference.
    """
    _check_pairs(pred_depths, heads, "root_acc")
    hits = np.zeros(len(heads), dtype=bool)
    for s, h in enumerate(heads):
        gold = _heads(h, f"sentence {s}")
        d = _as_vector(pred_depths[s], len(gold), s).copy()
        p = _punct(punct, s, len(gold))
        if not p.all():
            d[p] = np.inf
        hits[s] = int(np.argmin(d)) == int(np.flatnonzero(gold == 0)[0])
    return hits


def root_acc(pred_depths: Sequence, heads: Trees, punct: Masks = None) -> float:
    """Share of sentences whose least deep non-punctuation word is the gold root."""
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
    """``(metric, value, ci_low, ci_high)`` rows: uuas and dspr (distance) or root_acc and nspr (depth).

    Intervals resample sentences: UUAS as a pooled ratio of edges clustered by sentence, Root% over
    sentences, DSpr./NSpr. with the per-length averaging redone in every replicate.
    """
    kind = _kind(kind)
    sizes = np.array([len(h) for h in heads])
    rows = []
    if kind == "structural-distance":
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


# --- baselines and controls -------------------------------------------------------------------------


def position_distances(lengths: Sequence[int]) -> list[np.ndarray]:
    """Linear-position baseline for distances: |i - j| for every pair, one (n, n) array per sentence."""
    return [np.abs(np.arange(n)[:, None] - np.arange(n)[None, :]).astype(np.float64) for n in lengths]


def position_depths(lengths: Sequence[int]) -> list[np.ndarray]:
    """Linear-position baseline for depths: left-branching depth, word i (0-based) at depth i.

    It is the depth in the chain whose root is the first word and where each word heads the next;
    its Root% is the share of sentences rooted at their first non-punctuation word.
    """
    return [np.arange(n, dtype=np.float64) for n in lengths]


def random_trees(lengths: Sequence[int], seed: int = 0) -> list[np.ndarray]:
    """Control trees: for each length n a tree drawn uniformly from all n^(n-2) trees over n words
    (decoded from a random Prüfer sequence), rooted at a uniformly drawn word. Head arrays, 0 = root."""
    rng = np.random.default_rng(seed)
    out = []
    for n in lengths:
        n = int(n)
        if n < 1:
            raise InputError(f"random_trees: lengths must be positive, got {n}")
        adj: list[list[int]] = [[] for _ in range(n)]
        if n == 2:
            adj[0].append(1)
            adj[1].append(0)
        elif n > 2:
            prufer = rng.integers(0, n, size=n - 2)
            degree = np.ones(n, dtype=np.int64)
            np.add.at(degree, prufer, 1)
            leaves = [i for i in range(n) if degree[i] == 1]
            heapq.heapify(leaves)
            for v in prufer:
                leaf = heapq.heappop(leaves)
                adj[leaf].append(int(v))
                adj[int(v)].append(leaf)
                degree[v] -= 1
                if degree[v] == 1:
                    heapq.heappush(leaves, int(v))
            a, b = heapq.heappop(leaves), heapq.heappop(leaves)
            adj[a].append(b)
            adj[b].append(a)
        root = int(rng.integers(0, n))
        heads = np.zeros(n, dtype=np.int64)
        seen, stack = {root}, [root]
        while stack:
            u = stack.pop()
            for v in adj[u]:
                if v not in seen:
                    seen.add(v)
                    heads[v] = u + 1
                    stack.append(v)
        out.append(heads)
    return out


# --- probes -----------------------------------------------------------------------------------------


def _kind(kind: str) -> str:
    k = kind if kind.startswith("structural-") else f"structural-{kind}"
    if k not in KINDS:
        raise InputError(f"kind must be one of {KINDS} (or 'distance' / 'depth'), got {kind!r}")
    return k


class _StructuralProbe:
    """Shared training loop; subclasses say how to predict and which labels to fit."""

    _pairwise: bool

    def __init__(
        self,
        rank: int | None = None,
        *,
        lr: float = 1e-3,
        batch_size: int = 20,
        max_epochs: int = 40,
        patience: int = 4,
        min_delta: float = 1e-4,
        lr_decay: float = 0.1,
        dev_fraction: float = 0.1,
        seed: int = 0,
        progress: bool = False,
        device: str | None = None,
    ) -> None:
        self.rank = rank
        self.lr = lr
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.patience = patience
        self.min_delta = min_delta
        self.lr_decay = lr_decay
        self.dev_fraction = dev_fraction
        self.seed = seed
        self.progress = progress
        self.device = device

    # labels and forward pass ------------------------------------------------------------------------

    def _labels(self, heads: np.ndarray) -> np.ndarray:
        return tree_distances(heads) if self._pairwise else tree_depths(heads)

    def _forward(self, x: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        """x (b, T, dim) -> (b, T, T) squared distances or (b, T) squared norms."""
        t = x @ B
        sq = (t * t).sum(-1)
        if not self._pairwise:
            return sq
        return (sq[:, :, None] + sq[:, None, :] - 2 * (t @ t.transpose(1, 2))).clamp_min(0)

    def _batch(
        self, X: Sequence, idx: Sequence[int], dim: int, device: torch.device | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Sentences ``idx`` zero-padded into ``(b, T, dim)`` fp32 and their lengths ``(b,)``, on ``device``."""
        sents = [np.asarray(X[i], dtype=np.float32) for i in idx]
        lengths = torch.tensor([len(s) for s in sents])
        x = torch.zeros(len(sents), int(lengths.max()), dim)
        for b, s in enumerate(sents):
            if s.ndim != 2 or s.shape[1] != dim:
                raise InputError(f"sentence {idx[b]}: vectors have shape {s.shape}, expected (n_words, {dim})")
            x[b, : len(s)] = torch.from_numpy(s)
        return (x, lengths) if device is None else (x.to(device), lengths.to(device))

    def _loss(self, pred: torch.Tensor, labels: list[np.ndarray], lengths: torch.Tensor) -> torch.Tensor:
        """L1 per sentence over its real words (pairs), / n^2 (distance) or / n (depth); mean over sentences."""
        gold = torch.zeros_like(pred)
        for b, lab in enumerate(labels):
            n = len(lab)
            if self._pairwise:
                gold[b, :n, :n] = torch.from_numpy(lab)
            else:
                gold[b, :n] = torch.from_numpy(lab)
        T = pred.shape[1]
        real = torch.arange(T, device=pred.device)[None, :] < lengths[:, None]
        mask = real[:, :, None] & real[:, None, :] if self._pairwise else real
        err = ((pred - gold).abs() * mask).flatten(1).sum(1)
        return (err / lengths.double().pow(2 if self._pairwise else 1).to(err.dtype)).mean()

    def _check(self, X: Sequence, trees: Trees, what: str) -> list[np.ndarray]:
        if len(X) != len(trees):
            raise InputError(f"{what}: {len(X)} sentences of vectors but {len(trees)} trees")
        if len(X) == 0:
            raise InputError(f"{what}: no sentences")
        labels = []
        for i, h in enumerate(trees):
            lab = self._labels(_heads(h, f"{what} sentence {i}")).astype(np.float32)
            labels.append(lab)
        return labels

    # fit / predict ----------------------------------------------------------------------------------

    def fit(self, X: Sequence, trees: Trees, X_dev: Sequence | None = None, trees_dev: Trees | None = None):
        """Fit B on sentences ``X`` (each (n_words, dim)) and their head arrays; early-stop on the dev set.

        Without ``X_dev``, a seeded ``dev_fraction`` of the training sentences is held out for it.
        ``X`` may be any sequence that returns one sentence's vectors per index (e.g.
        :class:`StoreSentences`, read from a memory map), so only a batch of sentences is in memory.
        Sets ``B_`` (dim, rank), ``n_epochs_``, ``best_epoch_``, ``dev_loss_`` and ``history_``. Batches and B
        live on ``device`` (see :func:`probing.devices.resolve_device`); B starts from the same seeded values
        on every device.
        """
        labels = self._check(X, trees, "fit")
        rng = np.random.default_rng(self.seed)
        X_t: Sequence
        X_d: Sequence
        dev_labels: list[np.ndarray]
        if X_dev is None:
            if trees_dev is not None:
                raise InputError("fit: trees_dev given without X_dev")
            if len(X) < 2:
                raise InputError("fit: need at least 2 sentences to hold out a dev set, or pass X_dev")
            order = rng.permutation(len(X))
            n_dev = max(1, int(round(self.dev_fraction * len(X))))
            dev_idx, train_idx = order[:n_dev], order[n_dev:]
            X_d, dev_labels = [X[i] for i in dev_idx], [labels[i] for i in dev_idx]
            X_t, labels = _Subset(X, train_idx), [labels[i] for i in train_idx]
        else:
            if trees_dev is None:
                raise InputError("fit: X_dev given without trees_dev")
            X_t, X_d, dev_labels = X, X_dev, self._check(X_dev, trees_dev, "fit (dev)")
        dim = int(np.asarray(X_t[0]).shape[1])
        rank = dim if self.rank is None else int(self.rank)
        if rank < 1:
            raise InputError(f"rank must be a positive int or None (full), got {self.rank!r}")
        device = torch_device(self.device)
        gen = torch.Generator().manual_seed(self.seed)
        B = torch.nn.Parameter(torch.empty(dim, rank).uniform_(-0.05, 0.05, generator=gen).to(device))
        opt = torch.optim.Adam([B], lr=self.lr)
        sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=self.lr_decay, patience=0)
        best, best_state, best_epoch = math.inf, B.detach().clone(), -1
        self.history_: list[dict[str, float]] = []
        for epoch in _progress(range(self.max_epochs), self.progress, type(self).__name__):
            order = rng.permutation(len(X_t))
            train_loss = 0.0
            for start in range(0, len(order), self.batch_size):
                idx = order[start : start + self.batch_size].tolist()
                x, lengths = self._batch(X_t, idx, dim, device)
                loss = self._loss(self._forward(x, B), [labels[i] for i in idx], lengths)
                opt.zero_grad()
                loss.backward()
                opt.step()
                train_loss += float(loss.detach()) * len(idx)
            dev_loss = self._dev_loss(X_d, dev_labels, B.detach(), dim)
            sched.step(dev_loss)
            self.history_.append(
                {
                    "epoch": epoch,
                    "train_loss": train_loss / len(order),
                    "dev_loss": dev_loss,
                    "lr": opt.param_groups[0]["lr"],
                }
            )
            if dev_loss < best - self.min_delta:
                best, best_state, best_epoch = dev_loss, B.detach().clone(), epoch
            elif epoch > best_epoch + self.patience:
                break
        self.B_ = best_state.cpu().numpy()
        self.n_epochs_ = len(self.history_)
        self.best_epoch_ = best_epoch
        self.dev_loss_ = best
        return self

    def _dev_loss(self, X: Sequence, labels: list[np.ndarray], B: torch.Tensor, dim: int) -> float:
        total = 0.0
        with torch.no_grad():
            for start in range(0, len(X), self.batch_size):
                idx = list(range(start, min(start + self.batch_size, len(X))))
                x, lengths = self._batch(X, idx, dim, B.device)
                total += float(self._loss(self._forward(x, B), [labels[i] for i in idx], lengths)) * len(idx)
        return total / len(X)

    def predict(self, X: Sequence) -> list[np.ndarray]:
        """One float64 (n, n) predicted distance matrix (or (n,) depth vector) per sentence."""
        if not hasattr(self, "B_"):
            raise RuntimeError(f"{type(self).__name__} is not fitted: call fit first")
        B = torch.from_numpy(self.B_).to(torch_device(self.device))
        dim = B.shape[0]
        out: list[np.ndarray] = []
        with torch.no_grad():
            for start in range(0, len(X), self.batch_size):
                idx = list(range(start, min(start + self.batch_size, len(X))))
                x, lengths = self._batch(X, idx, dim, B.device)
                pred = self._forward(x, B).double().cpu().numpy()
                for b, n in enumerate(lengths.tolist()):
                    out.append(pred[b, :n, :n] if self._pairwise else pred[b, :n])
        return out

    def evaluate(
        self, X: Sequence, trees: Trees, punct: Masks = None, *, n_boot: int = 1000, seed: int = 0
    ) -> pd.DataFrame:
        """Both metrics of the task with bootstrap CIs: columns metric, value, ci_low, ci_high."""
        self._check(X, trees, "evaluate")
        rows = scores_with_ci(self._task, self.predict(X), trees, punct, n_boot=n_boot, seed=seed)
        return pd.DataFrame(rows, columns=["metric", "value", "ci_low", "ci_high"])

    _task: str


class DistanceProbe(_StructuralProbe):
    """Distance probe: ||B^T (h_i - h_j)||^2 fits the tree distance d(i, j). B is (dim, rank), rank default dim.

    fit(X, trees) with X a sequence of (n_words, dim) arrays and trees their head arrays;
    predict(X) -> list of (n, n) distance matrices; score(X, trees, punct) -> UUAS.
    """

    _pairwise = True
    _task = "structural-distance"

    def score(self, X: Sequence, trees: Trees, punct: Masks = None) -> float:
        """UUAS of the predicted distances' minimum spanning trees (punctuation excluded)."""
        self._check(X, trees, "score")
        return uuas(self.predict(X), trees, punct)


class DepthProbe(_StructuralProbe):
    """Depth probe: ||B^T h_i||^2 fits the depth of word i. B is (dim, rank), rank default dim.

    fit(X, trees); predict(X) -> list of (n,) depth vectors; score(X, trees, punct) -> Root%.
    """

    _pairwise = False
    _task = "structural-depth"

    def score(self, X: Sequence, trees: Trees, punct: Masks = None) -> float:
        """Root%: share of sentences whose least deep non-punctuation word is the gold root."""
        self._check(X, trees, "score")
        return root_acc(self.predict(X), trees, punct)


class _Subset(Sequence):
    def __init__(self, base: Sequence, idx: np.ndarray) -> None:
        self._base, self._idx = base, idx

    def __len__(self) -> int:
        return len(self._idx)

    def __getitem__(self, i):
        return self._base[int(self._idx[i])]


def _progress(it: range, on: bool, desc: str):
    if not on:
        return it
    from tqdm.auto import tqdm

    return tqdm(it, desc=f"{desc} epochs", file=sys.stderr)


# --- stores -----------------------------------------------------------------------------------------


class StoreSentences(Sequence):
    """One layer of a store as a sequence of sentences: item i is float32 (n_words_i, dim), read from
    the layer's memory map via the store's sentence offsets when asked for (nothing is held)."""

    def __init__(self, store: Any, layer: int | str) -> None:
        self.store = store
        self.layer = layer
        self._offsets = np.asarray(store.offsets)

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def __getitem__(self, i):
        if not -len(self) <= i < len(self):
            raise IndexError(f"sentence {i} out of range for {len(self)} sentences")
        i %= len(self)
        a, b = int(self._offsets[i]), int(self._offsets[i + 1])
        return self.store.layer(self.layer, rows=slice(a, b), dtype=np.float32)


def _corpus_name(store: Any) -> str:
    c = store.manifest.get("corpus", {})
    return f"{c.get('name', '?')}/{c.get('split', '?')} (store {store.path})"


def store_trees(store: Any) -> list[np.ndarray]:
    """Head arrays of every sentence of a store, from its token table's ``head`` column."""
    t = store.tokens
    heads = t["head"].to_numpy(dtype=np.int64) if "head" in t.columns else np.full(len(t), -1)
    if (heads < 0).any():
        missing = t["sentence_id"].iloc[int(np.argmax(heads < 0))]
        raise InputError(
            f"corpus {_corpus_name(store)} has no dependency heads (first at sentence {missing!r}): structural "
            "probes need a treebank with a HEAD column, e.g. a UD corpus read from CoNLL-U (re-extract a store "
            "made before heads were kept)"
        )
    off = store.offsets
    out = []
    for i in range(len(off) - 1):
        h = heads[off[i] : off[i + 1]]
        check_tree([int(v) for v in h], f"corpus {_corpus_name(store)} sentence {t['sentence_id'].iloc[off[i]]!r}")
        out.append(h)
    return out


def store_punct(store: Any) -> list[np.ndarray]:
    """Punctuation masks per sentence of a store (UPOS PUNCT if the store has UPOS, else PTB tags)."""
    t = store.tokens
    has_upos = bool((t["upos"] != "").any())
    mask = (t["upos"] == "PUNCT").to_numpy() if has_upos else t["xpos"].isin(PTB_PUNCT).to_numpy()
    off = store.offsets
    return [mask[off[i] : off[i + 1]] for i in range(len(off) - 1)]


def run_structural(
    train_store: Any,
    dev_store: Any,
    test_store: Any,
    layer: int | str,
    kind: str,
    rank: int | None = None,
    seed: int = 0,
    *,
    control: bool = False,
    n_boot: int = 1000,
    progress: bool = False,
    **probe_params: Any,
) -> list[tuple[str, float, float, float]]:
    """Fit a structural probe on ``layer`` of ``train_store`` (early stopping on ``dev_store``) and score
    ``test_store``: ``(metric, value, ci_low, ci_high)`` rows, uuas/dspr or root_acc/nspr.

    ``control=True`` replaces every split's trees by :func:`random_trees` of the same lengths (the
    control task; selectivity = score - control score).
    """
    kind = _kind(kind)
    trees = [store_trees(s) for s in (train_store, dev_store, test_store)]
    if control:
        trees = [random_trees([len(h) for h in t], seed=seed + 1000 * k) for k, t in enumerate(trees)]
    probe_cls: Callable[..., _StructuralProbe] = DistanceProbe if kind == "structural-distance" else DepthProbe
    probe = probe_cls(rank=rank, seed=seed, progress=progress, **probe_params)
    probe.fit(StoreSentences(train_store, layer), trees[0], StoreSentences(dev_store, layer), trees[1])
    pred = probe.predict(StoreSentences(test_store, layer))
    return scores_with_ci(kind, pred, trees[2], store_punct(test_store), n_boot=n_boot, seed=seed)


def position_baseline(
    test_store: Any, kind: str, *, n_boot: int = 1000, seed: int = 0
) -> list[tuple[str, float, float, float]]:
    """The linear-position baseline's rows on ``test_store`` (|i - j| distances, left-branching depths)."""
    kind = _kind(kind)
    trees = store_trees(test_store)
    lengths = [len(h) for h in trees]
    pred = position_distances(lengths) if kind == "structural-distance" else position_depths(lengths)
    return scores_with_ci(kind, pred, trees, store_punct(test_store), n_boot=n_boot, seed=seed)


def rank_sweep(
    train_store: Any,
    dev_store: Any,
    test_store: Any,
    layer: int | str,
    ranks: Sequence[int] | None = None,
    seed: int = 0,
    *,
    n_boot: int = 1000,
    progress: bool = False,
    **probe_params: Any,
) -> pd.DataFrame:
    """Distance probes of several ranks on one layer: columns rank, metric (uuas, dspr), value, ci_low, ci_high.

    Default ranks 1, 2, 4, ... below the layer's dim, then the dim itself (full rank).
    """
    dim = int(train_store.dim)
    if ranks is None:
        ranks = [2**k for k in range(dim.bit_length()) if 2**k < dim] + [dim]
    rows = []
    for r in ranks:
        for metric, value, lo, hi in run_structural(
            train_store,
            dev_store,
            test_store,
            layer,
            "structural-distance",
            rank=int(r),
            seed=seed,
            n_boot=n_boot,
            progress=progress,
            **probe_params,
        ):
            rows.append({"rank": int(r), "metric": metric, "value": value, "ci_low": lo, "ci_high": hi})
    return pd.DataFrame(rows, columns=["rank", "metric", "value", "ci_low", "ci_high"])
