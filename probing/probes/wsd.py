"""Word-sense disambiguation: Raganato et al.'s scorer, key files, baselines and ELMo's 1-NN sense centroids.

Scoring follows ``Scorer.java`` of the WSD evaluation framework (Raganato, Camacho-Collados and
Navigli 2017), whose ``score`` method does exactly this:

* Both files are read into ``id -> set of keys``; a line ``id key1 key2 ...`` adds its keys to the
  id's set, so repeated ids accumulate and repeated keys count once.
* For each answered id that is in the gold standard, an answer with ``n`` keys of which ``c`` are
  gold keys adds ``c / n`` to ``correct`` and ``(n - c) / n`` to ``wrong``. So one right key among
  several gold keys is fully correct, and several answer keys share one unit of credit.
  Answers for ids not in the gold standard are ignored.
* ``P = correct / (correct + wrong)`` (= correct / answered), ``R = correct / |gold|``,
  ``F1 = 2PR / (P + R)`` and 0 when ``P + R = 0``.

Where this module differs, it is on inputs Scorer.java mishandles: key files are split on any
whitespace (Scorer.java splits on single spaces, so a tab-separated line is one token), a line with an
id but no key is an error naming the line (Scorer.java prints a note and skips it), and with no
answers at all P is 0 (Scorer.java divides 0 by 0). Blank lines are skipped by both.

``SenseCentroids`` is the method of Peters et al. (2018, section 5.3, Table 5): the mean
representation of each sense over its SemCor occurrences; a test word takes the sense, among its
lemma's WordNet senses, with the nearest mean, and the WordNet first sense when none of them was seen
in training. The paper says "nearest neighbor" without naming the distance; cosine similarity is the
default here (it is what later 1-NN WSD work with contextual vectors uses, e.g. Loureiro and Jorge
2019), and ``metric="euclidean"`` is available.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import sparse

from probing._io import atomic_open
from probing.errors import InputError, ProbingError
from probing.wordnet import SenseInventory, normalize_lemma, normalize_pos
from probing.wordnet import inventory as _default_inventory

KeysLike = str | Sequence[str]


class KeyFileError(ProbingError, ValueError):
    """A key file line that is not ``instance_id key [key ...]``."""


def _as_keys(value: KeysLike | None) -> tuple[str, ...]:
    """Keys from a string (one key, or several separated by whitespace as in the token table) or a sequence."""
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(dict.fromkeys(value.split()))
    return tuple(dict.fromkeys(value))


def _inventory(inv: SenseInventory | None) -> SenseInventory:
    return inv if inv is not None else _default_inventory()


def read_key_file(path: str | os.PathLike) -> dict[str, list[str]]:
    """Read a Raganato key file (``id key [key ...]`` per line) into ``id -> keys`` in file order.

    Keys of a repeated id are merged, duplicates dropped (as Scorer.java does). Blank lines are skipped;
    a line with an id but no key raises KeyFileError naming the file and line.
    """
    path = Path(path)
    out: dict[str, list[str]] = {}
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) < 2:
                raise KeyFileError(f"{path} line {lineno}: expected 'instance_id key [key ...]', got {line.strip()!r}")
            keys = out.setdefault(fields[0], [])
            keys.extend(k for k in fields[1:] if k not in keys)
    return out


def write_key_file(path: str | os.PathLike, answers: Mapping[str, KeysLike]) -> Path:
    """Write ``id key [key ...]`` lines atomically, in the mapping's order; returns the path."""
    path = Path(path)
    with atomic_open(path, "w", encoding="utf-8", newline="\n") as f:
        for instance_id, value in answers.items():
            keys = _as_keys(value)
            if not keys or any(not k or k.isspace() for k in keys) or not instance_id or len(instance_id.split()) != 1:
                raise KeyFileError(
                    f"answer for instance {instance_id!r} must be an id without spaces and at least one key, "
                    f"got {value!r}"
                )
            f.write(" ".join((instance_id, *keys)) + "\n")
    return path


def score_wsd(pred: Mapping[str, KeysLike | None], gold: Mapping[str, KeysLike]) -> dict:
    """Precision, recall and F1 (fractions, not percent) by Scorer.java's rules; see the module docstring.

    ``pred`` maps instance ids to one key, several keys, or None/empty for no answer. Returns
    ``P, R, F1, n_gold, n_answered`` (answered gold instances), ``correct`` (fractional credit) and
    ``n_ignored`` (answers for ids not in ``gold``).
    """
    gold_sets = {i: set(_as_keys(k)) for i, k in gold.items()}
    if not gold_sets:
        raise InputError("score_wsd: the gold standard has no instances")
    empty = [i for i, k in gold_sets.items() if not k]
    if empty:
        raise InputError(f"score_wsd: gold instance {empty[0]!r} has no sense key ({len(empty)} such instances)")
    correct = wrong = 0.0
    n_answered = n_ignored = 0
    for instance_id, value in pred.items():
        answer = _as_keys(value)
        if not answer:
            continue
        if instance_id not in gold_sets:
            n_ignored += 1
            continue
        n_answered += 1
        hits = sum(1 for k in answer if k in gold_sets[instance_id])
        correct += hits / len(answer)
        wrong += (len(answer) - hits) / len(answer)
    p = correct / (correct + wrong) if n_answered else 0.0
    r = correct / len(gold_sets)
    f1 = 2 * p * r / (p + r) if p + r > 0 else 0.0
    return {
        "P": p,
        "R": r,
        "F1": f1,
        "n_gold": len(gold_sets),
        "n_answered": n_answered,
        "correct": correct,
        "n_ignored": n_ignored,
    }


def _check_aligned(lemmas: Sequence[str], pos: Sequence[str]) -> None:
    if len(lemmas) != len(pos):
        raise InputError(f"lemmas has {len(lemmas)} items but pos has {len(pos)}; they must be aligned")


def wn_first_sense(lemmas: Sequence[str], pos: Sequence[str], inventory: SenseInventory | None = None) -> list[str]:
    """The WordNet first sense (sense number 1) of each (lemma, pos).

    Parameters
    ----------
    lemmas, pos : (n,) str
        The instances' lemmas and UPOS tags.
    inventory : the sense inventory (default: the bundled WordNet subset).

    Returns
    -------
    list of str (n,)
        A sense key per instance.
    """
    _check_aligned(lemmas, pos)
    inv = _inventory(inventory)
    return [inv.first_sense(lemma, p) for lemma, p in zip(lemmas, pos)]


class MostFrequentSense:
    """SemCor most-frequent-sense baseline: for each (lemma, pos) the candidate key seen most often in training.

    Every gold key of a training instance counts once. Ties go to WordNet order; a lemma with no
    counted candidate falls back to its WordNet first sense.
    """

    def __init__(self, inventory: SenseInventory | None = None):
        self.inventory = inventory

    def fit(self, sense_keys: Iterable[KeysLike]) -> MostFrequentSense:
        """Count the keys of each training instance (a key string, space-separated keys, or a sequence)."""
        counts: Counter[str] = Counter()
        for value in sense_keys:
            counts.update(_as_keys(value))
        self.counts_ = counts
        return self

    def predict_details(self, lemmas: Sequence[str], pos: Sequence[str]) -> pd.DataFrame:
        """One row per instance: ``sense``, its training ``count`` and ``backoff`` (True = WordNet first sense)."""
        _check_aligned(lemmas, pos)
        if not hasattr(self, "counts_"):
            raise RuntimeError("MostFrequentSense is not fitted; call fit() first")
        inv = _inventory(self.inventory)
        rows = []
        for lemma, p in zip(lemmas, pos):
            candidates = inv.senses(lemma, p)
            best = max(candidates, key=lambda k: self.counts_.get(k, 0))  # max keeps the first of equals
            count = self.counts_.get(best, 0)
            rows.append((best, count, count == 0))
        return pd.DataFrame(rows, columns=["sense", "count", "backoff"])

    def predict(self, lemmas: Sequence[str], pos: Sequence[str]) -> list[str]:
        """The most frequent training sense of each (lemma, pos)."""
        return self.predict_details(lemmas, pos)["sense"].tolist()


def _rows(X, rows: Sequence[int] | np.ndarray | None, n: int, what: str) -> np.ndarray:
    if getattr(X, "ndim", None) != 2:
        raise InputError(f"{what}: X must be a 2-d array (n_tokens, dim), got shape {getattr(X, 'shape', None)}")
    if rows is None:
        if X.shape[0] != n:
            raise InputError(
                f"{what}: X has {X.shape[0]} rows but there are {n} occurrences; pass rows= to select them"
            )
        return np.arange(n, dtype=np.int64)
    rows = np.asarray(rows, dtype=np.int64)
    if rows.shape != (n,):
        raise InputError(f"{what}: rows has shape {rows.shape} but there are {n} occurrences")
    if n and (rows.min() < 0 or rows.max() >= X.shape[0]):
        raise InputError(f"{what}: rows must lie in [0, {X.shape[0]}), got {rows.min()}..{rows.max()}")
    return rows


class SenseCentroids:
    """Peters et al. (2018) 1-NN WSD: one mean vector per sense, nearest mean among the lemma's senses.

    ``X`` may be any 2-d array, including an fp16 ``np.memmap`` of a whole store layer; ``rows`` then
    selects the occurrences. Sums are accumulated in float64 from float32 blocks of ``chunk_rows`` rows,
    so memory is bounded by the centroids plus one block.
    """

    def __init__(self, metric: str = "cosine", inventory: SenseInventory | None = None, chunk_rows: int = 8192):
        if metric not in ("cosine", "euclidean"):
            raise InputError(f"metric {metric!r} is not 'cosine' or 'euclidean'")
        if chunk_rows < 1:
            raise InputError(f"chunk_rows must be at least 1, got {chunk_rows}")
        self.metric = metric
        self.inventory = inventory
        self.chunk_rows = chunk_rows

    def fit(self, X, sense_keys: Sequence[KeysLike], rows: Sequence[int] | np.ndarray | None = None) -> SenseCentroids:
        """Mean of the occurrences of each sense; an occurrence with several gold keys counts for each.

        X: (n_tokens, d) activations (e.g. a store's layer); ``sense_keys``: the n instances' gold keys;
        ``rows``: (n,) the instances' rows of X (default: X has exactly the n rows).

        Parameters
        ----------
        X : array-like (n_tokens, d)
            Activations, e.g. a store's fp16 layer memmap; read in float32 blocks of ``chunk_rows`` rows.
        sense_keys : sequence (n,) of str or sequence of str
            Gold keys of each occurrence (one string may hold several, whitespace-separated).
        rows : array-like (n,) of int, optional
            Row of X of each occurrence; default: X has exactly the n rows, in order.

        Returns
        -------
        SenseCentroids
            ``self``, with ``keys_`` (n_senses,), ``counts_`` (n_senses,) int64 and ``centroids_`` (n_senses, d)
            float32, in order of first occurrence.
        """
        keys = [_as_keys(k) for k in sense_keys]
        rows = _rows(X, rows, len(keys), "SenseCentroids.fit")
        index: dict[str, int] = {}
        pair_sense, pair_row = [], []
        for occ_keys, row in zip(keys, rows.tolist()):
            for k in occ_keys:
                pair_sense.append(index.setdefault(k, len(index)))
                pair_row.append(row)
        if not index:
            raise InputError("SenseCentroids.fit: no occurrence has a sense key")
        order = np.argsort(np.asarray(pair_row), kind="stable")  # read X front to back
        senses_sorted, rows_sorted = np.asarray(pair_sense)[order], np.asarray(pair_row)[order]
        sums = np.zeros((len(index), X.shape[1]), dtype=np.float64)
        for start in range(0, len(rows_sorted), self.chunk_rows):
            ps, pr = senses_sorted[start : start + self.chunk_rows], rows_sorted[start : start + self.chunk_rows]
            urows, row_local = np.unique(pr, return_inverse=True)
            usenses, sense_local = np.unique(ps, return_inverse=True)
            block = np.asarray(X[urows], dtype=np.float32)
            onehot = sparse.csr_matrix(
                (np.ones(len(pr), dtype=np.float32), (sense_local, row_local)), shape=(len(usenses), len(urows))
            )
            sums[usenses] += onehot @ block
        self.counts_ = np.bincount(senses_sorted, minlength=len(index))
        self.keys_ = list(index)
        self.centroids_ = (sums / self.counts_[:, None]).astype(np.float32)
        self._index = index
        norms = np.linalg.norm(self.centroids_, axis=1, keepdims=True)
        self._unit = self.centroids_ / np.where(norms == 0, 1, norms)
        return self

    def _scores(self, Q: np.ndarray, idx: list[int]) -> np.ndarray:
        if self.metric == "cosine":
            qn = np.linalg.norm(Q, axis=1, keepdims=True)
            return (Q / np.where(qn == 0, 1, qn)) @ self._unit[idx].T
        C = self.centroids_[idx]
        d2 = (Q * Q).sum(1)[:, None] - 2 * Q @ C.T + (C * C).sum(1)[None, :]
        return -np.sqrt(np.maximum(d2, 0))

    def sense_scores(
        self, X, lemmas: Sequence[str], pos: Sequence[str], rows: Sequence[int] | np.ndarray | None = None
    ) -> list[dict[str, float]]:
        """For each occurrence, the score (cosine similarity, or minus the Euclidean distance) of every
        candidate sense of its lemma that has a centroid, in WordNet order; ``{}`` means back-off.
        X, rows: as in :meth:`fit`; ``lemmas``, ``pos``: (n,) per occurrence.

        Parameters
        ----------
        X : array-like (n_tokens, d)
            Activations, e.g. a store's fp16 layer memmap; read in float32 blocks of ``chunk_rows`` rows.
        lemmas, pos : sequence of str (n,)
            Each occurrence's lemma and part of speech (NOUN/VERB/ADJ/ADV or n/v/a/s/r): its candidate senses.
        rows : array-like (n,) of int, optional
            Row of X of each occurrence; default: X has exactly the n rows, in order.

        Returns
        -------
        list of dict (n,)
            Per occurrence, sense key -> score (float) of its candidate senses seen in fit; ``{}`` if none was.
        """
        if not hasattr(self, "centroids_"):
            raise RuntimeError("SenseCentroids is not fitted; call fit() first")
        _check_aligned(lemmas, pos)
        rows = _rows(X, rows, len(lemmas), "SenseCentroids.predict")
        inv = _inventory(self.inventory)
        groups: dict[tuple[str, str], list[int]] = {}
        for i, (lemma, p) in enumerate(zip(lemmas, pos)):
            groups.setdefault((normalize_lemma(lemma), normalize_pos(p)), []).append(i)
        out: list[dict[str, float]] = [{} for _ in lemmas]
        for (lemma, p), members in groups.items():
            seen = [k for k in inv.senses(lemma, p) if k in self._index]
            if not seen:
                continue
            for start in range(0, len(members), self.chunk_rows):
                part = members[start : start + self.chunk_rows]
                Q = np.asarray(X[rows[part]], dtype=np.float32)
                scores = self._scores(Q, [self._index[k] for k in seen])
                for i, row in zip(part, scores.tolist()):
                    out[i] = dict(zip(seen, row))
        return out

    def predict_details(
        self, X, lemmas: Sequence[str], pos: Sequence[str], rows: Sequence[int] | np.ndarray | None = None
    ) -> pd.DataFrame:
        """One row per occurrence: ``sense``, its ``score`` (NaN on back-off), ``backoff``, and ``n_seen``
        (candidate senses with a centroid). Equal scores go to the sense first in WordNet order.
        X, rows: as in :meth:`fit`; ``lemmas``, ``pos``: (n,) per occurrence.

        Parameters
        ----------
        X : array-like (n_tokens, d)
            Activations, e.g. a store's fp16 layer memmap; read in float32 blocks of ``chunk_rows`` rows.
        lemmas, pos : sequence of str (n,)
            Each occurrence's lemma and part of speech (NOUN/VERB/ADJ/ADV or n/v/a/s/r): its candidate senses.
        rows : array-like (n,) of int, optional
            Row of X of each occurrence; default: X has exactly the n rows, in order.

        Returns
        -------
        DataFrame (n rows)
            Columns ``sense`` (str), ``score`` (float), ``backoff`` (bool), ``n_seen`` (int), in occurrence order.
        """
        inv = _inventory(self.inventory)
        records = []
        for lemma, p, scores in zip(lemmas, pos, self.sense_scores(X, lemmas, pos, rows)):
            if scores:
                best = max(scores, key=scores.__getitem__)
                records.append((best, scores[best], False, len(scores)))
            else:
                records.append((inv.first_sense(lemma, p), math.nan, True, 0))
        return pd.DataFrame(records, columns=["sense", "score", "backoff", "n_seen"])

    def predict(
        self, X, lemmas: Sequence[str], pos: Sequence[str], rows: Sequence[int] | np.ndarray | None = None
    ) -> list[str]:
        """The nearest-centroid sense of each of the n occurrences (WordNet first sense when no candidate was
        seen). X, rows: as in :meth:`fit`; ``lemmas``, ``pos``: (n,).

        Parameters
        ----------
        X : array-like (n_tokens, d)
            Activations, e.g. a store's fp16 layer memmap; read in float32 blocks of ``chunk_rows`` rows.
        lemmas, pos : sequence of str (n,)
            Each occurrence's lemma and part of speech (NOUN/VERB/ADJ/ADV or n/v/a/s/r): its candidate senses.
        rows : array-like (n,) of int, optional
            Row of X of each occurrence; default: X has exactly the n rows, in order.

        Returns
        -------
        list of str (n,)
            One sense key per occurrence.
        """
        return self.predict_details(X, lemmas, pos, rows)["sense"].tolist()

    def score(
        self,
        X,
        sense_keys: Sequence[KeysLike],
        lemmas: Sequence[str],
        pos: Sequence[str],
        rows: Sequence[int] | np.ndarray | None = None,
    ) -> float:
        """F1 of ``predict`` against the gold keys (by Scorer.java's rules; every occurrence is answered).

        Parameters
        ----------
        X : array-like (n_tokens, d)
            Activations, e.g. a store's fp16 layer memmap; read in float32 blocks of ``chunk_rows`` rows.
        sense_keys : sequence (n,) of str or sequence of str
            Gold keys of each occurrence; every one needs at least one.
        lemmas, pos : sequence of str (n,)
            Each occurrence's lemma and part of speech (NOUN/VERB/ADJ/ADV or n/v/a/s/r): its candidate senses.
        rows : array-like (n,) of int, optional
            Row of X of each occurrence; default: X has exactly the n rows, in order.

        Returns
        -------
        float
            F1 as a fraction in [0, 1]; with one answer per occurrence it equals the accuracy.
        """
        pred = self.predict(X, lemmas, pos, rows)
        gold = {str(i): k for i, k in enumerate(sense_keys)}
        return score_wsd({str(i): k for i, k in enumerate(pred)}, gold)["F1"]


def supersense_labels(sense_keys: Iterable[KeysLike], inventory: SenseInventory | None = None) -> list[str]:
    """The lexname (supersense) of the first gold key of each item; ``""`` for items without a key.

    Parameters
    ----------
    sense_keys : (n,) items, each a key or keys (str, or a sequence of str).
    inventory : the sense inventory (default: the bundled WordNet subset).

    Returns
    -------
    list of str (n,)
    """
    inv = _inventory(inventory)
    labels = []
    for value in sense_keys:
        keys = _as_keys(value)
        labels.append(inv.lexname(keys[0]) if keys else "")
    return labels


def instances_from_tokens(tokens: pd.DataFrame) -> pd.DataFrame:
    """The WSD instances of a token table (rows with a ``sense``): ``row`` (index into the store's layers),
    ``instance_id``, ``lemma``, ``pos`` (the ``upos`` column) and ``keys`` (tuple of gold keys)."""
    missing = {"sense", "lemma", "upos", "instance_id"} - set(tokens.columns)
    if missing:
        raise InputError(f"token table lacks column(s) {sorted(missing)}")
    mask = tokens["sense"].astype(str).str.strip() != ""
    sub = tokens[mask.to_numpy()]
    return pd.DataFrame(
        {
            "row": np.flatnonzero(mask.to_numpy()),
            "instance_id": sub["instance_id"].to_numpy(),
            "lemma": sub["lemma"].to_numpy(),
            "pos": sub["upos"].to_numpy(),
            "keys": [_as_keys(s) for s in sub["sense"]],
        }
    )
