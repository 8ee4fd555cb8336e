"""Word-identity baselines for tagging probes: what a probe must beat to show it learned anything.

Both take a sequence of word tokens (not features): ``fit(words, y)``, ``predict(words)``,
``score(words, y)`` (accuracy). Ties are broken deterministically: the label that is more frequent
in the whole training set wins, then the smaller label in sorted order.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter, defaultdict
from collections.abc import Sequence

import numpy as np

from probing.errors import InputError

LOWERCASE_MODES = ("fallback", "never", "always")


def _check_pair(words, y, name: str) -> tuple[list[str], np.ndarray]:
    if isinstance(words, str):
        raise TypeError(f"{name}: words must be a sequence of strings, not one string")
    words = list(words)
    y = np.asarray(y)
    if y.ndim != 1 or len(y) != len(words):
        raise InputError(f"{name}: y must be 1-D with one label per word; got shape {y.shape} for {len(words)} words")
    if not words:
        raise InputError(f"{name}: no words")
    return words, y


def _scalar(label):
    """A label as a plain Python value: numpy scalars unwrapped, objects (e.g. the ``str`` items of a
    pandas column's object array) as they are."""
    return label.item() if isinstance(label, np.generic) else label


class _WordBaseline(ABC):
    def score(self, words: Sequence[str], y: Sequence) -> float:
        """Accuracy on ``words`` (n,) with gold labels ``y`` (n,)."""
        checked, labels = _check_pair(words, y, f"{type(self).__name__}.score")
        return float(np.mean(self.predict(checked) == labels))

    @abstractmethod
    def predict(self, words: Sequence[str]) -> np.ndarray:
        """One predicted label per word: (n,) for n ``words``."""

    def _check_fitted(self) -> None:
        if not hasattr(self, "classes_"):
            raise RuntimeError(f"{type(self).__name__}: call fit(words, y) first")

    def _fit_counts(self, y: np.ndarray) -> None:
        self.classes_, counts = np.unique(y, return_counts=True)
        # rank: most frequent first, then sorted label order (np.unique sorts; the sort is stable)
        order = np.argsort(-counts, kind="stable")
        self._rank = {_scalar(self.classes_[i]): r for r, i in enumerate(order)}
        self.majority_ = self.classes_[order[0]]


class MajorityBaseline(_WordBaseline):
    """Predicts the most frequent training label for every token."""

    def fit(self, words: Sequence[str], y: Sequence) -> MajorityBaseline:
        """Count the labels ``y`` of the training ``words``.

        Parameters
        ----------
        words : sequence of str (n,)
            The training tokens (unused but checked: the baselines share one signature).
        y : array-like (n,)
            One gold label per token (any hashable).

        Returns
        -------
        MajorityBaseline
            ``self``, with ``classes_`` and ``majority_``.
        """
        _, labels = _check_pair(words, y, "MajorityBaseline.fit")
        self._fit_counts(labels)
        return self

    def predict(self, words: Sequence[str]) -> np.ndarray:
        """The majority training label for each of ``words``.

        Parameters
        ----------
        words : sequence of str (n,)
            Word tokens (only their number matters).

        Returns
        -------
        ndarray (n,)
            ``majority_`` repeated, with the dtype of ``classes_``.
        """
        self._check_fitted()
        return np.full(len(list(words)), self.majority_, dtype=self.classes_.dtype)


class MostFrequentTagBaseline(_WordBaseline):
    """Predicts each word type's most frequent training label.

    ``lowercase``:
      - ``"fallback"`` (default): look up the exact form; if it never occurred in training, look up
        its lowercased form in a table built from lowercased training tokens (so "The" at the start
        of a sentence still gets the tag of "the"); else the overall majority label.
      - ``"never"``: exact form, else majority.
      - ``"always"``: lowercased form only, else majority.
    """

    def __init__(self, lowercase: str = "fallback"):
        self.lowercase = lowercase

    def fit(self, words: Sequence[str], y: Sequence) -> MostFrequentTagBaseline:
        """Count the labels ``y`` of each word type among the training ``words``.

        Parameters
        ----------
        words : sequence of str (n,)
            The training tokens.
        y : array-like (n,)
            One gold label per token (any hashable).

        Returns
        -------
        MostFrequentTagBaseline
            ``self``, with the exact-form and lowercased lookup tables.
        """
        if self.lowercase not in LOWERCASE_MODES:
            raise InputError(
                f"MostFrequentTagBaseline: lowercase must be one of {LOWERCASE_MODES}, got {self.lowercase!r}"
            )
        words, y_arr = _check_pair(words, y, "MostFrequentTagBaseline.fit")
        self._fit_counts(y_arr)
        labels = y_arr.tolist()
        exact: dict[str, Counter] = defaultdict(Counter)
        lower: dict[str, Counter] = defaultdict(Counter)
        for w, t in zip(words, labels):
            if self.lowercase != "always":
                exact[w][t] += 1
            if self.lowercase != "never":
                lower[w.lower()][t] += 1
        self.exact_table_ = {w: self._best(c) for w, c in exact.items()}
        self.lower_table_ = {w: self._best(c) for w, c in lower.items()}
        return self

    def _best(self, counter: Counter):
        return min(counter.items(), key=lambda kv: (-kv[1], self._rank[kv[0]]))[0]

    def predict(self, words: Sequence[str]) -> np.ndarray:
        """Each word's most frequent training label, looked up as ``lowercase`` says, else the majority label.

        Parameters
        ----------
        words : sequence of str (n,)
            Word tokens.

        Returns
        -------
        ndarray (n,)
            One label per word, with the dtype of ``classes_``.
        """
        self._check_fitted()
        majority = _scalar(self.majority_)
        out = []
        for w in words:
            label = self.exact_table_.get(w)
            if label is None:
                label = self.lower_table_.get(w.lower(), majority)
            out.append(label)
        return np.asarray(out, dtype=self.classes_.dtype)
