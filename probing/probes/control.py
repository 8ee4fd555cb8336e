"""Control tasks (Hewitt & Liang 2019): does a probe read a property, or memorise word identity?

Every word type gets one random label drawn from the task's empirical label distribution (over
tokens). A probe that scores well on this control task can do so only by memorising types, so
``selectivity = task accuracy - control accuracy`` separates what the representation encodes from
what the probe learns by itself.

A type's label is a pure function of (type, seed, label distribution): the type and seed are hashed
(blake2b, stable across processes, unlike ``hash``) to a uniform number in [0, 1) that is mapped
through the inverse CDF of the label distribution. Types unseen at fit time therefore get labels from
the same distribution, deterministically, without any table of types.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from probing.errors import InputError

_TWO_64 = float(2**64)


def _type_uniform(word: str, seed: int) -> float:
    digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8, key=str(seed).encode()).digest()
    return int.from_bytes(digest, "little") / _TWO_64


def _as_words(words, name: str) -> list[str]:
    if isinstance(words, str):
        raise TypeError(f"{name}: words must be a sequence of strings, not one string")
    words = list(words)
    if set(map(type, words)) - {str}:
        i, w = next((i, w) for i, w in enumerate(words) if not isinstance(w, str))
        raise TypeError(f"{name}: words[{i}] is {type(w).__name__} {w!r}, expected str")
    return words


class ControlTask:
    """Random per-type labels with the task's token-level label distribution.

    ``fit(words, labels)`` learns ``classes_`` and ``class_prior_`` (label frequencies over tokens);
    ``transform(words)`` returns one control label per token, identical for every occurrence of a
    type and for every call with the same seed.
    """

    def __init__(self, seed: int = 0):
        self.seed = seed

    def fit(self, words: Sequence[str], labels: Sequence | np.ndarray) -> ControlTask:
        """Learn the label distribution of ``labels`` (n,), one per word of ``words`` (n,).

        Parameters
        ----------
        words : sequence of str (n,)
            Word tokens (checked, not stored: control labels depend on the type, not on training).
        labels : array-like (n,)
            The task's label of each token; any hashable that ``np.unique`` sorts.

        Returns
        -------
        ControlTask
            ``self``, with ``classes_`` (n_classes,) sorted and ``class_prior_`` (n_classes,) token frequencies.
        """
        words = _as_words(words, "ControlTask.fit")
        y = np.asarray(labels)
        if y.ndim != 1 or len(y) != len(words):
            raise InputError(
                f"ControlTask.fit: labels must be 1-D with one label per word; got shape "
                f"{y.shape} for {len(words)} words"
            )
        if len(words) == 0:
            raise InputError("ControlTask.fit: no words")
        self.classes_, counts = np.unique(y, return_counts=True)
        self.class_prior_ = counts / counts.sum()
        self._cdf = np.cumsum(self.class_prior_)
        self._cdf[-1] = 1.0
        return self

    def transform(self, words: Sequence[str]) -> np.ndarray:
        """The control label (n,) of each of ``words`` (n,): one per word type, drawn from the label distribution.

        Parameters
        ----------
        words : sequence of str (n,)
            Word tokens; types unseen at fit time get labels too.

        Returns
        -------
        ndarray (n,)
            Items of ``classes_`` (its dtype); equal words get equal labels.
        """
        if not hasattr(self, "classes_"):
            raise RuntimeError("ControlTask.transform: call fit(words, labels) first")
        words = _as_words(words, "ControlTask.transform")
        if not words:
            return self.classes_[:0]
        index: dict[str, int] = {}
        codes = np.fromiter((index.setdefault(w, len(index)) for w in words), dtype=np.int64, count=len(words))
        seed = int(self.seed)
        u = np.fromiter((_type_uniform(t, seed) for t in index), dtype=np.float64, count=len(index))
        type_labels = np.searchsorted(self._cdf, u, side="right")
        return self.classes_[type_labels[codes]]

    def fit_transform(self, words: Sequence[str], labels: Sequence) -> np.ndarray:
        """Fit on ``words`` (n,) and ``labels`` (n,), then their control labels (n,).

        Parameters
        ----------
        words : sequence of str (n,)
            Word tokens.
        labels : array-like (n,)
            The task's label of each token.

        Returns
        -------
        ndarray (n,)
            ``transform(words)`` after ``fit(words, labels)``.
        """
        words = _as_words(words, "ControlTask.fit_transform")
        return self.fit(words, labels).transform(words)


def selectivity(task_accuracy: float, control_accuracy: float) -> float:
    """Hewitt & Liang's selectivity: task accuracy minus control-task accuracy (same probe, data)."""
    return float(task_accuracy) - float(control_accuracy)
