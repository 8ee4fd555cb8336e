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

Trees are head arrays (:mod:`probing.probes.trees`); the metrics, UUAS, DSpr., NSpr. and Root%, are in
:mod:`probing.probes.tree_metrics`. Both modules' public names are importable from here too.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch

from probing.corpora.base import check_tree
from probing.devices import torch_device
from probing.errors import InputError
from probing.probes.tree_metrics import (
    KINDS,
    SPEARMAN_LENGTHS,
    Masks,
    Trees,
    check_kind,
    dspr,
    dspr_per_sentence,
    nspr,
    nspr_per_sentence,
    root_acc,
    root_hits,
    scores_with_ci,
    uuas,
    uuas_counts,
)
from probing.probes.trees import (
    PTB_PUNCT,
    as_heads,
    mst_edges,
    position_depths,
    position_distances,
    punctuation_mask,
    random_trees,
    tree_depths,
    tree_distances,
)
from probing.protocols import StoreLike

__all__ = [
    "DepthProbe",
    "DistanceProbe",
    "KINDS",
    "Masks",
    "PTB_PUNCT",
    "SPEARMAN_LENGTHS",
    "StoreSentences",
    "Trees",
    "dspr",
    "dspr_per_sentence",
    "mst_edges",
    "nspr",
    "nspr_per_sentence",
    "position_baseline",
    "position_depths",
    "position_distances",
    "punctuation_mask",
    "random_trees",
    "rank_sweep",
    "root_acc",
    "root_hits",
    "run_structural",
    "scores_with_ci",
    "store_punct",
    "store_trees",
    "tree_depths",
    "tree_distances",
    "uuas",
    "uuas_counts",
]

# --- probes -----------------------------------------------------------------------------------------


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
            lab = self._labels(as_heads(h, f"{what} sentence {i}")).astype(np.float32)
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
        rows = scores_with_ci(self._kind, self.predict(X), trees, punct, n_boot=n_boot, seed=seed)
        return pd.DataFrame(rows, columns=["metric", "value", "ci_low", "ci_high"])

    _kind: str  # of tree_metrics.KINDS


class DistanceProbe(_StructuralProbe):
    """Distance probe: ||B^T (h_i - h_j)||^2 fits the tree distance d(i, j). B is (dim, rank), rank default dim.

    fit(X, trees) with X a sequence of (n_words, dim) arrays and trees their head arrays;
    predict(X) -> list of (n, n) distance matrices; score(X, trees, punct) -> UUAS.
    """

    _pairwise = True
    _kind = "distance"

    def score(self, X: Sequence, trees: Trees, punct: Masks = None) -> float:
        """UUAS of the predicted distances' minimum spanning trees (punctuation excluded).

        Parameters
        ----------
        X : sequence of ndarray (n_words, dim)
            One array per sentence.
        trees : sequence of ndarray (n_words,) of int
            Each sentence's heads (1-based, 0 = root), as in the fit.
        punct : sequence of ndarray (n_words,) of bool, optional
            True on punctuation, which is left out of the score.

        Returns
        -------
        float
            UUAS in [0, 1]: the share of gold undirected edges that the predicted trees contain.
        """
        self._check(X, trees, "score")
        return uuas(self.predict(X), trees, punct)


class DepthProbe(_StructuralProbe):
    """Depth probe: ||B^T h_i||^2 fits the depth of word i. B is (dim, rank), rank default dim.

    fit(X, trees); predict(X) -> list of (n,) depth vectors; score(X, trees, punct) -> Root%.
    """

    _pairwise = False
    _kind = "depth"

    def score(self, X: Sequence, trees: Trees, punct: Masks = None) -> float:
        """Root%: share of sentences whose least deep non-punctuation word is the gold root.

        Parameters
        ----------
        X : sequence of ndarray (n_words, dim)
            One array per sentence.
        trees : sequence of ndarray (n_words,) of int
            Each sentence's heads (1-based, 0 = root), as in the fit.
        punct : sequence of ndarray (n_words,) of bool, optional
            True on punctuation, which is left out of the score.

        Returns
        -------
        float
            Root% in [0, 1].
        """
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

    def __init__(self, store: StoreLike, layer: int | str) -> None:
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


def _corpus_name(store: StoreLike) -> str:
    c = store.manifest.get("corpus", {})
    return f"{c.get('name', '?')}/{c.get('split', '?')} (store {store.path})"


def store_trees(store: StoreLike) -> list[np.ndarray]:
    """Head arrays of every sentence of a store, from its token table's ``head`` column.

    Returns
    -------
    list of ndarray, int64 (n_s,)
        One per sentence (1-based heads, 0 = root); InputError if the store has no heads.
    """
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


def store_punct(store: StoreLike) -> list[np.ndarray]:
    """Punctuation masks per sentence of a store (UPOS PUNCT if the store has UPOS, else PTB tags).

    Returns
    -------
    list of ndarray, bool (n_s,)
        One per sentence.
    """
    t = store.tokens
    has_upos = bool((t["upos"] != "").any())
    mask = (t["upos"] == "PUNCT").to_numpy() if has_upos else t["xpos"].isin(PTB_PUNCT).to_numpy()
    off = store.offsets
    return [mask[off[i] : off[i + 1]] for i in range(len(off) - 1)]


def run_structural(
    train_store: StoreLike,
    dev_store: StoreLike,
    test_store: StoreLike,
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
    """Fit a structural probe of ``kind`` (``"distance"`` or ``"depth"``) on ``layer`` of ``train_store`` (early
    stopping on ``dev_store``) and score ``test_store``: ``(metric, value, ci_low, ci_high)`` rows, uuas/dspr
    or root_acc/nspr.

    ``control=True`` replaces every split's trees by :func:`random_trees` of the same lengths (the
    control task; selectivity = score - control score).
    """
    kind = check_kind(kind)
    trees = [store_trees(s) for s in (train_store, dev_store, test_store)]
    if control:
        trees = [random_trees([len(h) for h in t], seed=seed + 1000 * k) for k, t in enumerate(trees)]
    probe_cls: Callable[..., _StructuralProbe] = DistanceProbe if kind == "distance" else DepthProbe
    probe = probe_cls(rank=rank, seed=seed, progress=progress, **probe_params)
    probe.fit(StoreSentences(train_store, layer), trees[0], StoreSentences(dev_store, layer), trees[1])
    pred = probe.predict(StoreSentences(test_store, layer))
    return scores_with_ci(kind, pred, trees[2], store_punct(test_store), n_boot=n_boot, seed=seed)


def position_baseline(
    test_store: StoreLike, kind: str, *, n_boot: int = 1000, seed: int = 0
) -> list[tuple[str, float, float, float]]:
    """The linear-position baseline's rows on ``test_store`` (``|i - j|`` distances, left-branching depths)."""
    kind = check_kind(kind)
    trees = store_trees(test_store)
    lengths = [len(h) for h in trees]
    pred = position_distances(lengths) if kind == "distance" else position_depths(lengths)
    return scores_with_ci(kind, pred, trees, store_punct(test_store), n_boot=n_boot, seed=seed)


def rank_sweep(
    train_store: StoreLike,
    dev_store: StoreLike,
    test_store: StoreLike,
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
            "distance",
            rank=int(r),
            seed=seed,
            n_boot=n_boot,
            progress=progress,
            **probe_params,
        ):
            rows.append({"rank": int(r), "metric": metric, "value": value, "ci_low": lo, "ci_high": hi})
    return pd.DataFrame(rows, columns=["rank", "metric", "value", "ci_low", "ci_high"])
