"""Online (prequential) codelength of labels given representations: MDL probing (Voita & Titov 2020).

The training sentences are permuted with a seed and cut into blocks at the cumulative fractions
``FRACTIONS`` (0.1 %, 0.2 %, ..., 50 %, 100 %, the reference's ``inds``; boundary ``int(f * n_sentences)``).
The first block is sent with the uniform code, ``tokens * log2 K`` bits; every later block is sent with
a fresh probe trained only on the blocks before it, at ``-sum log2 p(y | x)`` bits. The sum is the
online codelength; ``compression = uniform / online`` with ``uniform = N log2 K`` over all N training
tokens. A representation that makes the labels easy to learn from few examples gets a short code.

What the reference code does (lena-voita/description-length-probing, ``control_tasks``: ``run_experiment.py``,
``regimen.py``, ``loss.py`` and ``mdl_eval_notebooks/Eval_MDL_online_code.ipynb``), checked line by line:

* early stopping uses the task's own **dev split** (``dev_dataloader``), not data carved from the training
  blocks; training on a block stops when the mean dev cross-entropy has not improved by 0.001 for 5
  epochs (at most 40), and the block is coded with the best-dev checkpoint. Pass ``X_dev, y_dev`` to
  do the same; without them a ``dev_fraction`` of the sentences already sent is held out instead
  (a valid code too: the receiver knows those labels).
* **units**: each block's cost is ``CrossEntropyLoss(reduction='sum')`` summed over its tokens, i.e.
  in **nats**, and the notebook adds these to ``first_block_tokens * log2(K)`` (bits) with no
  conversion, then divides by **1024** for "kbits". So the published numbers mix units: the block
  terms are ln 2 = 0.693 times their value in bits. This module computes bits throughout and kbits
  as 1000 bits; ``reference_units=True`` reproduces the reference's arithmetic (nats for the later
  blocks, kbits = bits / 1024) for comparison with published tables.

The default probe is :class:`probing.probes.linear.LinearProbe` (L-BFGS, exact optimum of a convex
objective, so no epochs to stop early: with ``Cs`` the dev set picks the L2 strength per block, by dev
cross-entropy, which plays the role of early stopping); ``probe="mlp"`` is :class:`~probing.probes.mlp.MLPProbe`, the
reference's MLP (ReLU, 1 or 2 hidden layers, Adam, early stopping on dev loss); any estimator with
``fit``/``predict_proba``/``classes_`` works (cloned per block). The coded block is never seen by the
probe that codes it: neither in training nor as dev data.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import clone

from probing.errors import InputError
from probing.probes.control import ControlTask
from probing.probes.curves import epsilon_sample_complexity, surplus_description_length
from probing.probes.linear import LinearProbe
from probing.probes.mlp import MLPProbe

__all__ = ["FRACTIONS", "OnlineCode", "online_codelength", "control_codelength"]

FRACTIONS = (0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.0625, 0.125, 0.25, 0.5, 1.0)
_LN2 = math.log(2.0)


@dataclass
class OnlineCode:
    """Result of :func:`online_codelength`. Arrays have one entry per block (``len(fractions)``).

    ``block_bits[0]`` is the uniform cost of the first block; ``block_bits[k]`` for k >= 1 the cross-entropy
    in bits of block k under the probe trained on blocks 0..k-1 (``block_nats`` the same in nats).
    """

    codelength_bits: float
    uniform_bits: float
    n_tokens: int
    n_classes: int
    fractions: np.ndarray
    block_sentences: np.ndarray
    block_tokens: np.ndarray
    block_bits: np.ndarray
    block_nats: np.ndarray
    block_accuracy: np.ndarray
    reference_units: bool = False
    params: dict = field(default_factory=dict)

    @property
    def compression(self) -> float:
        return self.uniform_bits / self.codelength_bits

    @property
    def _kilo(self) -> float:
        return 1024.0 if self.reference_units else 1000.0

    @property
    def codelength_kbits(self) -> float:
        return self.codelength_bits / self._kilo

    @property
    def uniform_kbits(self) -> float:
        return self.uniform_bits / self._kilo

    def with_reference_units(self, reference_units: bool = True) -> OnlineCode:
        """The same blocks totalled as the reference does (later blocks in nats, kbits = bits / 1024),
        or in bits throughout with ``False``."""
        total = self.block_bits[0] + (self.block_nats[1:].sum() if reference_units else self.block_bits[1:].sum())
        return dataclasses.replace(self, codelength_bits=float(total), reference_units=reference_units)

    def metrics(self) -> dict[str, float]:
        """The results.csv metrics: ``codelength_kbits``, ``uniform_kbits``, ``compression``."""
        return {
            "codelength_kbits": self.codelength_kbits,
            "uniform_kbits": self.uniform_kbits,
            "compression": self.compression,
        }

    def surplus_description_length(self, epsilon: float) -> tuple[float, bool]:
        """Whitney et al.'s SDL in bits at ``epsilon`` bits per token, bounded from above
        (:func:`probing.probes.curves.surplus_description_length`): each block's tokens at the mean
        cross-entropy of the probe that coded it, the first at ``log2 K``. At ``epsilon = 0`` it is
        ``codelength_bits`` (in bits throughout). Returns ``(sdl_bits, complete)``."""
        sent = self.block_tokens > 0
        per_token = self.block_bits[sent] / self.block_tokens[sent]
        return surplus_description_length(self.block_tokens[sent], per_token, epsilon)

    def sample_complexity(self, epsilon: float) -> float:
        """Whitney et al.'s eSC in training sentences (:func:`probing.probes.curves.epsilon_sample_complexity`):
        the sentences sent before the first block whose probe codes it at ``epsilon`` bits per token or
        less (0 when the uniform code already does); ``inf`` when no block's probe does."""
        sent = self.block_tokens > 0
        before = np.concatenate([[0], np.cumsum(self.block_sentences)[:-1]])[sent]
        per_token = self.block_bits[sent] / self.block_tokens[sent]
        return epsilon_sample_complexity(before, per_token, epsilon)

    def blocks(self) -> pd.DataFrame:
        """One row per block: fraction, sentences, tokens, bits, nats, accuracy (NaN for the first)."""
        return pd.DataFrame(
            {
                "fraction": self.fractions,
                "sentences": self.block_sentences,
                "tokens": self.block_tokens,
                "bits": self.block_bits,
                "nats": self.block_nats,
                "accuracy": self.block_accuracy,
            }
        )


# ----------------------------------------------------------------------------- online code


def _make_probe(probe: Any, C: float, hidden_layers: int, width: int, max_iter: int, seed: int) -> Any:
    if isinstance(probe, str):
        if probe == "linear":
            return LinearProbe(C=C, max_iter=max_iter)
        if probe == "mlp":
            return MLPProbe(hidden_layers=hidden_layers, width=width, random_state=seed)
        raise InputError(f"online_codelength: probe must be 'linear', 'mlp' or an estimator, got {probe!r}")
    if not (hasattr(probe, "fit") and hasattr(probe, "predict_proba")):
        raise TypeError(f"online_codelength: probe {probe!r} has no fit/predict_proba")
    est = clone(probe)
    if "random_state" in est.get_params():
        est.set_params(random_state=seed)
    return est


def _fit(est: Any, X, y, X_dev, y_dev) -> Any:
    if X_dev is not None and "X_dev" in inspect.signature(est.fit).parameters:
        return est.fit(X, y, X_dev=X_dev, y_dev=y_dev)
    return est.fit(X, y)


def _full_proba(est: Any, X, K: int) -> np.ndarray:
    """(n, K) probabilities over the label indices 0..K-1; classes the probe never saw get 0."""
    p = est.predict_proba(X)
    out = np.zeros((p.shape[0], K))
    out[:, np.asarray(est.classes_, dtype=np.int64)] = p
    return out


def _dev_xent(est: Any, X, y_idx: Any, K: int, smoothing: float) -> float:
    p = (1 - smoothing) * _full_proba(est, X, K) + smoothing / K
    with np.errstate(divide="ignore"):
        return float(-np.mean(np.log(p[np.arange(len(y_idx)), y_idx])))


def online_codelength(
    X: Any,
    y: Sequence | np.ndarray,
    groups: Sequence | np.ndarray,
    *,
    X_dev: Any = None,
    y_dev: Sequence | np.ndarray | None = None,
    probe: Any = "linear",
    fractions: Sequence[float] = FRACTIONS,
    seed: int = 0,
    n_classes: int | None = None,
    C: float = 1.0,
    Cs: Sequence[float] | None = None,
    hidden_layers: int = 1,
    width: int = 256,
    max_iter: int = 300,
    dev_fraction: float = 0.1,
    smoothing: float = 1e-6,
    reference_units: bool = False,
    progress: bool = False,
) -> OnlineCode:
    """Online codelength, in bits, of labels ``y`` given features ``X``, blocks of whole sentences.

    Without ``X_dev``/``y_dev``, a seeded ``dev_fraction`` of the already-sent sentences is held out of each
    block's training set when the probe uses dev data (``"mlp"``, ``"linear"`` with ``Cs``, an estimator whose
    ``fit`` takes ``X_dev``). Each code is ``(1 - smoothing) p + smoothing / K``, so a class the probe has not
    seen yet costs ~log2(K / smoothing) bits instead of infinity.

    Parameters
    ----------
    X : (n, d)
        Features of the n tokens.
    y : (n,)
        Their labels.
    groups : (n,)
        Sentence id of each token (tokens of a sentence stay together; any hashable ids).
    X_dev : (n_dev, d), optional
        The task's dev split, for early stopping (the reference's choice).
    y_dev : (n_dev,), optional
        Its labels.
    probe : ``"linear"``, ``"mlp"`` or an estimator
        ``"linear"``: LinearProbe(C), or the C in ``Cs`` with the lowest dev cross-entropy; ``"mlp"``:
        MLPProbe(hidden_layers, width); an estimator is cloned per block.
    fractions : (k,) float
        Cumulative block boundaries, strictly increasing to 1.0.
    seed : int
        Orders the sentences (and seeds the probes).
    n_classes : int, optional
        K of the uniform code (default: the distinct labels in ``y``; pass the task's tag-set size when ``y``
        lacks some).
    C, Cs, hidden_layers, width, max_iter : the probe's settings.
    dev_fraction, smoothing : see above.
    reference_units : bool
        Total = first block in bits + later blocks in nats, kbits = bits / 1024 (see the module docstring).
    progress : bool
        A progress bar over the blocks.

    Returns
    -------
    OnlineCode
        Its arrays have one entry per block (k,).
    """
    y_arr, g_arr = np.asarray(y), np.asarray(groups)
    n = len(y_arr)
    fr = _check_code_inputs(X, n, g_arr, fractions, smoothing, X_dev, y_dev)
    classes, y_idx = np.unique(y_arr, return_inverse=True)
    K = len(classes) if n_classes is None else int(n_classes)
    if K < max(len(classes), 2):
        raise InputError(f"online_codelength: n_classes={n_classes} but y has {len(classes)} distinct labels")
    X_dev, dev_idx = _dev_labels(classes, X_dev, y_dev)
    sentence_of, block_of_sentence, bounds = _sentence_blocks(g_arr, fr, seed)
    block_of_token = block_of_sentence[sentence_of]

    if isinstance(probe, str):
        uses_dev = probe == "mlp" or bool(Cs)
    else:
        uses_dev = "X_dev" in inspect.signature(probe.fit).parameters
    nb = len(fr)
    sizes = np.bincount(block_of_token, minlength=nb)
    sents = np.diff(np.concatenate([[0], bounds]))
    bits = np.zeros(nb)
    nats = np.zeros(nb)
    acc = np.full(nb, np.nan)
    bits[0] = sizes[0] * math.log2(K)
    nats[0] = sizes[0] * math.log(K)
    chosen_C: list[float | None] = [None]
    from tqdm.auto import tqdm

    for k in tqdm(range(1, nb), desc="online code", disable=not progress):
        coded = np.flatnonzero(block_of_token == k)
        if not len(coded):
            chosen_C.append(None)
            continue
        train = np.flatnonzero(block_of_token < k)
        Xd, yd = X_dev, dev_idx
        if X_dev is None and uses_dev:
            train, Xd, yd = _held_out_dev(X, y_idx, train, block_of_sentence < k, sentence_of, dev_fraction, [seed, k])
        settings = (probe, C, Cs, hidden_layers, width, max_iter, seed + k, smoothing)
        p, c = _block_proba(X, y_idx, train, coded, Xd, yd, K, settings)
        chosen_C.append(c)
        nats[k], acc[k] = _block_code(p, y_idx[coded], K, smoothing, k)
        bits[k] = nats[k] / _LN2

    total = bits[0] + (nats[1:].sum() if reference_units else bits[1:].sum())
    return OnlineCode(
        codelength_bits=float(total),
        uniform_bits=float(n * math.log2(K)),
        n_tokens=n,
        n_classes=K,
        fractions=fr,
        block_sentences=sents,
        block_tokens=sizes,
        block_bits=bits,
        block_nats=nats,
        block_accuracy=acc,
        reference_units=reference_units,
        params={"seed": seed, "probe": probe if isinstance(probe, str) else type(probe).__name__, "C": chosen_C},
    )


def _dev_labels(classes: np.ndarray, X_dev, y_dev) -> tuple[Any, np.ndarray | None]:
    """The dev features and labels as indices into the training ``classes``, without the dev items whose label
    training lacks (they cannot be scored against the training classes); (X_dev, None) without dev data."""
    if y_dev is None:
        return X_dev, None
    lookup = {c: i for i, c in enumerate(classes.tolist())}
    dev_idx = np.array([lookup.get(v, -1) for v in np.asarray(y_dev).tolist()], dtype=np.int64)
    keep = dev_idx >= 0
    return (X_dev if keep.all() else np.asarray(X_dev)[keep]), dev_idx[keep]


def _held_out_dev(X, y_idx, train, sent, sentence_of, dev_fraction: float, seed: list[int]):
    """A seeded ``dev_fraction`` of the sentences already sent (``sent``: a mask over sentences) held out of
    the ``train`` items: (train items left, dev features, dev labels); unchanged when it would be none or all."""
    sent_before = np.flatnonzero(sent)
    n_dev = int(round(dev_fraction * len(sent_before)))
    if not 1 <= n_dev < len(sent_before):
        return train, None, None
    held = np.random.default_rng(seed).choice(sent_before, size=n_dev, replace=False)
    is_dev = np.isin(sentence_of[train], held)
    return train[~is_dev], X[train[is_dev]], y_idx[train[is_dev]]


def _block_code(p: np.ndarray, y_true: np.ndarray, K: int, smoothing: float, k: int) -> tuple[float, float]:
    """Block ``k``'s codelength in nats and accuracy from the probe's probabilities ``p`` (m, K), smoothed."""
    p = (1 - smoothing) * p + smoothing / K
    p_true = p[np.arange(len(y_true)), y_true]
    if np.any(p_true <= 0):
        raise InputError(
            f"online_codelength: block {k} has a label the probe gives probability 0 "
            "(a class unseen in the earlier blocks); use smoothing > 0"
        )
    return float(-np.sum(np.log(p_true))), float(np.mean(p.argmax(1) == y_true))


def _check_code_inputs(X: Any, n: int, g_arr: np.ndarray, fractions, smoothing: float, X_dev, y_dev) -> np.ndarray:
    """:func:`online_codelength`'s argument checks; returns the block fractions as an array (k,)."""
    if getattr(X, "ndim", None) != 2 or X.shape[0] != n or g_arr.shape != (n,):
        raise InputError(
            f"online_codelength: X must be (n, d) with y and groups of length n; got X {getattr(X, 'shape', None)}, "
            f"y ({n},), groups {g_arr.shape}"
        )
    if n == 0:
        raise InputError("online_codelength: no tokens")
    fr = np.asarray(fractions, dtype=np.float64)
    if fr.ndim != 1 or len(fr) < 2 or not (np.all(np.diff(fr) > 0) and fr[0] > 0 and fr[-1] == 1.0):
        raise InputError(f"online_codelength: fractions must increase strictly from > 0 to 1.0, got {fractions!r}")
    if not 0 <= smoothing < 1:
        raise InputError(f"online_codelength: smoothing must be in [0, 1), got {smoothing!r}")
    if (X_dev is None) != (y_dev is None):
        raise InputError("online_codelength: pass both X_dev and y_dev, or neither")
    return fr


def _sentence_blocks(g_arr: np.ndarray, fr: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The sentences in one seeded order cut at the block fractions ``fr`` (k,): each token's sentence index
    (n,), each sentence's block (n_sent,) and the blocks' cumulative sentence bounds (k,)."""
    sentence_ids, sentence_of = np.unique(g_arr, return_inverse=True)
    n_sent = len(sentence_ids)
    rng = np.random.default_rng(seed)
    position = np.empty(n_sent, dtype=np.int64)
    position[rng.permutation(n_sent)] = np.arange(n_sent)
    bounds = (fr * n_sent).astype(np.int64)  # the reference's int(fraction * total_len)
    bounds[-1] = n_sent
    if bounds[0] < 1:
        raise InputError(
            f"online_codelength: the first block ({fr[0]:g} of {n_sent} sentences) is empty; "
            f"need at least {math.ceil(1 / fr[0])} sentences or a larger first fraction"
        )
    return sentence_of, np.searchsorted(bounds, position, side="right"), bounds


def _block_proba(X, y_idx, train, coded, Xd, yd, K: int, settings: tuple) -> tuple[np.ndarray, float | None]:
    """One block's class probabilities (m, K) from the probe trained on the ``train`` items (the C in ``Cs``
    with the lowest dev cross-entropy for a linear probe with dev data), and the C chosen (None for another
    probe or none fitted: fewer than two classes give the add-one prior)."""
    probe, C, Cs, hidden_layers, width, max_iter, seed, smoothing = settings
    if len(np.unique(y_idx[train])) < 2:  # a probe needs two classes: add-one estimate of the prior
        p_train = (np.bincount(y_idx[train], minlength=K) + 1.0) / (len(train) + K)
        return np.broadcast_to(p_train, (len(coded), K)), None
    candidates = list(Cs) if (Cs and probe == "linear" and Xd is not None) else [C]
    best = None
    for c in candidates:
        est = _fit(_make_probe(probe, c, hidden_layers, width, max_iter, seed), X[train], y_idx[train], Xd, yd)
        score = _dev_xent(est, Xd, yd, K, smoothing) if len(candidates) > 1 else 0.0
        if best is None or score < best[0]:
            best = (score, c, est)
    assert best is not None
    return _full_proba(best[2], X[coded], K), best[1] if probe == "linear" else None


def control_codelength(
    X: Any,
    y: Sequence | np.ndarray,
    words: Sequence[str],
    groups: Sequence | np.ndarray,
    *,
    control_seed: int = 0,
    X_dev: Any = None,
    words_dev: Sequence[str] | None = None,
    **kwargs: Any,
) -> OnlineCode:
    """Online codelength of the control task (Hewitt & Liang): :class:`ControlTask` labels, one random
    label per word type drawn from ``y``'s distribution, coded with the same K as the task (so the
    uniform codelengths are equal). Dev labels are the control labels of ``words_dev``.

    Parameters
    ----------
    X : (n, d)
    y : (n,)
        The task's labels (their distribution and K).
    words : (n,) str
        The tokens' words (the control labels are per word type).
    groups : (n,)
        Sentence id of each token.
    control_seed : int
        Seeds the control labels.
    X_dev : (n_dev, d), optional
    words_dev : (n_dev,) str, optional
    **kwargs : the other arguments of :func:`online_codelength`.

    Returns
    -------
    OnlineCode
    """
    if (X_dev is None) != (words_dev is None):
        raise InputError("control_codelength: pass both X_dev and words_dev, or neither")
    task = ControlTask(seed=control_seed).fit(list(words), np.asarray(y).tolist())
    y_ctrl = task.transform(list(words))
    if "n_classes" not in kwargs:
        kwargs["n_classes"] = len(np.unique(np.asarray(y)))
    dev_labels = task.transform(list(words_dev)) if words_dev is not None else None
    return online_codelength(X, y_ctrl, groups, X_dev=X_dev, y_dev=dev_labels, **kwargs)
